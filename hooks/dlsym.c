/*
 * dlsym.c — a lookup of a hooked function by name hands back its wrapper.
 *
 * Wraps (by symbol interposition): dlsym with an explicit handle or
 * RTLD_DEFAULT, the way PyTorch, XLA and ctypes look up CUDA driver or Python
 * entry points.  The definition found is kept for the calling module, so
 * calls through the returned wrapper reach exactly what glibc would have
 * returned.  RTLD_DEFAULT is answered as glibc does, relative to the
 * calling module: the global scope first, then the caller's own local
 * scope (what a module loaded RTLD_LOCAL sees of its dependencies).
 * Leaves out: dlsym(RTLD_NEXT, ...), which means "after the caller" and is
 * left to glibc itself (the entry point below jumps there with the caller's
 * return address untouched), and dlvsym.
 *
 * x86-64 only: the entry point is assembly because only a jump, not a call,
 * keeps the caller visible to glibc.
 */
#include <dlfcn.h>
#include <string.h>

#include "hooks.h"

/* RTLD_DEFAULT as the caller would see it: the global scope, then the
 * caller's local scope (a handle for the caller, opened without loading). */
static void *default_lookup(const char *name, const void *caller)
{
    void *f = ds_real_dlsym(RTLD_DEFAULT, name);
    if (f)
        return f;
    Dl_info info;
    if (!dladdr(caller, &info))
        return NULL;
    void *(*glibc_dlopen)(const char *, int) =
        (void *(*)(const char *, int))ds_real_dlsym(RTLD_NEXT, "dlopen");
    int (*glibc_dlclose)(void *) = (int (*)(void *))ds_real_dlsym(RTLD_NEXT, "dlclose");
    /* The main program has no file name here: dlopen(NULL) is its handle. */
    const char *path = info.dli_fname && strchr(info.dli_fname, '/') ? info.dli_fname : NULL;
    void *self = glibc_dlopen && glibc_dlclose ? glibc_dlopen(path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    if (!self)
        return ds_real_dlsym(RTLD_DEFAULT, name); /* leaves glibc's own error */
    f = ds_real_dlsym(self, name);
    glibc_dlclose(self);
    return f;
}

__attribute__((used)) void *ds_dlsym_hooked(void *handle, const char *name, const void *caller);
void *ds_dlsym_hooked(void *handle, const char *name, const void *caller)
{
    void *f = handle == RTLD_DEFAULT ? default_lookup(name, caller) : ds_real_dlsym(handle, name);
    if (f && ds_active())
        f = ds_hook_for_lookup(name, f, caller);
    return f;
}

/* Set once the shim is initialised.  Before that (other libraries'
 * constructors, a sanitizer runtime setting itself up) every call goes
 * straight to glibc, touching nothing of the shim but this flag. */
__attribute__((used)) int ds_dlsym_ready;

static void enable(void)
{
    __atomic_store_n(&ds_dlsym_ready, 1, __ATOMIC_RELEASE);
}

/* Loaded into a running process (dlshim.attach()), the export interposes
 * nothing (see dlopen.c): every module's GOT slot is pointed at it instead,
 * so lookups by name (ctypes, PyTorch's of the CUDA driver) still hand out
 * the wrappers. */
/* The entry point below, by a local name: `dlsym` named here is the global
 * scope's (the C library's when the shim was loaded late). */
void *ds_dlsym_entry(void *handle, const char *name);
static void *real_dlsym_late;

static void install(void)
{
    if (ds_attached()) {
        static const ds_got_hook late[] = {
            {"dlsym", (void *)ds_dlsym_entry, &real_dlsym_late, NULL},
        };
        ds_got_hooks_add(late, DS_ARRAY_LEN(late));
    }
}

/* Not an option: the shim's own lookups and every hooked name depend on it. */
DS_FAMILY(dlsym, .order = DS_ORDER_OTHER, .install = install, .started = enable);

/* Where the entry point jumps for RTLD_NEXT and before start-up; not
 * instrumented, since it may run before a sanitizer runtime is ready. */
__attribute__((used, no_sanitize("address", "thread", "undefined"))) void *ds_glibc_dlsym_address(void);
void *ds_glibc_dlsym_address(void)
{
    static void *glibc;
    if (!glibc) {
        glibc = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!glibc)
            glibc = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        /* Loaded late (dlshim.attach()), nothing comes after the shim. */
        if (!glibc)
            glibc = dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34");
        if (!glibc)
            glibc = dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.2.5");
    }
    return glibc;
}

/* dlsym(handle, name): RTLD_NEXT (-1), and every call before start-up,
 * jumps to glibc with the stack as the caller left it; anything else goes to
 * ds_dlsym_hooked(handle, name, return address). */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        ".globl ds_dlsym_entry\n"
        ".hidden ds_dlsym_entry\n"
        ".type ds_dlsym_entry, @function\n"
        "dlsym:\n"
        "ds_dlsym_entry:\n"
        "    cmpq $-1, %rdi\n"
        "    je 1f\n"
        "    cmpl $0, ds_dlsym_ready(%rip)\n"
        "    je 1f\n"
        "    movq (%rsp), %rdx\n"
        "    jmp ds_dlsym_hooked\n"
        "1:  pushq %rdi\n"
        "    pushq %rsi\n"
        "    subq $8, %rsp\n"
        "    call ds_glibc_dlsym_address\n"
        "    addq $8, %rsp\n"
        "    popq %rsi\n"
        "    popq %rdi\n"
        "    testq %rax, %rax\n"
        "    je 2f\n"
        "    jmp *%rax\n"
        "2:  ret\n"
        ".size dlsym, .-dlsym\n");
