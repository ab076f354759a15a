/*
 * device_per_thread.h — included before a device table's expansion into the
 * list of its functions with per-thread-default-stream twins: each _PTSZ,
 * _PTDS or _SPT line becomes DS_PER_THREAD_NAME(name, _ptsz, _ptds or _spt),
 * which the including file defines; the other lines become nothing.
 */
#include "device_forms_undef.h"
#define DS_HOOK(name, params, args, before, after)
#define DS_HOT(name, params, args, before, after)
#define DS_FREE(name, params, args, pointer, KIND)
#define DS_HOST_FN(name, params, args, stream, fn, data, KIND)
#define DS_LOOKUP(name, params, args, after)
#define DS_HOOK_PTSZ(name, params, args, before, after) DS_PER_THREAD_NAME(name, _ptsz)
#define DS_HOOK_PTDS(name, params, args, before, after) DS_PER_THREAD_NAME(name, _ptds)
#define DS_HOT_PTSZ(name, params, args, before, after) DS_PER_THREAD_NAME(name, _ptsz)
#define DS_FREE_PTSZ(name, params, args, pointer, KIND) DS_PER_THREAD_NAME(name, _ptsz)
#define DS_HOST_FN_PTSZ(name, params, args, stream, fn, data, KIND) DS_PER_THREAD_NAME(name, _ptsz)
#define DS_LOOKUP_PTSZ(name, params, args, after) DS_PER_THREAD_NAME(name, _ptsz)
#define DS_HOOK_SPT(name, params, args, before, after) DS_PER_THREAD_NAME(name, _spt)
#define DS_HOT_SPT(name, params, args, before, after) DS_PER_THREAD_NAME(name, _spt)
#define DS_HOST_FN_SPT(name, params, args, stream, fn, data, KIND) DS_PER_THREAD_NAME(name, _spt)
