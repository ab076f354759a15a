/*
 * tensor_record.h — what the ledger's three steps share, for tensor.c
 * (export), tensor_import.c and tensor_release.c alone: the trampolines
 * that stand in a tensor's deleter, a record's copy taken under the
 * registry lock, the tensor's fingerprint, and the fields events and
 * violations show.
 */
#ifndef DS_TENSOR_RECORD_H
#define DS_TENSOR_RECORD_H

#include "ledger/ledger.h"

/* The trampoline of a layout (tensor_release.c): what an export puts in the
 * tensor's deleter field, and how an import after release knows its own. */
void *ds_tensor_trampoline(bool versioned);

static inline void **deleter_field(void *managed, bool versioned)
{
    return versioned ? (void **)&((DLManagedTensorVersioned *)managed)->deleter
                     : (void **)&((DLManagedTensor *)managed)->deleter;
}

/* id: the interned name (which may be "other" when the table is full);
 * name: the name itself, for the events, or NULL for ds_name(id).
 * may_wait: a struct not filled in yet is left for the caller to ask again
 * (false returned). */
bool ds_tensor_export_as(void *m, bool versioned, uint16_t id, const char *name, uint16_t api,
                         bool may_wait);

/* A release's stamp (its registry shard held): its time, shown in events and violation
 * details, and the order of evictions.  With no output open nothing shows
 * the time, and the registry's counter orders as well as a clock and costs
 * nothing (the tick clock was a fifth of a release's instructions).  The
 * kind of stamp changes only when the outputs do, at exit (the trace
 * closed): releases after that merely look oldest. */
static inline uint64_t release_stamp(uint64_t hash)
{
    return ds_output_open_now() ? ds_now_ns() : ds_reg_next_stamp(hash);
}

/* The name the events and violations show: `name` as the program gave it
 * (the table may hold it as "other"), else the interned one, looked up only
 * when something shows it. */
static inline const char *shown_name(const char *name, uint16_t id)
{
    return name ? name : ds_name(id);
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

static inline record_copy copy_of(const ds_record *r)
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
static inline uint64_t fingerprint_of(const ds_tensor_view *v)
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
static inline uint16_t site_of(const ds_context *c)
{
    return c && c->has_where ? c->where.site : 0;
}

/* The context of an event, gathered where one will be written and has any
 * field (*c then holds it): NULL otherwise. */
static inline const ds_context *gather(ds_context *c, int event_id, bool show)
{
    if (!show || !ds_context_wanted())
        return NULL;
    ds_context_capture(c, event_id);
    return c->any ? c : NULL;
}

/* Memory that device streams write: its handoffs are checked (sync.c). */
static inline bool on_a_device(int32_t type)
{
    return type == kDLCUDA || type == kDLCUDAHost || type == kDLROCM || type == kDLROCMHost ||
           type == kDLCUDAManaged;
}

/* An event's fields, taken from the record under the registry lock where
 * the event is wanted (only what it shows: copying the whole record first
 * was a twentieth of the event).  `api`: the importer's route. */
static inline ds_import_fields import_fields(const ds_record *r, uint16_t api)
{
    return (ds_import_fields){.tensor = r->key,
                              .consumer = r->consumer,
                              .producer = r->producer,
                              .api = api,
                              .zero_copy = !r->copied,
                              .bytes = r->bytes};
}

static inline ds_release_fields release_fields(const ds_record *r, bool consumed,
                                               bool copy_on_import)
{
    return (ds_release_fields){.tensor = r->key,
                               .consumed = consumed,
                               .lifetime_ns = r->t_release - r->t_export,
                               .producer = r->producer,
                               .consumer = consumed ? r->consumer : -1,
                               .copy_on_import = copy_on_import,
                               .bytes_copied = r->bytes};
}

/* A name from the program, copied through the no-fault reader into `out`
 * (which the events show, even when the table is full), and its id. */
static inline uint16_t copied_name(char out[DS_NAME_MAX], const char *name)
{
    ds_safe_string(out, DS_NAME_MAX, name, "unknown");
    return ds_name_intern(out);
}

/* " (exported at file.py:3 in f)", or "" where the line is not known. */
static inline const char *at_site(char *out, size_t cap, const char *what, uint16_t site)
{
    out[0] = '\0';
    if (site)
        ds_fmt(out, cap, " (%s at %s)", what, ds_site_text(site));
    return out;
}

/* Extra fields of a violation about a share: where it was exported and,
 * once released, who released it first and where (write_share_fields
 * writes them, through ds_violation_with). */
typedef struct {
    record_copy r;
    bool released;
} share_fields;

static inline void write_share_fields(ds_ev *e, void *arg)
{
    static const char *const releasers[] = {"unknown", "consumer", "producer", "consumer"};
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

#endif
