/*
 * annotate.c — the annotation API of include/dlshim.h, for C and C++ code
 * that exchanges DLPack tensors without Python.
 *
 * Wraps (defines, rather: these are the shim's own entry points):
 *   dlshim_export, dlshim_export_versioned, dlshim_import,
 *   dlshim_import_versioned.
 * Leaves out: nothing.  A program that calls them without the shim
 * preloaded reaches no code at all (the header resolves them at run time).
 *
 * Every wrapper has the same shape: keep errno, do nothing unless the shim
 * is active, hand the call to the ledger (shim/ledger/tensor.c).
 */
#include <errno.h>

#include "internal.h"

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
