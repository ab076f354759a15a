/*
 * dlsym.c — a lookup of a hooked function by name hands back its wrapper.
 *
 * Wraps (by symbol interposition): dlsym with an explicit handle, the way
 * PyTorch, XLA and ctypes look up CUDA driver or Python entry points after
 * dlopen.  The definition found is kept for the calling module, so calls
 * through the returned wrapper reach exactly what glibc would have returned.
 * Leaves out: dlsym(RTLD_DEFAULT / RTLD_NEXT, ...) and dlvsym.  glibc answers
 * those relative to the *calling* module (its local scope, the objects after
 * it), which a wrapper written in C would replace by the shim; the entry
 * point below jumps to glibc's dlsym for them with the caller's return
 * address untouched, so they keep their exact meaning (and are not traced).
 *
 * x86-64 only: the entry point is assembly because only a jump, not a call,
 * keeps the caller visible to glibc.
 */
#include <dlfcn.h>

#include "internal.h"

/* Explicit handles: the caller's identity does not change the answer. */
__attribute__((used)) void *ds_dlsym_explicit(void *handle, const char *name, const void *caller);
void *ds_dlsym_explicit(void *handle, const char *name, const void *caller)
{
    void *f = ds_real_dlsym(handle, name);
    if (f && ds_active())
        f = ds_hook_for_lookup(name, f, caller);
    return f;
}

/* Where the entry point jumps for RTLD_DEFAULT / RTLD_NEXT. */
__attribute__((used)) void *ds_glibc_dlsym_address(void);
void *ds_glibc_dlsym_address(void)
{
    static void *glibc;
    if (!glibc) {
        glibc = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!glibc)
            glibc = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    }
    return glibc;
}

/* dlsym(handle, name): RTLD_DEFAULT (0) and RTLD_NEXT (-1) jump to glibc
 * with the stack as the caller left it; anything else goes to
 * ds_dlsym_explicit(handle, name, return address). */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    testq %rdi, %rdi\n"
        "    je 1f\n"
        "    cmpq $-1, %rdi\n"
        "    je 1f\n"
        "    movq (%rsp), %rdx\n"
        "    jmp ds_dlsym_explicit\n"
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
