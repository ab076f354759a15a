/*
 * sync_host.c — the host's clock in the stream model (see sync.c): a
 * stream, event or device synchronize (or a query that answers "done")
 * merges into it, and the handoffs whose write it then covers can race
 * with nothing.
 */
#include "sync_model.h"

/* ---- the host waits: SYNC held ------------------------------------------------ */

/* The host's clock grew: handoffs whose write it now covers can race with
 * nothing any more.  `from`'s lock held too. */
static void host_merges(const uint32_t *from)
{
    uint64_t before = ds_sync_streams[HOST].version;
    merge(&ds_sync_streams[HOST], from);
    if (ds_sync_streams[HOST].version == before)
        return;
    int n = atomic_load_explicit(&ds_sync_npending, memory_order_relaxed);
    if (!n)
        return;
    pend_change_begin();
    for (int i = n - 1; i >= 0; i--)
        if (covered_by_host(ds_sync_pend[i].stream, ds_sync_pend[i].tick))
            pend_set(i, &ds_sync_pend[--n]);
    atomic_store_explicit(&ds_sync_npending, n, memory_order_release);
    pend_change_end();
}

void ds_sync_host_waits_stream(int api, uintptr_t handle, bool ptsz)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, ptsz, false);
    if (s >= 0) {
        bool own = stream_take(s);
        before_op(s); /* synchronizing the legacy stream also waits for blocking ones */
        host_merges(ds_sync_streams[s].vc);
        stream_give(s, own);
    }
    ds_lock_give(DS_LOCK_SYNC);
}

void ds_sync_host_waits_event(int api, uintptr_t ev)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_SYNC);
    event_table *et = events_take(ev);
    event *e = event_of(et, api, ev, false);
    if (e && e->recorded)
        host_merges(e->vc);
    events_give(et);
    ds_lock_give(DS_LOCK_SYNC);
}

void ds_sync_host_waits_all(int api)
{
    if (!ds_sync_enabled())
        return;
    int family = ds_device_api_family(api);
    ds_lock_take(DS_LOCK_SYNC);
    for (uint64_t m = ds_sync_used_slots & ~1ull; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        if (ds_sync_streams[i].api == family) {
            bool own = stream_take(i);
            host_merges(ds_sync_streams[i].vc);
            stream_give(i, own);
        }
    }
    ds_lock_give(DS_LOCK_SYNC);
}
