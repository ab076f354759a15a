/*
 * device_family.h — the end of a device API's file (cuda_runtime.c,
 * cuda_driver.c, hip.c): its table once more as its GOT hooks, and the
 * family that installs them with its descriptor.  The file defines, before
 * including this: DS_TABLE (its table's file name), DS_OPTION (its
 * DLSHIM_HOOKS name), `api` (DS_DEVICE_API) and `ds_api`.
 */
#include "device_entries.h"
static const ds_got_hook hooks[] = {
#include DS_TABLE
};

static void install(void)
{
    ds_api = ds_device_api_add(&api);
    ds_got_hooks_add(hooks, DS_ARRAY_LEN(hooks));
}

DS_FAMILY(device_api, .option = DS_OPTION, .order = DS_ORDER_DEVICES, .install = install);
