/*
 * timelines.c — timeline semaphores in the stream model: a clock per value
 * signalled, whichever API signals or waits.
 *
 * A binary semaphore is an event of the model: its signal a record on a
 * stream, its wait a stream wait.  A timeline semaphore counts: each signal
 * of a value on a stream is an event of its own (its key the address of its
 * slot here, which no API's handle can be, under the semaphore's owner's
 * API), and a wait for value V (a stream's, or the host's) waits for the
 * least signal of a value >= V and every signal below it: a signal's value
 * must exceed the counter when it runs, so the counter passes the values
 * in order, and got to V by that signal.
 *
 * A semaphore is known by its owner's API and handle: a Vulkan timeline
 * semaphore (hooks/vulkan_queues.c), whose signals and waits a CUDA or HIP
 * import of it shares (ds_extsem_source says which semaphore an import
 * stands for), or a CUDA import of a timeline the shim never saw exported,
 * under the importer's API and handle.  So a queue's signal of 5 orders a
 * CUDA stream's wait for 5, and a CUDA stream's signal of 7 a submission's
 * wait for 7.
 *
 * Signals the host has waited for are forgotten (every later operation
 * merges the host's clock), and so are those of a stream the host waited
 * idle.  A full table of signals overwrites an old one (a host wait for
 * that one alone then orders nothing: 1,024 signals the host never waited
 * for).
 *
 * A stream may wait for a value no signal submitted yet reaches (wait-
 * before-signal: the counter gets there from a submission made later, on
 * another queue or by another API).  Such a wait is kept pending, and the
 * first signal that reaches its value merges into the waiting stream then,
 * with every signal up to the value: what the stream does from then on is
 * ordered after the writes.  The operations the stream was given between
 * its wait and that signal's submission are not (their clocks are taken
 * already), so a handoff they consume may still be reported; a table of
 * pending waits that is full forgets its oldest (a report that should not
 * be, never a race hidden).  Left out: a host's signal (vkSignalSemaphore:
 * it orders the host before the stream, which every operation already
 * merges; a wait pending on it stays pending).
 */
#include <stdatomic.h>

#include "ledger/ledger.h"

#define DS_TIMELINES 1024u /* timeline semaphores known (a power of two) */
#define DS_SIGNALS 1024u   /* signals not yet waited for by the host */
#define DS_PENDING 256u    /* streams' waits for values not yet signalled */

typedef struct {
    uintptr_t handle; /* 0: free; ~0: deleted */
    int api;
    uint64_t highest; /* the initial value, then the highest value signalled */
    uint64_t passed;  /* the initial value, then the highest the host saw reached */
} timeline;

typedef struct {
    uintptr_t semaphore; /* 0: free */
    uint64_t value;
    uintptr_t stream; /* where it was signalled */
    int owner;        /* the semaphore's API */
    int api;          /* the stream's */
} timeline_signal;

static timeline timelines[DS_TIMELINES];
static timeline_signal signals[DS_SIGNALS];
static unsigned next_signal; /* where a full table overwrites (the oldest, roughly) */

typedef struct {
    uintptr_t semaphore; /* 0: free */
    uint64_t value;
    uintptr_t stream; /* the waiting one */
    int owner;        /* the semaphore's API */
    int api;          /* the stream's */
    bool ptsz;
} pending_wait;
static pending_wait pending[DS_PENDING];
static unsigned next_pending;
/* Whether a timeline was ever made: until then every semaphore of a CUDA
 * or HIP program is found binary without the lock. */
static atomic_bool any_timeline;

static uintptr_t signal_key(const timeline_signal *t)
{
    return (uintptr_t)t;
}

/* Lock held.  The slot of a timeline semaphore, or (insert) a free one. */
static timeline *timeline_slot(int api, uintptr_t handle, bool insert)
{
    if (!handle || handle == ~(uintptr_t)0)
        return NULL;
    uint64_t h = ((uint64_t)handle * 0x9e3779b97f4a7c15ull) >> 54;
    timeline *hole = NULL;
    for (unsigned i = 0; i < DS_TIMELINES; i++) {
        timeline *t = &timelines[(h + i) & (DS_TIMELINES - 1)];
        if (t->handle == handle && t->api == api)
            return t;
        if (t->handle == ~(uintptr_t)0 && !hole)
            hole = t;
        if (!t->handle)
            return insert ? (hole ? hole : t) : NULL;
    }
    return insert ? hole : NULL;
}

void ds_timeline_created(int api, uintptr_t semaphore, uint64_t initial)
{
    ds_lock_take(DS_LOCK_TIMELINES);
    timeline *t = timeline_slot(api, semaphore, true);
    if (t) {
        *t = (timeline){semaphore, api, initial, initial};
        atomic_store_explicit(&any_timeline, true, memory_order_relaxed);
    }
    ds_lock_give(DS_LOCK_TIMELINES);
}

bool ds_timeline_is(int api, uintptr_t semaphore)
{
    /* Relaxed: a semaphore made on another thread reaches this one through
     * the program's own synchronization, which the lock then completes. */
    if (!atomic_load_explicit(&any_timeline, memory_order_relaxed))
        return false;
    ds_lock_take(DS_LOCK_TIMELINES);
    bool yes = timeline_slot(api, semaphore, false) != NULL;
    ds_lock_give(DS_LOCK_TIMELINES);
    return yes;
}

/* Lock held.  A signal's slot given back, and its event. */
static void signal_forget(timeline_signal *t)
{
    ds_sync_event_destroyed(t->owner, signal_key(t));
    t->semaphore = 0;
}

void ds_timeline_destroyed(int api, uintptr_t semaphore)
{
    ds_lock_take(DS_LOCK_TIMELINES);
    timeline *slot = timeline_slot(api, semaphore, false);
    if (slot) {
        slot->handle = ~(uintptr_t)0;
        for (unsigned i = 0; i < DS_SIGNALS; i++)
            if (signals[i].semaphore == semaphore && signals[i].owner == api)
                signal_forget(&signals[i]);
        for (unsigned i = 0; i < DS_PENDING; i++)
            if (pending[i].semaphore == semaphore && pending[i].owner == api)
                pending[i].semaphore = 0;
    }
    ds_lock_give(DS_LOCK_TIMELINES);
}

/* Lock held.  Whether a signal is one of the semaphore's up to `value`. */
static bool reached(const timeline_signal *t, int owner, uintptr_t semaphore, uint64_t value)
{
    return t->semaphore && t->semaphore == semaphore && t->owner == owner && t->value <= value;
}

/* Lock held.  The value a wait for `value` has seen signalled: the least
 * signal of at least `value` (the counter passes each value once, in
 * order, so it got to `value` by that signal), or `value` where none
 * reaches it yet (*none set) or the host saw the counter there already
 * (its signals forgotten, and merged into every operation since). */
static uint64_t met_by(int owner, uintptr_t semaphore, uint64_t value, bool *none)
{
    const timeline *known = timeline_slot(owner, semaphore, false);
    *none = !known || value > known->passed;
    if (!*none)
        return value;
    uint64_t least = UINT64_MAX;
    for (unsigned i = 0; i < DS_SIGNALS; i++) {
        const timeline_signal *t = &signals[i];
        if (t->semaphore == semaphore && t->owner == owner && t->value >= value &&
            t->value <= least) {
            least = t->value;
            *none = false;
        }
    }
    return *none ? value : least;
}

/* Lock held.  `api`'s stream waits for every signal of the semaphore up to
 * the one that meets `value`; true where none does yet. */
static bool stream_waits(int owner, uintptr_t semaphore, uint64_t value, int api,
                         uintptr_t stream, bool ptsz)
{
    bool none;
    uint64_t upto = met_by(owner, semaphore, value, &none);
    for (unsigned i = 0; i < DS_SIGNALS; i++)
        if (reached(&signals[i], owner, semaphore, upto))
            ds_sync_shared_waits(api, stream, ptsz, owner, signal_key(&signals[i]));
    return none;
}

/* Lock held.  The waits pending on the semaphore that `value` reaches:
 * done now (the signal of `value` is recorded). */
static void pending_reached(int owner, uintptr_t semaphore, uint64_t value)
{
    for (unsigned i = 0; i < DS_PENDING; i++) {
        pending_wait *w = &pending[i];
        if (w->semaphore != semaphore || w->owner != owner || w->value > value)
            continue;
        stream_waits(owner, semaphore, w->value, w->api, w->stream, w->ptsz);
        w->semaphore = 0;
    }
}

/* Lock held.  A stream's wait for a value nothing signalled yet reaches. */
static void pending_add(int owner, uintptr_t semaphore, uint64_t value, int api,
                        uintptr_t stream, bool ptsz)
{
    pending_wait *w = NULL;
    for (unsigned i = 0; i < DS_PENDING && !w; i++)
        if (!pending[(next_pending + i) % DS_PENDING].semaphore)
            w = &pending[(next_pending + i) % DS_PENDING];
    if (!w)
        w = &pending[next_pending % DS_PENDING];
    next_pending = (unsigned)(w - pending + 1) % DS_PENDING;
    *w = (pending_wait){semaphore, value, stream, owner, api, ptsz};
}

void ds_timeline_signalled(int owner, uintptr_t semaphore, uint64_t value, int api,
                           uintptr_t stream, bool ptsz)
{
    ds_lock_take(DS_LOCK_TIMELINES);
    timeline_signal *t = NULL;
    for (unsigned i = 0; i < DS_SIGNALS && !t; i++)
        if (!signals[(next_signal + i) % DS_SIGNALS].semaphore)
            t = &signals[(next_signal + i) % DS_SIGNALS];
    if (!t) {
        t = &signals[next_signal % DS_SIGNALS];
        signal_forget(t);
    }
    next_signal = (unsigned)(t - signals + 1) % DS_SIGNALS;
    *t = (timeline_signal){semaphore, value, stream, owner, api};
    ds_sync_shared_recorded(owner, signal_key(t), api, stream, ptsz);
    timeline *known = timeline_slot(owner, semaphore, false);
    if (known && value > known->highest)
        known->highest = value;
    pending_reached(owner, semaphore, value);
    ds_lock_give(DS_LOCK_TIMELINES);
}

void ds_timeline_waited(int owner, uintptr_t semaphore, uint64_t value, int api,
                        uintptr_t stream, bool ptsz)
{
    ds_lock_take(DS_LOCK_TIMELINES);
    const timeline *known = timeline_slot(owner, semaphore, false);
    if (stream_waits(owner, semaphore, value, api, stream, ptsz) && known &&
        value > known->highest)
        pending_add(owner, semaphore, value, api, stream, ptsz);
    ds_lock_give(DS_LOCK_TIMELINES);
}

/* Lock held.  The host knows the counter got to `value`. */
static void host_saw(int owner, uintptr_t semaphore, uint64_t value)
{
    timeline *known = timeline_slot(owner, semaphore, false);
    if (known && value > known->passed)
        known->passed = value;
}

void ds_timeline_host_waited(int owner, uintptr_t semaphore, uint64_t value)
{
    ds_lock_take(DS_LOCK_TIMELINES);
    bool none;
    uint64_t upto = met_by(owner, semaphore, value, &none);
    host_saw(owner, semaphore, upto);
    for (unsigned i = 0; i < DS_SIGNALS; i++)
        if (reached(&signals[i], owner, semaphore, upto)) {
            ds_sync_host_waits_event(owner, signal_key(&signals[i]));
            signal_forget(&signals[i]);
        }
    ds_lock_give(DS_LOCK_TIMELINES);
}

void ds_timeline_stream_idle(int api, uintptr_t stream)
{
    ds_lock_take(DS_LOCK_TIMELINES);
    for (unsigned i = 0; i < DS_SIGNALS; i++)
        if (signals[i].semaphore && signals[i].api == api &&
            (!stream || signals[i].stream == stream)) {
            host_saw(signals[i].owner, signals[i].semaphore, signals[i].value);
            signal_forget(&signals[i]);
        }
    /* Its waits were met (it went idle past them): by signals of a kind
     * not followed, or the host's. */
    for (unsigned i = 0; i < DS_PENDING; i++)
        if (pending[i].semaphore && pending[i].api == api &&
            (!stream || pending[i].stream == stream))
            pending[i].semaphore = 0;
    ds_lock_give(DS_LOCK_TIMELINES);
}
