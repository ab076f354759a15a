/*
 * unloads.c — a library unloaded while a tensor it would release is
 * shared.
 *
 * A tensor's deleter is code of its producer's library: a kernel library
 * that exported a tensor and is dlclosed while the tensor lives (tvm-ffi's
 * modules were) leaves the consumer's release to jump into unmapped code,
 * long after the unload, far from its cause.  The dlopen family asks here
 * at each dlclose of a library the shim knows: the live shares whose
 * deleter (or the deleter it chains to) lies in the library's range are
 * counted and the first named.  Under DLSHIM_ON_ERROR=protect the library
 * stays loaded: its dlclose waits until the last such share is released,
 * then is made through the family's own real function.
 */
#include <stdatomic.h>
#include <string.h>

#include "ledger/ledger.h"

static void (*release_fn)(void *handle);

void ds_unloads_set_release(void (*release)(void *handle))
{
    release_fn = release;
}

/* ---- the shares a library would release --------------------------------------- */

typedef struct {
    uintptr_t lo, hi;
    unsigned count;
    ds_record first;
} holding;

static bool in(uintptr_t p, const holding *h)
{
    return p >= h->lo && p < h->hi;
}

static void count_held(const ds_record *r, void *arg)
{
    holding *h = arg;
    if (r->state == DS_RELEASED || r->inherited ||
        !(in((uintptr_t)r->orig_deleter, h) || in((uintptr_t)r->chained_deleter, h)))
        return;
    if (!h->count++)
        h->first = *r;
}

static holding held_by(uintptr_t lo, uintptr_t hi)
{
    holding h = {.lo = lo, .hi = hi};
    ds_reg_lock_all();
    ds_reg_foreach(count_held, &h);
    ds_reg_unlock_all();
    return h;
}

/* ---- dlcloses deferred under protect ------------------------------------------ */

#define DS_DEFERRED_UNLOADS 16
static struct {
    void *handle;
    uintptr_t lo, hi;
} deferred[DS_DEFERRED_UNLOADS];
static atomic_uint ndeferred;

static bool defer(void *handle, uintptr_t lo, uintptr_t hi)
{
    bool kept = false;
    ds_lock_take(DS_LOCK_UNLOADS);
    for (int i = 0; i < DS_DEFERRED_UNLOADS && !kept; i++)
        if (!deferred[i].handle) {
            deferred[i].handle = handle, deferred[i].lo = lo, deferred[i].hi = hi;
            atomic_fetch_add_explicit(&ndeferred, 1, memory_order_relaxed);
            kept = true;
        }
    ds_lock_give(DS_LOCK_UNLOADS);
    return kept;
}

void ds_unloads_share_ended(void)
{
    if (__builtin_expect(!atomic_load_explicit(&ndeferred, memory_order_relaxed), 1))
        return;
    for (int i = 0; i < DS_DEFERRED_UNLOADS; i++) {
        ds_lock_take(DS_LOCK_UNLOADS);
        void *handle = deferred[i].handle;
        uintptr_t lo = deferred[i].lo, hi = deferred[i].hi;
        ds_lock_give(DS_LOCK_UNLOADS);
        if (!handle || held_by(lo, hi).count)
            continue;
        ds_lock_take(DS_LOCK_UNLOADS);
        bool mine = deferred[i].handle == handle;
        if (mine) {
            deferred[i].handle = NULL;
            atomic_fetch_sub_explicit(&ndeferred, 1, memory_order_relaxed);
        }
        ds_lock_give(DS_LOCK_UNLOADS);
        if (mine && release_fn)
            release_fn(handle);
    }
}

/* ---- the check ---------------------------------------------------------------- */

typedef struct {
    uintptr_t first;
    unsigned count;
    uint16_t export_site;
    const char *library;
} unload_fields;

static void write_unload_fields(ds_ev *e, void *arg)
{
    const unload_fields *f = arg;
    ds_ev_str(e, "library", f->library);
    ds_ev_uint(e, "shares", f->count);
    if (f->export_site)
        ds_ev_str(e, "export_py", ds_site_text(f->export_site));
}

int ds_unload_check(uintptr_t lo, uintptr_t hi, const char *library, void *handle)
{
    holding h = held_by(lo, hi);
    if (!h.count)
        return DS_FREE_FORWARD;
    char detail[DS_DETAIL_MAX + 2 * DS_NAME_MAX + DS_SITE_MAX], at[DS_SITE_MAX + 16] = "";
    if (h.first.export_site)
        ds_fmt(at, sizeof(at), " (exported at %s)", ds_site_text(h.first.export_site));
    ds_fmt(detail, sizeof(detail),
           "%s was unloaded while %u shared tensor%s still need%s its code to be released: "
           "tensor %p from %s%s%s%s will call into unmapped memory when released", library,
           h.count, h.count == 1 ? "" : "s", h.count == 1 ? "s" : "", (void *)h.first.key,
           ds_name(h.first.producer), h.first.state == DS_IMPORTED ? ", imported by " : "",
           h.first.state == DS_IMPORTED ? ds_name(h.first.consumer) : "", at);
    unload_fields f = {h.first.key, h.count, h.first.export_site, library};
    bool prevent = ds_violation_with(DS_VIO_UNLOAD_WHILE_SHARED, "tensor", h.first.key, detail,
                                     write_unload_fields, &f);
    return prevent && handle && release_fn && defer(handle, lo, hi) ? DS_FREE_DEFER
                                                                     : DS_FREE_FORWARD;
}

bool ds_unload_holds(uintptr_t lo, uintptr_t hi)
{
    return held_by(lo, hi).count != 0;
}
