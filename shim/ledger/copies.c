/*
 * copies.c — copy accounting: every transfer that touches a tracked
 * allocation or a DLPack share becomes a `copy` event; an export filled by
 * a copy from another tracked buffer is a copy, not a zero-copy share; and a
 * device→host copy out of one owner followed by a host→device copy of the
 * same host bytes into another owner is a `roundtrip` that a DLPack handoff
 * would have avoided.
 *
 * Live shares (exported tensors not yet released) are indexed by their data
 * range here, so a copy can name the tensor it reads or writes.  Bounded
 * tables, one mutex, nothing called out while it is held.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

#define DS_SHARES_INDEXED 8192
#define DS_RECENT_COPIES 256   /* for exports filled by a copy (a power of two) */
#define DS_PENDING_TRIPS 256   /* device→host copies waiting for their way back */

typedef struct {
    uintptr_t tensor, start, end;
} share;

typedef struct {
    uintptr_t dst, dst_end, src;
    bool src_tracked;
} recent_copy;

typedef struct {
    uintptr_t host, host_end;
    ds_alloc_info from; /* the device allocation the bytes came out of */
} trip;

static share shares[DS_SHARES_INDEXED];
static int nshares;
static recent_copy recent[DS_RECENT_COPIES];
static uint64_t nrecent;
static trip trips[DS_PENDING_TRIPS];
static uint64_t ntrips;
static atomic_uint_fast64_t transfers, bytes_transferred, roundtrips;

static const char *const direction_names[] = {"h2d", "d2h", "d2d", "h2h", "peer"};

/* ---- the share index ------------------------------------------------------------ */

/* Kept only from the first copy on: a program that never copies (any
 * CPU-only one without the opt-in host-copy hooks) pays no lock per handoff
 * for it.  The first copy builds it from the registry's live records. */
static atomic_bool indexing;

/* Lock held. */
static void add_share(uintptr_t tensor, uintptr_t data, uint64_t bytes)
{
    int i = 0;
    while (i < nshares && shares[i].tensor != tensor) /* exported again: updated */
        i++;
    if (i < DS_SHARES_INDEXED) {
        shares[i] = (share){tensor, data, data + bytes};
        if (i == nshares)
            nshares++;
    }
}

static void index_record(const ds_record *r, void *arg)
{
    (void)arg;
    if (r->state != DS_RELEASED && r->data && r->bytes)
        add_share(r->key, r->data, r->bytes);
}

/* The registry's lock, then ours: the only place the two are held together.
 * Under both, no export or release can slip between the scan and the switch
 * (each checks `indexing` after its registry update). */
static void start_indexing(void)
{
    ds_reg_lock();
    ds_lock_take(DS_LOCK_COPIES);
    if (!atomic_load(&indexing)) {
        ds_reg_foreach(index_record, NULL);
        atomic_store(&indexing, true);
    }
    ds_lock_give(DS_LOCK_COPIES);
    ds_reg_unlock();
}

void ds_copies_share_added(uintptr_t tensor, uintptr_t data, uint64_t bytes)
{
    if (!bytes || !data || !atomic_load(&indexing))
        return;
    ds_lock_take(DS_LOCK_COPIES);
    add_share(tensor, data, bytes);
    ds_lock_give(DS_LOCK_COPIES);
}

void ds_copies_share_removed(uintptr_t tensor)
{
    if (!atomic_load(&indexing))
        return;
    ds_lock_take(DS_LOCK_COPIES);
    for (int i = 0; i < nshares; i++)
        if (shares[i].tensor == tensor) {
            shares[i] = shares[--nshares];
            break;
        }
    ds_lock_give(DS_LOCK_COPIES);
}

/* Lock held. */
static uintptr_t share_at(uintptr_t start, uint64_t bytes)
{
    for (int i = 0; i < nshares; i++)
        if (shares[i].start < start + bytes && start < shares[i].end)
            return shares[i].tensor;
    return 0;
}

/* ---- one side of a copy ---------------------------------------------------------- */

typedef struct {
    bool tracked;          /* inside a tracked allocation */
    ds_alloc_info alloc;
    bool device;           /* device (or managed) memory, not host */
    uintptr_t share;       /* the DLPack share it belongs to, if any */
} side;

static void describe(side *s, uintptr_t p)
{
    memset(s, 0, sizeof(*s));
    s->tracked = ds_alloc_lookup(p, &s->alloc);
    s->device = s->tracked && s->alloc.kind != DS_ALLOC_HOST && s->alloc.kind != DS_ALLOC_MAPPED;
}

static void side_fields(ds_ev *e, const char *which, const side *s, uintptr_t p)
{
    char key[32], device[32];
    ds_fmt(key, sizeof(key), "%s", which);
    ds_ev_hex(e, key, p);
    ds_fmt(key, sizeof(key), "%s_owner", which);
    ds_ev_str(e, key, s->tracked ? ds_name(s->alloc.owner) : NULL);
    if (!s->tracked)
        ds_fmt(device, sizeof(device), "cpu:0");
    else
        ds_alloc_device_name(device, sizeof(device), &s->alloc);
    ds_fmt(key, sizeof(key), "%s_device", which);
    ds_ev_str(e, key, device);
    ds_fmt(key, sizeof(key), "%s_share", which);
    if (s->share)
        ds_ev_hex(e, key, s->share);
    else
        ds_ev_str(e, key, NULL);
}

/* ---- a copy ---------------------------------------------------------------------- */

static int infer_direction(const side *src, const side *dst)
{
    if (src->device && dst->device)
        return src->alloc.device != dst->alloc.device ? DS_COPY_PEER : DS_COPY_D2D;
    if (src->device)
        return DS_COPY_D2H;
    if (dst->device)
        return DS_COPY_H2D;
    return DS_COPY_H2H;
}

static void emit_roundtrip(const trip *t, const side *dst, uint64_t bytes, const char *caller)
{
    char detail[DS_DETAIL_MAX + 2 * DS_NAME_MAX], to_device[32], from_device[32];
    ds_alloc_device_name(from_device, sizeof(from_device), &t->from);
    ds_alloc_device_name(to_device, sizeof(to_device), &dst->alloc);
    ds_fmt(detail, sizeof(detail),
           "%llu bytes went from %s's %s through host memory to %s's %s (copied by %s); a "
           "DLPack handoff between the two would have been zero-copy",
           (unsigned long long)bytes, ds_name(t->from.owner), from_device, ds_name(dst->alloc.owner),
           to_device, caller);
    if (!ds_event_wanted(DS_EV_ROUNDTRIP))
        return;
    ds_ev e;
    ds_ev_begin(&e, DS_EV_ROUNDTRIP);
    ds_ev_uint(&e, "bytes", bytes);
    ds_ev_name(&e, "from_owner", t->from.owner);
    ds_ev_str(&e, "from_device", from_device);
    ds_ev_name(&e, "to_owner", dst->alloc.owner);
    ds_ev_str(&e, "to_device", to_device);
    ds_ev_hex(&e, "host", t->host);
    ds_ev_str(&e, "detail", detail);
    ds_ev_end(&e);
}

void ds_copy_record(uintptr_t dst, uintptr_t src, uint64_t bytes, int direction,
                    bool needs_share, const void *caller_addr)
{
    if (!bytes)
        return;
    if (!atomic_load(&indexing))
        start_indexing();
    side s, d;
    describe(&s, src);
    describe(&d, dst);
    trip matched = {0};
    bool roundtrip = false;
    ds_lock_take(DS_LOCK_COPIES);
    s.share = share_at(src, bytes);
    d.share = share_at(dst, bytes);
    bool relevant = needs_share ? (s.share || d.share)
                                : (s.tracked || d.tracked || s.share || d.share);
    if (relevant) {
        if (direction == DS_COPY_INFER)
            direction = infer_direction(&s, &d);
        recent[nrecent % DS_RECENT_COPIES] =
            (recent_copy){dst, dst + bytes, src, s.tracked || s.share};
        __atomic_store_n(&nrecent, nrecent + 1, __ATOMIC_RELAXED);
        if (direction == DS_COPY_D2H && s.tracked) {
            trips[ntrips++ % DS_PENDING_TRIPS] =
                (trip){dst, dst + bytes, s.alloc};
        } else if (direction == DS_COPY_H2D && d.tracked) {
            uint64_t oldest = ntrips > DS_PENDING_TRIPS ? ntrips - DS_PENDING_TRIPS : 0;
            for (uint64_t n = ntrips; n > oldest && !roundtrip; n--) {
                trip *t = &trips[(n - 1) % DS_PENDING_TRIPS];
                if (t->host_end && t->host < src + bytes && src < t->host_end &&
                    t->from.owner != d.alloc.owner) {
                    matched = *t;
                    t->host_end = 0; /* one way back per way out */
                    roundtrip = true;
                }
            }
        }
    }
    ds_lock_give(DS_LOCK_COPIES);
    if (!relevant)
        return;

    char caller[DS_NAME_MAX];
    ds_module_name_at(caller_addr, caller, sizeof(caller));
    atomic_fetch_add(&transfers, 1);
    ds_note_work();
    atomic_fetch_add(&bytes_transferred, bytes);
    if (ds_event_wanted(DS_EV_COPY)) {
        ds_ev e;
        ds_ev_begin(&e, DS_EV_COPY);
        ds_ev_uint(&e, "bytes", bytes);
        ds_ev_str(&e, "direction", direction_names[direction]);
        side_fields(&e, "src", &s, src);
        side_fields(&e, "dst", &d, dst);
        ds_ev_str(&e, "by", caller);
        ds_ev_end(&e);
    }
    if (roundtrip) {
        atomic_fetch_add(&roundtrips, 1);
        ds_stats_roundtrip(matched.from.owner, d.alloc.owner);
        emit_roundtrip(&matched, &d, bytes, caller);
    }
}

bool ds_copies_filled_by_copy(uintptr_t data, uint64_t bytes, uintptr_t *source)
{
    bool found = false;
    if (__atomic_load_n(&nrecent, __ATOMIC_RELAXED) == 0)
        return false; /* no copy seen yet: no lock on every export */
    ds_lock_take(DS_LOCK_COPIES);
    uint64_t oldest = nrecent > DS_RECENT_COPIES ? nrecent - DS_RECENT_COPIES : 0;
    for (uint64_t n = nrecent; n > oldest; n--) {
        const recent_copy *c = &recent[(n - 1) % DS_RECENT_COPIES];
        if (c->dst < data + bytes && data < c->dst_end) {
            /* The newest copy into these bytes: a copy of another tracked
             * buffer that covers the export. */
            found = c->src_tracked && c->dst <= data && data + bytes <= c->dst_end;
            if (found && source)
                *source = c->src + (data - c->dst);
            break;
        }
    }
    ds_lock_give(DS_LOCK_COPIES);
    return found;
}

void ds_copies_totals(uint64_t *count, uint64_t *bytes, uint64_t *trips_out)
{
    *count = atomic_load(&transfers);
    *bytes = atomic_load(&bytes_transferred);
    *trips_out = atomic_load(&roundtrips);
}

void ds_copies_after_fork(void)
{
    atomic_store(&transfers, 0);
    atomic_store(&bytes_transferred, 0);
    atomic_store(&roundtrips, 0);
}
