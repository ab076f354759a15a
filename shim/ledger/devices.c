/*
 * devices.c — the device APIs the hook families describe to the core.
 *
 * A family that intercepts a device runtime (hooks/cuda_runtime.c,
 * cuda_driver.c, hip.c) registers one descriptor when it installs: its name,
 * the DLPack names of the devices it allocates on, the handles its API gives
 * the default streams, how to make one stream wait for another, how to
 * perform a free the shim deferred.  Allocations, copies and the stream model
 * keep the descriptor's index and ask it; the core names no API itself.
 */
#include <stdatomic.h>
#include <string.h>

#include "ledger/ledger.h"

static const ds_device_api *apis[DS_DEVICE_APIS_MAX];
static atomic_int count;
/* By DLPack device type, the first API whose tensors are of that type, plus
 * one (0: none): every export asks, and walking the APIs was a twelfth of
 * an export's tracking.  Types past the table are looked for in the list. */
#define TYPES_INDEXED 64
static atomic_schar api_of_type[TYPES_INDEXED];
/* Each API's stream family: the first API registered that drives the same
 * devices (a CUDA runtime stream or event is a driver one).  Written before
 * `count` makes the API visible. */
static int family[DS_DEVICE_APIS_MAX];

static bool same_devices(const ds_device_api *a, const ds_device_api *b)
{
    const char *da = a->device_type[DS_ALLOC_DEVICE], *db = b->device_type[DS_ALLOC_DEVICE];
    return a == b || (da && db && !strcmp(da, db));
}

int ds_device_api_add(const ds_device_api *api)
{
    int i = atomic_load(&count);
    if (i == DS_DEVICE_APIS_MAX)
        return -1;
    apis[i] = api;
    family[i] = i;
    for (int j = 0; j < i; j++)
        if (same_devices(apis[j], api)) {
            family[i] = j;
            break;
        }
    int32_t type = api->tensor_device_type;
    if (type > 0 && type < TYPES_INDEXED && !atomic_load(&api_of_type[type]))
        atomic_store(&api_of_type[type], (signed char)(i + 1));
    atomic_store(&count, i + 1);
    return i;
}

const ds_device_api *ds_device_api_at(int index)
{
    static const ds_device_api unknown = {.name = "?"};
    return index >= 0 && index < atomic_load_explicit(&count, memory_order_relaxed) ? apis[index]
                                                                                   : &unknown;
}

int ds_device_api_family(int api)
{
    return api >= 0 && api < atomic_load_explicit(&count, memory_order_relaxed) ? family[api] : api;
}

int ds_device_api_for_tensors(int32_t device_type)
{
    if (device_type > 0 && device_type < TYPES_INDEXED)
        return atomic_load_explicit(&api_of_type[device_type], memory_order_acquire) - 1;
    int n = atomic_load_explicit(&count, memory_order_acquire);
    for (int i = 0; i < n && device_type; i++)
        if (apis[i]->tensor_device_type == device_type)
            return i;
    return -1;
}

void ds_alloc_device_name(char *out, size_t cap, const ds_alloc_info *a)
{
    const char *type = a->kind >= 0 && a->kind < DS_ALLOC_KINDS
                           ? ds_device_api_at(a->api)->device_type[a->kind]
                           : NULL;
    ds_fmt(out, cap, "%s:%d", type ? type : "device", a->device);
}
