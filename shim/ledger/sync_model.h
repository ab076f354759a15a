/*
 * sync_model.h — what the stream model's files share among themselves, and
 * nothing else of the layer sees (ledger.h and shim.h are the model's API;
 * sync.c describes the model).  Each file does one job and calls only those
 * listed below it here, never one above (no circle: scripts/check-layers):
 *
 *   sync.c           an operation on a stream: the way that calls nothing, the general way
 *   sync_host.c      the host's clock: stream, event and device synchronizes
 *   sync_events.c    events: their tables, a record, a stream's wait, a destroy
 *   sync_handoffs.c  imports and host reads, a handoff's first use checked (a barrier
 *                    under enforce), races reported
 *   sync_streams.c   the streams' state declared here, a stream's slot from its handle, streams
 *                    made and destroyed, a forked child's memos
 *
 * The helpers of the way that calls nothing are here, static inline: each
 * hot call inlines them, whichever file it is in.
 */
#ifndef DS_SYNC_MODEL_H
#define DS_SYNC_MODEL_H

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
 * freed (`freed`: ds_sync_slots_freed then, which the general way asks; the way
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
 *         the slot's STREAMS shard), ds_sync_used_slots, ds_sync_blocking_slots,
 *         legacy_slot, the pending handoffs, and the clocks of the host and
 *         of the legacy streams, which only the general way touches;
 *   a STREAMS shard: its slot's clock and the rest of its stream (every
 *         stream's but the host's and the legacy ones', see sharded), and
 *         its ring of writes;
 *   an EVENTS shard: its table of events.
 * ds_sync_width, ds_sync_slots_freed and ds_sync_merges are written under SYNC and read without
 * it (atomics): a settled stream's way reads width and merges under its
 * shard alone. */
extern stream ds_sync_streams[DS_CLOCKS]; /* [0]: the host */
extern _Atomic int ds_sync_width; /* slots ever used: clocks are zero beyond */
extern uint64_t ds_sync_used_slots, ds_sync_blocking_slots;
extern int ds_sync_legacy_slot[DS_DEVICE_APIS_MAX]; /* each API's legacy default stream, or 0 */
extern _Atomic uint32_t ds_sync_slots_freed; /* memos and events' snapshots name it */
/* Bumped when the host's clock or a legacy stream's changes: a stream
 * settled before (see settled) may have to merge them again. */
extern _Atomic uint64_t ds_sync_merges;
extern event_table ds_sync_event_tables[DS_EVENT_SHARDS];
extern pending ds_sync_pend[DS_PENDING];  /* [0, ds_sync_npending) */
extern atomic_int ds_sync_npending; /* read outside the lock: whether to find a launch's module */
/* The pending handoffs change under SYNC and inside a change of this count
 * (odd meanwhile), so that an operation on a settled stream can ask without
 * SYNC whether it is the first use of any (ds_sync_may_be_due): a sequence
 * lock, read by threads that never write.  Without fences (ThreadSanitizer
 * has none): a change's fields and count are release stores and a reader's
 * acquire loads, so a reader that sees any of them sees the sequence made
 * odd before them, and its second look at the sequence comes after them. */
extern _Atomic uint32_t ds_sync_pend_seq;

static inline void pend_change_begin(void)
{
    uint32_t s = atomic_load_explicit(&ds_sync_pend_seq, memory_order_relaxed);
    atomic_store_explicit(&ds_sync_pend_seq, s + 1, memory_order_relaxed);
}

static inline void pend_change_end(void)
{
    uint32_t s = atomic_load_explicit(&ds_sync_pend_seq, memory_order_relaxed);
    atomic_store_explicit(&ds_sync_pend_seq, s + 1, memory_order_release);
}

/* SYNC held, inside a change: pending handoff i set to *p. */
static inline void pend_set(int i, const pending *p)
{
    pending *d = &ds_sync_pend[i];
    __atomic_store_n(&d->tensor, p->tensor, __ATOMIC_RELEASE);
    __atomic_store_n(&d->start, p->start, __ATOMIC_RELEASE);
    __atomic_store_n(&d->end, p->end, __ATOMIC_RELEASE);
    __atomic_store_n(&d->space, p->space, __ATOMIC_RELEASE);
    __atomic_store_n(&d->stream, p->stream, __ATOMIC_RELEASE);
    __atomic_store_n(&d->tick, p->tick, __ATOMIC_RELEASE);
    __atomic_store_n(&d->producer, p->producer, __ATOMIC_RELEASE);
    __atomic_store_n(&d->consumer, p->consumer, __ATOMIC_RELEASE);
}
/* Where recent handles led this thread (its own default stream too: a
 * thread's memos are its own, and a forked child's one thread forgets
 * them, ds_sync_after_fork). */
extern DS_TLS stream_memo ds_sync_memos[DS_STREAM_MEMOS];

static inline int width_now(void)
{
    return atomic_load_explicit(&ds_sync_width, memory_order_relaxed);
}

static inline uint64_t merges_now(void)
{
    return atomic_load_explicit(&ds_sync_merges, memory_order_relaxed);
}

/* ---- a stream's lock: SYNC held --------------------------------------------- */

/* Whether slot i's clock is its STREAMS shard's: every stream's but the
 * host's and the legacy streams', which are never settled (only the
 * general way, under SYNC, touches them). */
static inline bool sharded(int i)
{
    return i != HOST && ds_sync_streams[i].kind != KIND_LEGACY;
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

static inline void changed(stream *s)
{
    s->version++;
}

/* A clock others merge before their operations changed: none is settled.
 * (Only the host's and the legacy streams': SYNC held.) */
static inline void unsettles(const stream *s)
{
    if (s->kind == KIND_LEGACY || s == &ds_sync_streams[HOST])
        atomic_fetch_add_explicit(&ds_sync_merges, 1, memory_order_relaxed);
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

/* The low bit marks a memo written: a zeroed one holds nothing. */
static inline uint16_t memo_tag(int api, bool ptsz)
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
static inline stream_memo *memo_of(uintptr_t handle)
{
    _Static_assert(DS_STREAM_MEMOS == 4, "the hash's top two bits");
    return &ds_sync_memos[(uint32_t)handle * 0xcc9e2d51u >> 30];
}

/* stream_index past the memo: looked up, and remembered. */
int ds_stream_remembered(stream_memo *m, int api, uintptr_t handle, bool ptsz, bool create);

/* Whether memo m names the stream a call names: the handle, and no slot
 * freed since it was written (the slot still holds that stream: asked
 * again under the slot's shard by a way without SYNC). */
static inline bool memo_holds(const stream_memo *m, int api, uintptr_t handle, bool ptsz)
{
    return m->handle == handle && m->tag == memo_tag(api, ptsz) &&
           m->freed == atomic_load_explicit(&ds_sync_slots_freed, memory_order_relaxed);
}

/* The stream a call names (see stream_lookup): the memo first. */
static inline int stream_index(int api, uintptr_t handle, bool ptsz, bool create)
{
    stream_memo *m = memo_of(handle);
    return memo_holds(m, api, handle, ptsz) ? m->slot
                                            : ds_stream_remembered(m, api, handle, ptsz, create);
}

/* The legacy default stream of an API, or 0. */
static inline int legacy_of(int api)
{
    return (unsigned)api < DS_DEVICE_APIS_MAX ? ds_sync_legacy_slot[api] : 0;
}

/* Program order and CUDA's implicit ordering, before an operation on s
 * (its lock held; a legacy stream's takes each blocking stream's shard in
 * turn): each clock merged only if it changed since s (or, for the legacy
 * stream, the blocking stream) last saw it.  A stream other than the
 * legacy one is then settled until the host's clock or a legacy stream's
 * changes. */
static inline void before_op(int i)
{
    stream *s = &ds_sync_streams[i];
    if (s->host_merged != ds_sync_streams[HOST].version) {
        s->host_merged = ds_sync_streams[HOST].version;
        merge(s, ds_sync_streams[HOST].vc);
    }
    if (s->kind == KIND_BLOCKING) {
        int l = legacy_of(s->api);
        if (l && s->legacy_merged != ds_sync_streams[l].version) {
            s->legacy_merged = ds_sync_streams[l].version;
            merge(s, ds_sync_streams[l].vc);
        }
    } else if (s->kind == KIND_LEGACY) {
        for (uint64_t m = ds_sync_blocking_slots; m; m &= m - 1) {
            int j = __builtin_ctzll(m);
            stream *b = &ds_sync_streams[j];
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
    const stream *st = &ds_sync_streams[m.slot];
    if (st->settled_at == merges_now() && (st->handle == handle || (ptsz && handle == 0)))
        return m.slot;
    ds_lock_give_shard(DS_LOCK_STREAMS, m.slot);
    return -1;
}

/* ---- the host waits: SYNC held ------------------------------------------------ */

static inline bool covered_by_host(int stream_slot, uint32_t tick)
{
    return ds_sync_streams[HOST].vc[stream_slot] >= tick;
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

/* event_of past the event's home slot: the probe on to the first hole, and
 * (create) the event put there. */
event *ds_event_probed(event_table *et, int api, uintptr_t handle, bool create);

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
    return ds_event_probed(et, api, handle, create);
}

/* The shard of event handle ev, taken: its table. */
static inline event_table *events_take(uintptr_t ev)
{
    unsigned k = event_shard(event_hash(ev));
    ds_lock_take_shard(DS_LOCK_EVENTS, k);
    return &ds_sync_event_tables[k];
}

static inline void events_give(const event_table *et)
{
    ds_lock_give_shard(DS_LOCK_EVENTS, (unsigned)(et - ds_sync_event_tables));
}

/* ---- handoffs: SYNC held --------------------------------------------------------- */

/* SYNC and slot s's lock held (*own: its shard), and given back meanwhile:
 * the handoffs this operation on slot s is the first use of, checked, and
 * fixed by a barrier under enforce. */
void ds_handoffs_due(int api, uintptr_t handle, int s, bool *own, const ds_range *r, int n,
                     uint16_t caller);
/* Without SYNC: whether an operation touching r[0..n) (n < 0: a launch
 * by module `caller`) may be the first use of a waiting handoff; true also
 * when the handoffs changed while they were read (the general way then
 * decides under SYNC). */
bool ds_sync_may_be_due(const ds_range *r, int n, uint16_t caller);

#endif
