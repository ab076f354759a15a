/*
 * device_entries.h — included before a device table's second expansion
 * (see device.h): each line of the table becomes its GOT hook entry.  The
 * name is stringified and pasted here, never passed on: a header macro of
 * the same name (cuda.h's cuGetProcAddress → cuGetProcAddress_v2) must not
 * expand.
 */
#undef DS_HOOK
#undef DS_HOT
#undef DS_FREE
#undef DS_HOST_FN
#undef DS_LOOKUP
#define DS_HOOK(name, params, args, before, after) \
    {#name, (void *)wrap_##name, (void **)&real_##name, NULL},
#define DS_HOT(name, params, args, before, after) \
    {#name, (void *)wrap_##name, (void **)&real_##name, NULL},
#define DS_FREE(name, params, args, pointer, KIND) \
    {#name, (void *)wrap_##name, (void **)&real_##name, NULL},
#define DS_HOST_FN(name, params, args, stream, fn, data, KIND) \
    {#name, (void *)wrap_##name, (void **)&real_##name, NULL},
#define DS_LOOKUP(name, params, args, after) \
    {#name, (void *)wrap_##name, (void **)&real_##name, NULL},
