/*
 * families.c — the hook families, in one list.  Each family registers its
 * GOT hooks; the core then patches every loaded module (shim/modules.c).
 * The annotation API (annotate.c), dlopen (dlopen.c) and dlsym (dlsym.c)
 * need no registration: they are the shim's own exported symbols.
 */
#include "internal.h"

static bool wanted(int family)
{
    return ds_cfg.hooks & (1u << family);
}

void ds_hooks_install(void)
{
    ds_modules_set_namer(ds_framework_name);
    if (wanted(DS_HOOK_PYTHON))
        ds_python_capsule_install();
    if (wanted(DS_HOOK_TORCH))
        ds_torch_install(wanted(DS_HOOK_PYTHON));
    if (wanted(DS_HOOK_CUDA)) {
        ds_cuda_runtime_install();
        ds_cuda_driver_install();
        ds_cuda_runtime_sync_install();
        ds_cuda_driver_sync_install();
    }
    if (wanted(DS_HOOK_HIP)) {
        ds_hip_install();
        ds_hip_sync_install();
    }
    if (wanted(DS_HOOK_HOST_COPY))
        ds_host_copy_install();
    ds_entry_install(); /* DLSHIM_ENTRY specs, when given */
    ds_exit_install();  /* not a family: flushes the log buffer on _exit */
    ds_modules_refresh();
}
