/*
 * host_frees.c — host memory the program frees while a share lies in it.
 *
 * A CPU tensor's bytes belong to its producer until the last release: a
 * producer whose export keeps no reference to its buffer (Paddle, MXNet and
 * DGL had this), or a tensor whose storage moves after its export
 * (PyTorch's share_memory_), lets the buffer be freed and reused while the
 * consumer still reads it.  The host free family (hooks/host_free.c) asks
 * here before every free, realloc and munmap the program makes once a share
 * is live; what it frees is looked up in the index of live shares
 * (shares.c), so that a free costs the same with one share or thousands.
 * Under DLSHIM_ON_ERROR=protect the free is deferred until the last share in
 * it ends, then made through the family's own real function.
 *
 * The same frees tell what became of a tensor whose capsule died
 * unconsumed: the producer's destructor that frees the tensor without its
 * deleter (JAX's) frees its struct or its data meanwhile, one that does
 * neither leaks it (tensor.c, ds_tensor_dropped).
 */
#include <stdatomic.h>
#include <string.h>

#include "ledger/ledger.h"

static void (*release_fn)(uintptr_t p, uint64_t bytes, int how);
static atomic_bool armed;

void ds_host_frees_set_release(void (*release)(uintptr_t p, uint64_t bytes, int how))
{
    release_fn = release;
}

void ds_host_frees_arm(void)
{
    ds_shares_index();
    atomic_store_explicit(&armed, true, memory_order_release);
}

bool ds_host_frees_armed(void)
{
    return atomic_load_explicit(&armed, memory_order_acquire);
}

/* ---- what a dying capsule's destructor frees --------------------------------- */

/* This thread's watches, innermost first (each on its caller's stack, the
 * next outer one behind it): a capsule may die inside a dying capsule's
 * destructor. */
static DS_TLS ds_drop_watch *watches;

void ds_host_frees_watch(ds_drop_watch *w)
{
    w->outer = watches;
    w->freed = false;
    watches = w;
    atomic_fetch_add_explicit(&ds_frees_watched, 1, memory_order_relaxed);
}

bool ds_host_frees_unwatch(ds_drop_watch *w)
{
    if (watches != w)
        return false; /* not the innermost: never watched (or watched out of turn) */
    watches = w->outer;
    atomic_fetch_sub_explicit(&ds_frees_watched, 1, memory_order_relaxed);
    return w->freed;
}

/* [p, p + bytes) covers a watched tensor's struct or data: noted, and no
 * violation (the producer's destructor releasing its own tensor). */
static bool watched(uintptr_t p, uint64_t bytes)
{
    bool hit = false;
    for (ds_drop_watch *w = watches; w; w = w->outer) {
        bool on_struct = w->tensor - p < bytes;
        bool on_data = w->end > w->data && w->data < p + bytes && p < w->end;
        if (on_struct || on_data) {
            w->freed = true;
            hit = true;
        }
    }
    return hit;
}

/* ---- frees deferred under protect -------------------------------------------- */

#define DS_DEFERRED_FREES 64
static struct {
    uintptr_t p;
    uint64_t bytes;
    int how;
} deferred[DS_DEFERRED_FREES];
static atomic_uint ndeferred; /* slots in use (p != 0) */

/* Kept for later; false when the list is full (the free then goes ahead). */
static bool defer(uintptr_t p, uint64_t bytes, int how)
{
    bool kept = false;
    ds_lock_take(DS_LOCK_HOST_FREES);
    for (int i = 0; i < DS_DEFERRED_FREES && !kept; i++)
        if (!deferred[i].p) {
            deferred[i].p = p, deferred[i].bytes = bytes, deferred[i].how = how;
            atomic_fetch_add_explicit(&ndeferred, 1, memory_order_relaxed);
            kept = true;
        }
    ds_lock_give(DS_LOCK_HOST_FREES);
    return kept;
}

void ds_host_frees_share_ended(void)
{
    if (__builtin_expect(!atomic_load_explicit(&ndeferred, memory_order_relaxed), 1))
        return;
    /* Each deferred free with no share left in it, made one at a time
     * outside the lock (the family's free may come back here). */
    for (;;) {
        uintptr_t p = 0;
        uint64_t bytes = 0;
        int how = 0;
        ds_lock_take(DS_LOCK_HOST_FREES);
        for (int i = 0; i < DS_DEFERRED_FREES && !p; i++)
            if (deferred[i].p && !ds_shares_at(deferred[i].p, deferred[i].bytes)) {
                p = deferred[i].p, bytes = deferred[i].bytes, how = deferred[i].how;
                deferred[i].p = 0;
                atomic_fetch_sub_explicit(&ndeferred, 1, memory_order_relaxed);
            }
        ds_lock_give(DS_LOCK_HOST_FREES);
        if (!p)
            return;
        if (release_fn)
            release_fn(p, bytes, how);
    }
}

/* ---- the check ---------------------------------------------------------------- */

bool ds_host_shared(uintptr_t p, uint64_t bytes)
{
    return ds_shares_at(p, bytes) != 0;
}

static const char *const hows[] = {"freed", "reallocated", "unmapped"};

typedef struct {
    uintptr_t tensor;
    uint16_t export_site;
} free_fields;

static void write_free_fields(ds_ev *e, void *arg)
{
    const free_fields *f = arg;
    ds_ev_hex(e, "tensor", f->tensor);
    if (f->export_site)
        ds_ev_str(e, "export_py", ds_site_text(f->export_site));
}

/* A free that a share lies in: reported, and deferred where the program
 * asked for protection.  Out of line: the frees that touch no share (nearly
 * all) then save no registers for it. */
static __attribute__((noinline)) int free_of_shared(uintptr_t p, uint64_t bytes, int how,
                                                   const void *caller, uintptr_t tensor)
{
    /* The share's record, as it is now (released meanwhile: no harm). */
    uint64_t hash = ds_reg_lock(tensor);
    const ds_record *r = ds_reg_find(hash, tensor);
    bool live = r && r->state != DS_RELEASED && ds_in_host_memory(r->device_type);
    ds_record c = live ? *r : (ds_record){0};
    ds_reg_unlock(hash);
    if (!live)
        return DS_FREE_FORWARD;
    char detail[DS_DETAIL_MAX + 3 * DS_NAME_MAX + DS_SITE_MAX];
    char at[DS_SITE_MAX + 16] = "";
    const char *by = ds_name(ds_module_caller_at(caller));
    if (c.export_site)
        ds_fmt(at, sizeof(at), " (exported at %s)", ds_site_text(c.export_site));
    ds_fmt(detail, sizeof(detail),
           "%s %s %p (%llu bytes) while tensor %p from %s lies in it, %s%s%s; the consumer "
           "reads memory that is no longer the tensor's",
           by, hows[how], (void *)p, (unsigned long long)bytes, (void *)tensor,
           ds_name(c.producer), c.state == DS_IMPORTED ? "imported by " : "not yet imported",
           c.state == DS_IMPORTED ? ds_name(c.consumer) : "", at);
    free_fields f = {tensor, c.export_site};
    bool prevent = ds_violation_with(DS_VIO_FREE_WHILE_SHARED, "data", p, detail,
                                     write_free_fields, &f);
    return prevent && release_fn && defer(p, bytes, how) ? DS_FREE_DEFER : DS_FREE_FORWARD;
}

int ds_host_free_check(uintptr_t p, uint64_t bytes, int how, const void *caller)
{
    if (!p || !bytes)
        return DS_FREE_FORWARD;
    if (watches && watched(p, bytes))
        return DS_FREE_FORWARD;
    uintptr_t tensor = ds_shares_host_at(p, bytes);
    return tensor ? free_of_shared(p, bytes, how, caller, tensor) : DS_FREE_FORWARD;
}
