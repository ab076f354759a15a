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
 *
 * The model's parts are files of their own (sync_model.h lists them); this
 * one is an operation on a stream.
 */
#include "sync_model.h"

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

/* Whether a call names the legacy default stream (see stream_lookup). */
static bool names_legacy(int api, uintptr_t handle, bool ptsz)
{
    const ds_device_api *d = ds_device_api_at(api);
    if (d->per_thread_stream && handle == d->per_thread_stream)
        return false;
    return handle == 0 ? !ptsz : d->legacy_stream && handle == d->legacy_stream;
}

/* Slot s's lock held: an operation there (st: &ds_sync_streams[s], as a memo has
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
                                                 const ds_range *r, int n, uint16_t caller)
{
    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, ptsz, true);
    if (s >= 0) {
        bool own = stream_take(s);
        before_op(s);
        if (atomic_load_explicit(&ds_sync_npending, memory_order_relaxed))
            ds_handoffs_due(api, handle, s, &own, r, n, caller);
        tick_at(&ds_sync_streams[s], s, r, n);
        unsettles(&ds_sync_streams[s]);
        stream_give(s, own);
    }
    ds_lock_give(DS_LOCK_SYNC);
}

/* Only writes are ever checked.  An operation that writes nothing the shim
 * sees (a launch, a host function) and is the first use of no waiting
 * handoff (none waits, or ds_sync_may_be_due said so) changes nothing a
 * check reads: its tick orders no write, and what it would merge every
 * later reader of its stream's clock merges itself (an event record, a
 * host wait and a barrier merge first; the legacy stream has the host's
 * and its own).  The legacy stream's own operations are kept: their wait
 * for the blocking streams is a snapshot that the blocking streams' later
 * operations inherit from it.  (A handoff imported meanwhile raced with
 * the operation.) */
__attribute__((always_inline)) static inline bool changes_nothing(int api, uintptr_t handle,
                                                                  bool ptsz, int n)
{
    return n <= 0 && !names_legacy(api, handle, ptsz);
}

/* The rest of such operations, on a settled stream: its shard alone, so
 * that threads on different streams share no lock and write no common
 * line here.  False: not settled, nothing done. */
__attribute__((always_inline)) static inline bool op_on_settled(int api, uintptr_t handle,
                                                                bool ptsz, const ds_range *r,
                                                                int n)
{
    int s = settled(api, handle, ptsz);
    if (s < 0)
        return false;
    tick_at(&ds_sync_streams[s], s, r, n);
    ds_lock_give_shard(DS_LOCK_STREAMS, (unsigned)s);
    return true;
}

/* Always inline, as ds_sync_event_recorded_now. */
__attribute__((always_inline)) inline bool ds_sync_op_now(int api, uintptr_t handle, bool ptsz,
                                                          const ds_range *r, int n)
{
    if (!ds_sync_enabled())
        return true;
    if (n <= 0 && !atomic_load_explicit(&ds_sync_npending, memory_order_relaxed) &&
        changes_nothing(api, handle, ptsz, n))
        return true;
    if (atomic_load_explicit(&ds_sync_npending, memory_order_relaxed))
        return false;
    return op_on_settled(api, handle, ptsz, r, n);
}

void ds_sync_op(int api, uintptr_t handle, bool ptsz, const ds_range *r, int n,
                const void *caller_addr)
{
    if (ds_sync_op_now(api, handle, ptsz, r, n))
        return;
    uint16_t caller = NO_CALLER;
    if (atomic_load_explicit(&ds_sync_npending, memory_order_relaxed)) {
        /* Handoffs wait: one that is the first use of none of them (asked
         * without SYNC) goes as when none waits, so that threads working on
         * their own streams do not all take SYNC while a handoff elsewhere
         * waits for its consumer. */
        if (n < 0)
            caller = ds_module_id_at(caller_addr);
        if (!ds_sync_may_be_due(r, n, caller) &&
            (changes_nothing(api, handle, ptsz, n) || op_on_settled(api, handle, ptsz, r, n)))
            return;
    }
    op_general(api, handle, ptsz, r, n, caller);
}
