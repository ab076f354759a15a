# dlshim — see README.md.  `make` builds build/libdlshim.so; `make demo` and
# `make check` install their Debian packages first (scripts/install-deps).

CC      ?= gcc
PYTHON  ?= /usr/bin/python3
BUILD   ?= build
SAN_BUILD := build/sanitize

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wformat=2 -Wundef -Wvla
CFLAGS  ?= -O2 -g
# The library needs a C compiler and libc alone: the device APIs, Vulkan,
# libffi and DLPack are declared by its own headers (hooks/abi/,
# include/dlshim/dlpack.h), which tests/abi checks against the real ones.
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -Iinclude -Ishim
# The real device API headers, for test programs and that check.
CUDA_HOME ?= /usr/local/cuda
DEVICE_INCLUDES := -isystem $(CUDA_HOME)/include -D__HIP_PLATFORM_AMD__
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -Iinclude -Ishim
# Every object of the library binds glibc's symbols to versions glibc 2.17
# has (shim/base/glibc.h): the library loads on any glibc since.
LIB_CFLAGS  := $(BASE_CFLAGS) -DDLSHIM_BUILDING -fPIC -fvisibility=hidden \
               -fno-semantic-interposition -fno-strict-aliasing -include shim/base/glibc.h
# Exported: what shim/exports.map lists, nothing else.
# libdl.so.2 and libpthread.so.0: where a glibc before 2.34 defines the dl*
# and pthread_* functions (today they are stubs, and libc.so.6 has all).
# -z nodelete: dlclose never unmaps the library, since the modules it patched
# (their GOTs: exit, _exit, dlopen...) go on calling into it; a program that
# opened it with dlopen and closed it crashed at its next exit.  What the log
# holds is written at exit as for a preloaded one.
LIB_LDFLAGS := -shared -Wl,-soname,libdlshim.so -Wl,-z,relro,-z,now,-z,nodelete -Wl,--no-undefined \
    -Wl,--version-script=shim/exports.map \
    -Wl,--push-state,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0 -Wl,--pop-state
# Link-time optimisation of the library: the small functions of one file
# (locks, checks, no-fault reads) inline into the hooks of another, which
# saves a large share of a Python handoff's cost (docs/performance.md).  Fat
# objects, so the unit tests and bench programs link the same objects
# without it; the sanitizer builds turn it off (LTO=).  One partition, so
# that every object's glibc version pins (shim/base/glibc.h) reach the code
# that calls: split into partitions, some calls lose theirs.  clang makes no
# fat objects (its LTO objects are bitcode alone, which those links could
# not read), so a clang build goes without.
CC_IS_CLANG := $(findstring clang,$(shell $(CC) --version 2>/dev/null))
LTO ?= $(if $(CC_IS_CLANG),,-flto=auto -ffat-lto-objects -flto-partition=one)
# Extra flags for a variant build (the sanitizer run sets these).
VARIANT_CFLAGS ?=
VARIANT_LDFLAGS ?=

# The core (shim/) in layers, each calling only those below it (docs/design.md,
# scripts/check-layers): base; image and output; ledger; start.  hooks/
# feeds the core through shim/shim.h.  <LAYER>_OBJS: a layer's objects and
# those of every layer below, what a unit test of that layer links.
layer_objs = $(patsubst %.c,$(BUILD)/obj/%.o,$(foreach l,$(1),$(wildcard shim/$(l)/*.c)))
BASE_OBJS   := $(call layer_objs,base)
IMAGE_OBJS  := $(call layer_objs,base image)
OUTPUT_OBJS := $(call layer_objs,base output)
LEDGER_OBJS := $(call layer_objs,base image output ledger)
START_OBJS  := $(call layer_objs,base image output ledger start)
CORE_SRCS := $(wildcard shim/*/*.c)
HOOK_SRCS := $(wildcard hooks/*.c)
LIB_SRCS := $(CORE_SRCS) $(HOOK_SRCS)
CORE_OBJS := $(START_OBJS)
HOOK_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(HOOK_SRCS))
LIB_OBJS := $(CORE_OBJS) $(HOOK_OBJS)
LIB      := $(BUILD)/libdlshim.so
# The Vulkan layer's manifest, beside the library it names (hooks/vulkan.c).
VK_LAYER := $(BUILD)/vulkan/dlshim_layer.json

EXAMPLE    := $(BUILD)/examples/exchange

.PHONY: all deps venv check check-abi check-deps check-unit check-integration check-frameworks check-docs check-layers check-py314 \
        check-sanitize check-tsan check-valgrind check-fuzz check-quick lint gpu-check-programs \
        simdev demo docs clean test-programs wheel

all: $(LIB) $(VK_LAYER)

deps:
	@scripts/install-deps check

# The Python environment of the current frameworks (.venv/, pinned in
# tests/requirements.txt): reused as it is when its pins match.
VENV_PYTHON_HOST ?= python3
VENV := .venv/bin/python
venv:
	@scripts/venv $(VENV_PYTHON_HOST)

# Each object lists the headers and tables it included (-MMD, in its .d
# file, read below), so touching one rebuilds exactly its users.
$(BUILD)/obj/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $(CFLAGS) $(LTO) $(VARIANT_CFLAGS) -MMD -MP -c $< -o $@
-include $(LIB_OBJS:.o=.d)

# Relinked when the Makefile or the export list changes.
$(LIB): $(LIB_OBJS) Makefile shim/exports.map
	$(CC) $(LIB_LDFLAGS) $(CFLAGS) $(LTO) $(VARIANT_CFLAGS) $(VARIANT_LDFLAGS) -o $@ $(LIB_OBJS)

$(VK_LAYER): hooks/vulkan_layer.json
	@mkdir -p $(dir $@)
	cp $< $@

include tests/tests.mk

# ---- the options table in README.md comes from shim/base/options.def, and
# docs/frameworks.md from the last run of tests/frameworks ------------------
$(BUILD)/options-md: scripts/options-md.c shim/base/options.def
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -o $@ $<

FRAMEWORK_MATRIX := $(BUILD)/frameworks/matrix.json
docs: $(BUILD)/options-md
	$(PYTHON) scripts/update-generated.py README.md $(BUILD)/options-md
	$(PYTHON) scripts/update-generated.py bin/dlshim $(BUILD)/options-md --launcher
	$(PYTHON) scripts/update-generated.py --part locks docs/design.md scripts/locks-md
	@if [ -f $(FRAMEWORK_MATRIX) ]; then $(PYTHON) scripts/frameworks-md $(FRAMEWORK_MATRIX) docs/frameworks.md; \
	 else echo "docs/frameworks.md: run make check-frameworks first"; fi

check-docs: $(BUILD)/options-md
	$(PYTHON) scripts/update-generated.py --check README.md $(BUILD)/options-md
	$(PYTHON) scripts/update-generated.py --check bin/dlshim $(BUILD)/options-md --launcher
	$(PYTHON) scripts/update-generated.py --check --part locks docs/design.md scripts/locks-md
	$(PYTHON) scripts/check-fields shim/output/fields.def docs/events.md

# ---- the test command ------------------------------------------------------
# Everything CI runs: the suites, the docs check, short fuzzing runs, the
# linters, then the suites again under ASan+UBSan, TSan and memcheck.
# `make check-quick` is the first part alone.
check: deps venv
	$(MAKE) check-quick check-frameworks check-py314 check-fuzz lint
	$(MAKE) check-sanitize
	$(MAKE) check-tsan
	$(MAKE) check-valgrind

check-quick: deps
	$(MAKE) check-abi check-deps check-unit check-integration check-docs check-layers

# Each target of scripts/install-deps installs the Debian packages of the
# headers its sources include; the library's need none beyond gcc and libc.
check-deps:
	scripts/check-deps $(CUDA_HOME)

# The core's layers call and include only down, with no circle of calls
# (docs/design.md); no tracked file holds a merge-conflict marker; the
# library loads on glibc 2.17 (scripts/check-glibc).
check-layers: $(LIB)
	scripts/check-layers $(BUILD)
	scripts/check-markers
	scripts/check-glibc $(LIB)

# Current frameworks from the venv (tests/frameworks): the producer x consumer
# matrix, every consumption style, DLPack 1.x flags and dtypes, the C exchange
# table, ctypes capsules, Python lines and ranks (torchrun), the frameworks'
# own DLPack suites under the shim; the bugs of public trackers rebuilt and
# what the shim reports for each (tests/realworld, docs/realworld.md); the
# pytest plugin and `pip install .` in a clean venv (tests/package); then
# docs/frameworks.md must match the matrix this run saw.
check-frameworks: venv wheel $(LIB) $(REALWORLD_LIBS) $(SIMDEV_LIBS)
	DLSHIM_TEST_BUILD=$(abspath $(BUILD)) $(VENV) -m pytest -q -p no:cacheprovider --rootdir=tests \
	    tests/frameworks tests/realworld tests/package
	$(PYTHON) scripts/frameworks-md --check $(FRAMEWORK_MATRIX) docs/frameworks.md

# ---- static analysis: cppcheck and clang-tidy (configuration: .clang-tidy) --
LINT_SRCS := $(LIB_SRCS)
CPPCHECK_FLAGS := --enable=warning,portability,performance --std=c11 --inline-suppr --quiet \
                  --error-exitcode=1 -D_GNU_SOURCE -DDLSHIM_BUILDING -D__x86_64__ -Iinclude -Ishim \
                  --suppress=missingIncludeSystem --suppress=missingInclude
lint: deps
	cppcheck $(CPPCHECK_FLAGS) $(LINT_SRCS)
	clang-tidy --quiet $(LINT_SRCS) -- $(BASE_CFLAGS) -DDLSHIM_BUILDING

check-unit: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; DLSHIM_LOG=off $$t; done

check-integration: test-programs
	DLSHIM_TEST_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration tests/stress

# CPython 3.14 (tests/py314): Debian unstable's python3.14 and python3-numpy
# in a root that debootstrap builds once into a cache folder outside the
# clone, so that a clean clone (CI's) reuses it; rebuilt when its recipe in
# scripts/py314-root changes (the first build: 40-70 s and 258 MB here).  The
# Python tests that need only NumPy and ctypes run there, on the library
# built here.  As root (debootstrap, chroot, a mount namespace).
PY314_ROOT ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/dlshim/py314
check-py314: $(LIB)
	@scripts/install-deps py314
	scripts/py314-root $(PY314_ROOT)
	PY314_ROOT=$(PY314_ROOT) DLSHIM_TEST_BUILD=$(abspath $(BUILD)) \
	    $(PYTHON) -m pytest -q -p no:cacheprovider tests/py314

# The whole suite again with AddressSanitizer and UndefinedBehaviorSanitizer
# in the shim and in the test programs.  libasan must come first in
# LD_PRELOAD, so the tests put it there (DLSHIM_TEST_PRELOAD).
# DS_DEBUG_LOCKS: every lock taken out of the order of shim/base/locks.def aborts.
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
             -DDS_DEBUG_LOCKS
check-sanitize: deps
	$(MAKE) BUILD=$(SAN_BUILD) VARIANT_CFLAGS="$(SAN_FLAGS)" VARIANT_LDFLAGS="$(SAN_FLAGS)" LTO= \
	    check-unit test-programs
	DLSHIM_TEST_BUILD=$(abspath $(SAN_BUILD)) \
	DLSHIM_TEST_PRELOAD="$$($(CC) -print-file-name=libasan.so)" \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
	    $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration tests/stress

# The same with ThreadSanitizer (libtsan first in LD_PRELOAD, like libasan).
TSAN_BUILD := build/tsan
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer -DDS_DEBUG_LOCKS
check-tsan: deps
	$(MAKE) BUILD=$(TSAN_BUILD) VARIANT_CFLAGS="$(TSAN_FLAGS)" VARIANT_LDFLAGS="$(TSAN_FLAGS)" LTO= \
	    check-unit test-programs
	DLSHIM_TEST_BUILD=$(abspath $(TSAN_BUILD)) \
	DLSHIM_TEST_PRELOAD="$$($(CC) -print-file-name=libtsan.so)" \
	TSAN_OPTIONS="halt_on_error=1 exitcode=66 report_thread_leaks=0 suppressions=$(abspath tests/tsan.supp)" \
	    $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration tests/stress

# The C programs of the integration and stress suites under valgrind's
# memcheck (Python runs stay as they are).  The tool binary is run directly:
# the `valgrind` launcher is itself a dynamic program, which LD_PRELOAD would
# put the shim into as well.
VALGRIND_LIB ?= /usr/libexec/valgrind
VALGRIND_TESTS := tests/integration/test_exchange.py tests/integration/test_violations.py \
                  tests/integration/test_log_threads.py \
                  tests/integration/test_device.py tests/integration/test_sync.py \
                  tests/integration/test_copies.py tests/integration/test_entry.py \
                  tests/integration/test_got.py tests/integration/test_config.py tests/stress
check-valgrind: deps test-programs
	VALGRIND_LIB=$(VALGRIND_LIB) VALGRIND_LAUNCHER=/usr/bin/valgrind \
	DLSHIM_TEST_WRAPPER="$(VALGRIND_LIB)/memcheck-amd64-linux --quiet --error-exitcode=99 \
	    --suppressions=$(abspath tests/valgrind.supp)" \
	DLSHIM_TEST_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider $(VALGRIND_TESTS)

# ---- the demo --------------------------------------------------------------
$(EXAMPLE): examples/exchange.c include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -o $@ $<

# ---- the wheel: py3-none-manylinux_2_17_x86_64, checked by auditwheel -------
# (setup.py builds the library with this Makefile in build/pip; auditwheel
# reads its ELF and names the oldest glibc it loads on).
WHEEL_PLAT := manylinux_2_17_x86_64
wheel: venv
	@rm -rf $(BUILD)/wheel
	$(VENV) -m pip wheel --no-build-isolation --no-deps --disable-pip-version-check -q \
	    -w $(BUILD)/wheel/linux .
	PATH=$(abspath .venv/bin):$$PATH $(VENV) -m auditwheel repair --plat $(WHEEL_PLAT) \
	    --only-plat -w $(BUILD)/wheel \
	    $(BUILD)/wheel/linux/*.whl
	@ls $(BUILD)/wheel/*.whl

# The C parts first; the Python part makes its own small venv (.venv-demo:
# PyTorch, NumPy, JAX) when it comes to it.
demo:
	@scripts/install-deps demo
	@$(MAKE) --no-print-directory $(LIB) $(EXAMPLE) >/dev/null
	@scripts/demo $(BUILD) $(VENV_PYTHON_HOST)

include bench/bench.mk
include tests/fuzz/fuzz.mk
include tests/abi/abi.mk

clean:
	rm -rf build python/*.egg-info
