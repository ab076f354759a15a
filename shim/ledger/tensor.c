/*
 * tensor.c — the DLPack ownership ledger: export → import → release.
 *
 * Export records the tensor and swaps its deleter for a trampoline (one for
 * each layout) that records the release and forwards to the producer's
 * deleter.  Every hook family that sees DLPack tensors (annotation API,
 * Python capsules, entry points) feeds these two functions.
 *
 * Rules kept throughout: nothing from the program is read except through
 * ds_safe_read; the registry lock is never held while logging, reporting or
 * calling a deleter; a released tensor's memory is never read except its
 * deleter field (see import_after_release below).
 */
#include <errno.h>
#include <string.h>

#include "ledger/ledger.h"

typedef void (*deleter_fn)(void *self);

static void release(void *managed, bool versioned);
static void trampoline_legacy(DLManagedTensor *t) { release(t, false); }
static void trampoline_versioned(DLManagedTensorVersioned *t) { release(t, true); }

static void *trampoline(bool versioned)
{
    return versioned ? (void *)trampoline_versioned : (void *)trampoline_legacy;
}

static void **deleter_field(void *managed, bool versioned)
{
    return versioned ? (void **)&((DLManagedTensorVersioned *)managed)->deleter
                     : (void **)&((DLManagedTensor *)managed)->deleter;
}

/* A release's stamp (its registry shard held): its time, shown in events and violation
 * details, and the order of evictions.  With no output open nothing shows
 * the time, and the registry's counter orders as well as a clock and costs
 * nothing (the tick clock was a fifth of a release's instructions).  The
 * kind of stamp changes only when the outputs do, at exit (the trace
 * closed): releases after that merely look oldest. */
static uint64_t release_stamp(uint64_t hash)
{
    return ds_output_open_now() ? ds_now_ns() : ds_reg_next_stamp(hash);
}

/* ---- events ------------------------------------------------------------- */

/* The name the events and violations show: `name` as the program gave it
 * (the table may hold it as "other"), else the interned one, looked up only
 * when something shows it. */
static const char *shown_name(const char *name, uint16_t id)
{
    return name ? name : ds_name(id);
}

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
          last_kind.device.device_id == t->device.device_id && last_kind.dtype.code == t->dtype.code &&
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

typedef struct {
    uintptr_t tensor;
    uint16_t producer, consumer;
    uint64_t bytes;
    bool copied;
    uint64_t t_export, t_release;
    uintptr_t alloc_base;
    uint32_t alloc_generation;
    uintptr_t data;
    int32_t device_type;
    uint8_t released_by;
    uint16_t releaser, export_site, release_site;
    bool provisional, aliased;
} record_copy;

static record_copy copy_of(const ds_record *r)
{
    return (record_copy){r->key,         r->producer,     r->consumer,     r->bytes,
                         r->copied,      r->t_export,     r->t_release,    r->alloc_base,
                         r->alloc_generation, r->data,    r->device_type,  r->released_by,
                         r->releaser,    r->export_site,  r->release_site, r->provisional,
                         r->aliased};
}

/* What a consumer must find as the producer left it: the tensor the
 * DLTensor describes (where its bytes start, device, type, dimensions,
 * shape and strides), mixed into one word (a multiply and a shift per
 * word).  The same tensor told another way is the same: compact strides
 * given or left NULL (nanobind fills them in before it takes the tensor),
 * the offset in `byte_offset` or in `data`.  0 is kept for "not known". */
static uint64_t fingerprint_of(const ds_tensor_view *v)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 0xbf58476d1ce4e5b9ull, h ^= h >> 31)
    MIX((uintptr_t)v->t.data + v->t.byte_offset);
    MIX((uint64_t)(uint32_t)v->t.device.device_type << 32 | (uint32_t)v->t.device.device_id);
    MIX((uint64_t)(uint32_t)v->t.ndim << 32 | (uint64_t)v->t.dtype.code << 24 |
        (uint64_t)v->t.dtype.bits << 16 | v->t.dtype.lanes);
    /* The arrays only where the checks read them (a malformed tensor's are
     * not read; the checks stop at its first fault). */
    if (v->tensor_valid) {
        int n = v->t.ndim > 0 && v->t.ndim <= DS_MAX_NDIM ? v->t.ndim : 0;
        for (int i = 0; i < n; i++)
            MIX(v->shape[i]);
        int64_t compact = 1; /* row-major, innermost first */
        for (int i = n - 1; i >= 0; i--) {
            MIX(v->has_strides ? v->strides[i] : compact);
            compact *= v->shape[i];
        }
    }
#undef MIX
    return h | !h;
}

/* The site a gathered context names (0: none). */
static uint16_t site_of(const ds_context *c)
{
    return c && c->has_where ? c->where.site : 0;
}

/* The context of an event, gathered where one will be written and has any
 * field (*c then holds it): NULL otherwise. */
static const ds_context *gather(ds_context *c, int event_id, bool show)
{
    if (!show || !ds_context_wanted())
        return NULL;
    ds_context_capture(c, event_id);
    return c->any ? c : NULL;
}

/* Memory that device streams write: its handoffs are checked (sync.c). */
static bool on_a_device(int32_t type)
{
    return type == kDLCUDA || type == kDLCUDAHost || type == kDLROCM || type == kDLROCMHost ||
           type == kDLCUDAManaged;
}

/* An event's fields, taken from the record under the registry lock where
 * the event is wanted (only what it shows: copying the whole record first
 * was a twentieth of the event).  `api`: the importer's route. */
static ds_import_fields import_fields(const ds_record *r, uint16_t api)
{
    return (ds_import_fields){.tensor = r->key,
                              .consumer = r->consumer,
                              .producer = r->producer,
                              .api = api,
                              .zero_copy = !r->copied,
                              .bytes = r->bytes};
}

static ds_release_fields release_fields(const ds_record *r, bool consumed, bool copy_on_import)
{
    return (ds_release_fields){.tensor = r->key,
                               .consumed = consumed,
                               .lifetime_ns = r->t_release - r->t_export,
                               .producer = r->producer,
                               .consumer = consumed ? r->consumer : -1,
                               .copy_on_import = copy_on_import,
                               .bytes_copied = r->bytes};
}

/* ---- export ------------------------------------------------------------- */

static atomic_bool exported_once;
static void first_export(void);

/* " (exported at file.py:3 in f)", or "" where the line is not known. */
static const char *at_site(char *out, size_t cap, const char *what, uint16_t site)
{
    out[0] = '\0';
    if (site)
        ds_fmt(out, cap, " (%s at %s)", what, ds_site_text(site));
    return out;
}

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

/* id: the interned name (which may be "other" when the table is full);
 * name: the name itself, for the events, or NULL for ds_name(id). */
static bool export_tensor(void *m, bool versioned, uint16_t id, const char *name, uint16_t api,
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

    void *tramp = trampoline(versioned);
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

/* A name from the program, copied through the no-fault reader into `out`
 * (which the events show, even when the table is full), and its id. */
static uint16_t copied_name(char out[DS_NAME_MAX], const char *name)
{
    ds_safe_string(out, DS_NAME_MAX, name, "unknown");
    return ds_name_intern(out);
}

void ds_tensor_export(void *m, bool versioned, const char *producer, uint16_t api)
{
    char name[DS_NAME_MAX];
    export_tensor(m, versioned, copied_name(name, producer), name, api, false);
}

void ds_tensor_export_by(void *m, bool versioned, uint16_t producer, uint16_t api)
{
    export_tensor(m, versioned, producer, NULL, api, false);
}

bool ds_tensor_export_when_filled(void *m, bool versioned, uint16_t producer, uint16_t api)
{
    return export_tensor(m, versioned, producer, NULL, api, true);
}

/* ---- import ------------------------------------------------------------- */

/* As export_tensor. */
/* Extra fields of a violation about a share: where it was exported and,
 * once released, who released it first and where. */
typedef struct {
    record_copy r;
    bool released;
} share_fields;

static const char *const releasers[] = {"unknown", "consumer", "producer", "consumer"};

static void write_share_fields(ds_ev *e, void *arg)
{
    const share_fields *f = arg;
    if (f->r.export_site)
        ds_ev_str(e, "export_py", ds_site_text(f->r.export_site));
    if (!f->released)
        return;
    ds_ev_word(e, "first_released_by", releasers[f->r.released_by & 3]);
    if (f->r.released_by == DS_BY_CONSUMER || f->r.released_by == DS_BY_TAKER)
        ds_ev_name(e, "first_releaser", f->r.releaser);
    if (f->r.release_site)
        ds_ev_str(e, "first_release_py", ds_site_text(f->r.release_site));
}

/* The struct the consumer finds is not the one exported (its data, shape,
 * strides, type or device changed since, or it no longer reads as a tensor):
 * the consumer reads something the producer never shared. */
static void report_changed(void *m, const record_copy *c, const ds_tensor_view *v,
                           bool well_formed, const char *why, uint16_t id, const char *name)
{
    char detail[DS_DETAIL_MAX + 2 * DS_NAME_MAX + DS_SITE_MAX], site[DS_SITE_MAX + 16];
    uintptr_t data = (uintptr_t)v->t.data + (uintptr_t)v->t.byte_offset;
    if (!well_formed)
        ds_fmt(detail, sizeof(detail),
               "%s imported tensor %p from %s, which changed after its export%s: %s",
               shown_name(name, id), m, ds_name(c->producer),
               at_site(site, sizeof(site), "exported", c->export_site), why);
    else
        ds_fmt(detail, sizeof(detail),
               "%s imported tensor %p from %s, which changed after its export%s: its %s is "
               "not what was exported", shown_name(name, id), m, ds_name(c->producer),
               at_site(site, sizeof(site), "exported", c->export_site),
               data != c->data ? "data pointer" : v->bytes != c->bytes ? "size"
                                                                    : "shape, strides or type");
    share_fields f = {*c, false};
    ds_violation_with(DS_VIO_TENSOR_CHANGED, "tensor", (uintptr_t)m, detail, write_share_fields, &f);
}

/* A tensor that carries a handle of `api` (a Vulkan buffer or memory):
 * its bytes as offsets in the allocation found at its export, the space
 * its queues' writes and its consumer's uses are kept in (ds_range).
 * False where the handle no longer leads there. */
static bool handle_bytes(int api, const ds_tensor_view *v, const record_copy *c, ds_range *out)
{
    if (!c->alloc_base || !v->tensor_valid || !v->t.data || !c->bytes)
        return false;
    uint64_t offset;
    if (ds_alloc_memory_of(api, (uintptr_t)v->t.data, &offset) != c->alloc_base)
        return false;
    *out = (ds_range){.start = (uintptr_t)(offset + v->t.byte_offset), .len = c->bytes,
                      .space = c->alloc_generation};
    return true;
}

/* A share whose device memory was freed before the consumer took it. */
static void report_import_of_freed(void *m, const record_copy *c, uint16_t id, const char *name)
{
    char detail[DS_DETAIL_MAX + 2 * DS_NAME_MAX + DS_SITE_MAX], site[DS_SITE_MAX + 16];
    ds_fmt(detail, sizeof(detail),
           "%s imported tensor %p from %s, whose memory (the allocation %p) was freed after "
           "its export%s and before this import; the consumer reads freed memory",
           shown_name(name, id), m, ds_name(c->producer), (void *)c->alloc_base,
           at_site(site, sizeof(site), "exported", c->export_site));
    share_fields f = {*c, false};
    ds_violation_with(DS_VIO_USE_AFTER_FREE, "tensor", (uintptr_t)m, detail, write_share_fields, &f);
}

/* As export_tensor. */
static inline __attribute__((always_inline)) void
import_tensor(void *m, bool versioned, uint16_t id, const char *name, uint16_t api)
{
    char detail[DS_DETAIL_MAX + 2 * DS_NAME_MAX];
    ds_note_work();
    /* The struct as the consumer finds it, to hold to the export's. */
    ds_tensor_view v;
    char why[DS_DETAIL_MAX];
    bool readable = ds_dlpack_read_struct(m, versioned, &v, why, sizeof(why));
    bool well_formed = readable && ds_dlpack_check(&v, true, why, sizeof(why));
    uint64_t found = readable ? fingerprint_of(&v) : 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        uint64_t hash = ds_reg_lock((uintptr_t)m);
        ds_record *r = ds_reg_find(hash, (uintptr_t)m);
        int state = r ? r->state : 0;
        if (state == DS_EXPORTED) {
            r->state = DS_IMPORTED;
            r->consumer = id;
            ds_stats_share(ds_reg_shard(hash), r->producer, r->consumer, r->bytes, !r->copied);
            bool changed = r->fingerprint && r->fingerprint != found;
            /* The whole record only where something reads it: an event, a
             * violation, or the sync model for device memory. */
            /* In the stream model: device memory, or a handle of an API
             * whose queues write it (kDLVulkan). */
            int handles = r->device_type == kDLCPU ? -1
                                                   : ds_device_api_for_tensors(r->device_type);
            bool show = ds_event_wanted(DS_EV_IMPORT),
                 device = on_a_device(r->device_type) || handles >= 0;
            ds_import_fields shown;
            record_copy c;
            if (show)
                shown = import_fields(r, api);
            bool has_alloc = r->alloc_base != 0;
            if (device || changed || has_alloc)
                c = copy_of(r);
            ds_reg_unlock(hash);
            if (changed)
                report_changed(m, &c, &v, well_formed, why, id, name);
            if (has_alloc && !ds_alloc_live(c.alloc_base, c.alloc_generation))
                report_import_of_freed(m, &c, id, name);
            if (device) {
                ds_range alias;
                if (handles >= 0) { /* no address: where in its memory, if known */
                    if (readable && handle_bytes(handles, &v, &c, &alias))
                        ds_sync_import(c.tensor, 0, c.bytes, &alias, c.producer, c.consumer);
                } else {
                    /* Over another API's mapping of exported memory: that
                     * memory's own writes (a Vulkan queue's) are the same
                     * bytes. */
                    bool mapped = c.aliased && ds_alloc_alias_range(c.alloc_base,
                                                                    c.alloc_generation, c.data,
                                                                    c.bytes, &alias);
                    ds_sync_import(c.tensor, c.data, c.bytes, mapped ? &alias : NULL,
                                   c.producer, c.consumer);
                }
            }
            else if (has_alloc) /* a CPU tensor in a device API's memory: read on the host */
                ds_sync_host_reads(c.tensor, c.data, c.bytes, c.producer, c.consumer);
            if (show)
                ds_emit_import(&shown, ds_now_ns());
            return;
        }
        record_copy c = r ? copy_of(r) : (record_copy){0};
        ds_reg_unlock(hash);
        if (state == DS_IMPORTED) {
            if (c.consumer == id)
                return; /* one import seen from two layers (at::fromDLPack, then the capsule) */
            ds_fmt(detail, sizeof(detail),
                   "%s imported tensor %p from %s, which %s had already imported",
                   shown_name(name, id), m,
                   ds_name(c.producer), ds_name(c.consumer));
            share_fields f = {c, false};
            ds_violation_with(DS_VIO_DOUBLE_IMPORT, "tensor", (uintptr_t)m, detail,
                              write_share_fields, &f);
            return;
        }
        if (state == DS_RELEASED) {
            /* The released struct still carries our trampoline (the field
             * survives free() in practice); a new tensor that merely reuses
             * the address does not, and is tracked as a new export. */
            void *d = NULL;
            ds_safe_read(&d, deleter_field(m, versioned), sizeof(d));
            if (d == trampoline(versioned)) {
                ds_fmt(detail, sizeof(detail),
                       "%s imported tensor %p from %s %llu us after its deleter ran; "
                       "its memory may already be reused",
                       shown_name(name, id), m, ds_name(c.producer),
                       (unsigned long long)((ds_now_ns() - c.t_release) / 1000));
                share_fields f = {c, true};
                ds_violation_with(DS_VIO_IMPORT_AFTER_RELEASE, "tensor", (uintptr_t)m, detail,
                                  write_share_fields, &f);
                return;
            }
        }
        if (attempt == 0) /* never exported through the shim: producer unknown */
            export_tensor(m, versioned, DS_NAME_UNKNOWN, NULL, api, false);
    }
}

void ds_tensor_import(void *m, bool versioned, const char *consumer, uint16_t api)
{
    char name[DS_NAME_MAX];
    import_tensor(m, versioned, copied_name(name, consumer), name, api);
}

/* Inline into the hook that calls it (link-time optimisation): an import
 * through a capsule is a call shorter. */
inline __attribute__((always_inline)) void ds_tensor_import_by(void *m, bool versioned,
                                                               uint16_t consumer, uint16_t api)
{
    import_tensor(m, versioned, consumer, NULL, api);
}

/* ---- release (the trampolines) ------------------------------------------ */

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
    bool show = ds_event_wanted(DS_EV_RELEASE), show_import = taken_now && ds_event_wanted(DS_EV_IMPORT);
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
           m, ds_name(c->producer), at_site(site, sizeof(site), "exported", c->export_site));
    share_fields f = {*c, false};
    ds_violation_with(DS_VIO_LEAK, "tensor", (uintptr_t)m, detail, write_share_fields, &f);
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
