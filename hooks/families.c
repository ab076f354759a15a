/*
 * families.c — the hook families, in one list.  Each family registers its
 * GOT hooks; the core then patches every loaded module (shim/modules.c).
 * The annotation API (annotate.c), dlopen (dlopen.c) and dlsym (dlsym.c)
 * need no registration: they are the shim's own exported symbols.
 */
#include "internal.h"

void ds_hooks_install(void)
{
    ds_modules_set_namer(ds_framework_name);
    ds_python_capsule_install();
    ds_cuda_runtime_install();
    ds_cuda_driver_install();
    ds_hip_install();
    ds_cuda_runtime_sync_install();
    ds_cuda_driver_sync_install();
    ds_hip_sync_install();
    ds_modules_refresh();
}
