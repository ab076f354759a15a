/*
 * dlopen.c — modules loaded after start-up get patched too.
 *
 * Wraps (by symbol interposition: the shim exports them, and it precedes
 * libc in every module's lookup scope, the executable's included; loaded
 * late, dlshim.attach(), through every module's GOT instead):
 *   dlopen, dlclose.
 * Leaves out: dlmopen (modules in other namespaces are not patched) and
 * modules loaded by libc itself (__libc_dlopen: NSS, libgcc_s).
 *
 * A dlclose that unloads a library holding the deleter of a live share
 * (shim/ledger/unloads.c) is reported once the library is gone (one that
 * stays loaded through another handle is not); under protect the library
 * is kept, and its handle closed once the last such share is released.
 *
 * glibc's dlopen searches for a bare file name with the *caller's*
 * DT_RPATH / DT_RUNPATH ($ORIGIN the caller's folder); behind this wrapper
 * the caller is the shim, which has neither.  So the wrapper searches as
 * glibc would for the caller, in glibc's order: a module already loaded by
 * that name; the caller's RPATH (when it has no RUNPATH); LD_LIBRARY_PATH
 * and the caller's RUNPATH; then glibc itself (the system cache and the
 * default folders).  Found on a GPU machine: cuDNN opens its sub-libraries
 * through its RUNPATH, and without this the system's older ones came first.
 * Left out: the RPATH of the modules that loaded the caller, and $LIB and
 * $PLATFORM in a path.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hooks.h"

static void *(*real_dlopen)(const char *, int);
static int (*real_dlclose)(void *);
/* The shim's own definitions (below).  `dlopen` named in this file is the
 * global scope's, through the GOT: the C library's when the shim was loaded
 * into a running process. */
static __typeof__(dlopen) own_dlopen __attribute__((alias("dlopen"), copy(dlopen)));
static __typeof__(dlclose) own_dlclose __attribute__((alias("dlclose"), copy(dlclose)));

/* `file` in each folder of the colon list `path` ($ORIGIN expanded). */
static void *open_in(const char *path, const char *origin, const char *file, int mode)
{
    void *(*open_fn)(const char *, int) = __atomic_load_n(&real_dlopen, __ATOMIC_ACQUIRE);
    for (const char *p = path ? path : ""; *p;) {
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
        dir[n] = '\0'; /* ds_fmt stops at the buffer's end: n < sizeof(dir) */
        if (len && ds_fmt(full, sizeof(full), "%s/%s", dir, file) + 1 < sizeof(full) &&
            access(full, F_OK) == 0) {
            void *h = open_fn(full, mode);
            if (h)
                return h;
        }
        p += len + (p[len] == ':');
    }
    return NULL;
}

/* A bare name opened as glibc would for `caller` (see above), or NULL:
 * glibc's own search (cache, default folders) is left to the caller. */
static void *open_as_caller(const char *file, int mode, const void *caller)
{
    void *(*open_fn)(const char *, int) = __atomic_load_n(&real_dlopen, __ATOMIC_ACQUIRE);
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !info.dli_fbase)
        return NULL;
    ds_elf_module m;
    const ElfW(Ehdr) *eh = info.dli_fbase;
    if (ds_elf_open(&m, lm->l_addr, (const char *)eh + eh->e_phoff, eh->e_phnum) != NULL ||
        (!m.has_runpath && !m.has_rpath))
        return NULL;
    void *loaded = open_fn(file, mode | RTLD_NOLOAD);
    if (loaded)
        return loaded; /* by that name already: glibc answers with it (one reference more) */
    char origin[DS_PATH_MAX];
    ds_fmt(origin, sizeof(origin), "%s", info.dli_fname ? info.dli_fname : "");
    char *slash = strrchr(origin, '/');
    if (slash)
        *slash = '\0';
    if (!m.has_runpath)
        return open_in(ds_elf_string(&m, m.rpath_off), origin, file, mode);
    const char *library_path = getenv("LD_LIBRARY_PATH");
    void *h = library_path ? open_in(library_path, origin, file, mode) : NULL;
    return h ? h : open_in(ds_elf_string(&m, m.runpath_off), origin, file, mode);
}

DS_PUBLIC void *dlopen(const char *file, int mode)
{
    const void *caller = __builtin_return_address(0);
    int saved = errno;
    void *(*open_fn)(const char *, int) =
        DS_LAZY(real_dlopen, ds_resolve_real("dlopen", (void *)own_dlopen));
    void *h = NULL;
    if (file && !strchr(file, '/') && open_fn) {
        h = open_as_caller(file, mode, caller);
        dlerror(); /* the folders tried must not leave their failures behind */
    }
    errno = saved;
    if (!h)
        h = open_fn(file, mode); /* and glibc's own error, when nothing is found */
    saved = errno;
    if (h && ds_active()) {
        ds_entry_resolve(); /* specs whose module just arrived */
        ds_modules_refresh();
        ds_py_settle(); /* an extension module being imported: the GIL is held */
    }
    errno = saved;
    return h;
}

/* The loaded range and file name of the library behind a handle. */
static bool library_of(void *handle, uintptr_t *lo, uintptr_t *hi, char *name, size_t cap)
{
    struct link_map *lm = NULL;
    if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_ld ||
        !ds_module_range(lm->l_ld, lo, hi))
        return false;
    const char *path = lm->l_name ? lm->l_name : "", *slash = strrchr(path, '/');
    ds_printable(name, cap, slash ? slash + 1 : path, SIZE_MAX);
    return true;
}

static int real_close(void *handle)
{
    int (*close_fn)(void *) = DS_LAZY(real_dlclose, ds_resolve_real("dlclose", (void *)own_dlclose));
    return close_fn(handle);
}

/* A dlclose the shim deferred (protect), made now: the last share whose
 * deleter the library holds was released. */
static void close_deferred(void *handle)
{
    int saved = errno;
    if (real_close(handle) == 0)
        ds_modules_refresh();
    errno = saved;
}

/* A library that holds the deleter of a live share must not go: under
 * protect it stays (its dlclose waits for the last release); otherwise,
 * once it is gone, the shares that will jump into it are reported. */
DS_PUBLIC int dlclose(void *handle)
{
    int saved = errno;
    uintptr_t lo = 0, hi = 0;
    char name[DS_NAME_MAX] = "";
    bool known = ds_active() && library_of(handle, &lo, &hi, name, sizeof(name));
    if (known && ds_cfg.on_error == DS_ON_ERROR_PROTECT && ds_unload_holds(lo, hi) &&
        ds_unload_check(lo, hi, name, handle) == DS_FREE_DEFER) {
        errno = saved;
        return 0;
    }
    errno = saved;
    int r = real_close(handle);
    saved = errno;
    if (r == 0 && ds_active()) {
        ds_modules_refresh();
        uintptr_t still_lo, still_hi;
        if (known && !ds_module_range((const void *)lo, &still_lo, &still_hi))
            ds_unload_check(lo, hi, name, NULL); /* unloaded */
    }
    errno = saved;
    return r;
}

/* A shim loaded into a running process (dlshim.attach()) comes after the C
 * library in every lookup scope, so its exports interpose nothing: each
 * module's own GOT slots are pointed here instead, as every other family's
 * are.  Preloaded, the slots already bind to the exports, or to a sanitizer's
 * interceptor before them, which forwards here. */
static void install(void)
{
    ds_unloads_set_release(close_deferred);
    if (ds_attached()) {
        static const ds_got_hook late[] = {
            {"dlopen", (void *)own_dlopen, (void **)&real_dlopen, NULL},
            {"dlclose", (void *)own_dlclose, (void **)&real_dlclose, NULL},
        };
        ds_got_hooks_add(late, DS_ARRAY_LEN(late));
    }
}

/* dlopen and dlclose are the shim's own exports (above): always on. */
DS_FAMILY(dlopen, .order = DS_ORDER_OTHER, .install = install);
