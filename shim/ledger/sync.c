/*
 * sync.c — the happens-before model over device streams, and the handoff
 * check (DLSHIM_SYNC=check) or barrier (DLSHIM_SYNC=enforce).
 *
 * Vector clocks, as in PyTorch's CUDA sanitizer: every stream has a clock
 * (one counter per stream); slot 0 stands for the host.  An operation on
 * stream S first merges the host's clock (it was enqueued after everything
 * the host had waited for) and CUDA's implicit ordering (the legacy default
 * stream waits for all blocking streams and they for it; non-blocking and
 * per-thread default streams take no part beyond that), then ticks S.  An
 * event record snapshots S's clock, a stream wait merges a snapshot into the
 * waiting stream, and stream/event/device synchronizes (or a query that
 * answers "done") merge into the host's clock.
 *
 * Writes the shim can see (copy and fill destinations in tracked
 * allocations) go into a ring of recent writes.  When a device tensor is
 * imported, the last write overlapping its data becomes a pending handoff;
 * the consumer's first operation touching that range (or, for a launch whose
 * buffers are unknown, the consumer module's first operation) is checked:
 * if its stream's clock does not cover the write, the handoff is
 * unsynchronized.  A write the host's clock already covers can race with
 * nothing (every operation merges the host's clock first), so it never
 * waits as a handoff.  Missing a write (an untracked kernel, an evicted ring
 * entry) can only hide a race, never invent one.
 *
 * Every stream operation passes here, so its cost is kept independent of
 * everything but the streams in use: clocks are merged and copied only as
 * wide as the highest slot ever used (a narrow one copied whole); a clock
 * is merged into another only when it changed since the last merge (each
 * clock counts its changes: its version); a stream's slot is found through
 * a memo of recent handles; an operation or record on a settled stream
 * (neither the host's clock nor a legacy stream's changed since its last)
 * takes a way that calls nothing, inlined into the hooks (device.h's
 * DS_HOT); one that writes nothing the shim sees is not modelled while no
 * handoff waits (ds_sync_op_now says why); and no pending handoff is looked
 * at while none waits.
 *
 * One spin lock (short sections); barriers (calls into the runtime) and the
 * module lookup a launch needs are made outside it.
 */
#include <stdatomic.h>
#include <string.h>

#include "ledger/ledger.h"

#define DS_CLOCKS 64            /* slot 0: the host; streams beyond 63 are not modelled */
#define DS_CLOCKS_FEW 8         /* a snapshot this narrow is copied whole */
#define DS_EVENTS_FIRST 4096    /* events' table at first (a power of two, as it stays) */
#define DS_EVENTS_MAX (1u << 18) /* and at most (74 MiB): each host function in flight is one */
#define DS_WRITES 4096          /* ring of recent writes (a power of two) */
#define DS_PENDING 128          /* handoffs waiting for the consumer's first use */
#define DS_STREAM_MEMOS 8       /* recent stream handles' slots (a power of two) */

enum { KIND_LEGACY, KIND_BLOCKING, KIND_NON_BLOCKING };

typedef struct {
    bool used;
    int kind;
    int api;
    uintptr_t handle;
    long tid;             /* per-thread default streams: the owning thread */
    uint64_t version;     /* how often vc changed: what merges it remembers this */
    uint64_t host_merged; /* the host's version when its clock was last merged in */
    uint64_t settled_at;  /* `merges` when before_op last left nothing to merge (see settled) */
    /* Blocking streams: the legacy stream's version last merged in, and this
     * stream's version the legacy stream last merged. */
    uint64_t legacy_merged, merged_by_legacy;
    uint32_t vc[DS_CLOCKS];
} stream;

typedef struct {
    bool used, recorded;
    int api;
    uintptr_t handle;
    /* The snapshot's stream, its version, and no slot freed since (then the
     * same record again would copy the same clock). */
    int from;
    uint32_t from_freed;
    uint64_t from_version;
    uint32_t vc[DS_CLOCKS];
} event;

typedef struct {
    uintptr_t start, end;
    int stream;
    uint32_t tick;
} write_rec;

typedef struct {
    uintptr_t tensor, start, end;
    int stream;      /* the producer's last write */
    uint32_t tick;
    uint16_t producer, consumer; /* name ids */
} pending;

/* A handle as a call named it, and the slot it led to; `tag`: the call's
 * API and whether it was a per-thread-default-stream variant (see
 * memo_tag).  All are forgotten as a slot is freed. */
typedef struct {
    uintptr_t handle;
    uint32_t tag;
    int slot;
    stream *s; /* &streams[slot] */
} stream_memo;

#define HOST 0
#define NO_CALLER UINT16_MAX /* a launch's module, not looked up */

static stream streams[DS_CLOCKS]; /* [0]: the host */
static int width = 1;             /* slots ever used: clocks are zero beyond */
static uint64_t used_slots = 1, blocking_slots;
static int legacy_slot[DS_DEVICE_APIS_MAX]; /* each API's legacy default stream, or 0 */
static uint32_t slots_freed = 1; /* events' snapshots name it (see snapshot) */
/* Bumped when the host's clock or a legacy stream's changes: a stream
 * settled before (see settled) may have to merge them again. */
static uint64_t merges = 1;
/* Open addressing by handle, doubled when three quarters full. */
static event events_first[DS_EVENTS_FIRST];
static event *events = events_first;
static size_t events_mask = DS_EVENTS_FIRST - 1, events_live;
static write_rec writes[DS_WRITES];
static uint64_t nwrites;
static pending pend[DS_PENDING];  /* [0, npending) */
static atomic_int npending;       /* read outside the lock: whether to find a launch's module */
static uint64_t untracked_streams, barriers_inserted;
/* Where recent handles led: never to a thread's default stream, whose slot
 * depends on the thread asking. */
static stream_memo memos[DS_STREAM_MEMOS];

bool ds_sync_enabled(void)
{
    return ds_cfg.sync != DS_SYNC_OFF;
}

/* ---- clocks: lock held ------------------------------------------------------ */

static void changed(stream *s)
{
    s->version++;
}

/* A clock others merge before their operations changed: none is settled. */
static void unsettles(const stream *s)
{
    if (s->kind == KIND_LEGACY || s == &streams[HOST])
        merges++;
}

static void merge(stream *into, const uint32_t *from)
{
    bool any = false;
    for (int i = 0; i < width; i++)
        if (from[i] > into->vc[i]) {
            into->vc[i] = from[i];
            any = true;
        }
    if (any) {
        changed(into);
        unsettles(into);
    }
}

/* ---- streams and events: lock held ---------------------------------------- */

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
    for (uint64_t m = used_slots & ~1ull; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        if (streams[i].api == api && streams[i].handle == h && streams[i].tid == tid)
            return i;
    }
    if (!create || !~used_slots) {
        if (create)
            untracked_streams++;
        return -1;
    }
    int i = __builtin_ctzll(~used_slots);
    stream *s = &streams[i];
    memset(s, 0, sizeof(*s));
    *s = (stream){.used = true, .api = api, .handle = h, .tid = tid, .kind = kind};
    changed(s);
    used_slots |= 1ull << i;
    if (kind == KIND_BLOCKING)
        blocking_slots |= 1ull << i;
    if (kind == KIND_LEGACY && (unsigned)api < DS_DEVICE_APIS_MAX)
        legacy_slot[api] = i;
    if (i >= width)
        width = i + 1;
    return i;
}

/* The low bit marks a memo written: a zeroed one holds nothing. */
static uint32_t memo_tag(int api, bool ptsz)
{
    return (uint32_t)api << 2 | (uint32_t)ptsz << 1 | 1;
}

/* Handles are the runtimes' pointers: bits above their alignment.  (Two
 * APIs' handles that meet here take turns; the tag tells them apart.) */
static stream_memo *memo_of(uintptr_t handle)
{
    return &memos[((handle >> 4) ^ (handle >> 9)) % DS_STREAM_MEMOS];
}

/* stream_index past the memo: looked up, and remembered. */
__attribute__((noinline)) static int stream_remembered(stream_memo *m, int api, uintptr_t handle,
                                                       bool ptsz, bool create)
{
    uintptr_t resolved = handle;
    int i = stream_lookup(api, &resolved, ptsz, create);
    if (i > 0 && !streams[i].tid)
        *m = (stream_memo){handle, memo_tag(api, ptsz), i, &streams[i]};
    return i;
}

/* Whether memo m holds the slot of the stream a call names (no slot was
 * freed since it was written: the slot still holds that stream). */
static inline bool memo_holds(const stream_memo *m, int api, uintptr_t handle, bool ptsz)
{
    return m->handle == handle && m->tag == memo_tag(api, ptsz);
}

/* The stream a call names (see stream_lookup): the memo first. */
static inline int stream_index(int api, uintptr_t handle, bool ptsz, bool create)
{
    stream_memo *m = memo_of(handle);
    return memo_holds(m, api, handle, ptsz) ? m->slot
                                            : stream_remembered(m, api, handle, ptsz, create);
}

/* The first hole at or after handle's home slot in table t (mask: its size - 1). */
static event *event_hole(event *t, size_t mask, uintptr_t handle)
{
    size_t k = (handle >> 4) & mask;
    while (t[k].used)
        k = (k + 1) & mask;
    return &t[k];
}

/* A table twice the size, the events moved into it; the old one kept when
 * no memory could be had (then the table fills up, and events recorded past
 * its last hole are not modelled). */
static void events_grow(void)
{
    size_t size = (events_mask + 1) * 2;
    event *t = size <= DS_EVENTS_MAX ? ds_map(size * sizeof(*t), true) : NULL;
    if (!t)
        return;
    for (size_t k = 0; k <= events_mask; k++)
        if (events[k].used)
            *event_hole(t, size - 1, events[k].handle) = events[k];
    if (events != events_first)
        ds_unmap(events, (events_mask + 1) * sizeof(*events));
    events = t;
    events_mask = size - 1;
}

/* event_of past the event's home slot: the probe on to the first hole, and
 * (create) the event put there. */
__attribute__((noinline)) static event *event_probed(int api, uintptr_t handle, bool create)
{
    if (create && events_live >= (events_mask + 1) / 4 * 3)
        events_grow();
    size_t start = (handle >> 4) & events_mask;
    event *free_slot = NULL;
    for (size_t k = 0; k <= events_mask; k++) {
        event *e = &events[(start + k) & events_mask];
        if (e->used && e->api == api && e->handle == handle)
            return e;
        if (!e->used) {
            free_slot = free_slot ? free_slot : e;
            break; /* open addressing: the first hole ends the probe */
        }
    }
    if (!create || !free_slot)
        return NULL;
    memset(free_slot, 0, sizeof(*free_slot));
    free_slot->used = true;
    free_slot->api = api; /* a family (event_of) */
    free_slot->handle = handle;
    events_live++;
    return free_slot;
}

/* The event if it is in its home slot (where it usually is), else NULL. */
static inline event *event_at_home(int api, uintptr_t handle)
{
    event *e = &events[(handle >> 4) & events_mask];
    return e->used && e->handle == handle && e->api == api ? e : NULL;
}

/* Events are kept under their API's family, as streams are: a runtime
 * event is a driver one. */
static inline event *event_of(int api, uintptr_t handle, bool create)
{
    api = ds_device_api_family(api);
    event *e = event_at_home(api, handle);
    return e ? e : event_probed(api, handle, create);
}

/* The legacy default stream of an API, or 0. */
static inline int legacy_of(int api)
{
    return (unsigned)api < DS_DEVICE_APIS_MAX ? legacy_slot[api] : 0;
}

/* Program order and CUDA's implicit ordering, before an operation on s:
 * each clock merged only if it changed since s (or, for the legacy stream,
 * the blocking stream) last saw it.  A stream other than the legacy one or a
 * thread's default stream is then settled until the host's clock or a legacy
 * stream's changes. */
static inline void before_op(int i)
{
    stream *s = &streams[i];
    if (s->host_merged != streams[HOST].version) {
        s->host_merged = streams[HOST].version;
        merge(s, streams[HOST].vc);
    }
    if (s->kind == KIND_BLOCKING) {
        int l = legacy_of(s->api);
        if (l && s->legacy_merged != streams[l].version) {
            s->legacy_merged = streams[l].version;
            merge(s, streams[l].vc);
        }
    } else if (s->kind == KIND_LEGACY) {
        for (uint64_t m = blocking_slots; m; m &= m - 1) {
            stream *b = &streams[__builtin_ctzll(m)];
            if (b->api == s->api && b->merged_by_legacy != b->version) {
                b->merged_by_legacy = b->version;
                merge(s, b->vc);
            }
        }
    }
    if (s->kind != KIND_LEGACY && !s->tid)
        s->settled_at = merges;
}

/* Lock held.  The fast way of an operation or a record, which calls
 * nothing: the memo of the stream a call names if it holds its slot and
 * before_op would merge nothing into it (it is settled: no clock it merges,
 * the host's or a legacy stream's, changed since); else NULL, for the
 * general way. */
static inline const stream_memo *settled(int api, uintptr_t handle, bool ptsz)
{
    const stream_memo *m = memo_of(handle);
    return memo_holds(m, api, handle, ptsz) && m->s->settled_at == merges ? m : NULL;
}

static void set_kind(int i, int kind)
{
    streams[i].kind = kind;
    if (kind == KIND_BLOCKING)
        blocking_slots |= 1ull << i;
    else
        blocking_slots &= ~(1ull << i);
}

void ds_sync_stream_created(int api, uintptr_t handle, bool non_blocking)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, false, true);
    if (s >= 0) {
        memset(streams[s].vc, 0, sizeof(streams[s].vc));
        streams[s].host_merged = streams[s].legacy_merged = streams[s].settled_at = 0;
        changed(&streams[s]);
        set_kind(s, non_blocking ? KIND_NON_BLOCKING : KIND_BLOCKING);
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
         * their counters, which only ever makes later checks stricter. */
        streams[s].used = false;
        used_slots &= ~(1ull << s);
        slots_freed++;
        memset(memos, 0, sizeof(memos));
        blocking_slots &= ~(1ull << s);
    }
    ds_lock_give(DS_LOCK_SYNC);
}

static inline void snapshot(event *e, int s)
{
    if (e->from_version == streams[s].version && e->from == s && e->from_freed == slots_freed)
        return; /* a version is never 0: a fresh event matches nothing */
    /* Beyond the width both clocks are zero: a few streams' slots are
     * copied whole, in a few moves (no call), more only as wide as used. */
    if (width <= DS_CLOCKS_FEW)
        memcpy(e->vc, streams[s].vc, DS_CLOCKS_FEW * sizeof(e->vc[0]));
    else
        memcpy(e->vc, streams[s].vc, (size_t)width * sizeof(e->vc[0]));
    e->recorded = true;
    e->from = s;
    e->from_version = streams[s].version;
    e->from_freed = slots_freed;
}

/* A record the general way. */
__attribute__((noinline)) static void record_general(int api, uintptr_t ev, uintptr_t handle,
                                                     bool ptsz)
{
    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, ptsz, true);
    event *e = event_of(api, ev, true);
    if (s >= 0 && e) {
        before_op(s);
        snapshot(e, s);
    }
    ds_lock_give(DS_LOCK_SYNC);
}

/* Always inline, into the hooks too (link-time optimisation): a hot
 * wrapper's way that calls nothing but the real function (DS_HOT). */
__attribute__((always_inline)) inline bool ds_sync_event_recorded_now(int api, uintptr_t ev,
                                                                      uintptr_t handle, bool ptsz)
{
    if (!ds_sync_enabled())
        return true;
    if (!ds_spin_take_now(DS_LOCK_SYNC))
        return false;
    const stream_memo *m = settled(api, handle, ptsz);
    /* The event is kept under its API's family: its stream's (no call). */
    event *e = m ? event_at_home(m->s->api, ev) : NULL;
    if (e)
        snapshot(e, m->slot);
    ds_lock_give(DS_LOCK_SYNC);
    return e != NULL;
}

void ds_sync_event_recorded(int api, uintptr_t ev, uintptr_t handle, bool ptsz)
{
    if (!ds_sync_event_recorded_now(api, ev, handle, ptsz))
        record_general(api, ev, handle, ptsz);
}

void ds_sync_event_destroyed(int api, uintptr_t ev)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_SYNC);
    event *e = event_of(api, ev, false);
    if (e) {
        /* A record later re-creates it.  Probes stop at holes, so the
         * cluster after the hole is shifted back into place. */
        e->used = false;
        events_live--;
        size_t hole = (size_t)(e - events);
        for (size_t k = (hole + 1) & events_mask; events[k].used; k = (k + 1) & events_mask) {
            event moved = events[k];
            events[k].used = false;
            events_live--;
            event *dst = event_of(moved.api, moved.handle, true);
            if (dst)
                *dst = moved;
        }
    }
    ds_lock_give(DS_LOCK_SYNC);
}

void ds_sync_stream_waits(int api, uintptr_t handle, uintptr_t ev, bool ptsz)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, ptsz, true);
    event *e = event_of(api, ev, false);
    if (s >= 0) {
        if (streams[s].host_merged != streams[HOST].version) {
            streams[s].host_merged = streams[HOST].version;
            merge(&streams[s], streams[HOST].vc);
        }
        if (e && e->recorded)
            merge(&streams[s], e->vc);
    }
    ds_lock_give(DS_LOCK_SYNC);
}

/* ---- the host waits: lock held ------------------------------------------------ */

static bool covered_by_host(int stream_slot, uint32_t tick)
{
    return streams[HOST].vc[stream_slot] >= tick;
}

/* The host's clock grew: handoffs whose write it now covers can race with
 * nothing any more. */
static void host_merges(const uint32_t *from)
{
    uint64_t before = streams[HOST].version;
    merge(&streams[HOST], from);
    if (streams[HOST].version == before)
        return;
    int n = atomic_load_explicit(&npending, memory_order_relaxed);
    for (int i = n - 1; i >= 0; i--)
        if (covered_by_host(pend[i].stream, pend[i].tick))
            pend[i] = pend[--n];
    atomic_store_explicit(&npending, n, memory_order_relaxed);
}

void ds_sync_host_waits_stream(int api, uintptr_t handle, bool ptsz)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, ptsz, false);
    if (s >= 0) {
        before_op(s); /* synchronizing the legacy stream also waits for blocking ones */
        host_merges(streams[s].vc);
    }
    ds_lock_give(DS_LOCK_SYNC);
}

void ds_sync_host_waits_event(int api, uintptr_t ev)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_SYNC);
    event *e = event_of(api, ev, false);
    if (e && e->recorded)
        host_merges(e->vc);
    ds_lock_give(DS_LOCK_SYNC);
}

void ds_sync_host_waits_all(int api)
{
    if (!ds_sync_enabled())
        return;
    int family = ds_device_api_family(api);
    ds_lock_take(DS_LOCK_SYNC);
    for (uint64_t m = used_slots & ~1ull; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        if (streams[i].api == family)
            host_merges(streams[i].vc);
    }
    ds_lock_give(DS_LOCK_SYNC);
}

/* ---- handoffs --------------------------------------------------------------- */

/* Lock held: the newest write overlapping [data, data + bytes), or NULL. */
static const write_rec *newest_write(uintptr_t data, uint64_t bytes)
{
    uint64_t oldest = nwrites > DS_WRITES ? nwrites - DS_WRITES : 0;
    for (uint64_t n = nwrites; n > oldest; n--) {
        const write_rec *w = &writes[(n - 1) % DS_WRITES];
        if (w->start < data + bytes && data < w->end)
            return w;
    }
    return NULL;
}

void ds_sync_import(uintptr_t tensor, uintptr_t data, uint64_t bytes, uint16_t producer,
                    uint16_t consumer)
{
    if (!ds_sync_enabled() || !bytes)
        return;
    ds_lock_take(DS_LOCK_SYNC);
    const write_rec *last = newest_write(data, bytes);
    int n = atomic_load_explicit(&npending, memory_order_relaxed), i = 0;
    while (i < n && pend[i].tensor != tensor) /* imported again: replaced */
        i++;
    if (last && covered_by_host(last->stream, last->tick)) {
        if (i < n) /* what waited before is no longer the last write */
            pend[i] = pend[--n];
    } else if (last && i < DS_PENDING) {
        pend[i] = (pending){.tensor = tensor, .start = data, .end = data + bytes,
                            .stream = last->stream, .tick = last->tick,
                            .producer = producer, .consumer = consumer};
        n += i == n;
    }
    atomic_store_explicit(&npending, n, memory_order_relaxed);
    ds_lock_give(DS_LOCK_SYNC);
}

static void stream_name(char *out, size_t cap, const stream *s)
{
    const char *noun = ds_device_api_at(s->api)->stream_noun;
    if (s->kind == KIND_LEGACY)
        ds_fmt(out, cap, "legacy default stream");
    else if (s->tid)
        ds_fmt(out, cap, "per-thread default stream of thread %ld", s->tid);
    else
        ds_fmt(out, cap, "%s 0x%lx", noun ? noun : "stream", (unsigned long)s->handle);
}

typedef struct {
    pending handoff;
    int producer_stream, api;
    uintptr_t producer_handle;
    long producer_tid;
    char producer_name[64], consumer_name[64];
} race;

static void race_fields(ds_ev *e, void *arg)
{
    const race *r = arg;
    ds_ev_hex(e, "data", r->handoff.start);
    ds_ev_str(e, "producer", ds_name(r->handoff.producer));
    ds_ev_str(e, "consumer", ds_name(r->handoff.consumer));
    ds_ev_str(e, "producer_stream", r->producer_name);
    ds_ev_str(e, "consumer_stream", r->consumer_name);
}

static void emit_barrier(const race *r)
{
    if (!ds_event_wanted(DS_EV_SYNC))
        return;
    ds_ev e;
    ds_ev_begin(&e, DS_EV_SYNC);
    ds_ev_hex(&e, "tensor", r->handoff.tensor);
    race_fields(&e, (void *)r);
    ds_ev_end(&e);
}

static void report_race(race *x)
{
    char detail[DS_DETAIL_MAX + 4 * DS_NAME_MAX];
    ds_fmt(detail, sizeof(detail),
           "%s used tensor %p on the %s before %s's write to it on the %s was "
           "synchronized (no event record and stream wait, no synchronize)",
           ds_name(x->handoff.consumer), (void *)x->handoff.tensor, x->consumer_name,
           ds_name(x->handoff.producer), x->producer_name);
    ds_violation_with(DS_VIO_UNSYNCHRONIZED_HANDOFF, "tensor", x->handoff.tensor, detail,
                      race_fields, x);
}

/* Lock held: a race of handoff p, written by stream slot p.stream. */
static void race_of(race *x, const pending *p)
{
    x->handoff = *p;
    x->producer_stream = p->stream;
    x->producer_handle = streams[p->stream].handle;
    x->producer_tid = streams[p->stream].tid;
    x->api = streams[p->stream].api;
    stream_name(x->producer_name, sizeof(x->producer_name), &streams[p->stream]);
}

/* Whether an operation touching r[0..n) (n < 0: a launch by module
 * `caller`, or NO_CALLER) is the consumer's first use of handoff p. */
static bool touches(const pending *p, const ds_range *r, int n, uint16_t caller)
{
    if (n < 0) /* "other" stands for many names: it matches none */
        return caller == p->consumer && caller != DS_NAME_OTHER;
    for (int k = 0; k < n; k++)
        if (r[k].start < p->end && p->start < r[k].start + r[k].len)
            return true;
    return false;
}

/* Lock held.  Finds the pending handoffs this operation is the consumer's
 * first use of; clears them; returns how many races it copied out. */
static int take_due(int s, const ds_range *r, int n, uint16_t caller, race *out, int max)
{
    int found = 0, left = atomic_load_explicit(&npending, memory_order_relaxed);
    for (int i = 0; i < left;) {
        pending p = pend[i];
        if (!touches(&p, r, n, caller)) {
            i++;
            continue;
        }
        pend[i] = pend[--left];
        if (streams[s].vc[p.stream] >= p.tick || found == max)
            continue; /* covered: the producer's write happens before */
        race *x = &out[found++];
        race_of(x, &p);
        stream_name(x->consumer_name, sizeof(x->consumer_name), &streams[s]);
    }
    atomic_store_explicit(&npending, left, memory_order_relaxed);
    return found;
}

void ds_sync_host_reads(uintptr_t tensor, uintptr_t data, uint64_t bytes, uint16_t producer,
                        uint16_t consumer)
{
    if (!ds_sync_enabled() || !bytes)
        return;
    race x;
    ds_lock_take(DS_LOCK_SYNC);
    const write_rec *last = newest_write(data, bytes);
    bool racy = last && !covered_by_host(last->stream, last->tick);
    if (racy) {
        pending p = {.tensor = tensor, .start = data, .end = data + bytes, .stream = last->stream,
                     .tick = last->tick, .producer = producer, .consumer = consumer};
        race_of(&x, &p);
        ds_fmt(x.consumer_name, sizeof(x.consumer_name), "host");
    }
    ds_lock_give(DS_LOCK_SYNC);
    if (!racy)
        return;
    /* Enforced: the host waits for the producer's stream, where its API can
     * make it wait (bounded: a program whose own logic holds the stream
     * back until after this read gets the report instead). */
    bool (*host_wait)(uintptr_t) = ds_device_api_at(x.api)->host_wait;
    if (ds_cfg.sync == DS_SYNC_ENFORCE && host_wait && host_wait(x.producer_handle)) {
        ds_lock_take(DS_LOCK_SYNC);
        bool fixed = covered_by_host(x.producer_stream, x.handoff.tick);
        if (fixed) {
            barriers_inserted++;
            ds_note_work();
        }
        ds_lock_give(DS_LOCK_SYNC);
        if (fixed) {
            emit_barrier(&x);
            return;
        }
    }
    report_race(&x);
}

/* Lock held, and given back meanwhile: the handoffs this operation on slot
 * s is the first use of, checked, and fixed by a barrier under enforce. */
__attribute__((noinline)) static void handoffs_due(int api, uintptr_t handle, int s,
                                                   const ds_range *r, int n, uint16_t caller)
{
    race races[4];
    int nraces = take_due(s, r, n, caller, races, (int)DS_ARRAY_LEN(races));
    if (!nraces)
        return;
    ds_lock_give(DS_LOCK_SYNC);
    for (int i = 0; i < nraces; i++) {
        race *x = &races[i];
        bool fixed = false;
        /* A barrier records an event on the producer's stream: another
         * thread's per-thread default stream cannot be named from here. */
        bool (*barrier)(uintptr_t, uintptr_t) = ds_device_api_at(api)->barrier;
        /* The calling API's barrier can name the producer's stream when both
         * are of one family (a CUDA runtime stream is a driver one: PyTorch
         * writes through the runtime, CuPy launches through the driver);
         * x->api, a stream's, is a family already. */
        if (ds_cfg.sync == DS_SYNC_ENFORCE && x->api == ds_device_api_family(api) && barrier &&
            (!x->producer_tid || x->producer_tid == ds_tid()) &&
            barrier(x->producer_handle, handle)) {
            fixed = true;
            ds_lock_take(DS_LOCK_SYNC);
            before_op(x->producer_stream); /* the barrier's record is an operation there */
            merge(&streams[s], streams[x->producer_stream].vc);
            barriers_inserted++;
            ds_note_work();
            ds_lock_give(DS_LOCK_SYNC);
            emit_barrier(x);
        }
        if (!fixed)
            report_race(x);
    }
    ds_lock_take(DS_LOCK_SYNC);
}

/* Whether a call names the legacy default stream (see stream_lookup). */
static bool names_legacy(int api, uintptr_t handle, bool ptsz)
{
    const ds_device_api *d = ds_device_api_at(api);
    if (d->per_thread_stream && handle == d->per_thread_stream)
        return false;
    return handle == 0 ? !ptsz : d->legacy_stream && handle == d->legacy_stream;
}

/* Lock held: an operation on slot s (st: &streams[s], as a memo has it)
 * ticks its clock, and what it writes is remembered. */
static inline void tick_at(stream *st, int s, const ds_range *r, int n)
{
    uint32_t t = ++st->vc[s];
    changed(st);
    for (int k = 0; k < n; k++)
        if (r[k].write && r[k].len)
            writes[nwrites++ % DS_WRITES] = (write_rec){r[k].start, r[k].start + r[k].len, s, t};
}

/* An operation the general way, checked (and fixed) as the first use of
 * the handoffs that wait for it.  A launch counts as its module's use of
 * what it imported: the module is found before the lock (the module
 * table's comes first), and only while handoffs wait. */
__attribute__((noinline)) static void op_general(int api, uintptr_t handle, bool ptsz,
                                                 const ds_range *r, int n,
                                                 const void *caller_addr)
{
    uint16_t caller = n < 0 && atomic_load_explicit(&npending, memory_order_relaxed)
                          ? ds_module_id_at(caller_addr)
                          : NO_CALLER;
    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, ptsz, true);
    if (s >= 0) {
        before_op(s);
        if (atomic_load_explicit(&npending, memory_order_relaxed))
            handoffs_due(api, handle, s, r, n, caller);
        tick_at(&streams[s], s, r, n);
        unsettles(&streams[s]);
    }
    ds_lock_give(DS_LOCK_SYNC);
}

/* Always inline, as ds_sync_event_recorded_now. */
__attribute__((always_inline)) inline bool ds_sync_op_now(int api, uintptr_t handle, bool ptsz,
                                                          const ds_range *r, int n)
{
    if (!ds_sync_enabled())
        return true;
    /* Only writes are ever checked.  An operation that writes nothing the
     * shim sees (a launch, a host function) while no handoff waits for its
     * first use changes nothing a check reads: its tick orders no write, and
     * what it would merge every later reader of its stream's clock merges
     * itself (an event record, a host wait and a barrier merge first; the
     * legacy stream has the host's and its own).  The legacy stream's own
     * operations are kept: their wait for the blocking streams is a snapshot
     * that the blocking streams' later operations inherit from it.  (A
     * handoff imported meanwhile raced with the operation.) */
    if (n <= 0 && !atomic_load_explicit(&npending, memory_order_relaxed) &&
        !names_legacy(api, handle, ptsz))
        return true;
    if (!ds_spin_take_now(DS_LOCK_SYNC))
        return false;
    const stream_memo *m =
        atomic_load_explicit(&npending, memory_order_relaxed) ? NULL : settled(api, handle, ptsz);
    if (m)
        tick_at(m->s, m->slot, r, n);
    ds_lock_give(DS_LOCK_SYNC);
    return m != NULL;
}

void ds_sync_op(int api, uintptr_t handle, bool ptsz, const ds_range *r, int n,
                const void *caller_addr)
{
    if (!ds_sync_op_now(api, handle, ptsz, r, n))
        op_general(api, handle, ptsz, r, n, caller_addr);
}

uint64_t ds_sync_barriers(void)
{
    return barriers_inserted;
}
