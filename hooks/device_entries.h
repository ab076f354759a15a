/*
 * device_entries.h — included before a device table's second expansion
 * (see device.h): each line of the table becomes its GOT hook entry.  The
 * name is stringified and pasted here, never passed on: a header macro of
 * the same name (cuda.h's cuGetProcAddress → cuGetProcAddress_v2) must not
 * expand.
 */
#include "device_forms_undef.h"
#define DS_ENTRY(str, wrap, real) {str, (void *)(wrap), (void **)&(real), NULL},
#define DS_HOOK(name, params, args, before, after) DS_ENTRY(#name, wrap_##name, real_##name)
#define DS_HOT(name, params, args, before, after) DS_ENTRY(#name, wrap_##name, real_##name)
#define DS_FREE(name, params, args, pointer, KIND) DS_ENTRY(#name, wrap_##name, real_##name)
#define DS_HOST_FN(name, params, args, stream, fn, data, KIND) \
    DS_ENTRY(#name, wrap_##name, real_##name)
#define DS_LOOKUP(name, params, args, after) DS_ENTRY(#name, wrap_##name, real_##name)
/* A per-thread form: both functions. */
#define DS_HOOK_PTSZ(name, params, args, before, after)                                     \
    DS_ENTRY(#name, wrap_##name, real_##name)                                               \
    DS_ENTRY(#name "_ptsz", wrap_##name##_ptsz, real_##name##_ptsz)
#define DS_HOOK_PTDS(name, params, args, before, after)                                     \
    DS_ENTRY(#name, wrap_##name, real_##name)                                               \
    DS_ENTRY(#name "_ptds", wrap_##name##_ptds, real_##name##_ptds)
#define DS_HOT_PTSZ(name, params, args, before, after) DS_HOOK_PTSZ(name, , , , )
#define DS_FREE_PTSZ(name, params, args, pointer, KIND) DS_HOOK_PTSZ(name, , , , )
#define DS_HOST_FN_PTSZ(name, params, args, stream, fn, data, KIND) DS_HOOK_PTSZ(name, , , , )
#define DS_LOOKUP_PTSZ(name, params, args, after) DS_HOOK_PTSZ(name, , , , )
#define DS_HOOK_SPT(name, params, args, before, after)                                      \
    DS_ENTRY(#name, wrap_##name, real_##name)                                               \
    DS_ENTRY(#name "_spt", wrap_##name##_spt, real_##name##_spt)
#define DS_HOT_SPT(name, params, args, before, after) DS_HOOK_SPT(name, , , , )
#define DS_HOST_FN_SPT(name, params, args, stream, fn, data, KIND) DS_HOOK_SPT(name, , , , )
