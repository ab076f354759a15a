/*
 * shares.c — the live shares (exported tensors not yet released), indexed
 * by the bytes they cover: what a copy reads or writes (copies.c) and what
 * a host free would take away (host_frees.c) are named through it, and
 * finding that a range touches no share costs the same with one share or
 * thousands.  Bounded tables, one spin lock, nothing called out while it is
 * held.
 */
#include <stdatomic.h>
#include <string.h>

#include "ledger/ledger.h"

#define DS_SHARES_INDEXED 8192
#define DS_SHARE_BUCKET_BITS 14 /* two tables of 1 << 14 chain heads */
#define DS_SHARE_LEVELS 13      /* 4 KiB << 3k: 2^48 bytes at the last */

typedef struct {
    uintptr_t tensor, start, end;
    uint16_t next_of; /* the chain by tensor (share indices; 0 ends), or the free list */
    uint8_t level;    /* LEVEL_FREE: not in use */
} share;

/* A share listed in the chain of one granule it covers. */
typedef struct {
    uint16_t share, next; /* 0 ends the chain, or the free list */
} placement;

static share shares[DS_SHARES_INDEXED + 1]; /* [0]: none */
static placement placements[2 * DS_SHARES_INDEXED + 1];
static uint16_t at_heads[1u << DS_SHARE_BUCKET_BITS], of_heads[1u << DS_SHARE_BUCKET_BITS];
static uint16_t free_shares, next_share = 1, free_placements, next_placement = 1;
static uint32_t per_level[DS_SHARE_LEVELS];
static uint32_t levels_used; /* bit k: level k holds shares (lookups skip the others) */
static uint64_t share_changes; /* bumped as a share is added or removed */

/* Kept only from the first need on (a copy, or host frees watched): a
 * program that needs none pays no lock per handoff for it.  The first need
 * builds it from the registry's live records. */
static atomic_bool indexing;
atomic_uint ds_frees_watched;

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
        atomic_fetch_add_explicit(&ds_frees_watched, 1, memory_order_relaxed);
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
    atomic_fetch_sub_explicit(&ds_frees_watched, 1, memory_order_relaxed);
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
static __attribute__((noinline)) void start_indexing(void)
{
    ds_reg_lock();
    ds_lock_take(DS_LOCK_SHARES);
    if (!atomic_load(&indexing)) {
        ds_reg_foreach(index_record, NULL);
        atomic_store(&indexing, true);
    }
    ds_lock_give(DS_LOCK_SHARES);
    ds_reg_unlock();
}

/* Both inline into the ledger (link-time optimisation): on every export and
 * release, and mostly a load. */
void ds_shares_index(void)
{
    if (!atomic_load(&indexing))
        start_indexing();
}

inline __attribute__((always_inline)) void ds_shares_added(uintptr_t tensor, uintptr_t data,
                                                           uint64_t bytes)
{
    if (!bytes || !data || !atomic_load(&indexing))
        return;
    ds_lock_take(DS_LOCK_SHARES);
    add_share(tensor, data, bytes);
    ds_lock_give(DS_LOCK_SHARES);
}

inline __attribute__((always_inline)) void ds_shares_removed(uintptr_t tensor)
{
    if (!atomic_load(&indexing))
        return;
    ds_lock_take(DS_LOCK_SHARES);
    remove_share(tensor);
    ds_lock_give(DS_LOCK_SHARES);
}

uint64_t ds_shares_changes(void)
{
    return __atomic_load_n(&share_changes, __ATOMIC_RELAXED);
}

static bool overlaps(uint16_t n, unsigned k, uintptr_t a, uintptr_t b)
{
    return shares[n].level == k && shares[n].start < b && a < shares[n].end;
}

/* Lock held: a share overlapping [a, a + bytes) (when several do, one). */
static uintptr_t share_at_locked(uintptr_t a, uint64_t bytes)
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

uintptr_t ds_shares_at(uintptr_t a, uint64_t bytes)
{
    ds_lock_take(DS_LOCK_SHARES);
    uintptr_t t = share_at_locked(a, bytes);
    ds_lock_give(DS_LOCK_SHARES);
    return t;
}
