/*
 * sync_events.c — the stream model's events (see sync.c): a record
 * snapshots its stream's clock into the event, a stream wait merges the
 * snapshot into the waiting stream; the events' tables, a shard each.
 */
#include "sync_model.h"

event_table ds_sync_event_tables[DS_EVENT_SHARDS];

/* ---- events: their shard's lock held --------------------------------------------- */

/* The first hole at or after handle's home slot in t (mask: its size - 1). */
static event *event_hole(event *t, size_t mask, uintptr_t handle)
{
    size_t k = event_home(event_hash(handle), mask);
    while (t[k].used)
        k = (k + 1) & mask;
    return &t[k];
}

/* A table twice the size, the events moved into it; the old one kept when
 * no memory could be had (then the table fills up, and events recorded past
 * its last hole are not modelled). */
static void events_grow(event_table *et)
{
    size_t size = (et->mask + 1) * 2;
    event *t = size <= DS_EVENTS_MAX ? ds_map(size * sizeof(*t), true) : NULL;
    if (!t)
        return;
    for (size_t k = 0; k <= et->mask; k++)
        if (et->t[k].used)
            *event_hole(t, size - 1, et->t[k].handle) = et->t[k];
    if (et->t != et->first)
        ds_unmap(et->t, (et->mask + 1) * sizeof(*et->t));
    et->t = t;
    et->mask = size - 1;
}

__attribute__((noinline)) event *ds_event_probed(event_table *et, int api, uintptr_t handle,
                                              bool create)
{
    if (create && et->live >= (et->mask + 1) / 4 * 3)
        events_grow(et);
    size_t start = event_home(event_hash(handle), et->mask);
    event *free_slot = NULL;
    for (size_t k = 0; k <= et->mask; k++) {
        event *e = &et->t[(start + k) & et->mask];
        if (e->used && e->api == api && e->handle == handle)
            return e;
        if (!e->used) {
            free_slot = e;
            break; /* open addressing: the first hole ends the probe */
        }
    }
    if (!create || !free_slot)
        return NULL;
    memset(free_slot, 0, sizeof(*free_slot));
    free_slot->used = true;
    free_slot->api = api; /* a family (event_of) */
    free_slot->handle = handle;
    et->live++;
    return free_slot;
}

/* Slot s's lock and the event's shard held. */
static inline void snapshot(event *e, int s)
{
    uint32_t freed = atomic_load_explicit(&ds_sync_slots_freed, memory_order_relaxed);
    if (e->from_version == ds_sync_streams[s].version && e->from == s && e->from_freed == freed)
        return; /* a version is never 0: a fresh event matches nothing */
    /* Beyond the width both clocks are zero: a few streams' slots are
     * copied whole, in a few moves (no call), more only as wide as used. */
    int w = width_now();
    if (w <= DS_CLOCKS_FEW)
        memcpy(e->vc, ds_sync_streams[s].vc, DS_CLOCKS_FEW * sizeof(e->vc[0]));
    else
        memcpy(e->vc, ds_sync_streams[s].vc, (size_t)w * sizeof(e->vc[0]));
    e->recorded = true;
    e->from = s;
    e->from_version = ds_sync_streams[s].version;
    e->from_freed = freed;
}

/* A record the general way: `api`'s stream snapshotted into `ev_api`'s
 * event (another family's where a semaphore is shared). */
__attribute__((noinline)) static void record_general(int api, int ev_api, uintptr_t ev,
                                                     uintptr_t handle, bool ptsz)
{
    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, ptsz, true);
    if (s >= 0) {
        bool own = stream_take(s);
        before_op(s);
        event_table *et = events_take(ev);
        event *e = event_of(et, ev_api, ev, true);
        if (e)
            snapshot(e, s);
        events_give(et);
        stream_give(s, own);
    }
    ds_lock_give(DS_LOCK_SYNC);
}

/* A record's or a wait's way that calls nothing: the stream settled and
 * the event in its home slot, the stream's shard taken, then the event's.
 * False, nothing taken, otherwise.  Always inline: its result and out
 * stay in registers. */
typedef struct {
    int slot;
    unsigned shard;
    event *e;
} settled_event;

__attribute__((always_inline)) static inline bool event_settled(int api, uintptr_t handle,
                                                               uintptr_t ev, bool ptsz,
                                                               settled_event *out)
{
    int s = settled(api, handle, ptsz);
    if (s < 0)
        return false;
    unsigned k = event_shard(event_hash(ev));
    if (ds_spin_take_shard_now(DS_LOCK_EVENTS, k)) {
        /* The event is kept under its API's family: its stream's (no call). */
        event *e = event_at_home(&ds_sync_event_tables[k], ds_sync_streams[s].api, ev);
        if (e) {
            *out = (settled_event){s, k, e};
            return true;
        }
        ds_lock_give_shard(DS_LOCK_EVENTS, k);
    }
    ds_lock_give_shard(DS_LOCK_STREAMS, (unsigned)s);
    return false;
}

static inline void event_settled_give(const settled_event *x)
{
    ds_lock_give_shard(DS_LOCK_EVENTS, x->shard);
    ds_lock_give_shard(DS_LOCK_STREAMS, (unsigned)x->slot);
}

/* Always inline, into the hooks too (link-time optimisation): a hot
 * wrapper's way that calls nothing but the real function (DS_HOT). */
__attribute__((always_inline)) inline bool ds_sync_event_recorded_now(int api, uintptr_t ev,
                                                                      uintptr_t handle, bool ptsz)
{
    settled_event x;
    if (!ds_sync_enabled())
        return true;
    if (!event_settled(api, handle, ev, ptsz, &x))
        return false;
    snapshot(x.e, x.slot);
    event_settled_give(&x);
    return true;
}

void ds_sync_event_recorded(int api, uintptr_t ev, uintptr_t handle, bool ptsz)
{
    if (!ds_sync_event_recorded_now(api, ev, handle, ptsz))
        record_general(api, api, ev, handle, ptsz);
}

void ds_sync_shared_recorded(int ev_api, uintptr_t ev, int api, uintptr_t handle, bool ptsz)
{
    if (ds_sync_enabled())
        record_general(api, ev_api, ev, handle, ptsz);
}

void ds_sync_event_destroyed(int api, uintptr_t ev)
{
    if (!ds_sync_enabled())
        return;
    event_table *et = events_take(ev);
    event *e = event_of(et, api, ev, false);
    if (e) {
        /* A record later re-creates it.  Probes stop at holes, so the
         * cluster after the hole is shifted back into place (all of it in
         * this shard's table: a handle's shard is its hash's). */
        e->used = false;
        et->live--;
        size_t hole = (size_t)(e - et->t);
        for (size_t k = (hole + 1) & et->mask; et->t[k].used; k = (k + 1) & et->mask) {
            event moved = et->t[k];
            et->t[k].used = false;
            et->live--;
            event *dst = event_of(et, moved.api, moved.handle, true);
            if (dst)
                *dst = moved;
        }
    }
    events_give(et);
}

/* Always inline, as ds_sync_event_recorded_now. */
__attribute__((always_inline)) inline bool ds_sync_stream_waits_now(int api, uintptr_t handle,
                                                                    uintptr_t ev, bool ptsz)
{
    settled_event x;
    if (!ds_sync_enabled())
        return true;
    if (!event_settled(api, handle, ev, ptsz, &x))
        return false;
    if (x.e->recorded) /* not a legacy stream: nothing unsettled */
        merge(&ds_sync_streams[x.slot], x.e->vc);
    event_settled_give(&x);
    return true;
}

/* A wait the general way, SYNC first (the host's clock is merged before):
 * `api`'s stream waits for `ev_api`'s event (another family's where a
 * semaphore is shared). */
__attribute__((noinline)) static void wait_general(int api, uintptr_t handle, bool ptsz,
                                                   int ev_api, uintptr_t ev)
{
    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, ptsz, true);
    if (s >= 0) {
        bool own = stream_take(s);
        if (ds_sync_streams[s].host_merged != ds_sync_streams[HOST].version) {
            ds_sync_streams[s].host_merged = ds_sync_streams[HOST].version;
            merge(&ds_sync_streams[s], ds_sync_streams[HOST].vc);
        }
        event_table *et = events_take(ev);
        event *e = event_of(et, ev_api, ev, false);
        if (e && e->recorded)
            merge(&ds_sync_streams[s], e->vc);
        events_give(et);
        stream_give(s, own);
    }
    ds_lock_give(DS_LOCK_SYNC);
}

void ds_sync_stream_waits(int api, uintptr_t handle, uintptr_t ev, bool ptsz)
{
    if (!ds_sync_stream_waits_now(api, handle, ev, ptsz))
        wait_general(api, handle, ptsz, api, ev);
}

void ds_sync_shared_waits(int api, uintptr_t handle, bool ptsz, int ev_api, uintptr_t ev)
{
    if (ds_sync_enabled())
        wait_general(api, handle, ptsz, ev_api, ev);
}
