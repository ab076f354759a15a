/*
 * families.c — the hook families, in one list.  Each family registers its
 * GOT hooks; the core then patches every loaded module (shim/modules.c).
 * The annotation API (annotate.c) and dlopen (dlopen.c) need no
 * registration: they are the shim's own exported symbols.
 */
#include "internal.h"

void ds_hooks_install(void)
{
    ds_modules_set_namer(ds_framework_name);
    ds_python_capsule_install();
    ds_modules_refresh();
}
