/*
 * device_forms_undef.h — forgets every form a device table's lines are
 * written in (device.h lists them), so that the file including it can give
 * each its own meaning for another expansion of the table
 * (device_entries.h, device_per_thread.h).
 */
#undef DS_HOOK
#undef DS_HOT
#undef DS_FREE
#undef DS_HOST_FN
#undef DS_LOOKUP
#undef DS_HOOK_PTSZ
#undef DS_HOOK_PTDS
#undef DS_HOT_PTSZ
#undef DS_FREE_PTSZ
#undef DS_HOST_FN_PTSZ
#undef DS_LOOKUP_PTSZ
#undef DS_HOOK_SPT
#undef DS_HOT_SPT
#undef DS_HOST_FN_SPT
