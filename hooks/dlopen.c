/*
 * dlopen.c — modules loaded after start-up get patched too.
 *
 * Wraps (by symbol interposition: the shim exports them, and it precedes
 * libc in every module's lookup scope, the executable's included):
 *   dlopen, dlclose.
 * Leaves out: dlmopen (modules in other namespaces are not patched) and
 * modules loaded by libc itself (__libc_dlopen: NSS, libgcc_s).
 *
 * glibc's dlopen searches the *caller's* DT_RUNPATH/DT_RPATH for a bare file
 * name and expands $ORIGIN relative to the caller; behind this wrapper the
 * caller is the shim.  So when a bare name is not found, the caller's own
 * search path is tried with $ORIGIN expanded (a library that LD_LIBRARY_PATH
 * or the system cache also holds is then found there first: the one
 * difference left).
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <string.h>

#include "hooks.h"

static void *(*real_dlopen)(const char *, int);
static int (*real_dlclose)(void *);

/* Tries each directory of the caller's RUNPATH (or RPATH) for `file`. */
static void *open_from_callers_path(const char *file, int mode, const void *caller)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
        return NULL;
    ds_elf_module m;
    const ElfW(Ehdr) *eh = info.dli_fbase;
    if (ds_elf_open(&m, lm->l_addr, (const char *)eh + eh->e_phoff, eh->e_phnum) != NULL)
        return NULL;
    const char *path = m.has_runpath ? ds_elf_string(&m, m.runpath_off)
                       : m.has_rpath ? ds_elf_string(&m, m.rpath_off)
                                     : NULL;
    if (!path)
        return NULL;
    char origin[DS_PATH_MAX];
    ds_fmt(origin, sizeof(origin), "%s", info.dli_fname);
    char *slash = strrchr(origin, '/');
    if (slash)
        *slash = '\0';
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, ":");
        char dir[DS_PATH_MAX], full[DS_PATH_MAX];
        size_t n = 0;
        for (size_t i = 0; i < len && n + 1 < sizeof(dir);) {
            if (!strncmp(p + i, "$ORIGIN", 7) || !strncmp(p + i, "${ORIGIN}", 9)) {
                n += ds_fmt(dir + n, sizeof(dir) - n, "%s", origin);
                i += p[i + 1] == '{' ? 9 : 7;
            } else {
                dir[n++] = p[i++];
            }
        }
        dir[n] = '\0';
        if (ds_fmt(full, sizeof(full), "%s/%s", dir, file) + 1 < sizeof(full)) {
            void *h = __atomic_load_n(&real_dlopen, __ATOMIC_ACQUIRE)(full, mode);
            if (h)
                return h;
        }
        p += len + (p[len] == ':');
    }
    return NULL;
}

DS_PUBLIC void *dlopen(const char *file, int mode)
{
    const void *caller = __builtin_return_address(0);
    int saved = errno;
    void *(*open_fn)(const char *, int) =
        DS_LAZY(real_dlopen, ds_resolve_real("dlopen", (void *)dlopen));
    errno = saved;
    void *h = open_fn(file, mode);
    if (!h && file && !strchr(file, '/')) {
        saved = errno;
        dlerror(); /* a retry that succeeds must not leave this failure behind */
        h = open_from_callers_path(file, mode, caller);
        if (!h)
            open_fn(file, mode); /* the caller sees glibc's own error */
        errno = saved;
    }
    saved = errno;
    if (h && ds_active()) {
        ds_entry_resolve(); /* specs whose module just arrived */
        ds_modules_refresh();
    }
    errno = saved;
    return h;
}

DS_PUBLIC int dlclose(void *handle)
{
    int saved = errno;
    int (*close_fn)(void *) = DS_LAZY(real_dlclose, ds_resolve_real("dlclose", (void *)dlclose));
    errno = saved;
    int r = close_fn(handle);
    saved = errno;
    if (r == 0 && ds_active())
        ds_modules_refresh();
    errno = saved;
    return r;
}
