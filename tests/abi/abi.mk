# ---- the library's own declarations of the device APIs, Vulkan, libffi and
# DLPack (hooks/abi/, include/dlshim/dlpack.h) against the real headers
# (tests/abi/facts.h says how): each family's proof compiled with the real
# headers first, where the compiler checks every repeated declaration, and
# with the shim's alone; check.c compares the two lists of facts. --------
ABI_FAMILIES := cuda hip vulkan ffi dlpack
ABI_CFLAGS = $(BASE_CFLAGS) -Ihooks -Itests/abi $(CFLAGS)
ABI_OBJS := $(foreach f,$(ABI_FAMILIES),$(BUILD)/abi/$(f)-sdk.o $(BUILD)/abi/$(f)-ours.o)

$(BUILD)/abi/%-sdk.o: tests/abi/%.c tests/abi/facts.h Makefile
	@mkdir -p $(dir $@)
	$(CC) $(ABI_CFLAGS) $(DEVICE_INCLUDES) -DDS_ABI_SDK_TYPES -MMD -MP -c $< -o $@

$(BUILD)/abi/%-ours.o: tests/abi/%.c tests/abi/facts.h Makefile
	@mkdir -p $(dir $@)
	$(CC) $(ABI_CFLAGS) -MMD -MP -c $< -o $@
-include $(ABI_OBJS:.o=.d)

$(BUILD)/abi/check: tests/abi/check.c $(ABI_OBJS)
	$(CC) $(ABI_CFLAGS) -o $@ $^

# The tables' per-thread-default-stream twins (hooks/device.h) against the
# real headers' declarations of them: compiling is the check.
$(BUILD)/abi/per_thread.o: tests/abi/per_thread.c hooks/cuda_runtime.def hooks/cuda_driver.def \
                           Makefile
	@mkdir -p $(dir $@)
	$(CC) $(ABI_CFLAGS) $(DEVICE_INCLUDES) -c $< -o $@

check-abi: $(BUILD)/abi/check $(BUILD)/abi/per_thread.o
	$<
