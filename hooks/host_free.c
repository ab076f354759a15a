/*
 * host_free.c — the program's frees of host memory, for the bytes of a
 * CPU tensor freed while it is shared (shim/ledger/host_frees.c says what
 * follows), and for what a dying capsule's destructor frees.
 *
 * Wraps, through every module's GOT, from the process's first export on
 * (a program that never shares a tensor never pays for it, and one that
 * does pays two loads and branches per free while no share is live):
 *   free      the whole block (malloc_usable_size) before it goes
 *   realloc   the block, where it moved (or the tail, where it shrank in
 *             place); under protect, a block a share lies in is never given
 *             back: a new one is made and the old one's free deferred
 *   munmap    the range, before it goes
 * C++'s operator delete, numpy's and PyTorch's allocators and Python's own
 * end in these from their modules, so they are seen too.
 * Leaves out: frees the C library and the loader make inside themselves
 *   (their own modules keep their slots: pthread_create, thread exit,
 *   dlopen and fork free memory where a wrapper must not run, and none of
 *   it is a tensor's), those of the sanitizer and valgrind runtimes that
 *   may stand in front of them, cfree and reallocarray (no framework frees
 *   tensor memory with them), and allocators that keep freed memory in
 *   pools of their own (the memory is then not given back to anyone).
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "hooks.h"

static void (*real_free)(void *);
static void *(*real_realloc)(void *, size_t);
static int (*real_munmap)(void *, size_t);
static size_t (*usable_size)(void *); /* malloc_usable_size */
static void *(*real_malloc)(size_t);

static void wrap_free(void *p);
static void *wrap_realloc(void *p, size_t n);
static int wrap_munmap(void *p, size_t n);

/* The size of the block at p: what free gives back (resolved when the
 * hooks are armed: looking a function up may itself free). */
static size_t block_size(void *p)
{
    size_t (*f)(void *) = __atomic_load_n(&usable_size, __ATOMIC_ACQUIRE);
    return f ? f(p) : 1;
}

/* Set while this thread checks a free: a free made on the way (libc's own
 * calls go through its GOT too) only goes ahead. */
static DS_TLS bool checking;

/* Whether this free is to be looked at: the shim tracking, and not one
 * the check itself makes. */
static inline bool to_check(void)
{
    return !checking && ds_active();
}

static int check(uintptr_t p, uint64_t bytes, int how, const void *caller)
{
    int saved = errno;
    checking = true;
    int what = ds_host_free_check(p, bytes, how, caller);
    checking = false;
    errno = saved;
    return what;
}

__attribute__((noinline)) static void free_watched(void *p, const void *caller)
{
    void (*real)(void *) = (__typeof__(real))ds_got_original((void *)wrap_free,
                                                            (void **)&real_free, "free", caller);
    if (p && to_check() && check((uintptr_t)p, block_size(p), DS_HOST_FREE, caller) ==
                               DS_FREE_DEFER)
        return;
    real(p);
}

/* While no share is live, one word tested and the real function called:
 * most programs free far more often than they share.  The word also counts
 * the hooks whose modules no longer hold one definition (the image layer
 * raises it: ds_got_hooks_add_gated below), so real_free is every caller's here. */
static void wrap_free(void *p)
{
    if (__builtin_expect(!atomic_load_explicit(&ds_frees_watched, memory_order_acquire), 1)) {
        void (*real)(void *) = __atomic_load_n(&real_free, __ATOMIC_ACQUIRE);
        if (__builtin_expect(real != NULL, 1))
            return real(p);
    }
    free_watched(p, __builtin_return_address(0));
}

__attribute__((noinline)) static void *realloc_watched(void *p, size_t n, const void *caller)
{
    void *(*real)(void *, size_t) = (__typeof__(real))ds_got_original(
        (void *)wrap_realloc, (void **)&real_realloc, "realloc", caller);
    if (!p || !to_check())
        return real(p, n);
    int saved = errno;
    size_t old = block_size(p);
    if (ds_cfg.on_error == DS_ON_ERROR_PROTECT && ds_host_shared((uintptr_t)p, old)) {
        /* A share lies in the block: it must stay.  The program gets a new
         * block with the bytes, and the old one's free waits (or, where it
         * cannot wait, goes ahead as the program asked). */
        void *(*alloc)(size_t) = __atomic_load_n(&real_malloc, __ATOMIC_ACQUIRE);
        void *q = alloc && n ? alloc(n) : NULL;
        if (q) {
            memcpy(q, p, n < old ? n : old);
            if (check((uintptr_t)p, old, DS_HOST_REALLOC, caller) != DS_FREE_DEFER) {
                void (*f)(void *) = (__typeof__(f))ds_got_original(
                    (void *)wrap_free, (void **)&real_free, "free", caller);
                if (f)
                    f(p);
            }
            errno = saved;
            return q;
        }
    }
    errno = saved;
    void *r = real(p, n);
    saved = errno;
    if (r && r != p)
        check((uintptr_t)p, old, DS_HOST_REALLOC, caller); /* it moved */
    else if (r == p && n < old)
        check((uintptr_t)p + n, old - n, DS_HOST_REALLOC, caller); /* the tail */
    errno = saved;
    return r;
}

static void *wrap_realloc(void *p, size_t n)
{
    if (__builtin_expect(!atomic_load_explicit(&ds_frees_watched, memory_order_acquire), 1)) {
        void *(*real)(void *, size_t) = __atomic_load_n(&real_realloc, __ATOMIC_ACQUIRE);
        if (__builtin_expect(real != NULL, 1))
            return real(p, n);
    }
    return realloc_watched(p, n, __builtin_return_address(0));
}

static int wrap_munmap(void *p, size_t n)
{
    const void *caller = __builtin_return_address(0);
    int (*real)(void *, size_t) = DS_REAL(wrap_munmap, real_munmap, "munmap");
    if (__builtin_expect(!atomic_load_explicit(&ds_frees_watched, memory_order_relaxed), 1) ||
        !to_check())
        return real(p, n);
    return check((uintptr_t)p, n, DS_HOST_MUNMAP, caller) == DS_FREE_DEFER ? 0 : real(p, n);
}

/* The allocator function the program itself calls: the first definition,
 * which is a sanitizer's where one is preloaded before the shim (its blocks
 * are not libc's), libc's otherwise.  The shim defines none of them. */
static void *program_function(const char *name)
{
    return ds_real_dlsym(RTLD_DEFAULT, name);
}

/* A free the shim deferred, made now (the last share in it ended). */
static void release(uintptr_t p, uint64_t bytes, int how)
{
    if (how == DS_HOST_MUNMAP) {
        int (*f)(void *, size_t) = DS_LAZY(real_munmap, ds_resolve_real("munmap", NULL));
        if (f)
            f((void *)p, bytes);
        return;
    }
    void (*f)(void *) = DS_LAZY(real_free, program_function("free"));
    if (f)
        f((void *)p);
}

static const char *const runtimes[] = {"libc.so", "ld-linux", "libpthread.so", "libasan.so",
                                       "libtsan.so", "vgpreload_", NULL};

static const ds_got_hook hooks[] = {
    {"free", (void *)wrap_free, (void **)&real_free, NULL},
    {"realloc", (void *)wrap_realloc, (void **)&real_realloc, NULL},
    {"munmap", (void *)wrap_munmap, (void **)&real_munmap, NULL},
};

/* At the first export: every module's frees from now on. */
static void arm(void)
{
    __atomic_store_n(&usable_size, program_function("malloc_usable_size"), __ATOMIC_RELEASE);
    __atomic_store_n(&real_malloc, program_function("malloc"), __ATOMIC_RELEASE);
    ds_host_frees_set_release(release);
    ds_got_hooks_add_gated(hooks, DS_ARRAY_LEN(hooks), runtimes, &ds_frees_watched);
    ds_host_frees_arm();
    ds_modules_refresh();
}

static void install(void)
{
#ifdef __SANITIZE_THREAD__
    /* A ThreadSanitizer build of the shim instruments the wrappers too, and
     * the loader frees through them where the thread has no sanitizer state
     * (a thread's first and last steps, where a non-PIE executable's
     * canonical entry for free leads every module's free to its slot): the
     * race checks of the test suite run without these hooks. */
    return;
#endif
    ds_tensor_on_first_export(arm);
}

DS_FAMILY(host_free, .option = "host-free", .order = DS_ORDER_OTHER, .install = install);
