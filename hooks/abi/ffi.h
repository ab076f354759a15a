/*
 * abi/ffi.h — the part of libffi's ABI (ffi.h, libffi 3.4 on x86-64) that
 * entry.c uses: the call interface and closure it builds, the status and
 * ABI codes, the argument widths, and the functions it looks up in
 * libffi.so.8, which it opens at run time.  The shim must build with a C
 * compiler and libc alone, so these declarations are its own.  Left out:
 * the type objects (looked up by name), raw and Go closures, other
 * architectures (the layouts below are x86-64's).
 *
 * tests/abi checks every declaration against the real header, as
 * abi/cuda.h says (DS_ABI_SDK_TYPES).
 */
#ifndef DS_ABI_FFI_H
#define DS_ABI_FFI_H

#include <stddef.h>

#if !defined(__x86_64__) || defined(__ILP32__)
#error "abi/ffi.h declares libffi's x86-64 layouts only"
#endif

#ifndef DS_ABI_SDK_TYPES
typedef enum ffi_abi {
    FFI_FIRST_ABI = 1,
    FFI_UNIX64,
    FFI_WIN64,
    FFI_EFI64 = FFI_WIN64,
    FFI_GNUW64,
    FFI_LAST_ABI,
    FFI_DEFAULT_ABI = FFI_UNIX64
} ffi_abi;
typedef enum { FFI_OK = 0, FFI_BAD_TYPEDEF, FFI_BAD_ABI, FFI_BAD_ARGTYPE } ffi_status;

typedef struct _ffi_type {
    size_t size;
    unsigned short alignment;
    unsigned short type;
    struct _ffi_type **elements;
} ffi_type;

typedef struct {
    ffi_abi abi;
    unsigned nargs;
    ffi_type **arg_types;
    ffi_type *rtype;
    unsigned bytes;
    unsigned flags;
} ffi_cif;

typedef struct {
    union {
        char tramp[32]; /* FFI_TRAMPOLINE_SIZE */
        void *ftramp;
    };
    ffi_cif *cif;
    void (*fun)(ffi_cif *, void *, void **, void *);
    void *user_data;
} ffi_closure __attribute__((aligned(8)));
#endif

typedef unsigned long ffi_arg;
typedef signed long ffi_sarg;

ffi_status ffi_prep_cif(ffi_cif *cif, ffi_abi abi, unsigned int nargs, ffi_type *rtype,
                        ffi_type **atypes);
void *ffi_closure_alloc(size_t size, void **code);
ffi_status ffi_prep_closure_loc(ffi_closure *closure, ffi_cif *cif,
                                void (*fun)(ffi_cif *, void *, void **, void *), void *user_data,
                                void *codeloc);
void ffi_call(ffi_cif *cif, void (*fn)(void), void *rvalue, void **avalue);

#endif /* DS_ABI_FFI_H */
