# dlshim — see README.md.  `make` builds build/libdlshim.so; `make demo` and
# `make check` install their Debian packages first (scripts/install-deps).

CC      ?= gcc
PYTHON  ?= /usr/bin/python3
BUILD   ?= build
SAN_BUILD := build/sanitize

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wformat=2 -Wundef -Wvla
CFLAGS  ?= -O2 -g
# Device API headers (types and signatures only: nothing links to them).
CUDA_HOME ?= /usr/local/cuda
DEVICE_INCLUDES := -isystem $(CUDA_HOME)/include -D__HIP_PLATFORM_AMD__
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -Iinclude -Ishim
LIB_CFLAGS  := $(BASE_CFLAGS) $(DEVICE_INCLUDES) -DDLSHIM_BUILDING -fPIC -fvisibility=hidden \
               -fno-semantic-interposition -fno-strict-aliasing
# Exported: what shim/exports.map lists, nothing else.
LIB_LDFLAGS := -shared -Wl,-soname,libdlshim.so -Wl,-z,relro,-z,now -Wl,--no-undefined \
    -Wl,--version-script=shim/exports.map
# Link-time optimisation of the library: the small functions of one file
# (locks, checks, no-fault reads) inline into the hooks of another, ~19 % of
# the shim's instructions per Python handoff (docs/performance.md).  Fat
# objects, so the unit tests and bench programs link the same objects
# without it; the sanitizer builds turn it off (LTO=).
LTO ?= -flto=auto -ffat-lto-objects
# Extra flags for a variant build (the sanitizer run sets these).
VARIANT_CFLAGS ?=
VARIANT_LDFLAGS ?=

# The core (shim/) depends on nothing in hooks/; hooks/ feeds the core.
CORE_SRCS := $(wildcard shim/*/*.c)
HOOK_SRCS := $(wildcard hooks/*.c)
LIB_SRCS := $(CORE_SRCS) $(HOOK_SRCS)
CORE_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(CORE_SRCS))
HOOK_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(HOOK_SRCS))
LIB_OBJS := $(CORE_OBJS) $(HOOK_OBJS)
LIB      := $(BUILD)/libdlshim.so
# The Vulkan layer's manifest, beside the library it names (hooks/vulkan.c).
VK_LAYER := $(BUILD)/vulkan/dlshim_layer.json

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRCS))
PROG_SRCS  := $(wildcard tests/integration/progs/*.c)
PROG_BINS  := $(BUILD)/tests/libprod.so $(BUILD)/tests/consumer $(BUILD)/tests/secure_probe
EXAMPLE    := $(BUILD)/examples/exchange

.PHONY: all deps venv check check-unit check-integration check-frameworks check-docs check-layers \
        check-sanitize check-tsan check-valgrind check-fuzz check-quick lint gpu-check-programs \
        simdev demo docs clean test-programs

all: $(LIB) $(VK_LAYER)

deps:
	@scripts/install-deps check

# The Python environment of the current frameworks (.venv/, pinned in
# tests/requirements.txt): reused as it is when its pins match.
VENV_PYTHON_HOST ?= python3
VENV := .venv/bin/python
venv:
	@scripts/venv $(VENV_PYTHON_HOST)

$(BUILD)/obj/%.o: %.c $(wildcard shim/*.h shim/*.def hooks/*.h hooks/*.def include/*.h) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $(CFLAGS) $(LTO) $(VARIANT_CFLAGS) -c $< -o $@

# Relinked when the Makefile or the export list changes.
$(LIB): $(LIB_OBJS) Makefile shim/exports.map
	$(CC) $(LIB_LDFLAGS) $(CFLAGS) $(LTO) $(VARIANT_CFLAGS) $(VARIANT_LDFLAGS) -o $@ $(LIB_OBJS)

$(VK_LAYER): hooks/vulkan_layer.json
	@mkdir -p $(dir $@)
	cp $< $@

# ---- unit tests (cmocka), linked with the core's objects alone: a test
# that needs a hook family or a device API declares a fake one ------------
$(BUILD)/tests/unit/%: tests/unit/%.c $(CORE_OBJS) $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -DDLSHIM_BUILDING $(CFLAGS) $(VARIANT_CFLAGS) $(EXTRA_UNIT_FLAGS) \
	    -Itests/unit -o $@ $< $(CORE_OBJS) $(VARIANT_LDFLAGS) -ldl -pthread -lcmocka

# The ELF tests' modules: target.c in every link variant, calling impl.c.
ELF_DIR := $(BUILD)/tests/elf
ELF_FLAGS_lazy := -Wl,-z,lazy,-z,norelro
ELF_FLAGS_relro := -Wl,-z,lazy,-z,relro
ELF_FLAGS_now := -Wl,-z,now,-z,relro
ELF_FLAGS_noplt := -fno-plt -Wl,-z,now,-z,relro
ELF_LIBS := $(patsubst %,$(ELF_DIR)/libtarget_%.so,lazy relro now noplt) \
            $(ELF_DIR)/libtarget_other.so

$(ELF_DIR)/libimpl.so: tests/unit/elf/impl.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -fPIC -shared -o $@ $<

# A second definition of the same names, and a module bound to it.  Its call
# must not be a tail call: the shim tells callers apart by return address,
# and a sibling call returns straight to the caller's caller (a known limit,
# docs/reliability.md).
$(ELF_DIR)/libimpl_other.so: tests/unit/elf/impl.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -DIMPL_FACTOR=5 -fPIC -shared -o $@ $<

$(ELF_DIR)/libtarget_other.so: tests/unit/elf/target.c $(ELF_DIR)/libimpl_other.so
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -fno-optimize-sibling-calls -fPIC -shared $(ELF_FLAGS_now) \
	    -o $@ $< -L$(ELF_DIR) -limpl_other -Wl,-rpath,'$$ORIGIN'

$(ELF_DIR)/libtarget_%.so: tests/unit/elf/target.c $(ELF_DIR)/libimpl.so
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -fPIC -shared $(ELF_FLAGS_$*) -o $@ $< \
	    -L$(ELF_DIR) -limpl -Wl,-rpath,'$$ORIGIN'

$(BUILD)/tests/unit/test_elf: $(ELF_LIBS)
$(BUILD)/tests/unit/test_elf: EXTRA_UNIT_FLAGS = -DELF_TEST_DIR='"$(abspath $(ELF_DIR))"'
# The names of modules and Python files: hooks/frameworks.c on its own.
$(BUILD)/tests/unit/test_names: hooks/frameworks.c
$(BUILD)/tests/unit/test_names: EXTRA_UNIT_FLAGS = -Ihooks hooks/frameworks.c

# ---- integration test programs (annotation API users, no dlshim link) -----
$(BUILD)/tests/libprod.so: tests/integration/progs/libprod.c tests/integration/progs/prod.h include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) -fPIC -shared -o $@ $< $(VARIANT_LDFLAGS)

$(BUILD)/tests/%: tests/integration/progs/%.c $(BUILD)/tests/libprod.so tests/integration/progs/prod.h include/dlshim.h
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) -Itests/integration/progs -o $@ $< \
	    -L$(BUILD)/tests -lprod -Wl,-rpath,'$$ORIGIN' -pthread $(VARIANT_LDFLAGS)

# Run setuid by the security test: no libprod, no $ORIGIN (ignored there).
$(BUILD)/tests/secure_probe: tests/integration/progs/secure_probe.c include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) -o $@ $< -ldl $(VARIANT_LDFLAGS)

# ---- Python test material: a DLPack 1.x extension, a shared-libpython host
PY_CONFIG ?= /usr/bin/python3-config
PY_CFLAGS = $(shell $(PY_CONFIG) --includes)
PY_EXT = $(shell $(PY_CONFIG) --extension-suffix)
PY_EMBED_LIBS = $(shell $(PY_CONFIG) --ldflags --embed)
PY_PROGS = $(BUILD)/tests/python/dlpack1ext$(PY_EXT) $(BUILD)/tests/python/embed \
           $(BUILD)/tests/python/devproducer$(PY_EXT) $(BUILD)/tests/python/devconsumer$(PY_EXT)

# Extensions using the CUDA runtime (the simulated one in the tests).
$(BUILD)/tests/python/dev%$(PY_EXT): tests/python/dev%.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -Werror $(DEVICE_INCLUDES) $(PY_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) \
	    -fPIC -shared -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart $(VARIANT_LDFLAGS)

$(BUILD)/tests/python/dlpack1ext$(PY_EXT): tests/python/dlpack1ext.c include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -Werror -Iinclude $(PY_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) \
	    -fPIC -shared -o $@ $< $(VARIANT_LDFLAGS)

$(BUILD)/tests/python/embed: tests/python/embed.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -Werror $(PY_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) -o $@ $< \
	    $(PY_EMBED_LIBS) $(VARIANT_LDFLAGS)

# GOT patching of executables linked every way, against a capsule test double.
CAPSULE_VARIANTS := pie nopie noplt now
CAPSULE_FLAGS_pie := -fPIE -pie
CAPSULE_FLAGS_nopie := -fno-pie -no-pie
CAPSULE_FLAGS_noplt := -fPIE -pie -fno-plt
CAPSULE_FLAGS_now := -fPIE -pie -Wl,-z,now,-z,relro
CAPSULE_BINS := $(patsubst %,$(BUILD)/tests/capsule_%,$(CAPSULE_VARIANTS))

$(BUILD)/tests/libfakepy.so: tests/integration/progs/libfakepy.c tests/integration/progs/fakepy.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) -fPIC -shared -o $@ $< $(VARIANT_LDFLAGS)

$(BUILD)/tests/capsule_%: tests/integration/progs/capsule_user.c $(BUILD)/tests/libfakepy.so
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) $(CAPSULE_FLAGS_$*) -o $@ $< \
	    -L$(BUILD)/tests -lfakepy -Wl,-rpath,'$$ORIGIN' $(VARIANT_LDFLAGS)

# The same exchange from a library opened RTLD_LOCAL (its main renamed), so
# that the capsule API is out of the global scope.  An absolute run path: at
# dlopen, glibc's loader expands $ORIGIN with a word-wise strncmp that
# valgrind reports.
$(BUILD)/tests/libcapsule_user.so: tests/integration/progs/capsule_user.c $(BUILD)/tests/libfakepy.so
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) -fPIC -shared -Dmain=capsule_main \
	    -Wno-missing-prototypes -o $@ $< \
	    -L$(BUILD)/tests -lfakepy -Wl,-rpath,$(abspath $(BUILD))/tests $(VARIANT_LDFLAGS)

# A bare dlopen searched as glibc searches it for the caller (hooks/dlopen.c):
# libpick.so in two folders, one in the openers' RPATH or RUNPATH.
SEARCH_DIR := $(BUILD)/tests/search
SEARCH_PROGS := $(SEARCH_DIR)/first/libpick.so $(SEARCH_DIR)/second/libpick.so \
                $(SEARCH_DIR)/libopener_rpath.so $(SEARCH_DIR)/libopener_runpath.so \
                $(SEARCH_DIR)/search_path
$(SEARCH_DIR)/first/libpick.so: PICK := 1
$(SEARCH_DIR)/second/libpick.so: PICK := 2
$(SEARCH_DIR)/%/libpick.so: tests/integration/progs/search_path.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) -DPICK=$(PICK) -fPIC -shared -o $@ $< \
	    $(VARIANT_LDFLAGS)
$(SEARCH_DIR)/libopener_rpath.so: DTAGS := --disable-new-dtags
$(SEARCH_DIR)/libopener_runpath.so: DTAGS := --enable-new-dtags
$(SEARCH_DIR)/libopener_%.so: tests/integration/progs/search_path.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) -DOPENER -fPIC -shared -o $@ $< \
	    -Wl,$(DTAGS),-rpath,'$$ORIGIN/first' -ldl $(VARIANT_LDFLAGS)
$(SEARCH_DIR)/search_path: tests/integration/progs/search_path.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) -o $@ $< -ldl $(VARIANT_LDFLAGS)

$(BUILD)/tests/local_scope: tests/integration/progs/local_scope.c $(BUILD)/tests/libcapsule_user.so
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) -o $@ $< -ldl $(VARIANT_LDFLAGS)

# A PyO3 extension built offline with Debian's cargo and librust-pyo3-dev
# (crates from /usr/share/cargo/registry, see its .cargo/config.toml); one
# cargo target directory serves every build variant.
RUST_EXT = $(BUILD)/tests/python/dlpack_rs.so
RUST_TARGET := build/cargo
$(RUST_EXT): tests/rust/dlpack_rs/src/lib.rs tests/rust/dlpack_rs/Cargo.toml tests/rust/dlpack_rs/Cargo.lock
	@mkdir -p $(dir $@)
	cd tests/rust/dlpack_rs && PYO3_PYTHON=/usr/bin/python3 RUSTC=/usr/bin/rustc \
	    CARGO_TARGET_DIR=$(abspath $(RUST_TARGET)) /usr/bin/cargo build --release --offline --quiet
	cp $(RUST_TARGET)/release/libdlpack_rs.so $@

# ---- the simulated device: CUDA runtime, driver and HIP test doubles --------
SIMDEV := $(BUILD)/simdev
SIMDEV_CFLAGS = $(BASE_CFLAGS) $(DEVICE_INCLUDES) $(CFLAGS) $(VARIANT_CFLAGS) -fPIC \
                -fvisibility=hidden -Wno-missing-prototypes -pthread
SIMDEV_LIBS := $(SIMDEV)/libcuda.so.1 $(SIMDEV)/libcudart.so.13 $(SIMDEV)/libamdhip64.so.5

$(SIMDEV)/libcuda.so.1: tests/simdev/cuda_driver.c tests/simdev/engine.c tests/simdev/engine.h
	@mkdir -p $(dir $@)
	$(CC) $(SIMDEV_CFLAGS) -shared -Wl,-soname,libcuda.so.1 -o $@ \
	    tests/simdev/cuda_driver.c tests/simdev/engine.c $(VARIANT_LDFLAGS)

$(SIMDEV)/libcudart.so.13: tests/simdev/cuda_runtime.c tests/simdev/cudart.map
	@mkdir -p $(dir $@)
	$(CC) $(SIMDEV_CFLAGS) -shared -Wl,-soname,libcudart.so.13 \
	    -Wl,--version-script=tests/simdev/cudart.map -o $@ tests/simdev/cuda_runtime.c \
	    $(VARIANT_LDFLAGS)

$(SIMDEV)/libamdhip64.so.5: tests/simdev/hip.c tests/simdev/engine.c tests/simdev/hip.map
	@mkdir -p $(dir $@)
	$(CC) $(SIMDEV_CFLAGS) -shared -Wl,-soname,libamdhip64.so.5 \
	    -Wl,--version-script=tests/simdev/hip.map -o $@ tests/simdev/hip.c tests/simdev/engine.c \
	    $(VARIANT_LDFLAGS)

# Device test programs: linked against the real toolkit's libraries (their
# SONAMEs), run against the simulated device through LD_LIBRARY_PATH, or
# against a real GPU without it.  The toolkit ships no libcuda.so (the driver
# does; CUDA 13 dropped the stub from lib64/stubs), so programs of the driver
# API link against the simulated one: they record only its SONAME,
# libcuda.so.1, which a GPU machine's driver provides.
CUDA_DRIVER := $(SIMDEV)/libcuda.so.1
DEVICE_BIN := $(BUILD)/tests/device
DEVICE_PROGS := $(DEVICE_BIN)/rt_alloc $(DEVICE_BIN)/drv_alloc $(DEVICE_BIN)/hip_alloc \
                $(DEVICE_BIN)/culike_user $(DEVICE_BIN)/handoff $(DEVICE_BIN)/hip_handoff \
                $(DEVICE_BIN)/copies
DEVICE_PROG_FLAGS = $(BASE_CFLAGS) $(DEVICE_INCLUDES) $(CFLAGS) $(VARIANT_CFLAGS) \
                    -Wno-missing-prototypes -pthread

$(DEVICE_BIN)/rt_alloc: tests/device/rt_alloc.c include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/handoff: tests/device/handoff.c include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/lib%like.so: tests/device/owner.c
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -DOWNER=$*like -fPIC -shared -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart \
	    $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/copies: tests/device/copies.c $(DEVICE_BIN)/libjaxlike.so $(DEVICE_BIN)/libtorchlike.so
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -L$(DEVICE_BIN) -ljaxlike -ltorchlike \
	    -Wl,-rpath,'$$ORIGIN' -L$(CUDA_HOME)/lib64 -lcudart $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/drv_alloc: tests/device/drv_alloc.c $(CUDA_DRIVER)
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< $(CUDA_DRIVER) $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/hip_handoff: tests/device/hip_handoff.c include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -lamdhip64 $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/hip_alloc: tests/device/hip_alloc.c
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -lamdhip64 $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/libculike.so: tests/device/libculike.c
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -fPIC -shared -o $@ $< $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/culike_user: tests/device/culike_user.c $(DEVICE_BIN)/libculike.so
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -L$(DEVICE_BIN) -lculike -Wl,-rpath,'$$ORIGIN' \
	    $(VARIANT_LDFLAGS)

# What scripts/gpu-check needs on a GPU machine: the shim and the CUDA device
# programs (no HIP, Python extensions or Rust), bench/streams for the cost of
# a stream operation; `simdev` for its --simdev runs.
CUDA_DEVICE_PROGS := $(DEVICE_BIN)/rt_alloc $(DEVICE_BIN)/drv_alloc $(DEVICE_BIN)/handoff \
                     $(DEVICE_BIN)/copies
# Vulkan programs: the loader (libvulkan-dev), CUDA's runtime and HIP's, the
# simulated device's in CI (tests/vulkan).
VULKAN_PROGS := $(BUILD)/tests/vulkan/vk_share $(BUILD)/tests/vulkan/vk_hip
$(BUILD)/tests/vulkan/%: tests/vulkan/%.c tests/vulkan/vk_setup.c tests/vulkan/vk_setup.h \
                         include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< tests/vulkan/vk_setup.c -lvulkan $(VK_RUNTIME) \
	    $(VARIANT_LDFLAGS)
$(BUILD)/tests/vulkan/vk_share: VK_RUNTIME = -L$(CUDA_HOME)/lib64 -lcudart
$(BUILD)/tests/vulkan/vk_hip: VK_RUNTIME = -lamdhip64

gpu-check-programs: $(LIB) $(CUDA_DEVICE_PROGS) $(BUILD)/bench/streams $(VK_LAYER) \
                    $(if $(wildcard /usr/include/vulkan/vulkan.h),$(VULKAN_PROGS))
simdev: $(SIMDEV_LIBS)

# Stress programs (tests/stress): libprod for exchanges, the CUDA runtime for
# allocations, and a plugin module loaded and unloaded in a loop.
STRESS_BIN := $(BUILD)/tests/stress
STRESS_PROGS := $(STRESS_BIN)/stress $(STRESS_BIN)/libplugin.so $(STRESS_BIN)/fork_dlopen

$(STRESS_BIN)/fork_dlopen: tests/stress/fork_dlopen.c tests/stress/asan_fork_gate.h \
    $(BUILD)/tests/libfakepy.so
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) -Itests/integration/progs -o $@ $< \
	    -L$(BUILD)/tests -lfakepy -Wl,-rpath,'$$ORIGIN/..' -ldl -pthread $(VARIANT_LDFLAGS)

$(STRESS_BIN)/libplugin.so: tests/stress/libplugin.c
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -fPIC -shared -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart $(VARIANT_LDFLAGS)

$(STRESS_BIN)/stress: tests/stress/stress.c tests/stress/asan_fork_gate.h $(BUILD)/tests/libprod.so \
    tests/integration/progs/prod.h
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -Itests/integration/progs -o $@ $< -L$(BUILD)/tests -lprod \
	    -Wl,-rpath,'$$ORIGIN/..' -L$(CUDA_HOME)/lib64 -lcudart -ldl $(VARIANT_LDFLAGS)

# Entry-point tests: libraries with no annotation, traced by DLSHIM_ENTRY.
ENTRY_DIR := $(BUILD)/tests/entry
ENTRY_LIBS := $(ENTRY_DIR)/libprod.so $(ENTRY_DIR)/libcons.so $(ENTRY_DIR)/libbridge.so
ENTRY_PROGS := $(ENTRY_LIBS) $(ENTRY_DIR)/spec_user

$(ENTRY_DIR)/lib%.so: tests/entry/lib%.c include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) -Wno-missing-prototypes -fPIC -shared \
	    -o $@ $< $(VARIANT_LDFLAGS)

$(ENTRY_DIR)/spec_user: tests/entry/spec_user.c $(ENTRY_LIBS)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(VARIANT_CFLAGS) -Wno-missing-prototypes -o $@ $< \
	    -L$(ENTRY_DIR) -lprod -lcons -lbridge -Wl,-rpath,'$$ORIGIN' $(VARIANT_LDFLAGS)

# A C++ program using libtorch's DLPack API (Debian's libtorch-dev).  Built
# once for every variant: the sanitizer run preloads the runtime into it.
CXX ?= g++
TORCH_USER := build/cxx/torch_user
$(TORCH_USER): tests/entry/torch_user.cpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O1 -w -o $@ $< -ltorch -ltorch_cpu -lc10

test-programs: $(LIB) $(PROG_BINS) $(PY_PROGS) $(CAPSULE_BINS) $(BUILD)/tests/local_scope $(SEARCH_PROGS) $(RUST_EXT) $(SIMDEV_LIBS) \
               $(DEVICE_PROGS) $(STRESS_PROGS) $(ENTRY_PROGS) $(TORCH_USER) $(VULKAN_PROGS) $(VK_LAYER)

# ---- the options table in README.md comes from shim/options.def, and
# docs/frameworks.md from the last run of tests/frameworks ------------------
$(BUILD)/options-md: scripts/options-md.c shim/options.def
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -o $@ $<

FRAMEWORK_MATRIX := $(BUILD)/frameworks/matrix.json
docs: $(BUILD)/options-md
	$(PYTHON) scripts/update-generated.py README.md $(BUILD)/options-md
	$(PYTHON) scripts/update-generated.py scripts/dlshim $(BUILD)/options-md --launcher
	@if [ -f $(FRAMEWORK_MATRIX) ]; then $(PYTHON) scripts/frameworks-md $(FRAMEWORK_MATRIX) docs/frameworks.md; \
	 else echo "docs/frameworks.md: run make check-frameworks first"; fi

check-docs: $(BUILD)/options-md
	$(PYTHON) scripts/update-generated.py --check README.md $(BUILD)/options-md
	$(PYTHON) scripts/update-generated.py --check scripts/dlshim $(BUILD)/options-md --launcher
	$(PYTHON) scripts/check-fields shim/fields.def docs/events.md

# ---- the test command ------------------------------------------------------
# Everything CI runs: the suites, the docs check, short fuzzing runs, the
# linters, then the suites again under ASan+UBSan, TSan and memcheck.
# `make check-quick` is the first part alone.
check: deps venv
	$(MAKE) check-quick check-frameworks check-fuzz lint
	$(MAKE) check-sanitize
	$(MAKE) check-tsan
	$(MAKE) check-valgrind

check-quick: deps
	$(MAKE) check-unit check-integration check-docs check-layers

# The core stands alone: shim/'s objects use nothing hooks/ defines.
check-layers: $(LIB)
	scripts/check-layers $(BUILD)

# Current frameworks from the venv (tests/frameworks): the producer x consumer
# matrix, every consumption style, DLPack 1.x flags and dtypes, the C exchange
# table, ctypes capsules, Python lines and ranks (torchrun), the frameworks'
# own DLPack suites under the shim; the pytest plugin and `pip install .` in
# a clean venv (tests/package); then docs/frameworks.md must match the
# matrix this run saw.
check-frameworks: venv $(LIB)
	DLSHIM_TEST_BUILD=$(abspath $(BUILD)) $(VENV) -m pytest -q -p no:cacheprovider --rootdir=tests \
	    tests/frameworks tests/package
	$(PYTHON) scripts/frameworks-md --check $(FRAMEWORK_MATRIX) docs/frameworks.md

# ---- static analysis: cppcheck and clang-tidy (configuration: .clang-tidy) --
LINT_SRCS := $(LIB_SRCS)
CPPCHECK_FLAGS := --enable=warning,portability,performance --std=c11 --inline-suppr --quiet \
                  --error-exitcode=1 -D_GNU_SOURCE -DDLSHIM_BUILDING -D__x86_64__ -Iinclude -Ishim \
                  --suppress=missingIncludeSystem --suppress=missingInclude
lint: deps
	cppcheck $(CPPCHECK_FLAGS) $(LINT_SRCS)
	clang-tidy --quiet $(LINT_SRCS) -- $(BASE_CFLAGS) $(DEVICE_INCLUDES) -DDLSHIM_BUILDING

check-unit: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; DLSHIM_LOG=off $$t; done

check-integration: test-programs
	DLSHIM_TEST_BUILD=$(abspath $(BUILD)) $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration tests/stress

# The whole suite again with AddressSanitizer and UndefinedBehaviorSanitizer
# in the shim and in the test programs.  libasan must come first in
# LD_PRELOAD, so the tests put it there (DLSHIM_TEST_PRELOAD).
# DS_DEBUG_LOCKS: every lock taken out of the order of shim/locks.def aborts.
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

demo:
	@scripts/install-deps demo
	@scripts/venv $(VENV_PYTHON_HOST)
	@$(MAKE) --no-print-directory $(LIB) $(EXAMPLE) >/dev/null
	@scripts/demo $(BUILD)

include bench/bench.mk
include tests/fuzz/fuzz.mk

clean:
	rm -rf build python/*.egg-info
