/*
 * resolve.c — the one way the shim finds the real function behind a hook.
 *
 * RTLD_NEXT finds definitions in modules loaded after the shim (libc,
 * libpython.so, libcudart.so, ...).  The executable comes before the shim in
 * the lookup order, so a function it defines itself (libpython linked into
 * python3) is only found by RTLD_DEFAULT, which must then not answer with
 * the shim's own wrapper.
 */
#include <dlfcn.h>

#include "internal.h"

void *ds_resolve_real(const char *name, const void *ours)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (f && f != ours)
        return f;
    f = dlsym(RTLD_DEFAULT, name);
    return f == ours ? NULL : f;
}
