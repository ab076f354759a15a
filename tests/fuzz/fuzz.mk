# libFuzzer targets (clang, Debian's libclang-rt-14-dev): the core's objects
# built again with clang under ASan+UBSan and fuzzer instrumentation.
#   make check-fuzz   a bounded run of each over its corpus (make check)
#   make fuzz         a longer run (FUZZ_SECONDS each), new finds kept in
#                     build/fuzz/corpus-NAME
FUZZ_BUILD := build/fuzz
FUZZ_TARGETS := config entry_spec dlpack json elf
FUZZ_BINS := $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_TARGETS))
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_RUNS ?= 100000
FUZZ_MAX_LEN := 33000
FUZZ_SECONDS ?= 300
# The shim's own constructor stays out of the fuzzer's process.
FUZZ_ENV := DLSHIM_DISABLE=1 ASAN_OPTIONS=detect_leaks=1

.PHONY: fuzz check-fuzz fuzz-programs

# Built in a sub-make so CORE_OBJS names build/fuzz's objects.
fuzz-programs:
	$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=clang LTO= \
	    VARIANT_CFLAGS="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" $(FUZZ_BINS)

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(CORE_OBJS) tests/unit/json_check.h
	$(CC) $(BASE_CFLAGS) -DDLSHIM_BUILDING $(CFLAGS) -Itests/unit $(FUZZ_SAN) -fsanitize=fuzzer \
	    -o $@ $< $(CORE_OBJS)

check-fuzz: fuzz-programs
	@set -e; for t in $(FUZZ_TARGETS); do \
	    mkdir -p $(FUZZ_BUILD)/corpus-$$t; log=$(FUZZ_BUILD)/fuzz_$$t.log; \
	    echo "== fuzz_$$t ($(FUZZ_RUNS) runs)"; \
	    $(FUZZ_ENV) $(FUZZ_BUILD)/fuzz_$$t -runs=$(FUZZ_RUNS) -seed=1 -max_len=$(FUZZ_MAX_LEN) \
	        $(FUZZ_BUILD)/corpus-$$t tests/fuzz/corpus/$$t >$$log 2>&1 || { tail -n 60 $$log; exit 1; }; \
	    grep -E '^#[0-9]+.*DONE' $$log || tail -n 1 $$log; \
	done

fuzz: fuzz-programs
	@set -e; for t in $(FUZZ_TARGETS); do \
	    mkdir -p $(FUZZ_BUILD)/corpus-$$t; echo "== fuzz_$$t ($(FUZZ_SECONDS) s)"; \
	    $(FUZZ_ENV) $(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=$(FUZZ_MAX_LEN) \
	        $(FUZZ_BUILD)/corpus-$$t tests/fuzz/corpus/$$t; \
	done
