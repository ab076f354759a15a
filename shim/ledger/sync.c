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
 * Threads on different streams share no lock and write no common line on
 * the way that calls nothing (see "The stream model's locks" in
 * docs/design.md): a stream's clock and its ring of writes are under its
 * shard of the STREAMS lock, each table of events under its shard of
 * EVENTS, and SYNC guards the rest (the slots, the host's and the legacy
 * streams' clocks, the pending handoffs) for the general way.  Short
 * sections; barriers (calls into the runtime) and the module lookup a
 * launch needs are made outside every lock.
 */
#include <stdatomic.h>
#include <string.h>

#include "ledger/ledger.h"

#define DS_CLOCKS 64            /* slot 0: the host; streams beyond 63 are not modelled */
#define DS_CLOCKS_FEW 8         /* a snapshot this narrow is copied whole */
#define DS_EVENT_SHARDS 64      /* the EVENTS lock's: a table each */
#define DS_EVENTS_FIRST 64      /* a shard's table at first (a power of two, as it stays) */
#define DS_EVENTS_MAX (1u << 13) /* and at most: 2^19 in all, room for 262,144 host functions */
#define DS_WRITES 4096          /* a stream's ring of recent writes (a power of two) */
#define DS_PENDING 128          /* handoffs waiting for the consumer's first use */
#define DS_STREAM_MEMOS 4       /* a thread's recent stream handles' slots (a power of two; TLS) */

enum { KIND_LEGACY, KIND_BLOCKING, KIND_NON_BLOCKING };

/* A write the shim saw, and when the host queued it (see queued_at): what
 * orders writes kept in different streams' rings.  `space`: ds_range's (in
 * what was the padding). */
typedef struct {
    uintptr_t start;
    uint64_t len, when;
    uint32_t tick, space;
} write_rec;
_Static_assert(sizeof(write_rec) == 32, "a ring's entry stays half a cache line");

/* Each on cache lines of its own: threads on different streams write none
 * in common. */
typedef struct {
    _Alignas(64) bool used;
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
    /* The slot's recent writes, DS_WRITES of them (mapped when the slot is
     * first used) and how many were ever written: kept when the stream
     * goes, as the writes still name the slot. */
    write_rec *ring;
    uint64_t nwrites;
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
    uintptr_t tensor, start, end; /* the bytes the consumer's uses are found at */
    uint32_t space;  /* of start and end (ds_range): 0, addresses */
    int stream;      /* the producer's last write */
    uint32_t tick;
    uint16_t producer, consumer; /* name ids */
} pending;

/* A handle as a call named it, and the slot it led to while no slot was
 * freed (`freed`: slots_freed then, which the general way asks; the way
 * without SYNC asks the slot, see settled); `tag`: the call's API and
 * whether it was a per-thread-default-stream variant (see memo_tag).  16
 * bytes: the memos are thread-local, and what the shim keeps per thread
 * must fit glibc's static TLS reserve when it is loaded late
 * (docs/reliability.md). */
typedef struct {
    uintptr_t handle;
    uint32_t freed;
    uint16_t tag, slot;
} stream_memo;
_Static_assert(DS_CLOCKS <= UINT16_MAX, "a memo's slot fits");

/* One shard's events: open addressing by the handle's hash, doubled when
 * three quarters full; alone on its cache lines. */
typedef struct {
    _Alignas(64) event *t;
    size_t mask, live;
    event first[DS_EVENTS_FIRST];
} event_table;

#define HOST 0
#define NO_CALLER UINT16_MAX /* a launch's module, not looked up */

/* What guards what (docs/design.md, "The stream model's locks"):
 *   SYNC: the slots (used, kind, api, handle, tid: written under SYNC and
 *         the slot's STREAMS shard), used_slots, blocking_slots,
 *         legacy_slot, the pending handoffs, and the clocks of the host and
 *         of the legacy streams, which only the general way touches;
 *   a STREAMS shard: its slot's clock and the rest of its stream (every
 *         stream's but the host's and the legacy ones', see sharded), and
 *         its ring of writes;
 *   an EVENTS shard: its table of events.
 * width, slots_freed and merges are written under SYNC and read without
 * it (atomics): a settled stream's way reads width and merges under its
 * shard alone. */
static stream streams[DS_CLOCKS]; /* [0]: the host */
static _Atomic int width = 1; /* slots ever used: clocks are zero beyond */
static uint64_t used_slots = 1, blocking_slots;
static int legacy_slot[DS_DEVICE_APIS_MAX]; /* each API's legacy default stream, or 0 */
static _Atomic uint32_t slots_freed = 1; /* memos and events' snapshots name it */
/* Bumped when the host's clock or a legacy stream's changes: a stream
 * settled before (see settled) may have to merge them again. */
static _Atomic uint64_t merges = 1;
static event_table event_tables[DS_EVENT_SHARDS];
static pending pend[DS_PENDING];  /* [0, npending) */
static atomic_int npending;       /* read outside the lock: whether to find a launch's module */
static uint64_t untracked_streams;
static _Atomic uint64_t barriers_inserted;
/* Where recent handles led this thread (its own default stream too: a
 * thread's memos are its own, and a forked child's one thread forgets
 * them, ds_sync_after_fork). */
static DS_TLS stream_memo memos[DS_STREAM_MEMOS];

/* Writes of different threads are in the host's order when the program
 * ordered them (a lock, a queue, a join between the two calls), and the
 * shim sees none of that: they are ordered by the time they were queued,
 * without a counter threads would share — the CPU's time-stamp counter,
 * one instruction, kept in step across cores wherever Linux uses it as its
 * clock (constant_tsc, nonstop_tsc); elsewhere the monotonic clock.  A
 * write's time is read well after the program's own order was settled
 * (the whole real call of the write before lies between, and the program's
 * hand-over after it). */
static inline uint64_t host_order(void)
{
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    uint64_t t;
    __asm__ volatile("mrs %0, cntvct_el0" : "=r"(t));
    return t;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#endif
}

/* When a write is queued: host_order, strictly later than the thread's
 * write before, so that one thread's writes are ordered exactly.  On
 * x86-64 the read is ordered after every instruction before it (lfence;
 * rdtsc, as Linux reads the counter for its own clock), so two of one
 * thread's reads never come out backwards, and the real call and the hook
 * between them span many ticks: equal reads cannot happen.  Elsewhere the
 * counter may tick too slowly for that (ARM's runs at tens of MHz), and
 * the thread's last time, kept, makes the order strict. */
#if defined(__x86_64__)
static inline uint64_t queued_at(void)
{
    __builtin_ia32_lfence();
    return host_order();
}
#else
static DS_TLS uint64_t last_queued;

static inline uint64_t queued_at(void)
{
    uint64_t t = host_order(), last = last_queued;
    t = t > last ? t : last + 1;
    last_queued = t;
    return t;
}
#endif

bool ds_sync_enabled(void)
{
    return ds_cfg.sync != DS_SYNC_OFF;
}

static inline int width_now(void)
{
    return atomic_load_explicit(&width, memory_order_relaxed);
}

static inline uint64_t merges_now(void)
{
    return atomic_load_explicit(&merges, memory_order_relaxed);
}

/* ---- a stream's lock: SYNC held --------------------------------------------- */

/* Whether slot i's clock is its STREAMS shard's: every stream's but the
 * host's and the legacy streams', which are never settled (only the
 * general way, under SYNC, touches them). */
static inline bool sharded(int i)
{
    return i != HOST && streams[i].kind != KIND_LEGACY;
}

/* Takes slot i's shard where its clock has one; returns whether, for
 * stream_give (the kind may change in between: ds_sync_stream_created). */
static inline bool stream_take(int i)
{
    bool own = sharded(i);
    if (own)
        ds_lock_take_shard(DS_LOCK_STREAMS, (unsigned)i);
    return own;
}

static inline void stream_give(int i, bool own)
{
    if (own)
        ds_lock_give_shard(DS_LOCK_STREAMS, (unsigned)i);
}

/* ---- clocks: the stream's lock held ------------------------------------------- */

static void changed(stream *s)
{
    s->version++;
}

/* A clock others merge before their operations changed: none is settled.
 * (Only the host's and the legacy streams': SYNC held.) */
static void unsettles(const stream *s)
{
    if (s->kind == KIND_LEGACY || s == &streams[HOST])
        atomic_fetch_add_explicit(&merges, 1, memory_order_relaxed);
}

static inline void merge(stream *into, const uint32_t *from)
{
    bool any = false;
    for (int i = 0, w = width_now(); i < w; i++)
        if (from[i] > into->vc[i]) {
            into->vc[i] = from[i];
            any = true;
        }
    if (any) {
        changed(into);
        unsettles(into);
    }
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
    used_slots |= 1ull << i;
    if (kind == KIND_BLOCKING)
        blocking_slots |= 1ull << i;
    if (kind == KIND_LEGACY && (unsigned)api < DS_DEVICE_APIS_MAX)
        legacy_slot[api] = i;
    if (i >= width_now())
        atomic_store_explicit(&width, i + 1, memory_order_relaxed);
    return i;
}

/* The low bit marks a memo written: a zeroed one holds nothing. */
static uint16_t memo_tag(int api, bool ptsz)
{
    return (uint16_t)((unsigned)api << 2 | (unsigned)ptsz << 1 | 1);
}

/* Handles are the runtimes' pointers: a multiplicative hash of their low
 * half mixes the bits above the alignment into the top two, in three
 * instructions.  The multiplier (MurmurHash3's first) also sends the
 * runtime's special handles 0, 1 (legacy) and 2 (per-thread) to memos of
 * their own, so a thread that names its default stream both ways keeps
 * both.  (Two APIs' handles that meet here take turns; the tag tells them
 * apart.) */
static stream_memo *memo_of(uintptr_t handle)
{
    _Static_assert(DS_STREAM_MEMOS == 4, "the hash's top two bits");
    return &memos[(uint32_t)handle * 0xcc9e2d51u >> 30];
}

/* stream_index past the memo: looked up, and remembered. */
__attribute__((noinline)) static int stream_remembered(stream_memo *m, int api, uintptr_t handle,
                                                       bool ptsz, bool create)
{
    uintptr_t resolved = handle;
    int i = stream_lookup(api, &resolved, ptsz, create);
    if (i > 0)
        *m = (stream_memo){handle, atomic_load_explicit(&slots_freed, memory_order_relaxed),
                           memo_tag(api, ptsz), (uint16_t)i};
    return i;
}

/* Whether memo m names the stream a call names: the handle, and no slot
 * freed since it was written (the slot still holds that stream: asked
 * again under the slot's shard by a way without SYNC). */
static inline bool memo_holds(const stream_memo *m, int api, uintptr_t handle, bool ptsz)
{
    return m->handle == handle && m->tag == memo_tag(api, ptsz) &&
           m->freed == atomic_load_explicit(&slots_freed, memory_order_relaxed);
}

/* The stream a call names (see stream_lookup): the memo first. */
static inline int stream_index(int api, uintptr_t handle, bool ptsz, bool create)
{
    stream_memo *m = memo_of(handle);
    return memo_holds(m, api, handle, ptsz) ? m->slot
                                            : stream_remembered(m, api, handle, ptsz, create);
}

/* The legacy default stream of an API, or 0. */
static inline int legacy_of(int api)
{
    return (unsigned)api < DS_DEVICE_APIS_MAX ? legacy_slot[api] : 0;
}

/* Program order and CUDA's implicit ordering, before an operation on s
 * (its lock held; a legacy stream's takes each blocking stream's shard in
 * turn): each clock merged only if it changed since s (or, for the legacy
 * stream, the blocking stream) last saw it.  A stream other than the
 * legacy one is then settled until the host's clock or a legacy stream's
 * changes. */
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
            int j = __builtin_ctzll(m);
            stream *b = &streams[j];
            bool own = stream_take(j);
            if (b->api == s->api && b->merged_by_legacy != b->version) {
                b->merged_by_legacy = b->version;
                merge(s, b->vc);
            }
            stream_give(j, own);
        }
    }
    if (s->kind != KIND_LEGACY)
        s->settled_at = merges_now();
}

/* The way that calls nothing, for an operation, record or wait on a
 * stream a call names: the slot its memo holds, with the slot's shard
 * taken if it was free, and the stream settled (before_op would merge
 * nothing into it: no clock it merges, the host's or a legacy stream's,
 * changed since); else -1, nothing taken, for the general way.
 *
 * The memo is read once, before the lock is taken (the exchange would make
 * the compiler read it again).  Whether the slot still holds the stream it
 * named is asked of the slot, under its shard, by its handle: a slot given
 * to another stream since holds another handle, or the same handle made
 * again, which is the stream the call names.  Handle 0 in a per-thread
 * call names this thread's default stream, kept under the API's handle for
 * it: the memo alone says which, as a thread's default stream is never
 * destroyed (its slot never given to another) and the memos are the
 * thread's own.  (A legacy stream is never settled.) */
static inline int settled(int api, uintptr_t handle, bool ptsz)
{
    const stream_memo m = *memo_of(handle);
    if (m.handle != handle || m.tag != memo_tag(api, ptsz) ||
        !ds_spin_take_shard_now(DS_LOCK_STREAMS, m.slot))
        return -1;
    const stream *st = &streams[m.slot];
    if (st->settled_at == merges_now() && (st->handle == handle || (ptsz && handle == 0)))
        return m.slot;
    ds_lock_give_shard(DS_LOCK_STREAMS, m.slot);
    return -1;
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
        bool own = stream_take(s);
        memset(streams[s].vc, 0, sizeof(streams[s].vc));
        streams[s].host_merged = streams[s].legacy_merged = streams[s].settled_at = 0;
        changed(&streams[s]);
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
         * Every thread's memo of it is void from here (slots_freed). */
        bool own = stream_take(s);
        streams[s].used = false;
        atomic_fetch_add_explicit(&slots_freed, 1, memory_order_relaxed);
        stream_give(s, own);
        used_slots &= ~(1ull << s);
        blocking_slots &= ~(1ull << s);
    }
    ds_lock_give(DS_LOCK_SYNC);
}

/* ---- events: their shard's lock held --------------------------------------------- */

/* An event's hash: its shard in the top bits, its home slot below them. */
static inline uint64_t event_hash(uintptr_t handle)
{
    return (uint64_t)handle * 0x9e3779b97f4a7c15ull;
}

static inline unsigned event_shard(uint64_t hash)
{
    return (unsigned)(hash >> 58);
}

static inline size_t event_home(uint64_t hash, size_t mask)
{
    return (size_t)(hash >> 32) & mask;
}

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

/* event_of past the event's home slot: the probe on to the first hole, and
 * (create) the event put there. */
__attribute__((noinline)) static event *event_probed(event_table *et, int api, uintptr_t handle,
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

/* The event if it is in its home slot (where it usually is), else NULL. */
static inline event *event_at_home(const event_table *et, int api, uintptr_t handle)
{
    if (!et->t)
        return NULL;
    event *e = &et->t[event_home(event_hash(handle), et->mask)];
    return e->used && e->handle == handle && e->api == api ? e : NULL;
}

/* Events are kept under their API's family, as streams are: a runtime
 * event is a driver one. */
static inline event *event_of(event_table *et, int api, uintptr_t handle, bool create)
{
    api = ds_device_api_family(api);
    event *e = event_at_home(et, api, handle);
    if (e)
        return e;
    if (!et->t) {
        et->t = et->first;
        et->mask = DS_EVENTS_FIRST - 1;
    }
    return event_probed(et, api, handle, create);
}

/* The shard of event handle ev, taken: its table. */
static inline event_table *events_take(uintptr_t ev)
{
    unsigned k = event_shard(event_hash(ev));
    ds_lock_take_shard(DS_LOCK_EVENTS, k);
    return &event_tables[k];
}

static inline void events_give(const event_table *et)
{
    ds_lock_give_shard(DS_LOCK_EVENTS, (unsigned)(et - event_tables));
}

/* Slot s's lock and the event's shard held. */
static inline void snapshot(event *e, int s)
{
    uint32_t freed = atomic_load_explicit(&slots_freed, memory_order_relaxed);
    if (e->from_version == streams[s].version && e->from == s && e->from_freed == freed)
        return; /* a version is never 0: a fresh event matches nothing */
    /* Beyond the width both clocks are zero: a few streams' slots are
     * copied whole, in a few moves (no call), more only as wide as used. */
    int w = width_now();
    if (w <= DS_CLOCKS_FEW)
        memcpy(e->vc, streams[s].vc, DS_CLOCKS_FEW * sizeof(e->vc[0]));
    else
        memcpy(e->vc, streams[s].vc, (size_t)w * sizeof(e->vc[0]));
    e->recorded = true;
    e->from = s;
    e->from_version = streams[s].version;
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
        event *e = event_at_home(&event_tables[k], streams[s].api, ev);
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
        merge(&streams[x.slot], x.e->vc);
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
        if (streams[s].host_merged != streams[HOST].version) {
            streams[s].host_merged = streams[HOST].version;
            merge(&streams[s], streams[HOST].vc);
        }
        event_table *et = events_take(ev);
        event *e = event_of(et, ev_api, ev, false);
        if (e && e->recorded)
            merge(&streams[s], e->vc);
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

/* ---- the host waits: SYNC held ------------------------------------------------ */

static bool covered_by_host(int stream_slot, uint32_t tick)
{
    return streams[HOST].vc[stream_slot] >= tick;
}

/* The host's clock grew: handoffs whose write it now covers can race with
 * nothing any more.  `from`'s lock held too. */
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
        bool own = stream_take(s);
        before_op(s); /* synchronizing the legacy stream also waits for blocking ones */
        host_merges(streams[s].vc);
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
    for (uint64_t m = used_slots & ~1ull; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        if (streams[i].api == family) {
            bool own = stream_take(i);
            host_merges(streams[i].vc);
            stream_give(i, own);
        }
    }
    ds_lock_give(DS_LOCK_SYNC);
}

/* ---- handoffs --------------------------------------------------------------- */

/* A stream's write to some bytes. */
typedef struct {
    int stream;
    uint32_t tick;
} last_write;

/* Whether a write overlaps the range [start, start + len) of `space`. */
static inline bool overlaps(const write_rec *wr, uint32_t space, uintptr_t start, uint64_t len)
{
    return wr->space == space && wr->start < start + len && start < wr->start + wr->len;
}

/* SYNC held: the newest write overlapping the addresses [data, data +
 * bytes) (none where data is 0), or `alias` (NULL: none), in the order the
 * host queued them: each
 * stream's newest in its ring (read under its shard, one at a time), the
 * last queued of those.  False: none. */
static bool newest_write(uintptr_t data, uint64_t bytes, const ds_range *alias,
                         last_write *out)
{
    write_rec newest = {0};
    bool found = false;
    for (int s = 1, w = width_now(); s < w; s++) {
        const stream *r = &streams[s];
        ds_lock_take_shard(DS_LOCK_STREAMS, (unsigned)s);
        uint64_t oldest = r->nwrites > DS_WRITES ? r->nwrites - DS_WRITES : 0;
        for (uint64_t n = r->nwrites; n > oldest; n--) {
            const write_rec *wr = &r->ring[(n - 1) % DS_WRITES];
            if (wr->len && ((data && overlaps(wr, 0, data, bytes)) ||
                            (alias && overlaps(wr, alias->space, alias->start, alias->len)))) {
                if (!found || wr->when > newest.when) {
                    newest = *wr;
                    *out = (last_write){s, wr->tick};
                    found = true;
                }
                break;
            }
        }
        ds_lock_give_shard(DS_LOCK_STREAMS, (unsigned)s);
    }
    return found;
}

void ds_sync_import(uintptr_t tensor, uintptr_t data, uint64_t bytes, const ds_range *alias,
                    uint16_t producer, uint16_t consumer)
{
    if (!ds_sync_enabled() || !bytes || (!data && !alias))
        return;
    last_write last = {0, 0};
    ds_lock_take(DS_LOCK_SYNC);
    bool written = newest_write(data, bytes, alias, &last);
    int n = atomic_load_explicit(&npending, memory_order_relaxed), i = 0;
    while (i < n && pend[i].tensor != tensor) /* imported again: replaced */
        i++;
    if (written && covered_by_host(last.stream, last.tick)) {
        if (i < n) /* what waited before is no longer the last write */
            pend[i] = pend[--n];
    } else if (written && i < DS_PENDING) {
        /* A tensor that carries a handle is used where its memory is. */
        ds_range at = data ? (ds_range){.start = data, .len = bytes} : *alias;
        pend[i] = (pending){.tensor = tensor, .start = at.start, .end = at.start + at.len,
                            .space = at.space, .stream = last.stream, .tick = last.tick,
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
    if (r->handoff.space) /* a tensor carrying a handle: where in its memory */
        ds_ev_uint(e, "memory_offset", r->handoff.start);
    else
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
    for (int k = 0; k < n; k++) /* read or written, in the handoff's space */
        if (r[k].space == p->space && r[k].start < p->end && p->start < r[k].start + r[k].len)
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
    last_write last = {0, 0};
    ds_lock_take(DS_LOCK_SYNC);
    bool racy =
        newest_write(data, bytes, NULL, &last) && !covered_by_host(last.stream, last.tick);
    if (racy) {
        pending p = {.tensor = tensor, .start = data, .end = data + bytes, .stream = last.stream,
                     .tick = last.tick, .producer = producer, .consumer = consumer};
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
        ds_lock_give(DS_LOCK_SYNC);
        if (fixed) {
            atomic_fetch_add_explicit(&barriers_inserted, 1, memory_order_relaxed);
            ds_note_work();
            emit_barrier(&x);
            return;
        }
    }
    report_race(&x);
}

/* SYNC and slot s's lock held (*own: its shard), and given back meanwhile:
 * the handoffs this operation on slot s is the first use of, checked, and
 * fixed by a barrier under enforce. */
__attribute__((noinline)) static void handoffs_due(int api, uintptr_t handle, int s, bool *own,
                                                   const ds_range *r, int n, uint16_t caller)
{
    race races[4];
    int nraces = take_due(s, r, n, caller, races, (int)DS_ARRAY_LEN(races));
    if (!nraces)
        return;
    stream_give(s, *own);
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
            /* The barrier's record is an operation on the producer's
             * stream; its clock is copied out under its lock, then merged
             * into the consumer's under that one's (one shard at a time). */
            uint32_t vc[DS_CLOCKS];
            int p = x->producer_stream;
            ds_lock_take(DS_LOCK_SYNC);
            bool own_p = stream_take(p);
            before_op(p);
            memcpy(vc, streams[p].vc, sizeof(vc));
            stream_give(p, own_p);
            bool own_s = stream_take(s);
            merge(&streams[s], vc);
            stream_give(s, own_s);
            ds_lock_give(DS_LOCK_SYNC);
            atomic_fetch_add_explicit(&barriers_inserted, 1, memory_order_relaxed);
            ds_note_work();
            emit_barrier(x);
        }
        if (!fixed)
            report_race(x);
    }
    ds_lock_take(DS_LOCK_SYNC);
    *own = stream_take(s);
}

/* Whether a call names the legacy default stream (see stream_lookup). */
static bool names_legacy(int api, uintptr_t handle, bool ptsz)
{
    const ds_device_api *d = ds_device_api_at(api);
    if (d->per_thread_stream && handle == d->per_thread_stream)
        return false;
    return handle == 0 ? !ptsz : d->legacy_stream && handle == d->legacy_stream;
}

/* Slot s's lock held: an operation there (st: &streams[s], as a memo has
 * it) ticks its clock, and what it writes is remembered in its ring. */
static inline void tick_at(stream *st, int s, const ds_range *r, int n)
{
    uint32_t t = ++st->vc[s];
    changed(st);
    for (int k = 0; k < n; k++)
        if (r[k].write) /* an empty one too: it overlaps nothing (newest_write) */
            st->ring[st->nwrites++ % DS_WRITES] =
                (write_rec){r[k].start, r[k].len, queued_at(), t, r[k].space};
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
        bool own = stream_take(s);
        before_op(s);
        if (atomic_load_explicit(&npending, memory_order_relaxed))
            handoffs_due(api, handle, s, &own, r, n, caller);
        tick_at(&streams[s], s, r, n);
        unsettles(&streams[s]);
        stream_give(s, own);
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
    if (atomic_load_explicit(&npending, memory_order_relaxed))
        return false;
    /* The stream's shard alone: threads on different streams share no
     * lock and write no common line here. */
    int s = settled(api, handle, ptsz);
    if (s < 0)
        return false;
    tick_at(&streams[s], s, r, n);
    ds_lock_give_shard(DS_LOCK_STREAMS, (unsigned)s);
    return true;
}

void ds_sync_op(int api, uintptr_t handle, bool ptsz, const ds_range *r, int n,
                const void *caller_addr)
{
    if (!ds_sync_op_now(api, handle, ptsz, r, n))
        op_general(api, handle, ptsz, r, n, caller_addr);
}

uint64_t ds_sync_barriers(void)
{
    return atomic_load_explicit(&barriers_inserted, memory_order_relaxed);
}

/* The child's one thread is another thread: its default streams are not
 * its parent's, which its memos would lead to. */
void ds_sync_after_fork(void)
{
    memset(memos, 0, sizeof(memos));
}
