/*
 * copies.c — copy accounting: every transfer that touches a tracked
 * allocation or a DLPack share becomes a `copy` event; an export filled by
 * a copy from another tracked buffer made inside the export call is a copy,
 * not a zero-copy share; and a
 * device→host copy out of one owner followed by a host→device copy of the
 * same host bytes into another owner is a `roundtrip` that a DLPack handoff
 * would have avoided.
 *
 * A copy names the share it reads or writes through the index of live
 * shares (shares.c).  Bounded tables, one spin lock (every copy that
 * touches a tracked buffer or a share takes it; a copy this thread repeats
 * only counts), nothing called out while it is held.  The counts are kept
 * in cells of their own, a thread's by its id, summed when read: threads
 * copying at once write no common line.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "ledger/ledger.h"

#define DS_RECENT_COPIES 256   /* for exports filled by a copy (a power of two) */
#define DS_PENDING_TRIPS 256   /* device→host copies waiting for their way back */

/* `tid` and `site`: the thread and the line of the interpreted program
 * that made it (0: none known). */
typedef struct {
    uintptr_t dst, dst_end, src;
    long tid;
    uint16_t site;
    bool src_tracked;
    int8_t direction;
} recent_copy;

typedef struct {
    uintptr_t host, host_end;
    ds_alloc_info from; /* the device allocation the bytes came out of */
} trip;

static recent_copy recent[DS_RECENT_COPIES];
static uint64_t nrecent;
static trip trips[DS_PENDING_TRIPS];
static uint64_t ntrips;
#define DS_COUNT_CELLS 64 /* a power of two */
typedef struct {
    _Alignas(64) atomic_uint_fast64_t transfers, bytes;
} count_cell;
static count_cell counts[DS_COUNT_CELLS];
static atomic_uint_fast64_t roundtrips;

static const char *const direction_names[] = {"h2d", "d2h", "d2d", "h2h", "peer"};

/* ---- one side of a copy ---------------------------------------------------------- */

typedef struct {
    bool tracked;          /* inside a tracked allocation */
    ds_alloc_info alloc;
    bool device;           /* device (or managed) memory, not host */
    uintptr_t share;       /* the DLPack share it belongs to, if any */
} side;

static void describe(side *s, uintptr_t p)
{
    memset(s, 0, sizeof(*s));
    s->tracked = ds_alloc_lookup(p, &s->alloc);
    s->device = s->tracked && s->alloc.kind != DS_ALLOC_HOST && s->alloc.kind != DS_ALLOC_MAPPED;
}

static void side_fields(ds_ev *e, const char *which, const side *s, uintptr_t p)
{
    char key[32], device[32];
    ds_fmt(key, sizeof(key), "%s", which);
    ds_ev_hex(e, key, p);
    ds_fmt(key, sizeof(key), "%s_owner", which);
    ds_ev_str(e, key, s->tracked ? ds_name(s->alloc.owner) : NULL);
    if (!s->tracked)
        ds_fmt(device, sizeof(device), "cpu:0");
    else
        ds_alloc_device_name(device, sizeof(device), &s->alloc);
    ds_fmt(key, sizeof(key), "%s_device", which);
    ds_ev_str(e, key, device);
    ds_fmt(key, sizeof(key), "%s_share", which);
    if (s->share)
        ds_ev_hex(e, key, s->share);
    else
        ds_ev_str(e, key, NULL);
}

/* ---- a copy ---------------------------------------------------------------------- */

static int infer_direction(const side *src, const side *dst)
{
    if (src->device && dst->device)
        return src->alloc.device != dst->alloc.device ? DS_COPY_PEER : DS_COPY_D2D;
    if (src->device)
        return DS_COPY_D2H;
    if (dst->device)
        return DS_COPY_H2D;
    return DS_COPY_H2H;
}

static void emit_roundtrip(const trip *t, const side *dst, uint64_t bytes, const char *caller)
{
    char detail[DS_DETAIL_MAX + 2 * DS_NAME_MAX], to_device[32], from_device[32];
    ds_alloc_device_name(from_device, sizeof(from_device), &t->from);
    ds_alloc_device_name(to_device, sizeof(to_device), &dst->alloc);
    ds_fmt(detail, sizeof(detail),
           "%llu bytes went from %s's %s through host memory to %s's %s (copied by %s); a "
           "DLPack handoff between the two would have been zero-copy",
           (unsigned long long)bytes, ds_name(t->from.owner), from_device, ds_name(dst->alloc.owner),
           to_device, caller);
    if (!ds_event_wanted(DS_EV_ROUNDTRIP))
        return;
    ds_ev e;
    ds_ev_begin(&e, DS_EV_ROUNDTRIP);
    ds_ev_uint(&e, "bytes", bytes);
    ds_ev_name(&e, "from_owner", t->from.owner);
    ds_ev_str(&e, "from_device", from_device);
    ds_ev_name(&e, "to_owner", dst->alloc.owner);
    ds_ev_str(&e, "to_device", to_device);
    ds_ev_hex(&e, "host", t->host);
    ds_ev_str(&e, "detail", detail);
    ds_ev_end(&e);
}

/* The last device copy on this thread and whether it was relevant, with
 * what that answer holds under: the count of allocation and share changes
 * (their sum: both only grow; the allocations' alone when the source is a
 * tracked allocation, which makes the copy relevant and a filler of exports
 * whatever the shares are: the shares' count is a sum over their shards),
 * and of recent copies once its own entry (`entry`, in the ring of recent
 * copies) was checked against those after it (`nrecent`).
 * Programs repeat copies between the same buffers; the same copy again
 * while these hold is relevant or not alike, and if it is, its entry is
 * still the newest recent copy into its bytes (still_newest): it is
 * counted, nothing else.  Not kept for
 * copies between host and device (their trips go on), nor read when events
 * are written.  Device copies only: they run inside a device call, where a
 * signal handler on this thread does not come back here (its device calls
 * are inner ones); a host copy (memcpy) may. */
typedef struct {
    uintptr_t dst, src;
    uint64_t bytes, changes, nrecent, entry;
    int8_t direction;
    bool relevant;
    bool by_source; /* the source is tracked: `changes` counts allocations only */
} copy_memo;
static DS_TLS copy_memo last_copy;

static uint64_t changes_now(bool by_source)
{
    return ds_alloc_changes() + (by_source ? 0 : ds_shares_changes());
}

/* The calling thread's cell (threads may share one: its counts are
 * atomic), by a hash of where its thread-local storage lies (each thread's
 * is its own, found with one instruction), rather than a pointer kept
 * there: the shim's thread-local storage must fit glibc's static TLS
 * reserve when it is loaded late (docs/reliability.md). */
static inline count_cell *counts_of_thread(void)
{
    uint64_t here = (uint64_t)(uintptr_t)&ds_locks_held;
    return &counts[(here * 0x9e3779b97f4a7c15ull) >> 58 & (DS_COUNT_CELLS - 1)];
}

/* Always inline: it is all a repeated copy does (ds_copy_repeat). */
__attribute__((always_inline)) static inline void count(uint64_t bytes)
{
    count_cell *c = counts_of_thread();
    atomic_fetch_add_explicit(&c->transfers, 1, memory_order_relaxed);
    ds_note_work();
    atomic_fetch_add_explicit(&c->bytes, bytes, memory_order_relaxed);
}

/* A relevant memo's entry, once copies were recorded after it (another
 * thread's, as a rule): whether it is still in the ring and none of those
 * copies wrote over its destination.  Then its copy repeated answers
 * ds_copies_filled_by_copy as the same copy recorded again would (the
 * newest copy into bytes its destination covers is still its own, and
 * where it is not, the copies after it are the same either way), and the
 * memo is moved on to now; else the copy is recorded again.  So two
 * threads each repeating a copy of its own do not make each other take
 * the lock and write the ring on every copy. */
__attribute__((noinline)) static bool still_newest(copy_memo *m)
{
    bool newest = true;
    ds_lock_take(DS_LOCK_COPIES);
    uint64_t now = nrecent;
    if (now - m->entry > DS_RECENT_COPIES)
        newest = false; /* its entry was written over */
    for (uint64_t n = m->nrecent; newest && n < now; n++) {
        const recent_copy *c = &recent[n % DS_RECENT_COPIES];
        newest = !(c->dst < m->dst + m->bytes && m->dst < c->dst_end);
    }
    ds_lock_give(DS_LOCK_COPIES);
    if (newest)
        m->nrecent = now;
    return newest;
}

/* Whether last_copy answers for this copy. */
static inline bool repeated(copy_memo *m, uintptr_t dst, uintptr_t src, uint64_t bytes,
                            int direction)
{
    return m->dst == dst && m->src == src && m->bytes == bytes && m->direction == direction &&
           m->changes == changes_now(m->by_source) &&
           (!m->relevant || m->nrecent == __atomic_load_n(&nrecent, __ATOMIC_RELAXED) ||
            still_newest(m)) &&
           !ds_event_wanted(DS_EV_COPY);
}

/* The copy's sides, looked up and matched with the shares and trips. */
__attribute__((noinline)) static void record_general(uintptr_t dst, uintptr_t src,
                                                     uint64_t bytes, int direction,
                                                     bool needs_share, const void *caller_addr)
{
    ds_shares_index();
    /* Both counts read before the lookups: a change meanwhile voids the memo. */
    uint64_t alloc_changes = ds_alloc_changes(), share_changes = ds_shares_changes();
    copy_memo memo = {dst, src, bytes, 0, 0, 0, (int8_t)direction, false, false};
    side s, d;
    describe(&s, src);
    describe(&d, dst);
    memo.by_source = s.tracked;
    memo.changes = alloc_changes + (s.tracked ? 0 : share_changes);
    trip matched = {0};
    bool roundtrip = false;
    s.share = ds_shares_at(src, bytes);
    d.share = ds_shares_at(dst, bytes);
    bool relevant = needs_share ? (s.share || d.share)
                                : (s.tracked || d.tracked || s.share || d.share);
    if (relevant && direction == DS_COPY_INFER)
        direction = infer_direction(&s, &d);
    /* Where it was made, for an export it may fill (asked before the lock:
     * the locator reads the interpreter's frames). */
    bool fills = relevant && (s.tracked || s.share) && direction != DS_COPY_H2D;
    uint16_t site = fills ? ds_context_site() : 0;
    ds_lock_take(DS_LOCK_COPIES);
    if (relevant) {
        recent[nrecent % DS_RECENT_COPIES] = (recent_copy){
            dst, dst + bytes, src, ds_tid(), site, s.tracked || s.share, (int8_t)direction};
        __atomic_store_n(&nrecent, nrecent + 1, __ATOMIC_RELAXED);
        memo.nrecent = nrecent;
        memo.entry = nrecent - 1;
        if (direction == DS_COPY_D2H && s.tracked) {
            trips[ntrips++ % DS_PENDING_TRIPS] =
                (trip){dst, dst + bytes, s.alloc};
        } else if (direction == DS_COPY_H2D && d.tracked) {
            uint64_t oldest = ntrips > DS_PENDING_TRIPS ? ntrips - DS_PENDING_TRIPS : 0;
            for (uint64_t n = ntrips; n > oldest && !roundtrip; n--) {
                trip *t = &trips[(n - 1) % DS_PENDING_TRIPS];
                if (t->host_end && t->host < src + bytes && src < t->host_end &&
                    t->from.owner != d.alloc.owner) {
                    matched = *t;
                    t->host_end = 0; /* one way back per way out */
                    roundtrip = true;
                }
            }
        }
    }
    ds_lock_give(DS_LOCK_COPIES);
    memo.relevant = relevant;
    if (relevant && (direction == DS_COPY_D2H || direction == DS_COPY_H2D))
        memo = (copy_memo){0}; /* their trips go on: never repeated */
    if (!needs_share)
        last_copy = memo;
    if (!relevant)
        return;

    count(bytes);
    bool show = ds_event_wanted(DS_EV_COPY);
    if (!show && !roundtrip)
        return; /* nothing names the copying module */
    const char *caller = ds_name(ds_module_caller_at(caller_addr));
    if (show) {
        ds_ev e;
        ds_ev_begin(&e, DS_EV_COPY);
        ds_ev_uint(&e, "bytes", bytes);
        ds_ev_str(&e, "direction", direction_names[direction]);
        side_fields(&e, "src", &s, src);
        side_fields(&e, "dst", &d, dst);
        ds_ev_str(&e, "by", caller);
        ds_ev_end(&e);
    }
    if (roundtrip) {
        atomic_fetch_add(&roundtrips, 1);
        ds_stats_roundtrip(matched.from.owner, d.alloc.owner);
        emit_roundtrip(&matched, &d, bytes, caller);
    }
}

/* Always inline, into the hooks too (link-time optimisation), as sync.c's
 * ds_sync_op_now. */
__attribute__((always_inline)) inline bool ds_copy_is_repeat(uintptr_t dst, uintptr_t src,
                                                             uint64_t bytes, int direction)
{
    return !bytes || repeated(&last_copy, dst, src, bytes, direction);
}

__attribute__((always_inline)) inline void ds_copy_repeat(uint64_t bytes)
{
    if (bytes && last_copy.relevant)
        count(bytes);
}

void ds_copy_record(uintptr_t dst, uintptr_t src, uint64_t bytes, int direction,
                    bool needs_share, const void *caller_addr)
{
    if (!needs_share && ds_copy_is_repeat(dst, src, bytes, direction))
        ds_copy_repeat(bytes);
    else if (bytes)
        record_general(dst, src, bytes, direction, needs_share, caller_addr);
}

bool ds_copies_filled_by_copy(uintptr_t data, uint64_t bytes, uintptr_t *source)
{
    if (__atomic_load_n(&nrecent, __ATOMIC_RELAXED) == 0)
        return false; /* no copy seen yet: no lock on every export */
    recent_copy newest = {0};
    ds_lock_take(DS_LOCK_COPIES);
    uint64_t oldest = nrecent > DS_RECENT_COPIES ? nrecent - DS_RECENT_COPIES : 0;
    for (uint64_t n = nrecent; n > oldest; n--) {
        const recent_copy *c = &recent[(n - 1) % DS_RECENT_COPIES];
        if (c->dst < data + bytes && data < c->dst_end) {
            newest = *c;
            break;
        }
    }
    ds_lock_give(DS_LOCK_COPIES);
    /* The newest copy into these bytes is the producer's, for its consumer,
     * when it copied another tracked buffer whole into them inside the
     * export call: __dlpack__(dl_device=cpu) and __dlpack__(copy=True) copy
     * so, on the thread and at the line of the interpreted program that
     * asked for the tensor (np.from_dlpack(x)).  A copy the program made
     * before, at another line (x.copy_(src), then from_dlpack(x)) is its
     * own, and so is one from the host onto a device (jax.device_put): no
     * producer's __dlpack__ moves host bytes onto a device for its consumer.
     * Without a line (no interpreter, or DLSHIM_PY=0) no call is known, and
     * no copy is the producer's. */
    bool found = newest.src_tracked && newest.direction != DS_COPY_H2D && newest.dst <= data &&
                 data + bytes <= newest.dst_end && newest.site && newest.tid == ds_tid() &&
                 newest.site == ds_context_site();
    if (found && source)
        *source = newest.src + (data - newest.dst);
    return found;
}

void ds_copies_totals(uint64_t *count, uint64_t *bytes, uint64_t *trips_out)
{
    *count = *bytes = 0;
    for (unsigned i = 0; i < DS_COUNT_CELLS; i++) {
        *count += atomic_load_explicit(&counts[i].transfers, memory_order_relaxed);
        *bytes += atomic_load_explicit(&counts[i].bytes, memory_order_relaxed);
    }
    *trips_out = atomic_load(&roundtrips);
}

void ds_copies_after_fork(void)
{
    for (unsigned i = 0; i < DS_COUNT_CELLS; i++) {
        atomic_store(&counts[i].transfers, 0);
        atomic_store(&counts[i].bytes, 0);
    }
    atomic_store(&roundtrips, 0); /* the child's thread keeps its cell */
}
