# make bench: bench/run's programs, built like the tests (included by Makefile).
BENCH_BIN := $(BUILD)/bench
BENCH_PROGS := $(BENCH_BIN)/calls $(BENCH_BIN)/streams $(BENCH_BIN)/registry $(BENCH_BIN)/threads \
               $(if $(wildcard /usr/include/vulkan/vulkan.h),$(BENCH_BIN)/vk_submit)

$(BENCH_BIN)/calls: bench/calls.c include/dlshim.h $(CUDA_DRIVER)
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart \
	    $(CUDA_DRIVER) -ldl $(VARIANT_LDFLAGS)

$(BENCH_BIN)/streams: bench/streams.c bench/device.h include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart $(VARIANT_LDFLAGS)

$(BENCH_BIN)/threads: bench/threads.c bench/device.h include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart -pthread $(VARIANT_LDFLAGS)

# The Vulkan rows: the queue programs' set-up (tests/vulkan/vk_setup.c).
$(BENCH_BIN)/vk_submit: bench/vk_submit.c tests/vulkan/vk_setup.c tests/vulkan/vk_setup.h
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -Itests/vulkan -o $@ $< tests/vulkan/vk_setup.c -lvulkan \
	    $(VARIANT_LDFLAGS)

# Linked with the core's objects, as the unit tests are.
$(BENCH_BIN)/registry: bench/registry.c $(CORE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(DEVICE_INCLUDES) -DDLSHIM_BUILDING $(CFLAGS) $(VARIANT_CFLAGS) -o $@ $< \
	    $(CORE_OBJS) -ldl -pthread $(VARIANT_LDFLAGS)

.PHONY: bench bench-quick bench-programs
bench-programs: $(LIB) $(SIMDEV_LIBS) $(BENCH_PROGS)

# Timings are reported, never judged: this target fails only if a program does.
bench: deps venv bench-programs
	$(PYTHON) bench/run --build $(abspath $(BUILD))

# About a minute, for day-to-day work: small sizes, three runs per row, no
# callgrind rows, Debian's loop only; its rows go beside the build, not over
# bench/results.json.
bench-quick: deps bench-programs
	$(PYTHON) bench/run --build $(abspath $(BUILD)) --quick --repeat 3 --no-instructions \
	    --no-venv --out $(abspath $(BUILD))/bench/results-quick.json

# The test suite runs each program once (tests/integration/test_bench.py).
test-programs: $(BENCH_PROGS)
