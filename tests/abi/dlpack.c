/* include/dlshim/dlpack.h against the installed dlpack.h (facts.h says
 * how); the versioned structures, which Debian's DLPack 0.6 lacks, come from
 * dlshim.h's own declarations there, and dlshim.h checks their layout. */
#ifdef DS_ABI_SDK_TYPES
#include <dlpack/dlpack.h>
#else
#include "dlshim/dlpack.h"
#endif
#include "dlshim.h"
#include "facts.h"

DS_FACTS(dlpack) = {
    DS_FACT(kDLCPU), DS_FACT(kDLCUDA), DS_FACT(kDLCUDAHost), DS_FACT(kDLOpenCL),
    DS_FACT(kDLVulkan), DS_FACT(kDLMetal), DS_FACT(kDLVPI), DS_FACT(kDLROCM),
    DS_FACT(kDLROCMHost), DS_FACT(kDLExtDev), DS_FACT(kDLCUDAManaged),
    DS_FACT(sizeof(DLDeviceType)),
    DS_FACT(kDLInt), DS_FACT(kDLUInt), DS_FACT(kDLFloat), DS_FACT(kDLOpaqueHandle),
    DS_FACT(kDLBfloat), DS_FACT(kDLComplex), DS_FACT(sizeof(DLDataTypeCode)),
    DS_TYPE(DLDevice), DS_FIELD(DLDevice, device_type), DS_FIELD(DLDevice, device_id),
    DS_TYPE(DLDataType), DS_FIELD(DLDataType, code), DS_FIELD(DLDataType, bits),
    DS_FIELD(DLDataType, lanes),
    DS_TYPE(DLTensor), DS_FIELD(DLTensor, data), DS_FIELD(DLTensor, device),
    DS_FIELD(DLTensor, ndim), DS_FIELD(DLTensor, dtype), DS_FIELD(DLTensor, shape),
    DS_FIELD(DLTensor, strides), DS_FIELD(DLTensor, byte_offset),
    DS_TYPE(DLManagedTensor), DS_FIELD(DLManagedTensor, dl_tensor),
    DS_FIELD(DLManagedTensor, manager_ctx), DS_FIELD(DLManagedTensor, deleter),
    DS_TYPE(DLManagedTensorVersioned), DS_FIELD(DLManagedTensorVersioned, version),
    DS_FIELD(DLManagedTensorVersioned, manager_ctx), DS_FIELD(DLManagedTensorVersioned, deleter),
    DS_FIELD(DLManagedTensorVersioned, flags), DS_FIELD(DLManagedTensorVersioned, dl_tensor),
    DS_FACT(DLPACK_FLAG_BITMASK_READ_ONLY), DS_FACT(DLPACK_FLAG_BITMASK_IS_COPIED),
    DS_FACT(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED),
    {NULL, 0}};
