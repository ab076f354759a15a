/*
 * sync_streams.c — the stream model's streams (see sync.c): the state every
 * part of the model shares (sync_model.h says what guards what), a stream's
 * slot found from the handle a call names, streams made and destroyed, and
 * the memos of recent handles a forked child forgets.
 */
#include "sync_model.h"

stream ds_sync_streams[DS_CLOCKS];
_Atomic int ds_sync_width = 1;
uint64_t ds_sync_used_slots = 1, ds_sync_blocking_slots;
int ds_sync_legacy_slot[DS_DEVICE_APIS_MAX];
_Atomic uint32_t ds_sync_slots_freed = 1;
_Atomic uint64_t ds_sync_merges = 1;
DS_TLS stream_memo ds_sync_memos[DS_STREAM_MEMOS];
static uint64_t untracked_streams;

bool ds_sync_enabled(void)
{
    return ds_cfg.sync != DS_SYNC_OFF;
}

/* ---- streams: SYNC held ------------------------------------------------------- */

/* The slot of a stream the memo does not know: handle 0 (and the API's own
 * legacy handle) the legacy default stream, the API's per-thread handle (or
 * 0 in a _ptsz call) this thread's default stream, kept under that handle
 * with the thread's id.  -1 when the table is full. */
static int stream_lookup(int api, uintptr_t *handle, bool per_thread_default, bool create)
{
    const ds_device_api *d = ds_device_api_at(api);
    long tid = 0;
    int kind = KIND_BLOCKING;
    uintptr_t h = *handle;
    api = ds_device_api_family(api); /* a runtime stream is a driver one: one slot */
    if ((d->per_thread_stream && h == d->per_thread_stream) || (h == 0 && per_thread_default)) {
        h = d->per_thread_stream;
        tid = ds_tid();
    } else if (h == 0 || (d->legacy_stream && h == d->legacy_stream)) {
        h = 0;
        kind = KIND_LEGACY;
    }
    *handle = h;
    for (uint64_t m = ds_sync_used_slots & ~1ull; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        if (ds_sync_streams[i].api == api && ds_sync_streams[i].handle == h &&
            ds_sync_streams[i].tid == tid)
            return i;
    }
    if (!create || !~ds_sync_used_slots) {
        if (create)
            untracked_streams++;
        return -1;
    }
    int i = __builtin_ctzll(~ds_sync_used_slots);
    stream *s = &ds_sync_streams[i];
    if (!s->ring && !(s->ring = ds_map(DS_WRITES * sizeof(write_rec), true))) {
        untracked_streams++; /* no memory for its writes: not modelled */
        return -1;
    }
    /* A stream that used the slot before may still be named by a thread's
     * memo made before it went: the way without SYNC asks the slot's
     * handle under the shard (settled). */
    ds_lock_take_shard(DS_LOCK_STREAMS, (unsigned)i);
    *s = (stream){.used = true, .api = api, .handle = h, .tid = tid, .kind = kind,
                  .ring = s->ring, .nwrites = s->nwrites};
    changed(s);
    ds_lock_give_shard(DS_LOCK_STREAMS, (unsigned)i);
    ds_sync_used_slots |= 1ull << i;
    if (kind == KIND_BLOCKING)
        ds_sync_blocking_slots |= 1ull << i;
    if (kind == KIND_LEGACY && (unsigned)api < DS_DEVICE_APIS_MAX)
        ds_sync_legacy_slot[api] = i;
    if (i >= width_now())
        atomic_store_explicit(&ds_sync_width, i + 1, memory_order_relaxed);
    return i;
}

__attribute__((noinline)) int ds_stream_remembered(stream_memo *m, int api, uintptr_t handle,
                                                bool ptsz, bool create)
{
    uintptr_t resolved = handle;
    int i = stream_lookup(api, &resolved, ptsz, create);
    if (i > 0)
        *m = (stream_memo){handle, atomic_load_explicit(&ds_sync_slots_freed, memory_order_relaxed),
                           memo_tag(api, ptsz), (uint16_t)i};
    return i;
}

static void set_kind(int i, int kind)
{
    ds_sync_streams[i].kind = kind;
    if (kind == KIND_BLOCKING)
        ds_sync_blocking_slots |= 1ull << i;
    else
        ds_sync_blocking_slots &= ~(1ull << i);
}

void ds_sync_stream_created(int api, uintptr_t handle, bool non_blocking)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, false, true);
    if (s >= 0) {
        bool own = stream_take(s);
        memset(ds_sync_streams[s].vc, 0, sizeof(ds_sync_streams[s].vc));
        ds_sync_streams[s].host_merged = ds_sync_streams[s].legacy_merged =
            ds_sync_streams[s].settled_at = 0;
        changed(&ds_sync_streams[s]);
        set_kind(s, non_blocking ? KIND_NON_BLOCKING : KIND_BLOCKING);
        stream_give(s, own);
    }
    ds_lock_give(DS_LOCK_SYNC);
}

void ds_sync_stream_destroyed(int api, uintptr_t handle)
{
    const ds_device_api *d = ds_device_api_at(api);
    if (!ds_sync_enabled() || handle == 0 || handle == d->legacy_stream ||
        handle == d->per_thread_stream)
        return; /* the default streams are never destroyed */
    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, false, false);
    if (s >= 0) {
        /* Its work completes before it goes (cudaStreamDestroy) but nobody
         * waited for it: the slot is reused, the clocks that mention it keep
         * their counters, which only ever makes later checks stricter.
         * Every thread's memo of it is void from here (ds_sync_slots_freed). */
        bool own = stream_take(s);
        ds_sync_streams[s].used = false;
        atomic_fetch_add_explicit(&ds_sync_slots_freed, 1, memory_order_relaxed);
        stream_give(s, own);
        ds_sync_used_slots &= ~(1ull << s);
        ds_sync_blocking_slots &= ~(1ull << s);
    }
    ds_lock_give(DS_LOCK_SYNC);
}

/* The child's one thread is another thread: its default streams are not
 * its parent's, which its memos would lead to. */
void ds_sync_after_fork(void)
{
    memset(ds_sync_memos, 0, sizeof(ds_sync_memos));
}
