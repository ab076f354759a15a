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
#include <string.h>

#include "image/image.h"

static void *(*glibc_dlsym)(void *, const char *);

static void *find_glibc_dlsym(void)
{
    void *f = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    return f ? f : dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
}

void *ds_real_dlsym(void *handle, const char *name)
{
    void *(*real)(void *, const char *) = DS_LAZY(glibc_dlsym, find_glibc_dlsym());
    return real ? real(handle, name) : NULL;
}

void *ds_resolve_real(const char *name, const void *ours)
{
    void *f = ds_real_dlsym(RTLD_NEXT, name);
    if (f && f != ours)
        return f;
    f = ds_real_dlsym(RTLD_DEFAULT, name);
    return f == ours ? NULL : f;
}

static void *(*glibc_dlopen)(const char *, int);

void *ds_real_dlopen(const char *file, int mode)
{
    void *(*open_fn)(const char *, int) = DS_LAZY(glibc_dlopen, ds_real_dlsym(RTLD_NEXT, "dlopen"));
    return open_fn ? open_fn(file, mode) : NULL;
}

void *ds_resolve_beside(const void *fn, const char *name)
{
    static int (*glibc_dlclose)(void *);
    void *(*open_fn)(const char *, int) = DS_LAZY(glibc_dlopen, ds_real_dlsym(RTLD_NEXT, "dlopen"));
    int (*close_fn)(void *) = DS_LAZY(glibc_dlclose, ds_real_dlsym(RTLD_NEXT, "dlclose"));
    Dl_info info;
    if (!fn || !open_fn || !close_fn || !dladdr(fn, &info) || !info.dli_fname)
        return NULL;
    /* A handle for the already loaded library (not its link_map: glibc sets
     * up the search scope only of objects opened with dlopen). */
    void *handle = open_fn(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle)
        return NULL;
    void *f = ds_real_dlsym(handle, name);
    close_fn(handle);
    return f;
}

bool ds_defines(const void *fn, const char *name)
{
    Dl_info info;
    if (!fn || !name || !dladdr(fn, &info) || info.dli_saddr != fn || !info.dli_sname)
        return false;
    /* dladdr names one of the symbols at fn: another may be `name`. */
    return !strcmp(info.dli_sname, name) || ds_resolve_beside(fn, name) == fn;
}
