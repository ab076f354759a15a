# The test programs of make check (included by the Makefile): unit tests,
# integration programs, Python extensions, the simulated device and the
# programs that use it, stress and entry-point programs.

# ---- unit tests (cmocka): each links its layer's objects and those below
# (a test that needs a hook family or a device API declares a fake one) ---
UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRCS))
UNIT_LAYER_test_locks := BASE
UNIT_LAYER_test_safe_mem := BASE
UNIT_LAYER_test_config := START
UNIT_LAYER_test_elf := IMAGE
UNIT_LAYER_test_entry_spec := IMAGE
UNIT_LAYER_test_json := OUTPUT
UNIT_LAYER_test_log_writer := OUTPUT
UNIT_LAYER_test_ledger := LEDGER
UNIT_LAYER_test_allocs := LEDGER
UNIT_LAYER_test_copies := LEDGER
UNIT_LAYER_test_sync := LEDGER
UNIT_LAYER_test_names := START
UNIT_LAYER_test_py_frames := START
unit_objs = $($(or $(UNIT_LAYER_$(1)),$(error tests/unit/$(1).c: no UNIT_LAYER_$(1) in tests/tests.mk))_OBJS)

.SECONDEXPANSION:
$(BUILD)/tests/unit/%: tests/unit/%.c $$(call unit_objs,%) $(wildcard tests/unit/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -DDLSHIM_BUILDING $(CFLAGS) $(VARIANT_CFLAGS) $(EXTRA_UNIT_FLAGS) \
	    -Itests/unit -o $@ $< $(call unit_objs,$*) $(VARIANT_LDFLAGS) -ldl -pthread -lcmocka

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
# python_frames.c and python_locations.c against the fake interpreter the
# test defines (its C API found in the test's own dynamic symbols).
PY_FRAMES_SRCS := hooks/python_frames.c hooks/python_locations.c
$(BUILD)/tests/unit/test_py_frames: $(PY_FRAMES_SRCS) hooks/python_frames.h hooks/frameworks.c \
    hooks/hooks.h
$(BUILD)/tests/unit/test_py_frames: EXTRA_UNIT_FLAGS = -Ihooks $(PY_FRAMES_SRCS) \
    hooks/frameworks.c -rdynamic

# ---- integration test programs (annotation API users, no dlshim link) -----
PROG_BINS  := $(BUILD)/tests/libprod.so $(BUILD)/tests/consumer $(BUILD)/tests/secure_probe
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

# A Vulkan layer that gives a driver without them VK_KHR_external_semaphore_fd
# and VK_KHR_maintenance6's descriptor commands (lavapipe:
# tests/simdev/vk_simulated.c), with its manifest beside it.
VK_SIMULATED := $(SIMDEV)/vulkan/libvk_simulated.so $(SIMDEV)/vulkan/vk_simulated.json
$(SIMDEV)/vulkan/libvk_simulated.so: tests/simdev/vk_simulated.c tests/vulkan/vk_maintenance6.h
	@mkdir -p $(dir $@)
	$(CC) $(SIMDEV_CFLAGS) -shared -o $@ $< $(VARIANT_LDFLAGS)
$(SIMDEV)/vulkan/vk_simulated.json: tests/simdev/vk_simulated.json
	@mkdir -p $(dir $@)
	cp $< $@

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
                $(DEVICE_BIN)/hip_handoff_spt \
                $(DEVICE_BIN)/copies $(DEVICE_BIN)/handoff_ptsz
DEVICE_PROG_FLAGS = $(BASE_CFLAGS) $(DEVICE_INCLUDES) $(CFLAGS) $(VARIANT_CFLAGS) \
                    -Wno-missing-prototypes -pthread

$(DEVICE_BIN)/rt_alloc: tests/device/rt_alloc.c tests/device/cuda_check.h include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/handoff: tests/device/handoff.c tests/device/cuda_check.h include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart $(VARIANT_LDFLAGS)

# The same program built as `nvcc --default-stream per-thread` builds it.
$(DEVICE_BIN)/handoff_ptsz: tests/device/handoff.c tests/device/cuda_check.h include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -DCUDA_API_PER_THREAD_DEFAULT_STREAM -o $@ $< \
	    -L$(CUDA_HOME)/lib64 -lcudart $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/lib%like.so: tests/device/owner.c
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -DOWNER=$*like -fPIC -shared -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart \
	    $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/copies: tests/device/copies.c tests/device/cuda_check.h $(DEVICE_BIN)/libjaxlike.so $(DEVICE_BIN)/libtorchlike.so
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -L$(DEVICE_BIN) -ljaxlike -ltorchlike \
	    -Wl,-rpath,'$$ORIGIN' -L$(CUDA_HOME)/lib64 -lcudart $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/drv_alloc: tests/device/drv_alloc.c $(CUDA_DRIVER)
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< $(CUDA_DRIVER) $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/hip_handoff: tests/device/hip_handoff.c include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -lamdhip64 $(VARIANT_LDFLAGS)

# The same program built as `hipcc -fgpu-default-stream=per-thread` builds it,
# linked against the simulated runtime (HIP 6's twins; Debian's HIP 5 lacks
# three of them): it records only the SONAME.
$(DEVICE_BIN)/hip_handoff_spt: tests/device/hip_handoff.c include/dlshim.h $(SIMDEV)/libamdhip64.so.5
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -DHIP_API_PER_THREAD_DEFAULT_STREAM -o $@ $< \
	    $(SIMDEV)/libamdhip64.so.5 $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/hip_alloc: tests/device/hip_alloc.c
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -lamdhip64 $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/libculike.so: tests/device/libculike.c
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -fPIC -shared -o $@ $< $(VARIANT_LDFLAGS)

$(DEVICE_BIN)/culike_user: tests/device/culike_user.c $(DEVICE_BIN)/libculike.so
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< -L$(DEVICE_BIN) -lculike -Wl,-rpath,'$$ORIGIN' \
	    $(VARIANT_LDFLAGS)

# What bin/gpu-check needs on a GPU machine: the shim and the CUDA device
# programs (no HIP, Python extensions or Rust), bench/streams for the cost of
# a stream operation; `simdev` for its --simdev runs.
CUDA_DEVICE_PROGS := $(DEVICE_BIN)/rt_alloc $(DEVICE_BIN)/drv_alloc $(DEVICE_BIN)/handoff \
                     $(DEVICE_BIN)/copies $(DEVICE_BIN)/handoff_ptsz
# Vulkan programs: the loader (libvulkan-dev), CUDA's runtime and HIP's, the
# simulated device's in CI (tests/vulkan).
VULKAN_PROGS := $(BUILD)/tests/vulkan/vk_share $(BUILD)/tests/vulkan/vk_hip \
                $(BUILD)/tests/vulkan/vk_queue $(BUILD)/tests/vulkan/vk_timeline \
                $(BUILD)/tests/vulkan/vk_dispatch $(BUILD)/tests/vulkan/vk_extsem \
                $(BUILD)/tests/vulkan/vk_consume
$(BUILD)/tests/vulkan/%: tests/vulkan/%.c tests/vulkan/vk_setup.c tests/vulkan/vk_setup.h \
                         tests/vulkan/vk_maintenance6.h tests/device/cuda_check.h include/dlshim.h
	@mkdir -p $(dir $@)
	$(CC) $(DEVICE_PROG_FLAGS) -o $@ $< tests/vulkan/vk_setup.c -lvulkan $(VK_RUNTIME) \
	    $(VARIANT_LDFLAGS)
$(BUILD)/tests/vulkan/vk_share: VK_RUNTIME = -L$(CUDA_HOME)/lib64 -lcudart
$(BUILD)/tests/vulkan/vk_extsem: VK_RUNTIME = -L$(CUDA_HOME)/lib64 -lcudart
$(BUILD)/tests/vulkan/vk_hip: VK_RUNTIME = -lamdhip64

gpu-check-programs: $(LIB) $(CUDA_DEVICE_PROGS) $(BUILD)/bench/streams $(VK_LAYER) \
                    $(if $(wildcard /usr/include/vulkan/vulkan.h),$(VULKAN_PROGS))
simdev: $(SIMDEV_LIBS) $(if $(wildcard /usr/include/vulkan/vulkan.h),$(VK_SIMULATED))

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

# The real-world cases' kernel library (tests/realworld): loaded by ctypes.
REALWORLD_LIBS := $(BUILD)/tests/realworld/libkernel.so
$(BUILD)/tests/realworld/libkernel.so: tests/realworld/progs/libkernel.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -g -Wall -Wextra -Werror $(VARIANT_CFLAGS) -fPIC -shared -o $@ $< \
	    $(VARIANT_LDFLAGS)

test-programs: $(LIB) $(PROG_BINS) $(PY_PROGS) $(CAPSULE_BINS) $(BUILD)/tests/local_scope $(SEARCH_PROGS) $(RUST_EXT) $(SIMDEV_LIBS) \
               $(DEVICE_PROGS) $(STRESS_PROGS) $(ENTRY_PROGS) $(TORCH_USER) $(VULKAN_PROGS) $(VK_LAYER) $(VK_SIMULATED) \
               $(REALWORLD_LIBS) $(EXAMPLE)

