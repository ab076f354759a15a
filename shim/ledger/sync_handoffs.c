/*
 * sync_handoffs.c — the stream model's handoffs (see sync.c): an imported
 * tensor's last write waits for the consumer's first use, which is checked
 * (and under enforce fixed by a barrier) when it comes; a host read is
 * checked at once; races are reported.
 */
#include "sync_model.h"

pending ds_sync_pend[DS_PENDING];
atomic_int ds_sync_npending;
_Atomic uint32_t ds_sync_pend_seq;
static _Atomic uint64_t barriers_inserted;

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

/* The newest write overlapping the addresses [data, data + bytes) (none
 * where data is 0), or `alias` (NULL: none), in the order the host queued
 * them: each stream's newest in its ring (read under its shard, one at a
 * time, SYNC held or not), the last queued of those.  False: none. */
static bool newest_write(uintptr_t data, uint64_t bytes, const ds_range *alias,
                         last_write *out)
{
    write_rec newest = {0};
    bool found = false;
    for (int s = 1, w = width_now(); s < w; s++) {
        const stream *r = &ds_sync_streams[s];
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
    /* The streams' writes are read under their own shards, before SYNC:
     * an import of bytes no stream wrote (a host tensor's, or a device
     * tensor's not written since the host last waited) changes nothing
     * here, and takes no lock that every thread's imports would share. */
    last_write last = {0, 0};
    if (!newest_write(data, bytes, alias, &last))
        return;
    ds_lock_take(DS_LOCK_SYNC);
    int n = atomic_load_explicit(&ds_sync_npending, memory_order_relaxed), i = 0;
    while (i < n && ds_sync_pend[i].tensor != tensor) /* imported again: replaced */
        i++;
    pend_change_begin();
    if (covered_by_host(last.stream, last.tick)) {
        if (i < n) /* what waited before is no longer the last write */
            pend_set(i, &ds_sync_pend[--n]);
    } else if (i < DS_PENDING) {
        /* A tensor that carries a handle is used where its memory is. */
        ds_range at = data ? (ds_range){.start = data, .len = bytes} : *alias;
        pend_set(i, &(pending){.tensor = tensor, .start = at.start, .end = at.start + at.len,
                               .space = at.space, .stream = last.stream, .tick = last.tick,
                               .producer = producer, .consumer = consumer});
        n += i == n;
    }
    atomic_store_explicit(&ds_sync_npending, n, memory_order_release);
    pend_change_end();
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
    x->producer_handle = ds_sync_streams[p->stream].handle;
    x->producer_tid = ds_sync_streams[p->stream].tid;
    x->api = ds_sync_streams[p->stream].api;
    stream_name(x->producer_name, sizeof(x->producer_name), &ds_sync_streams[p->stream]);
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
    int found = 0, left = atomic_load_explicit(&ds_sync_npending, memory_order_relaxed);
    bool changing = false;
    for (int i = 0; i < left;) {
        pending p = ds_sync_pend[i];
        if (!touches(&p, r, n, caller)) {
            i++;
            continue;
        }
        if (!changing)
            pend_change_begin();
        changing = true;
        pend_set(i, &ds_sync_pend[--left]);
        if (ds_sync_streams[s].vc[p.stream] >= p.tick || found == max)
            continue; /* covered: the producer's write happens before */
        race *x = &out[found++];
        race_of(x, &p);
        stream_name(x->consumer_name, sizeof(x->consumer_name), &ds_sync_streams[s]);
    }
    if (changing) {
        atomic_store_explicit(&ds_sync_npending, left, memory_order_release);
        pend_change_end();
    }
    return found;
}

bool ds_sync_may_be_due(const ds_range *r, int n, uint16_t caller)
{
    uint32_t seq = atomic_load_explicit(&ds_sync_pend_seq, memory_order_acquire);
    if (seq & 1)
        return true; /* changing now: the general way decides */
    int count = atomic_load_explicit(&ds_sync_npending, memory_order_acquire);
    for (int i = 0; i < count && i < DS_PENDING; i++) {
        const pending *q = &ds_sync_pend[i];
        pending key = {.start = __atomic_load_n(&q->start, __ATOMIC_ACQUIRE),
                       .end = __atomic_load_n(&q->end, __ATOMIC_ACQUIRE),
                       .space = __atomic_load_n(&q->space, __ATOMIC_ACQUIRE),
                       .consumer = __atomic_load_n(&q->consumer, __ATOMIC_ACQUIRE)};
        if (touches(&key, r, n, caller))
            return true;
    }
    return atomic_load_explicit(&ds_sync_pend_seq, memory_order_relaxed) != seq;
}

void ds_sync_host_reads(uintptr_t tensor, uintptr_t data, uint64_t bytes, uint16_t producer,
                        uint16_t consumer)
{
    if (!ds_sync_enabled() || !bytes)
        return;
    race x;
    /* As an import: the writes are read before SYNC, and a read of bytes
     * no stream wrote takes no lock that every thread's reads would share. */
    last_write last = {0, 0};
    if (!newest_write(data, bytes, NULL, &last))
        return;
    ds_lock_take(DS_LOCK_SYNC);
    bool racy = !covered_by_host(last.stream, last.tick);
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

__attribute__((noinline)) void ds_handoffs_due(int api, uintptr_t handle, int s, bool *own,
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
            memcpy(vc, ds_sync_streams[p].vc, sizeof(vc));
            stream_give(p, own_p);
            bool own_s = stream_take(s);
            merge(&ds_sync_streams[s], vc);
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

uint64_t ds_sync_barriers(void)
{
    return atomic_load_explicit(&barriers_inserted, memory_order_relaxed);
}
