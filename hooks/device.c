/*
 * device.c — what the CUDA runtime, CUDA driver and HIP hook families share:
 * turning a successful allocation into a record, and a free into a decision.
 * Each family file keeps its wrappers to one shape around these calls.
 */
#include <errno.h>

#include "internal.h"

void ds_device_allocated(int family, int kind, const void *out_ptr, size_t ptr_size,
                         uint64_t bytes, int device, void *stream, const void *caller)
{
    int saved = errno;
    uintptr_t base = 0;
    if (ds_active() && ds_safe_read(&base, out_ptr, ptr_size) == ptr_size && base) {
        ds_alloc_info a = {.base = base, .size = bytes, .stream = stream, .device = device,
                           .kind = kind, .family = family};
        ds_alloc_record(&a, ds_module_id_at(caller));
    }
    errno = saved;
}

int ds_device_free_check(int family, int kind, uintptr_t ptr, const void *caller)
{
    if (!ptr || !ds_active())
        return DS_FREE_FORWARD; /* freeing NULL is legal and does nothing */
    int saved = errno;
    char who[DS_NAME_MAX];
    ds_module_name_at(caller, who, sizeof(who));
    int action = ds_alloc_free_check(ptr, family, kind, who);
    errno = saved;
    return action;
}

void ds_device_freed(uintptr_t ptr, const void *caller)
{
    if (!ptr || !ds_active())
        return;
    int saved = errno;
    char who[DS_NAME_MAX];
    ds_module_name_at(caller, who, sizeof(who));
    ds_alloc_forget(ptr, who);
    errno = saved;
}

void ds_device_op(int family, const void *stream, bool ptsz, const ds_range *r, int n,
                  const void *caller)
{
    int saved = errno;
    if (ds_active())
        ds_sync_op(family, (uintptr_t)stream, ptsz, r, n, caller);
    errno = saved;
}

void ds_device_copy(int family, const void *stream, uintptr_t dst, uintptr_t src, uint64_t bytes,
                    uint64_t dst_span, uint64_t src_span, int direction, const void *caller)
{
    int saved = errno;
    if (ds_active()) {
        ds_range r[2] = {{src, src_span, false}, {dst, dst_span, true}};
        ds_sync_op(family, (uintptr_t)stream, false, r, 2, caller);
        ds_copy_record(dst, src, bytes, direction, false, caller);
    }
    errno = saved;
}

int ds_copy_kind_direction(int kind)
{
    /* cudaMemcpyKind and hipMemcpyKind share these values; 4 is "Default". */
    static const int directions[] = {DS_COPY_H2H, DS_COPY_H2D, DS_COPY_D2H, DS_COPY_D2D};
    return kind >= 0 && kind < 4 ? directions[kind] : DS_COPY_INFER;
}
