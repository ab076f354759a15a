/* The libffi declarations of hooks/abi/ against ffi.h (facts.h says how). */
#ifdef DS_ABI_SDK_TYPES
#include <ffi.h>
#endif
#include "abi/ffi.h"
#include "facts.h"

DS_FACTS(ffi) = {
    DS_FACT(FFI_OK), DS_FACT(FFI_BAD_TYPEDEF), DS_FACT(FFI_BAD_ABI), DS_FACT(FFI_BAD_ARGTYPE),
    DS_FACT(sizeof(ffi_status)), DS_FACT(FFI_FIRST_ABI), DS_FACT(FFI_UNIX64), DS_FACT(FFI_WIN64),
    DS_FACT(FFI_EFI64), DS_FACT(FFI_GNUW64), DS_FACT(FFI_LAST_ABI), DS_FACT(FFI_DEFAULT_ABI),
    DS_FACT(sizeof(ffi_abi)), DS_FACT(sizeof(ffi_arg)), DS_FACT(sizeof(ffi_sarg)),
    DS_FACT((ffi_sarg)-1 < 0), DS_FACT((ffi_arg)-1 > 0),
    DS_TYPE(ffi_type), DS_FIELD(ffi_type, size), DS_FIELD(ffi_type, alignment),
    DS_FIELD(ffi_type, type), DS_FIELD(ffi_type, elements),
    DS_TYPE(ffi_cif), DS_FIELD(ffi_cif, abi), DS_FIELD(ffi_cif, nargs),
    DS_FIELD(ffi_cif, arg_types), DS_FIELD(ffi_cif, rtype), DS_FIELD(ffi_cif, bytes),
    DS_FIELD(ffi_cif, flags),
    DS_TYPE(ffi_closure), DS_FIELD(ffi_closure, tramp), DS_FIELD(ffi_closure, cif),
    DS_FIELD(ffi_closure, fun), DS_FIELD(ffi_closure, user_data),
    {NULL, 0}};
