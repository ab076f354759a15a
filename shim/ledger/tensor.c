/*
 * tensor.c — the DLPack ownership ledger: export → import → release.
 *
 * Export records the tensor and swaps its deleter for a trampoline (one for
 * each layout) that records the release and forwards to the producer's
 * deleter (tensor_release.c); the import holds the struct the consumer
 * finds to the one exported (tensor_import.c).  Every hook family that sees
 * DLPack tensors (annotation API, Python capsules, entry points) feeds
 * these functions.  This file: the export, and the fields the three share.
 *
 * Rules kept throughout: nothing from the program is read except through
 * ds_safe_read; the registry lock is never held while logging, reporting or
 * calling a deleter; a released tensor's memory is never read except its
 * deleter field (see the import after release, tensor_import.c).
 */
#include <string.h>

#include "tensor_record.h"

/* ---- events ------------------------------------------------------------- */

/* This thread's last export's kind, named ("cuda:0", "float32"): a program
 * exports the same kind of tensor over and over, and naming it was a tenth
 * of the event.  Copied out whole, lengths cut to the slot: a signal
 * handler that exports may rewrite it meanwhile. */
static DS_TLS struct {
    bool valid;
    DLDevice device;
    DLDataType dtype;
    ds_word device_name, dtype_name;
} last_kind;

static void name_the_kind(const DLTensor *t, ds_word *device, ds_word *dtype)
{
    if (!(last_kind.valid && last_kind.device.device_type == t->device.device_type &&
          last_kind.device.device_id == t->device.device_id &&
          last_kind.dtype.code == t->dtype.code &&
          last_kind.dtype.bits == t->dtype.bits && last_kind.dtype.lanes == t->dtype.lanes)) {
        ds_word *d = &last_kind.device_name, *k = &last_kind.dtype_name;
        ds_device_name(d->slot, sizeof(d->slot), t->device);
        ds_dtype_name(k->slot, sizeof(k->slot), t->dtype);
        d->len = (uint8_t)strnlen(d->slot, sizeof(d->slot) - 1);
        k->len = (uint8_t)strnlen(k->slot, sizeof(k->slot) - 1);
        last_kind.device = t->device;
        last_kind.dtype = t->dtype;
        last_kind.valid = true;
    }
    *device = last_kind.device_name;
    *dtype = last_kind.dtype_name;
}

/* Called when the event is wanted; `now`: the export's time, `context`
 * what it says of where (gathered by the caller, which keeps its site). */
static void emit_export(void *m, const ds_tensor_view *v, const char *name, uint16_t id,
                        uint16_t api, const ds_alloc_info *alloc, uintptr_t copied_from,
                        uint64_t now, const ds_context *context)
{
    /* Member by member: an initializer cleared the two words' slots first
     * (a tenth of the event), which name_the_kind then overwrites. */
    const char *flags[64];
    ds_export_fields f;
    f.tensor = (uintptr_t)m;
    f.versioned = v->versioned;
    /* where the table is full, the name as the program gave it */
    f.producer = (ds_label){id, name && id == DS_NAME_OTHER ? name : NULL};
    f.api = api;
    f.data = (uintptr_t)v->t.data;
    f.byte_offset = v->t.byte_offset;
    f.shape = (ds_ints){v->tensor_valid ? v->shape : NULL, v->t.ndim};
    f.strides = (ds_ints){v->tensor_valid && v->has_strides ? v->strides : NULL, v->t.ndim};
    f.bytes = v->bytes;
    f.flags = (ds_words){flags, ds_flag_names(v->flags, flags, (int)DS_ARRAY_LEN(flags))};
    f.allocation = alloc ? alloc->base : 0;
    f.allocation_owner = alloc ? alloc->owner : DS_NAME_UNKNOWN;
    f.copied_from = copied_from;
    if (v->tensor_valid)
        name_the_kind(&v->t, &f.device, &f.dtype);
    else
        f.device.len = f.dtype.len = 0; /* null */
    if (!ds_cfg.pystack_exports) {
        ds_emit_export_with(&f, now, context);
        return;
    }
    ds_ev e; /* a Python stack after the fields: built field by field */
    ds_ev_begin_with(&e, DS_EV_EXPORT, e.line, sizeof(e.line), now, context);
    ds_ev_export(&e, &f);
    ds_ev_py_stack(&e, (int)ds_cfg.pystack);
    ds_ev_end(&e);
}

/* ---- export ------------------------------------------------------------- */

static atomic_bool exported_once;
static void first_export(void);

/* A violation's "freed_py": where the memory was freed. */
static void freed_fields(ds_ev *e, void *arg)
{
    uint16_t site = *(const uint16_t *)arg;
    if (site)
        ds_ev_str(e, "freed_py", ds_site_text(site));
}

/* Called outside the registry lock: a violation may log, stop or abort. */
static void report_malformed(void *m, bool versioned, uint16_t id, const char *name,
                             const char *why)
{
    char detail[DS_DETAIL_MAX + DS_NAME_MAX + 64];
    ds_fmt(detail, sizeof(detail), "%s exported a malformed %s tensor: %s", shown_name(name, id),
           versioned ? "versioned" : "legacy", why);
    ds_violation(DS_VIO_MALFORMED_TENSOR, "tensor", (uintptr_t)m, detail);
}

/* A device tensor exported over memory no tracked allocation holds now,
 * but one freed a moment ago did: the consumer will read freed memory. */
static void report_freed_export(void *m, uintptr_t data, uint16_t id, const char *name)
{
    ds_alloc_info was;
    uint64_t t_free;
    uint16_t site;
    if (!ds_alloc_freed_at(data, &was, &t_free, &site))
        return;
    char detail[DS_DETAIL_MAX + 2 * DS_NAME_MAX + DS_SITE_MAX], at[DS_SITE_MAX + 16];
    ds_fmt(detail, sizeof(detail),
           "%s exported tensor %p over the %llu-byte allocation %p of %s, which was freed %llu "
           "us before%s; the consumer will read freed memory",
           shown_name(name, id), m, (unsigned long long)was.size, (void *)was.base,
           ds_name(was.owner), (unsigned long long)((ds_now_ns() - t_free) / 1000),
           at_site(at, sizeof(at), "freed", site));
    ds_violation_with(DS_VIO_USE_AFTER_FREE, "tensor", (uintptr_t)m, detail, freed_fields, &site);
}

bool ds_tensor_export_as(void *m, bool versioned, uint16_t id, const char *name, uint16_t api,
                          bool may_wait)
{
    char why[DS_DETAIL_MAX];
    ds_tensor_view v;
    bool show = ds_event_wanted(DS_EV_EXPORT); /* asked once: it decides three things */
    bool well_formed =
        ds_dlpack_read_struct(m, versioned, &v, why, sizeof(why)) &&
        ds_dlpack_check(&v, true, why, sizeof(why));
    if (!well_formed && may_wait)
        return false; /* perhaps not filled in yet: the caller asks again later */
    ds_note_work();
    if (!v.readable) {
        report_malformed(m, versioned, id, name, why);
        return true; /* nothing there to track */
    }

    /* Where the data starts, and the tracked allocation it lies in, if any
     * (looked up before the registry lock: the two locks are never held
     * together). */
    uintptr_t data = (uintptr_t)v.t.data + (uintptr_t)v.t.byte_offset, copied_from = 0;
    ds_alloc_info alloc;
    int handles = ds_device_api_for_tensors((int32_t)v.t.device.device_type);
    bool linked = v.tensor_valid && v.t.data &&
                  ds_alloc_lookup_tensor(handles, (uintptr_t)v.t.data, data, &alloc);

    /* Filled by a copy from another tracked buffer just before: a copy for
     * the consumer, whatever the flags say (e.g. __dlpack__(dl_device=cpu)
     * on a device tensor).  (Not where data is a handle: no bytes there.) */
    if (v.tensor_valid && v.t.data && v.bytes && handles < 0)
        ds_copies_filled_by_copy(data, v.bytes, &copied_from);
    /* Device memory that is no tracked allocation's may be one just freed. */
    if (v.tensor_valid && v.t.data && !linked && handles < 0 &&
        on_a_device((int32_t)v.t.device.device_type))
        report_freed_export(m, data, id, name);
    ds_context context;
    const ds_context *where = gather(&context, DS_EV_EXPORT, show);

    void *tramp = ds_tensor_trampoline(versioned);
    void *orig = v.deleter, *chained = NULL;
    /* One clock read for the event and the record's export time (only
     * events show either). */
    uint64_t now = show || ds_event_wanted(DS_EV_RELEASE) ? ds_now_ns() : 0;
    uint64_t hash = ds_reg_lock((uintptr_t)m);
    ds_record *r = ds_reg_find(hash, (uintptr_t)m);
    bool live = r && r->state != DS_RELEASED;
    if (orig == tramp) {
        /* Already ours: exported again while live, or a struct copied from an
         * exported one.  The producer's deleter is the one recorded. */
        orig = r ? r->orig_deleter : NULL;
    } else if (live && r->wrapped) {
        /* Exported again with a new deleter, which may well be a decorator
         * calling the old one (our trampoline): remember where that leads. */
        chained = r->orig_deleter;
    }
    if (live && v.deleter == tramp && r->producer == id) {
        /* One handoff seen from a second layer (a library function that
         * wraps another's export, both traced): still one export, the record
         * as first made.  A struct broken since the first view is reported,
         * one broken from the start only the first time. */
        bool report = !well_formed && !r->malformed;
        r->malformed |= !well_formed;
        r->fingerprint = fingerprint_of(&v); /* what the outer layer hands over */
        ds_reg_unlock(hash);
        if (report)
            report_malformed(m, versioned, id, name, why);
        return true;
    }
    /* Handed on while live (a consumer passing the tensor to another): the
     * share in the old allocation ends here, and a new one begins. */
    uintptr_t ended_base = live ? r->alloc_base : 0;
    uint32_t ended_generation = ended_base ? r->alloc_generation : 0;
    if (!live) /* a released record at the address is replaced */
        r = r ? ds_reg_renew(r) : ds_reg_insert(hash, (uintptr_t)m);
    if (r) { /* else the table is full of live records: counted as untracked */
        r->orig_deleter = orig;
        r->chained_deleter = chained;
        r->data = data;
        r->bytes = v.bytes;
        r->t_export = now;
        r->producer = id;
        r->consumer = DS_NAME_UNKNOWN;
        r->state = DS_EXPORTED;
        r->versioned = versioned;
        r->copied = (v.flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0 || copied_from != 0;
        r->wrapped = orig != NULL;
        r->device_type = (int32_t)v.t.device.device_type;
        r->malformed = !well_formed;
        r->provisional = 0;
        r->released_by = DS_BY_UNKNOWN;
        r->releaser = DS_NAME_UNKNOWN;
        r->export_site = site_of(where);
        r->release_site = 0;
        r->fingerprint = fingerprint_of(&v);
        r->alloc_base = linked ? alloc.base : 0;
        r->alloc_generation = linked ? alloc.generation : 0;
        r->aliased = linked && alloc.alias_of;
        if (orig && v.deleter != tramp &&
            !ds_safe_write(deleter_field(m, versioned), &tramp, sizeof(tramp))) {
            /* Read-only memory: the release will pass unseen. */
            r->wrapped = false;
            r->orig_deleter = NULL;
        }
    }
    ds_reg_unlock(hash);
    if (ended_base)
        ds_alloc_share(ended_base, ended_generation, -1);
    /* The share in its allocation counts from the export: a free before
     * the consumer imports it is as harmful as one after. */
    if (r && linked)
        ds_alloc_share(alloc.base, alloc.generation, +1);
    if (!well_formed)
        report_malformed(m, versioned, id, name, why);
    if (r)
        ds_shares_added(hash, (uintptr_t)m, data, v.bytes,
                        ds_in_host_memory(v.t.device.device_type));
    else
        ds_stats_untracked();
    if (show)
        emit_export(m, &v, name, id, api, linked ? &alloc : NULL, copied_from, now, where);
    if (__builtin_expect(!atomic_load_explicit(&exported_once, memory_order_relaxed), 0))
        first_export();
    return true;
}

void ds_tensor_export(void *m, bool versioned, const char *producer, uint16_t api)
{
    char name[DS_NAME_MAX];
    ds_tensor_export_as(m, versioned, copied_name(name, producer), name, api, false);
}

void ds_tensor_export_by(void *m, bool versioned, uint16_t producer, uint16_t api)
{
    ds_tensor_export_as(m, versioned, producer, NULL, api, false);
}

bool ds_tensor_export_when_filled(void *m, bool versioned, uint16_t producer, uint16_t api)
{
    return ds_tensor_export_as(m, versioned, producer, NULL, api, true);
}

/* ---- the first export --------------------------------------------------------- */

static void (*_Atomic first_export_fn)(void);

void ds_tensor_on_first_export(void (*fn)(void))
{
    atomic_store_explicit(&first_export_fn, fn, memory_order_release);
}

static void first_export(void)
{
    void (*fn)(void) = atomic_load_explicit(&first_export_fn, memory_order_acquire);
    if (fn && !atomic_exchange(&exported_once, true))
        fn();
}
