/*
 * tensor_release.c — the ledger's release (tensor.c says the whole): the
 * trampolines an export put in the tensor's deleter field, which record the
 * release and forward to the producer's deleter, and a holder that dies
 * with its tensor unconsumed.
 */
#include <errno.h>

#include "tensor_record.h"

typedef void (*deleter_fn)(void *self);

static void release(void *managed, bool versioned);
static void trampoline_legacy(DLManagedTensor *t) { release(t, false); }
static void trampoline_versioned(DLManagedTensorVersioned *t) { release(t, true); }

void *ds_tensor_trampoline(bool versioned)
{
    return versioned ? (void *)trampoline_versioned : (void *)trampoline_legacy;
}

/* The release this thread is forwarding, so that a decorated deleter calling
 * our trampoline again for the same tensor reaches the deleter it wrapped. */
typedef struct {
    uintptr_t tensor;
    deleter_fn chained;
} release_frame;
static DS_TLS release_frame releasing;

static void forward(void *m, deleter_fn orig, deleter_fn chained)
{
    release_frame outer = releasing;
    releasing = (release_frame){(uintptr_t)m, chained};
    orig(m);
    releasing = outer;
}

static _Atomic(ds_release_observer) observer;

void ds_tensor_set_release_observer(ds_release_observer fn)
{
    atomic_store_explicit(&observer, fn, memory_order_release);
}

/* Lock held: a consumer took the tensor and lets it go inside the call that
 * took it, before its import could be seen (ds_release_context.taker): the
 * import, made now, of a copy.  Provisional: counted once the consumer marks
 * the capsule taken (ds_tensor_taken_after_release), since a consumer that
 * fails in the middle of its import lets the tensor go the same way. */
static void import_at_release(ds_record *r, uint16_t taker)
{
    r->state = DS_IMPORTED;
    r->consumer = taker;
    r->copied = true;
    r->provisional = 1;
}

/* A second call of a released tensor's deleter: who released it first
 * (and where), and who releases it now. */
static bool report_double_release(void *m, const record_copy *c, const ds_release_context *now)
{
    char detail[DS_DETAIL_MAX + 3 * DS_NAME_MAX + DS_SITE_MAX], first[DS_NAME_MAX + 64];
    char site[DS_SITE_MAX + 16];
    unsigned long long ago = (ds_now_ns() - c->t_release) / 1000;
    switch (c->released_by) {
    case DS_BY_CONSUMER:
        ds_fmt(first, sizeof(first), "its consumer %s released it", ds_name(c->releaser));
        break;
    case DS_BY_TAKER:
        ds_fmt(first, sizeof(first),
               c->provisional ? "%s released it inside an import it never completed (the "
                                "capsule was not marked taken)"
                              : "%s released it after taking it from its capsule without "
                                "marking the capsule taken",
               ds_name(c->releaser));
        break;
    case DS_BY_PRODUCER:
        ds_fmt(first, sizeof(first), "the producer's own holder (its capsule) released it");
        break;
    default:
        ds_fmt(first, sizeof(first), "it was released");
    }
    ds_fmt(detail, sizeof(detail), "the deleter of tensor %p from %s was called again%s, %llu us "
           "after %s%s", m, ds_name(c->producer),
           now->by_producer ? " by the producer's capsule destructor" : "", ago, first,
           at_site(site, sizeof(site), "first released", c->release_site));
    share_fields f = {*c, true};
    return ds_violation_with(DS_VIO_DOUBLE_RELEASE, "tensor", (uintptr_t)m, detail,
                             write_share_fields, &f);
}

static void release(void *m, bool versioned)
{
    (void)versioned;
    if (releasing.tensor == (uintptr_t)m && releasing.chained) {
        deleter_fn next = releasing.chained;
        releasing.chained = NULL;
        next(m);
        return;
    }
    if (ds_holds(DS_LOCK_REGISTRY)) {
        /* Re-entered from a signal handler that interrupted our own
         * bookkeeping: the producer's deleter is behind the lock this thread
         * holds.  Leaking the tensor is the only safe choice. */
        ds_stats_untracked();
        return;
    }
    int saved = errno;
    ds_note_work();
    ds_release_context ctx = {0};
    ds_release_observer observe = atomic_load_explicit(&observer, memory_order_acquire);
    if (observe) /* before the lock: it may read the program's state */
        observe((uintptr_t)m, &ctx);
    /* Where the release happens, gathered where its event will be written
     * (the record keeps the site, for a second release to name). */
    ds_context context;
    const ds_context *where = gather(&context, DS_EV_RELEASE, ds_event_wanted(DS_EV_RELEASE));
    uint64_t hash = ds_reg_lock((uintptr_t)m);
    ds_record *r = ds_reg_find(hash, (uintptr_t)m);
    if (!r) {
        /* Trampolines are only installed with a record, and live records are
         * never evicted: this is a late second release of a tensor whose
         * record was evicted.  Its deleter is no longer known. */
        ds_reg_unlock(hash);
        char detail[DS_DETAIL_MAX];
        ds_fmt(detail, sizeof(detail),
               "the deleter of tensor %p was called again long after it ran (its record was "
               "evicted, so the call is not forwarded)", m);
        ds_violation(DS_VIO_DOUBLE_RELEASE, "tensor", (uintptr_t)m, detail);
        errno = saved;
        return;
    }
    deleter_fn orig = (deleter_fn)r->orig_deleter;
    if (r->state == DS_RELEASED) {
        record_copy c = copy_of(r);
        ds_reg_unlock(hash);
        bool prevent = report_double_release(m, &c, &ctx);
        errno = saved;
        if (!prevent && orig)
            orig(m);
        return;
    }
    bool taken = r->state == DS_EXPORTED && ctx.taker && ctx.taker != r->producer;
    bool taken_now = taken && ctx.taken_in_call;
    if (taken_now)
        import_at_release(r, ctx.taker);
    /* Let go inside the call that imported it: the consumer kept a copy. */
    bool copied_out = taken_now || (r->state == DS_IMPORTED && ctx.copy_on_import && !r->copied);
    if (copied_out && !taken_now)
        ds_stats_copied(ds_reg_shard(hash), r->producer, r->consumer, r->bytes);
    bool consumed = r->state == DS_IMPORTED;
    r->released_by = ctx.by_producer ? DS_BY_PRODUCER
                     : taken         ? DS_BY_TAKER
                     : consumed      ? DS_BY_CONSUMER
                                     : DS_BY_UNKNOWN;
    r->releaser = taken ? ctx.taker : consumed ? r->consumer : DS_NAME_UNKNOWN;
    r->release_site = site_of(where);
    deleter_fn chained = (deleter_fn)r->chained_deleter;
    r->state = DS_RELEASED;
    uint64_t at = r->t_release = release_stamp(hash); /* a time wherever an event is wanted */
    uintptr_t base = r->alloc_base;
    uint32_t generation = r->alloc_generation;
    bool show = ds_event_wanted(DS_EV_RELEASE),
         show_import = taken_now && ds_event_wanted(DS_EV_IMPORT);
    ds_import_fields took;
    ds_release_fields shown;
    if (show_import)
        took = import_fields(r, ctx.taker_api);
    if (show)
        shown = release_fields(r, consumed, copied_out);
    ds_reg_unlock(hash);
    ds_shares_removed(hash, (uintptr_t)m);
    ds_host_frees_share_ended();
    if (show_import)
        ds_emit_import(&took, at);
    if (show)
        ds_emit_release_with(&shown, at, where);
    /* The share ends before the producer's deleter runs: that deleter may
     * well free the buffer itself. */
    if (base)
        ds_alloc_share(base, generation, -1);
    errno = saved;
    if (orig)
        forward(m, orig, chained);
    ds_unloads_share_ended(); /* its deleter has run: the library may go */
}

void ds_tensor_taken_after_release(void *m, uint16_t taker, uint16_t api)
{
    uint64_t hash = ds_reg_lock((uintptr_t)m);
    ds_record *r = ds_reg_find(hash, (uintptr_t)m);
    if (!r || r->state != DS_RELEASED || r->released_by != DS_BY_TAKER || r->releaser != taker) {
        ds_reg_unlock(hash);
        return;
    }
    /* Taken in the call that let it go: its import was shown then, and is
     * counted now.  Let go in an earlier call: the import of a copy, shown
     * and counted now. */
    bool shown_before = r->provisional;
    r->provisional = 0;
    r->consumer = taker;
    r->copied = true;
    ds_stats_share(ds_reg_shard(hash), r->producer, taker, r->bytes, false);
    bool show = !shown_before && ds_event_wanted(DS_EV_IMPORT);
    ds_import_fields took;
    if (show)
        took = import_fields(r, api);
    ds_reg_unlock(hash);
    if (show)
        ds_emit_import(&took, ds_now_ns());
}

/* ---- a holder that dies with its tensor unconsumed ------------------------ */

void ds_tensor_drop_watch(void *m, ds_drop_watch *w)
{
    *w = (ds_drop_watch){.tensor = (uintptr_t)m};
    uint64_t hash = ds_reg_lock((uintptr_t)m);
    const ds_record *r = ds_reg_find(hash, (uintptr_t)m);
    if (r && r->state == DS_EXPORTED)
        w->data = r->data, w->end = r->data + r->bytes;
    ds_reg_unlock(hash);
    ds_host_frees_watch(w);
}

/* The holder died and the tensor was neither released nor freed: it leaks,
 * and stays outstanding (the summary names it). */
static void report_leak(void *m, const record_copy *c)
{
    char detail[DS_DETAIL_MAX + DS_NAME_MAX + DS_SITE_MAX], site[DS_SITE_MAX + 16];
    ds_fmt(detail, sizeof(detail),
           "the capsule holding tensor %p from %s died unconsumed and the tensor's deleter "
           "never ran%s: the tensor and the memory it holds leak",
           m, ds_name(c->producer),
           at_site(site, sizeof(site), "exported", c->export_site));
    share_fields f = {*c, false};
    ds_violation_with(DS_VIO_LEAK, "tensor", (uintptr_t)m, detail,
                      write_share_fields, &f);
}

void ds_tensor_dropped(void *m, ds_drop_watch *w, bool leaving)
{
    bool freed = ds_host_frees_unwatch(w);
    uint64_t hash = ds_reg_lock((uintptr_t)m);
    ds_record *r = ds_reg_find(hash, (uintptr_t)m);
    if (!r || r->state != DS_EXPORTED) { /* released through its deleter, or consumed */
        ds_reg_unlock(hash);
        return;
    }
    if (!freed) {
        /* Where frees are watched, none took the tensor: a leak, unless the
         * program is ending.  Where they are not, nothing is known: said
         * nothing of. */
        record_copy c = copy_of(r);
        ds_reg_unlock(hash);
        if (ds_host_frees_armed() && !leaving)
            report_leak(m, &c);
        return;
    }
    /* Freed by its producer's own holder, without the deleter: released. */
    r->state = DS_RELEASED;
    r->released_by = DS_BY_PRODUCER;
    uint64_t at = r->t_release = release_stamp(hash);
    uintptr_t base = r->alloc_base;
    uint32_t generation = r->alloc_generation;
    bool show = ds_event_wanted(DS_EV_RELEASE);
    ds_release_fields shown;
    if (show)
        shown = release_fields(r, false, false);
    ds_reg_unlock(hash);
    ds_shares_removed(hash, (uintptr_t)m);
    ds_host_frees_share_ended();
    if (base)
        ds_alloc_share(base, generation, -1);
    if (show)
        ds_emit_release(&shown, at);
}
