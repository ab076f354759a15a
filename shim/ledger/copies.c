/*
 * copies.c — copy accounting: every transfer that touches a tracked
 * allocation or a DLPack share becomes a `copy` event; an export filled by
 * a copy from another tracked buffer is a copy, not a zero-copy share; and a
 * device→host copy out of one owner followed by a host→device copy of the
 * same host bytes into another owner is a `roundtrip` that a DLPack handoff
 * would have avoided.
 *
 * Live shares (exported tensors not yet released) are indexed by their data
 * range here, so a copy can name the tensor it reads or writes; finding
 * that a copy touches none costs the same with one share or thousands.
 * Bounded tables, one spin lock (every copy takes it), nothing called out
 * while it is held.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "ledger/ledger.h"

#define DS_SHARES_INDEXED 8192
#define DS_SHARE_BUCKET_BITS 14 /* two tables of 1 << 14 chain heads */
#define DS_SHARE_LEVELS 13      /* 4 KiB << 3k: 2^48 bytes at the last */
#define DS_RECENT_COPIES 256   /* for exports filled by a copy (a power of two) */
#define DS_PENDING_TRIPS 256   /* device→host copies waiting for their way back */

typedef struct {
    uintptr_t tensor, start, end;
    uint16_t next_of; /* the chain by tensor (share indices; 0 ends), or the free list */
    uint8_t level;    /* LEVEL_FREE: not in use */
} share;

/* A share listed in the chain of one granule it covers. */
typedef struct {
    uint16_t share, next; /* 0 ends the chain, or the free list */
} placement;

typedef struct {
    uintptr_t dst, dst_end, src;
    bool src_tracked;
    int8_t direction;
} recent_copy;

typedef struct {
    uintptr_t host, host_end;
    ds_alloc_info from; /* the device allocation the bytes came out of */
} trip;

static share shares[DS_SHARES_INDEXED + 1]; /* [0]: none */
static placement placements[2 * DS_SHARES_INDEXED + 1];
static uint16_t at_heads[1u << DS_SHARE_BUCKET_BITS], of_heads[1u << DS_SHARE_BUCKET_BITS];
static uint16_t free_shares, next_share = 1, free_placements, next_placement = 1;
static uint32_t per_level[DS_SHARE_LEVELS];
static uint32_t levels_used; /* bit k: level k holds shares (lookups skip the others) */
static uint64_t share_changes; /* bumped as a share is added or removed */
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

/* Size classes, as allocs.c indexes allocations: level k holds the shares of
 * at most 4 KiB << 3k bytes, each listed in a hash table under the granules
 * of that size it covers (one or two).  A range is looked up under the
 * granules it covers, per level in use: one or two chains, however many
 * shares live, where shares are no smaller than a tenth of the range.  A
 * range over more granules (a copy far bigger than a level's shares) walks
 * that level's shares instead: such a copy costs far more itself.  A second
 * table finds a share by its tensor. */
#define LEVEL_FREE 0xffu
#define GRANULES_PROBED 2u

static unsigned shift_of(unsigned k)
{
    return 12u + 3u * k;
}

static unsigned level_of(uint64_t bytes)
{
    unsigned k = 0;
    while (k + 1 < DS_SHARE_LEVELS && bytes > (uint64_t)1 << shift_of(k))
        k++;
    return k;
}

static uint16_t *bucket(uint16_t *heads, uint64_t key)
{
    return &heads[(key * 0x9e3779b97f4a7c15ull) >> (64u - DS_SHARE_BUCKET_BITS)];
}

static uint16_t *at_bucket(unsigned k, uintptr_t granule)
{
    return bucket(at_heads, (uint64_t)granule ^ (uint64_t)k << 58);
}

/* Lock held: share n listed under the granules it covers (or removed from
 * them), at its level. */
static void place(uint16_t n)
{
    unsigned k = shares[n].level, sh = shift_of(k);
    for (uintptr_t g = shares[n].start >> sh; g <= (shares[n].end - 1) >> sh; g++) {
        uint16_t p = free_placements ? free_placements : next_placement++;
        if (p == free_placements)
            free_placements = placements[p].next;
        uint16_t *head = at_bucket(k, g);
        placements[p] = (placement){n, *head};
        *head = p;
    }
    per_level[k]++;
    levels_used |= 1u << k;
}

static void unplace(uint16_t n)
{
    unsigned k = shares[n].level, sh = shift_of(k);
    for (uintptr_t g = shares[n].start >> sh; g <= (shares[n].end - 1) >> sh; g++) {
        uint16_t *l = at_bucket(k, g);
        while (*l && placements[*l].share != n)
            l = &placements[*l].next;
        uint16_t p = *l;
        if (p) {
            *l = placements[p].next;
            placements[p].next = free_placements;
            free_placements = p;
        }
    }
    if (--per_level[k] == 0)
        levels_used &= ~(1u << k);
}

/* Lock held. */
static void add_share(uintptr_t tensor, uintptr_t data, uint64_t bytes)
{
    uint16_t *head = bucket(of_heads, tensor), n = *head;
    while (n && shares[n].tensor != tensor)
        n = shares[n].next_of;
    if (n) {
        unplace(n); /* exported again: updated */
    } else {
        n = free_shares ? free_shares : next_share <= DS_SHARES_INDEXED ? next_share++ : 0;
        if (!n)
            return;
        if (n == free_shares)
            free_shares = shares[n].next_of;
        shares[n].tensor = tensor;
        shares[n].next_of = *head;
        *head = n;
    }
    shares[n].start = data;
    shares[n].end = data + bytes;
    shares[n].level = (uint8_t)level_of(bytes);
    place(n);
    __atomic_store_n(&share_changes, share_changes + 1, __ATOMIC_RELAXED);
}

/* Lock held. */
static void remove_share(uintptr_t tensor)
{
    uint16_t *l = bucket(of_heads, tensor);
    while (*l && shares[*l].tensor != tensor)
        l = &shares[*l].next_of;
    uint16_t n = *l;
    if (!n)
        return;
    *l = shares[n].next_of;
    unplace(n);
    shares[n].level = LEVEL_FREE;
    shares[n].next_of = free_shares;
    free_shares = n;
    __atomic_store_n(&share_changes, share_changes + 1, __ATOMIC_RELAXED);
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

/* Both inline into the ledger (link-time optimisation): on every export and
 * release, and mostly a load. */
inline __attribute__((always_inline)) void ds_copies_share_added(uintptr_t tensor, uintptr_t data,
                                                                 uint64_t bytes)
{
    if (!bytes || !data || !atomic_load(&indexing))
        return;
    ds_lock_take(DS_LOCK_COPIES);
    add_share(tensor, data, bytes);
    ds_lock_give(DS_LOCK_COPIES);
}

inline __attribute__((always_inline)) void ds_copies_share_removed(uintptr_t tensor)
{
    if (!atomic_load(&indexing))
        return;
    ds_lock_take(DS_LOCK_COPIES);
    remove_share(tensor);
    ds_lock_give(DS_LOCK_COPIES);
}

static bool overlaps(uint16_t n, unsigned k, uintptr_t a, uintptr_t b)
{
    return shares[n].level == k && shares[n].start < b && a < shares[n].end;
}

/* Lock held: a share overlapping [a, a + bytes) (when several do, one). */
static uintptr_t share_at(uintptr_t a, uint64_t bytes)
{
    uintptr_t b = bytes > UINTPTR_MAX - a ? UINTPTR_MAX : a + bytes;
    for (uint32_t used = levels_used; used; used &= used - 1) {
        unsigned k = (unsigned)__builtin_ctz(used), sh = shift_of(k);
        uintptr_t first = a >> sh, last = (b - 1) >> sh;
        if (last - first < GRANULES_PROBED) {
            for (uintptr_t g = first; g <= last; g++)
                for (uint16_t p = *at_bucket(k, g); p; p = placements[p].next)
                    if (overlaps(placements[p].share, k, a, b))
                        return shares[placements[p].share].tensor;
        } else {
            for (uint16_t n = 1; n < next_share; n++)
                if (overlaps(n, k, a, b))
                    return shares[n].tensor;
        }
    }
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

/* The last device copy on this thread and whether it was relevant, with
 * what that answer holds under: the count of allocation and share changes
 * (their sum: both only grow), and of recent copies after its own entry.
 * Programs repeat copies between the same buffers; the same copy again
 * while these hold is relevant or not alike, and if it is, its entry is
 * still the newest recent copy: it is counted, nothing else.  Not kept for
 * copies between host and device (their trips go on), nor read when events
 * are written.  Device copies only: they run inside a device call, where a
 * signal handler on this thread does not come back here (its device calls
 * are inner ones); a host copy (memcpy) may. */
typedef struct {
    uintptr_t dst, src;
    uint64_t bytes, changes, nrecent;
    int8_t direction;
    bool relevant;
} copy_memo;
static DS_TLS copy_memo last_copy;

static uint64_t changes_now(void)
{
    return ds_alloc_changes() + __atomic_load_n(&share_changes, __ATOMIC_RELAXED);
}

/* Always inline: it is all a repeated copy does (ds_copy_repeat). */
__attribute__((always_inline)) static inline void count(uint64_t bytes)
{
    atomic_fetch_add(&transfers, 1);
    ds_note_work();
    atomic_fetch_add(&bytes_transferred, bytes);
}

/* Whether last_copy answers for this copy. */
static inline bool repeated(const copy_memo *m, uintptr_t dst, uintptr_t src, uint64_t bytes,
                            int direction)
{
    return m->dst == dst && m->src == src && m->bytes == bytes && m->direction == direction &&
           m->changes == changes_now() &&
           (!m->relevant || m->nrecent == __atomic_load_n(&nrecent, __ATOMIC_RELAXED)) &&
           !ds_event_wanted(DS_EV_COPY);
}

/* The copy's sides, looked up and matched with the shares and trips. */
__attribute__((noinline)) static void record_general(uintptr_t dst, uintptr_t src,
                                                     uint64_t bytes, int direction,
                                                     bool needs_share, const void *caller_addr)
{
    if (!atomic_load(&indexing))
        start_indexing();
    copy_memo memo = {dst, src, bytes, changes_now(), 0, (int8_t)direction, false};
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
            (recent_copy){dst, dst + bytes, src, s.tracked || s.share, (int8_t)direction};
        __atomic_store_n(&nrecent, nrecent + 1, __ATOMIC_RELAXED);
        memo.nrecent = nrecent;
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
    memo.relevant = relevant;
    if (relevant && (direction == DS_COPY_D2H || direction == DS_COPY_H2D))
        memo = (copy_memo){0}; /* their trips go on: never repeated */
    if (!needs_share)
        last_copy = memo;
    if (!relevant)
        return;

    count(bytes);
    bool show = ds_event_wanted(DS_EV_COPY);
    if (!show && !roundtrip)
        return; /* nothing names the copying module */
    char caller[DS_NAME_MAX];
    ds_module_name_at(caller_addr, caller, sizeof(caller));
    if (show) {
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

/* Always inline, into the hooks too (link-time optimisation), as sync.c's
 * ds_sync_op_now. */
__attribute__((always_inline)) inline bool ds_copy_is_repeat(uintptr_t dst, uintptr_t src,
                                                             uint64_t bytes, int direction)
{
    return !bytes || repeated(&last_copy, dst, src, bytes, direction);
}

__attribute__((always_inline)) inline void ds_copy_repeat(uint64_t bytes)
{
    if (bytes && last_copy.relevant)
        count(bytes);
}

void ds_copy_record(uintptr_t dst, uintptr_t src, uint64_t bytes, int direction,
                    bool needs_share, const void *caller_addr)
{
    if (!needs_share && ds_copy_is_repeat(dst, src, bytes, direction))
        ds_copy_repeat(bytes);
    else if (bytes)
        record_general(dst, src, bytes, direction, needs_share, caller_addr);
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
             * buffer that covers the export (__dlpack__(dl_device=cpu) and
             * __dlpack__(copy=True) copy so).  A copy from the host onto a
             * device is the program's own (jax.device_put): no producer's
             * __dlpack__ moves host bytes onto a device for its consumer. */
            found = c->src_tracked && c->direction != DS_COPY_H2D && c->dst <= data &&
                    data + bytes <= c->dst_end;
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
