/* The per-thread-default-stream twins the tables' _PTSZ and _PTDS rows
 * generate (hooks/device.h) against the real headers: compiled with
 * CUDA_API_PER_THREAD_DEFAULT_STREAM, as `nvcc --default-stream per-thread`
 * compiles, where cuda_runtime_api.h and cuda.h declare name_ptsz and
 * name_ptds.  Each twin initialises a pointer of its row's parameters: a
 * twin the header does not declare, or of other parameters, fails the
 * build (-Werror). */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include <cuda.h>
#include <cuda_runtime_api.h>

#define DS_TWIN(name, params) DS_RESULT(*const twin_##name) params = name;
#define DS_HOOK(name, params, args, before, after)
#define DS_HOT(name, params, args, before, after)
#define DS_FREE(name, params, args, pointer, KIND)
#define DS_HOST_FN(name, params, args, stream, fn, data, KIND)
#define DS_LOOKUP(name, params, args, after)
#define DS_HOOK_PTSZ(name, params, args, before, after) DS_TWIN(name##_ptsz, params)
#define DS_HOOK_PTDS(name, params, args, before, after) DS_TWIN(name##_ptds, params)
#define DS_HOT_PTSZ(name, params, args, before, after) DS_TWIN(name##_ptsz, params)
#define DS_FREE_PTSZ(name, params, args, pointer, KIND) DS_TWIN(name##_ptsz, params)
#define DS_HOST_FN_PTSZ(name, params, args, stream, fn, data, KIND) DS_TWIN(name##_ptsz, params)
#define DS_LOOKUP_PTSZ(name, params, args, after) DS_TWIN(name##_ptsz, params)

/* cudaGetDriverEntryPoint is deprecated in CUDA 13 (the table still wraps it). */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#define DS_RESULT cudaError_t
#include "cuda_runtime.def"
#undef DS_RESULT
#define DS_RESULT CUresult
#include "cuda_driver.def"
