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
 * unsynchronized.  Missing a write (an untracked kernel, an evicted ring
 * entry) can only hide a race, never invent one.
 *
 * One mutex; barriers (calls into the runtime) are made outside it.
 */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

#define DS_CLOCKS 64            /* slot 0: the host; streams beyond 63 are not modelled */
#define DS_EVENTS_MAX 4096
#define DS_WRITES 4096          /* ring of recent writes (a power of two) */
#define DS_PENDING 128          /* handoffs waiting for the consumer's first use */

typedef uint32_t vclock[DS_CLOCKS];

enum { KIND_LEGACY, KIND_BLOCKING, KIND_NON_BLOCKING };

typedef struct {
    bool used;
    int api;
    uintptr_t handle;
    long tid;        /* per-thread default streams: the owning thread */
    int kind;
    vclock vc;
} stream;

typedef struct {
    bool used, recorded;
    int api;
    uintptr_t handle;
    vclock vc;
} event;

typedef struct {
    uintptr_t start, end;
    int stream;
    uint32_t tick;
} write_rec;

typedef struct {
    bool used;
    uintptr_t tensor, start, end;
    int stream;      /* the producer's last write */
    uint32_t tick;
    char producer[DS_NAME_MAX], consumer[DS_NAME_MAX];
} pending;

static stream streams[DS_CLOCKS]; /* [0]: the host */
static event *events;             /* mmap'd, DS_EVENTS_MAX */
static write_rec writes[DS_WRITES];
static uint64_t nwrites;
static pending pend[DS_PENDING];
static uint64_t untracked_streams, barriers_inserted;

#define HOST 0

bool ds_sync_enabled(void)
{
    return ds_cfg.sync != DS_SYNC_OFF;
}

static void merge(uint32_t *into, const uint32_t *from)
{
    for (int i = 0; i < DS_CLOCKS; i++)
        if (from[i] > into[i])
            into[i] = from[i];
}

/* ---- streams and events: lock held ---------------------------------------- */

/* The stream a call names: handle 0 (and the API's own legacy handle) the
 * legacy default stream, the API's per-thread handle (or 0 in a _ptsz call)
 * this thread's default stream, kept under that handle with the thread's id.
 * -1 when the table is full. */
static int stream_index(int api, uintptr_t handle, bool per_thread_default, bool create)
{
    const ds_device_api *d = ds_device_api_at(api);
    long tid = 0;
    int kind = KIND_BLOCKING;
    if ((d->per_thread_stream && handle == d->per_thread_stream) ||
        (handle == 0 && per_thread_default)) {
        handle = d->per_thread_stream;
        tid = ds_tid();
    } else if (handle == 0 || (d->legacy_stream && handle == d->legacy_stream)) {
        handle = 0;
        kind = KIND_LEGACY;
    }
    int free_slot = -1;
    for (int i = 1; i < DS_CLOCKS; i++) {
        if (streams[i].used && streams[i].api == api && streams[i].handle == handle &&
            streams[i].tid == tid)
            return i;
        if (!streams[i].used && free_slot < 0)
            free_slot = i;
    }
    if (!create || free_slot < 0) {
        if (create)
            untracked_streams++;
        return -1;
    }
    stream *s = &streams[free_slot];
    memset(s, 0, sizeof(*s));
    *s = (stream){.used = true, .api = api, .handle = handle, .tid = tid, .kind = kind};
    return free_slot;
}

static event *event_of(int api, uintptr_t handle, bool create)
{
    if (!events) {
        void *p = mmap(NULL, DS_EVENTS_MAX * sizeof(event), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        events = p;
    }
    size_t start = (handle >> 4) % DS_EVENTS_MAX;
    event *free_slot = NULL;
    for (size_t k = 0; k < DS_EVENTS_MAX; k++) {
        event *e = &events[(start + k) % DS_EVENTS_MAX];
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
    free_slot->api = api;
    free_slot->handle = handle;
    return free_slot;
}

/* Program order and CUDA's implicit ordering, before an operation on s. */
static void before_op(int s)
{
    merge(streams[s].vc, streams[HOST].vc);
    if (streams[s].kind == KIND_LEGACY) {
        for (int i = 1; i < DS_CLOCKS; i++)
            if (streams[i].used && streams[i].api == streams[s].api &&
                streams[i].kind == KIND_BLOCKING)
                merge(streams[s].vc, streams[i].vc);
    } else if (streams[s].kind == KIND_BLOCKING) {
        for (int i = 1; i < DS_CLOCKS; i++)
            if (streams[i].used && streams[i].api == streams[s].api &&
                streams[i].kind == KIND_LEGACY)
                merge(streams[s].vc, streams[i].vc);
    }
}

void ds_sync_stream_created(int api, uintptr_t handle, bool non_blocking)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, false, true);
    if (s >= 0) {
        memset(streams[s].vc, 0, sizeof(vclock));
        streams[s].kind = non_blocking ? KIND_NON_BLOCKING : KIND_BLOCKING;
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
    }
    ds_lock_give(DS_LOCK_SYNC);
}

void ds_sync_event_recorded(int api, uintptr_t ev, uintptr_t handle, bool ptsz)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, ptsz, true);
    event *e = event_of(api, ev, true);
    if (s >= 0 && e) {
        before_op(s);
        memcpy(e->vc, streams[s].vc, sizeof(vclock));
        e->recorded = true;
    }
    ds_lock_give(DS_LOCK_SYNC);
}

void ds_sync_event_destroyed(int api, uintptr_t ev)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_SYNC);
    event *e = event_of(api, ev, false);
    if (e)
        e->used = false; /* a record later re-creates it; probes stop at holes: rehash below */
    if (e && events) {
        /* Backward-shift the cluster after the hole so probes stay correct. */
        size_t hole = (size_t)(e - events);
        for (size_t k = (hole + 1) % DS_EVENTS_MAX; events[k].used; k = (k + 1) % DS_EVENTS_MAX) {
            event moved = events[k];
            events[k].used = false;
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
        merge(streams[s].vc, streams[HOST].vc);
        if (e && e->recorded)
            merge(streams[s].vc, e->vc);
    }
    ds_lock_give(DS_LOCK_SYNC);
}

void ds_sync_host_waits_stream(int api, uintptr_t handle, bool ptsz)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, ptsz, false);
    if (s >= 0) {
        before_op(s); /* synchronizing the legacy stream also waits for blocking ones */
        merge(streams[HOST].vc, streams[s].vc);
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
        merge(streams[HOST].vc, e->vc);
    ds_lock_give(DS_LOCK_SYNC);
}

void ds_sync_host_waits_all(int api)
{
    if (!ds_sync_enabled())
        return;
    ds_lock_take(DS_LOCK_SYNC);
    for (int i = 1; i < DS_CLOCKS; i++)
        if (streams[i].used && streams[i].api == api)
            merge(streams[HOST].vc, streams[i].vc);
    ds_lock_give(DS_LOCK_SYNC);
}

/* ---- handoffs --------------------------------------------------------------- */

void ds_sync_import(uintptr_t tensor, uintptr_t data, uint64_t bytes, const char *producer,
                    const char *consumer)
{
    if (!ds_sync_enabled() || !bytes)
        return;
    ds_lock_take(DS_LOCK_SYNC);
    /* The newest write overlapping the tensor's bytes. */
    const write_rec *last = NULL;
    uint64_t oldest = nwrites > DS_WRITES ? nwrites - DS_WRITES : 0;
    for (uint64_t n = nwrites; n > oldest && !last; n--) {
        const write_rec *w = &writes[(n - 1) % DS_WRITES];
        if (w->start < data + bytes && data < w->end)
            last = w;
    }
    if (last) {
        pending *p = NULL;
        for (int i = 0; i < DS_PENDING && !p; i++)
            if (!pend[i].used || pend[i].tensor == tensor)
                p = &pend[i];
        if (p) {
            *p = (pending){.used = true, .tensor = tensor, .start = data, .end = data + bytes,
                           .stream = last->stream, .tick = last->tick};
            ds_fmt(p->producer, sizeof(p->producer), "%s", producer);
            ds_fmt(p->consumer, sizeof(p->consumer), "%s", consumer);
        }
    }
    ds_lock_give(DS_LOCK_SYNC);
}

static void stream_name(char *out, size_t cap, const stream *s)
{
    if (s->kind == KIND_LEGACY)
        ds_fmt(out, cap, "legacy default stream");
    else if (s->tid)
        ds_fmt(out, cap, "per-thread default stream of thread %ld", s->tid);
    else
        ds_fmt(out, cap, "stream 0x%lx", (unsigned long)s->handle);
}

typedef struct {
    pending handoff;
    int producer_stream, api;
    uintptr_t producer_handle, consumer_handle;
    long producer_tid;
    char producer_name[64], consumer_name[64];
} race;

static void race_fields(ds_ev *e, void *arg)
{
    const race *r = arg;
    ds_ev_hex(e, "data", r->handoff.start);
    ds_ev_str(e, "producer", r->handoff.producer);
    ds_ev_str(e, "consumer", r->handoff.consumer);
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

/* Lock held.  Finds the pending handoffs this operation is the consumer's
 * first use of; clears them; returns how many races it copied out. */
static int take_due(int s, const ds_range *r, int n, const char *caller, race *out, int max)
{
    int found = 0;
    for (int i = 0; i < DS_PENDING; i++) {
        pending *p = &pend[i];
        if (!p->used)
            continue;
        bool touches = false;
        if (n < 0) { /* buffers unknown: the consumer module's first operation */
            touches = caller && !strcmp(caller, p->consumer);
        } else {
            for (int k = 0; k < n && !touches; k++)
                touches = r[k].start < p->end && p->start < r[k].start + r[k].len;
        }
        if (!touches)
            continue;
        p->used = false;
        if (streams[s].vc[p->stream] >= p->tick || found == max)
            continue; /* covered: the producer's write happens before */
        race *x = &out[found++];
        x->handoff = *p;
        x->producer_stream = p->stream;
        x->producer_handle = streams[p->stream].handle;
        x->producer_tid = streams[p->stream].tid;
        x->consumer_handle = streams[s].handle;
        x->api = streams[p->stream].api;
        stream_name(x->producer_name, sizeof(x->producer_name), &streams[p->stream]);
        stream_name(x->consumer_name, sizeof(x->consumer_name), &streams[s]);
    }
    return found;
}

void ds_sync_op(int api, uintptr_t handle, bool ptsz, const ds_range *r, int n,
                const void *caller_addr)
{
    if (!ds_sync_enabled())
        return;
    char caller[DS_NAME_MAX] = "";
    race races[4];
    ds_lock_take(DS_LOCK_SYNC);
    bool any_pending = false;
    for (int i = 0; i < DS_PENDING && !any_pending; i++)
        any_pending = pend[i].used;
    ds_lock_give(DS_LOCK_SYNC);
    if (any_pending && n < 0)
        ds_module_name_at(caller_addr, caller, sizeof(caller));

    ds_lock_take(DS_LOCK_SYNC);
    int s = stream_index(api, handle, ptsz, true);
    if (s < 0) {
        ds_lock_give(DS_LOCK_SYNC);
        return;
    }
    before_op(s);
    int nraces = any_pending ? take_due(s, r, n, caller, races, (int)DS_ARRAY_LEN(races)) : 0;
    ds_lock_give(DS_LOCK_SYNC);

    for (int i = 0; i < nraces; i++) {
        race *x = &races[i];
        bool fixed = false;
        /* A barrier records an event on the producer's stream: another
         * thread's per-thread default stream cannot be named from here. */
        bool (*barrier)(uintptr_t, uintptr_t) = ds_device_api_at(api)->barrier;
        if (ds_cfg.sync == DS_SYNC_ENFORCE && x->api == api && barrier &&
            (!x->producer_tid || x->producer_tid == ds_tid()) &&
            barrier(x->producer_handle, handle)) {
            fixed = true;
            ds_lock_take(DS_LOCK_SYNC);
            merge(streams[s].vc, streams[x->producer_stream].vc);
            barriers_inserted++;
            ds_note_work();
            ds_lock_give(DS_LOCK_SYNC);
            emit_barrier(x);
        }
        if (!fixed) {
            char detail[DS_DETAIL_MAX + 4 * DS_NAME_MAX];
            ds_fmt(detail, sizeof(detail),
                   "%s used tensor %p on the %s before %s's write to it on the %s was "
                   "synchronized (no event record and stream wait, no synchronize)",
                   x->handoff.consumer, (void *)x->handoff.tensor, x->consumer_name,
                   x->handoff.producer, x->producer_name);
            ds_violation_with(DS_VIO_UNSYNCHRONIZED_HANDOFF, "tensor", x->handoff.tensor, detail,
                              race_fields, x);
        }
    }

    /* Tick, and remember what this operation writes. */
    ds_lock_take(DS_LOCK_SYNC);
    uint32_t tick = ++streams[s].vc[s];
    for (int k = 0; k < n; k++)
        if (r[k].write && r[k].len) {
            write_rec *w = &writes[nwrites++ % DS_WRITES];
            *w = (write_rec){r[k].start, r[k].start + r[k].len, s, tick};
        }
    ds_lock_give(DS_LOCK_SYNC);
}

uint64_t ds_sync_barriers(void)
{
    return barriers_inserted;
}
