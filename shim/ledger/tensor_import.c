/*
 * tensor_import.c — the ledger's import (tensor.c says the whole): the
 * struct the consumer finds held to the one exported, the share counted,
 * and a device tensor's handoff given to the stream model.
 */
#include "tensor_record.h"

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
    ds_violation_with(DS_VIO_TENSOR_CHANGED, "tensor", (uintptr_t)m, detail,
                      write_share_fields, &f);
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
    ds_violation_with(DS_VIO_USE_AFTER_FREE, "tensor", (uintptr_t)m, detail,
                      write_share_fields, &f);
}

/* As ds_tensor_export_as. */
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
            if (d == ds_tensor_trampoline(versioned)) {
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
            ds_tensor_export_as(m, versioned, DS_NAME_UNKNOWN, NULL, api, false);
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
