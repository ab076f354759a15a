/*
 * annotate.c — the public API of include/dlshim.h: the annotations, for C
 * and C++ code that exchanges DLPack tensors without Python, and the calls
 * of test runners and tools.
 *
 * Wraps (defines, rather: these are the shim's own entry points):
 *   dlshim_export, dlshim_export_versioned, dlshim_import,
 *   dlshim_import_versioned, dlshim_set_test, dlshim_get_status, dlshim_attach.
 * Leaves out: nothing.  A program that calls them without the shim
 * preloaded reaches no code at all (the header resolves them at run time).
 *
 * Every wrapper has the same shape: keep errno, do nothing unless the shim
 * is active, hand the call to the ledger (shim/ledger/tensor.c).
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "shim.h"

DS_PUBLIC void dlshim_export(DLManagedTensor *t, const char *producer)
{
    int saved = errno;
    if (ds_active())
        ds_tensor_export(t, false, producer, DS_NAME_ONCE("annotation"));
    errno = saved;
}

DS_PUBLIC void dlshim_export_versioned(DLManagedTensorVersioned *t, const char *producer)
{
    int saved = errno;
    if (ds_active())
        ds_tensor_export(t, true, producer, DS_NAME_ONCE("annotation"));
    errno = saved;
}

DS_PUBLIC void dlshim_import(DLManagedTensor *t, const char *consumer)
{
    int saved = errno;
    if (ds_active())
        ds_tensor_import(t, false, consumer, DS_NAME_ONCE("annotation"));
    errno = saved;
}

DS_PUBLIC void dlshim_import_versioned(DLManagedTensorVersioned *t, const char *consumer)
{
    int saved = errno;
    if (ds_active())
        ds_tensor_import(t, true, consumer, DS_NAME_ONCE("annotation"));
    errno = saved;
}

DS_PUBLIC void dlshim_set_test(const char *test)
{
    int saved = errno;
    if (ds_active())
        ds_context_set_test(test);
    errno = saved;
}

DS_PUBLIC int dlshim_attach(const char *options, char *error, size_t error_cap)
{
    int saved = errno;
    int r = ds_attach(options, error, error_cap);
    errno = saved;
    return r;
}

/* The public list of kinds is the table's, in its order (gcc and clang fold
 * the comparison of two literals). */
#define DS_VIOLATION(ID, name) "," name
_Static_assert(__builtin_strcmp("," DLSHIM_VIOLATION_KINDS,
#include "base/violations.def"
                                ) == 0,
               "DLSHIM_VIOLATION_KINDS lists violations.def in its order");
#undef DS_VIOLATION
_Static_assert(DS_VIO_COUNT <= sizeof(((dlshim_status *)0)->violations_of) / sizeof(uint64_t),
               "dlshim_status has a count for every kind");

DS_PUBLIC int dlshim_get_status(dlshim_status *s)
{
    int saved = errno;
    if (!s || s->size < offsetof(dlshim_status, last_violation) || !ds_active()) {
        errno = saved;
        return -1;
    }
    /* Filled in a copy, then the caller's `size` bytes of it. */
    dlshim_status now = {.size = s->size < sizeof(now) ? s->size : (uint32_t)sizeof(now)};
    ds_status_counts counts;
    ds_stats_now(&counts);
    now.outstanding = counts.outstanding;
    now.shares = counts.shares;
    now.copies = counts.copies;
    now.bytes_shared = counts.bytes_shared;
    now.bytes_copied = counts.bytes_copied;
    now.barriers_inserted = counts.barriers_inserted;
    for (int k = 0; k < DS_VIO_COUNT; k++) {
        now.violations += counts.violations[k];
        now.violations_of[k] = counts.violations[k];
    }
    int kind;
    char where[DS_WHERE_MAX];
    if (ds_stats_latest_violation(&kind, where)) {
        ds_fmt(now.last_violation, sizeof(now.last_violation), "%s", ds_violation_name(kind));
        ds_fmt(now.last_violation_py, sizeof(now.last_violation_py), "%s", where);
    }
    memcpy(s, &now, now.size);
    errno = saved;
    return 0;
}
