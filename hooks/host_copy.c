/*
 * host_copy.c — host-side copies of shared CPU buffers (opt-in:
 * DLSHIM_HOOKS=default,host-copy).
 *
 * Wraps, through every module's GOT: memcpy, memmove.
 * A copy of at least DLSHIM_COPY_MIN bytes that reads or writes a live
 * DLPack share becomes a `copy` event (h2h): numpy.array(shared) or
 * torch.tensor(shared) copying what could have been shared.
 * Leaves out: copies inside libc itself and inlined copies (no GOT call),
 *   __memcpy_chk, and every copy below the threshold (one comparison).
 * Opt-in because memcpy is the hottest function of many programs.
 */
#include <string.h>

#include "hooks.h"

static __typeof__(memcpy) *real_memcpy;
static __typeof__(memmove) *real_memmove;

static void *wrap_memcpy(void *dst, const void *src, size_t n)
{
    const void *caller = __builtin_return_address(0);
    void *r = DS_REAL(wrap_memcpy, real_memcpy, "memcpy")(dst, src, n);
    if (n >= (size_t)ds_cfg.copy_min && ds_active())
        ds_copy_record((uintptr_t)dst, (uintptr_t)src, n, DS_COPY_H2H, true, caller);
    return r;
}

static void *wrap_memmove(void *dst, const void *src, size_t n)
{
    const void *caller = __builtin_return_address(0);
    void *r = DS_REAL(wrap_memmove, real_memmove, "memmove")(dst, src, n);
    if (n >= (size_t)ds_cfg.copy_min && ds_active())
        ds_copy_record((uintptr_t)dst, (uintptr_t)src, n, DS_COPY_H2H, true, caller);
    return r;
}

static const ds_got_hook hooks[] = {
    {"memcpy", (void *)wrap_memcpy, (void **)&real_memcpy, NULL},
    {"memmove", (void *)wrap_memmove, (void **)&real_memmove, NULL},
};

static void install(void)
{
    ds_got_hooks_add(hooks, DS_ARRAY_LEN(hooks));
}

/* Off unless asked: wrapping memcpy costs every program's every copy. */
DS_FAMILY(host_copy, .option = "host-copy", .optional = true, .order = DS_ORDER_OTHER,
          .install = install);
