/*
 * resolve.c — the one way the shim finds the real function behind a hook.
 *
 * RTLD_NEXT finds definitions in modules loaded after the shim (libc,
 * libpython.so, libcudart.so, ...).  The executable comes before the shim in
 * the lookup order, so a function it defines itself (libpython linked into
 * python3) is only found by RTLD_DEFAULT, which must then not answer with
 * the shim's own wrapper.  The shim interposes dlsym (hooks/dlsym.c), so its
 * own lookups go to glibc's, found with dlvsym, which is not interposed.
 */
#include <dlfcn.h>

#include "internal.h"

static void *(*glibc_dlsym)(void *, const char *);

void *ds_real_dlsym(void *handle, const char *name)
{
    if (!glibc_dlsym) {
        void *f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!f)
            f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        glibc_dlsym = (void *(*)(void *, const char *))f;
        if (!glibc_dlsym)
            return NULL;
    }
    return glibc_dlsym(handle, name);
}

void *ds_resolve_real(const char *name, const void *ours)
{
    void *f = ds_real_dlsym(RTLD_NEXT, name);
    if (f && f != ours)
        return f;
    f = ds_real_dlsym(RTLD_DEFAULT, name);
    return f == ours ? NULL : f;
}

void *ds_resolve_beside(const void *fn, const char *name)
{
    static void *(*glibc_dlopen)(const char *, int);
    static int (*glibc_dlclose)(void *);
    if (!glibc_dlopen) {
        glibc_dlopen = (void *(*)(const char *, int))ds_real_dlsym(RTLD_NEXT, "dlopen");
        glibc_dlclose = (int (*)(void *))ds_real_dlsym(RTLD_NEXT, "dlclose");
    }
    Dl_info info;
    if (!fn || !glibc_dlopen || !glibc_dlclose || !dladdr(fn, &info) || !info.dli_fname)
        return NULL;
    /* A handle for the already loaded library (not its link_map: glibc sets
     * up the search scope only of objects opened with dlopen). */
    void *handle = glibc_dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle)
        return NULL;
    void *f = ds_real_dlsym(handle, name);
    glibc_dlclose(handle);
    return f;
}
