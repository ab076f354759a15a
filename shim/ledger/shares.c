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

/* The index is DS_SHARE_SHARDS indexes, a share's by a hash of its
 * tensor's address, each under its shard of the SHARES lock: threads
 * exporting and releasing different tensors write nothing in common.  A
 * lookup by bytes asks every shard that holds shares (a copy or a free
 * checked, far rarer than handoffs in a program with many threads). */
#define DS_SHARE_SHARDS 16u
_Static_assert(DS_SHARDS_SPIN16 == DS_SHARE_SHARDS, "a SHARES lock shard per index");
#define DS_SHARES_INDEXED 1024 /* per shard */
#define DS_SHARE_BUCKET_BITS 11 /* two tables of 1 << 11 chain heads per shard */
#define DS_SHARE_LEVELS 13      /* 4 KiB << 3k: 2^48 bytes at the last */
#define DS_SHARE_FILTER_BITS 12 /* the filter of the granules the shards cover (128 KiB) */

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
    _Alignas(64) uint64_t changes; /* bumped as a share is added or removed (relaxed) */
    uint32_t count;      /* shares in the shard */
    uint32_t bit;        /* the shard's in maybe_live */
    unsigned index;      /* its index: levels_seen[index] */
    uint64_t one;        /* its group's one in a filter entry */
    uint16_t free_shares, next_share, free_placements, next_placement;
    uint16_t at_heads[1u << DS_SHARE_BUCKET_BITS], of_heads[1u << DS_SHARE_BUCKET_BITS];
    share shares[DS_SHARES_INDEXED + 1]; /* [0]: none */
    placement placements[2 * DS_SHARES_INDEXED + 1];
} shard;

static shard shards[DS_SHARE_SHARDS];

/* What a lookup reads without any lock, to take the lock of only the shards
 * that may hold a share in its range (about none, among thousands of shares
 * in every shard), where a lock a shard cost more than the lookup itself.
 *
 * filter[e]: for each entry (a granule and level hashed: the bits above
 * at_heads' of the same hash), how many placements of each group of four
 * shards fall in it, 16 bits a group: shard s adds and subtracts at bits
 * 16 * (s / 4) with atomic adds (no group's count passes
 * 8 * DS_SHARES_INDEXED, so no carry crosses into a neighbour).  A lookup
 * loads one word per granule probed (most free checks: one load, 0, done)
 * and takes the shards of the groups whose count is not 0.
 *
 * levels_seen[s]: the levels shard s has held shares at since it was last
 * found empty: set (under the shard's lock) as a level is first used,
 * cleared only by a lookup that finds the shard empty, so a thread that
 * exports and releases one tensor over and over writes it once; a lookup
 * probes the granules of these levels only (and, under the shard's lock,
 * looks for shares at these levels only).
 *
 * Relaxed throughout: both are written under the shard's lock, and a share
 * added before the lookup (happens-before) is seen by it; one added
 * meanwhile is as if added after. */
static _Alignas(64) _Atomic uint64_t filter[1u << DS_SHARE_FILTER_BITS];
_Static_assert(DS_SHARE_SHARDS == 16 && 8 * DS_SHARES_INDEXED < 65536, "four 16-bit groups");
static _Alignas(64) atomic_uint levels_seen[DS_SHARE_SHARDS];
/* Every level any shard has seen, never cleared: what a lookup probes (a
 * level no shard holds any more costs it a probe of an empty entry). */
static atomic_uint levels_any;

/* From the registry's hash of the tensor (ledger.h), which the ledger has
 * at hand. */
static unsigned shard_of(uint64_t hash)
{
    return ds_shares_shard(hash);
}

/* The shards that may hold shares, a bit each: set (under the shard's lock)
 * as a shard's first share is added, cleared (under it too) only by a
 * lookup that finds the shard empty, so a thread that exports and releases
 * one tensor over and over writes it once, not twice a cycle.  While it is
 * not 0 it counts once in ds_frees_watched. */
static atomic_uint maybe_live;

/* The hull of every share in host memory indexed so far, [host_lo, host_hi),
 * which only grows: a host free outside it touches no share, so its check
 * probes no granule.  Most of a program's frees are small blocks of its
 * heap, and its large tensors lie in mappings of their own, apart from it
 * (a program whose tensors lie in the heap too gains nothing, and pays two
 * loads).  Grown before the share is indexed: a lookup that misses a share
 * being added is one made before it. */
static _Atomic uintptr_t host_lo = UINTPTR_MAX, host_hi;

/* The end of [a, a + bytes), saturated: a producer's garbage size makes a
 * range that reaches the top of the address space, never one that wraps
 * below its start. */
static uintptr_t end_of(uintptr_t a, uint64_t bytes)
{
    return bytes > UINTPTR_MAX - a ? UINTPTR_MAX : a + (uintptr_t)bytes;
}

static void grow_host_hull(uintptr_t a, uint64_t bytes)
{
    uintptr_t b = end_of(a, bytes);
    uintptr_t lo = atomic_load_explicit(&host_lo, memory_order_relaxed);
    while (a < lo && !atomic_compare_exchange_weak_explicit(&host_lo, &lo, a, memory_order_relaxed,
                                                            memory_order_relaxed))
        ;
    uintptr_t hi = atomic_load_explicit(&host_hi, memory_order_relaxed);
    while (b > hi && !atomic_compare_exchange_weak_explicit(&host_hi, &hi, b, memory_order_relaxed,
                                                            memory_order_relaxed))
        ;
}

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

/* The first level whose granule holds `bytes`: ceil(log2(bytes)) from
 * the leading zeros, over the levels' steps of 3, rounded up. */
static unsigned level_of(uint64_t bytes)
{
    if (bytes <= (uint64_t)1 << shift_of(0))
        return 0;
    unsigned k = (unsigned)(64 - __builtin_clzll(bytes - 1) - shift_of(0) + 2) / 3;
    return k < DS_SHARE_LEVELS - 1 ? k : DS_SHARE_LEVELS - 1;
}

static uint16_t *bucket(uint16_t *heads, uint64_t key)
{
    return &heads[(key * 0x9e3779b97f4a7c15ull) >> (64u - DS_SHARE_BUCKET_BITS)];
}

/* A granule at level k, hashed: the top bits are its chain in at_heads, and
 * its entry in the filter. */
static uint64_t granule_hash(unsigned k, uintptr_t granule)
{
    return ((uint64_t)granule ^ (uint64_t)k << 58) * 0x9e3779b97f4a7c15ull;
}

static uint16_t *at_bucket(shard *d, uint64_t gh)
{
    return &d->at_heads[gh >> (64u - DS_SHARE_BUCKET_BITS)];
}

static _Atomic uint64_t *filter_entry(uint64_t gh)
{
    return &filter[gh >> (64u - DS_SHARE_FILTER_BITS)];
}

/* Shard d's count at the entry, up or down by one (its lock held). */
static void filter_add(const shard *d, uint64_t gh, bool up)
{
    if (up)
        atomic_fetch_add_explicit(filter_entry(gh), d->one, memory_order_relaxed);
    else
        atomic_fetch_sub_explicit(filter_entry(gh), d->one, memory_order_relaxed);
}

static void note_live(uint32_t bit);

/* Shard held: share n listed under the granules it covers (or removed from
 * them), at its level.  A level new to the shard is marked seen, and the
 * first one marks the shard live. */
static void place(shard *d, uint16_t n)
{
    unsigned k = d->shares[n].level, sh = shift_of(k);
    for (uintptr_t g = d->shares[n].start >> sh; g <= (d->shares[n].end - 1) >> sh; g++) {
        uint16_t p = d->free_placements ? d->free_placements : d->next_placement++;
        if (p == d->free_placements)
            d->free_placements = d->placements[p].next;
        uint64_t gh = granule_hash(k, g);
        uint16_t *head = at_bucket(d, gh);
        d->placements[p] = (placement){n, *head};
        *head = p;
        filter_add(d, gh, true);
    }
    atomic_uint *seen = &levels_seen[d->index];
    unsigned was = atomic_load_explicit(seen, memory_order_relaxed);
    if (!(was & 1u << k)) {
        atomic_store_explicit(seen, was | 1u << k, memory_order_relaxed);
        if (!(atomic_load_explicit(&levels_any, memory_order_relaxed) & 1u << k))
            atomic_fetch_or_explicit(&levels_any, 1u << k, memory_order_relaxed);
        if (!was)
            note_live(d->bit);
    }
}

static void unplace(shard *d, uint16_t n)
{
    unsigned k = d->shares[n].level, sh = shift_of(k);
    for (uintptr_t g = d->shares[n].start >> sh; g <= (d->shares[n].end - 1) >> sh; g++) {
        uint64_t gh = granule_hash(k, g);
        uint16_t *l = at_bucket(d, gh);
        while (*l && d->placements[*l].share != n)
            l = &d->placements[*l].next;
        uint16_t p = *l;
        if (p) {
            filter_add(d, gh, false);
            *l = d->placements[p].next;
            d->placements[p].next = d->free_placements;
            d->free_placements = p;
        }
    }
}

/* Its shard held: the shard may hold shares from now on.  The bit's owner is the
 * shard's lock (set and cleared only under it); the word is shared, so an
 * atomic or, and only when the bit is clear.  The first bit counts the
 * shares in ds_frees_watched (relaxed: the host free hooks read it with
 * acquire, and the share's own data is read under the shard's lock). */
static void note_live(uint32_t bit)
{
    if (atomic_load_explicit(&maybe_live, memory_order_relaxed) & bit)
        return;
    if (atomic_fetch_or_explicit(&maybe_live, bit, memory_order_relaxed) == 0)
        atomic_fetch_add_explicit(&ds_frees_watched, 1, memory_order_relaxed);
}

/* Shard `s` held and found empty by a lookup: its bit cleared, and the
 * shares' count in ds_frees_watched with the last bit. */
static void note_empty(unsigned s)
{
    atomic_store_explicit(&levels_seen[s], 0, memory_order_relaxed);
    if (!(atomic_load_explicit(&maybe_live, memory_order_relaxed) & 1u << s))
        return;
    if (atomic_fetch_and_explicit(&maybe_live, ~(1u << s), memory_order_relaxed) == 1u << s)
        atomic_fetch_sub_explicit(&ds_frees_watched, 1, memory_order_relaxed);
}

/* Its shard held. */
static void add_share(shard *d, uintptr_t tensor, uintptr_t data, uint64_t bytes)
{
    uint16_t *head = bucket(d->of_heads, tensor), n = *head;
    while (n && d->shares[n].tensor != tensor)
        n = d->shares[n].next_of;
    if (n) {
        unplace(d, n); /* exported again: updated */
    } else {
        n = d->free_shares ? d->free_shares
                           : d->next_share <= DS_SHARES_INDEXED ? d->next_share++ : 0;
        if (!n)
            return;
        if (n == d->free_shares)
            d->free_shares = d->shares[n].next_of;
        d->shares[n].tensor = tensor;
        d->shares[n].next_of = *head;
        *head = n;
        d->count++;
    }
    d->shares[n].start = data;
    d->shares[n].end = end_of(data, bytes);
    d->shares[n].level = (uint8_t)level_of(bytes);
    place(d, n);
    __atomic_store_n(&d->changes, d->changes + 1, __ATOMIC_RELAXED);
}

/* The shards this thread's releases emptied since its last lookup, a bit
 * each: their bits in maybe_live are given up at this thread's next lookup
 * (a free checked) if they are still empty, so that a thread that shares a
 * few tensors at a time stops having its frees checked right after the
 * releases, as with one exact count, and a thread that exports again before
 * any free writes nothing. */
static DS_TLS uint32_t emptied;

/* Its shard held.  Its bit in maybe_live stays until a lookup finds the
 * shard empty. */
static void remove_share(shard *d, uintptr_t tensor)
{
    uint16_t *l = bucket(d->of_heads, tensor);
    while (*l && d->shares[*l].tensor != tensor)
        l = &d->shares[*l].next_of;
    uint16_t n = *l;
    if (!n)
        return;
    *l = d->shares[n].next_of;
    unplace(d, n);
    d->shares[n].level = LEVEL_FREE;
    d->shares[n].next_of = d->free_shares;
    d->free_shares = n;
    if (--d->count == 0)
        emptied |= d->bit;
    __atomic_store_n(&d->changes, d->changes + 1, __ATOMIC_RELAXED);
}

/* Every shard held (start_indexing). */
static void index_record(const ds_record *r, void *arg)
{
    (void)arg;
    if (r->state == DS_RELEASED || !r->data || !r->bytes)
        return;
    if (ds_in_host_memory(r->device_type))
        grow_host_hull(r->data, r->bytes);
    add_share(&shards[shard_of(ds_reg_hash(r->key))], r->key, r->data, r->bytes);
}

/* The registry's lock, then ours: the only place the two are held together.
 * Under both, no export or release can slip between the scan and the switch
 * (each checks `indexing` after its registry update). */
static __attribute__((noinline)) void start_indexing(void)
{
    ds_reg_lock_all();
    ds_lock_take(DS_LOCK_SHARES);
    if (!atomic_load(&indexing)) {
        for (unsigned s = 0; s < DS_SHARE_SHARDS; s++) {
            shards[s].next_share = shards[s].next_placement = 1; /* [0] is none */
            shards[s].bit = 1u << s;
            shards[s].index = s;
            shards[s].one = (uint64_t)1 << (16 * (s / 4));
        }
        ds_reg_foreach(index_record, NULL);
        atomic_store(&indexing, true);
    }
    ds_lock_give(DS_LOCK_SHARES);
    ds_reg_unlock_all();
}

/* Both inline into the ledger (link-time optimisation): on every export and
 * release, and mostly a load. */
void ds_shares_index(void)
{
    if (!atomic_load(&indexing))
        start_indexing();
}

inline __attribute__((always_inline)) void ds_shares_added(uint64_t hash, uintptr_t tensor,
                                                           uintptr_t data, uint64_t bytes,
                                                           bool host)
{
    if (!bytes || !data || !atomic_load(&indexing))
        return;
    if (host)
        grow_host_hull(data, bytes);
    unsigned s = shard_of(hash);
    ds_lock_take_shard(DS_LOCK_SHARES, s);
    add_share(&shards[s], tensor, data, bytes);
    ds_lock_give_shard(DS_LOCK_SHARES, s);
}

inline __attribute__((always_inline)) void ds_shares_removed(uint64_t hash, uintptr_t tensor)
{
    if (!atomic_load(&indexing))
        return;
    unsigned s = shard_of(hash);
    ds_lock_take_shard(DS_LOCK_SHARES, s);
    remove_share(&shards[s], tensor);
    ds_lock_give_shard(DS_LOCK_SHARES, s);
}

/* The sum of the shards' counters: it moves whenever one does. */
uint64_t ds_shares_changes(void)
{
    uint64_t n = 0;
#pragma GCC unroll 16
    for (unsigned s = 0; s < DS_SHARE_SHARDS; s++)
        n += __atomic_load_n(&shards[s].changes, __ATOMIC_RELAXED);
    return n;
}

static bool overlaps(const shard *d, uint16_t n, unsigned k, uintptr_t a, uintptr_t b)
{
    return d->shares[n].level == k && d->shares[n].start < b && a < d->shares[n].end;
}

/* Shard held: a share of it overlapping [a, b) (when several do, one). */
static uintptr_t share_at_locked(const shard *d, uintptr_t a, uintptr_t b)
{
    for (uint32_t used = atomic_load_explicit(&levels_seen[d->index], memory_order_relaxed); used;
         used &= used - 1) {
        unsigned k = (unsigned)__builtin_ctz(used), sh = shift_of(k);
        uintptr_t first = a >> sh, last = (b - 1) >> sh;
        if (last - first < GRANULES_PROBED) {
            for (uintptr_t g = first; g <= last; g++)
                for (uint16_t p = *at_bucket((shard *)d, granule_hash(k, g)); p;
                     p = d->placements[p].next)
                    if (overlaps(d, d->placements[p].share, k, a, b))
                        return d->shares[d->placements[p].share].tensor;
        } else {
            for (uint16_t n = 1; n < d->next_share; n++)
                if (overlaps(d, n, k, a, b))
                    return d->shares[n].tensor;
        }
    }
    return 0;
}

/* The shards that may hold a share overlapping [a, b), from the filter
 * alone (no lock): those counted at an entry of a granule the range covers,
 * on a level some shard has seen; every live one where the range is wider
 * than GRANULES_PROBED granules of a level (it walks that level's shares). */
static uint32_t candidates(uintptr_t a, uintptr_t b, uint32_t live)
{
    uint32_t found = 0;
    for (uint32_t levels = atomic_load_explicit(&levels_any, memory_order_relaxed); levels;
         levels &= levels - 1) {
        unsigned k = (unsigned)__builtin_ctz(levels), sh = shift_of(k);
        uintptr_t first = a >> sh, last = (b - 1) >> sh;
        if (last - first >= GRANULES_PROBED)
            return live;
        for (uintptr_t g = first; g <= last; g++) {
            uint64_t counts =
                atomic_load_explicit(filter_entry(granule_hash(k, g)), memory_order_relaxed);
            for (unsigned group = 0; counts; group++, counts >>= 16)
                if (counts & 0xffff)
                    found |= 0xfu << (4 * group);
        }
    }
    return found & live;
}

/* Lookups on this thread since its last sweep of empty shards. */
static DS_TLS unsigned lookups;

/* The shards that may hold a share in the range, each under its lock, one
 * at a time.  A share added meanwhile to a shard already passed is as if
 * added after the lookup (as one added just after the lock was given back
 * would be).  A lookup also visits the shard its thread's last release
 * emptied (see `emptied`), and every 64th lookup of a thread every live
 * shard, so that those found empty give up their bits in maybe_live (and
 * the host free hooks stop looking once no share is left). */
static __attribute__((noinline)) uintptr_t visit_shards(uintptr_t a, uintptr_t b, bool near,
                                                        uint32_t live, bool sweep)
{
    uint32_t visit = near ? candidates(a, b, live) : 0;
    if (sweep)
        visit = live;
    else
        visit |= live & emptied;
    emptied = 0;
    uintptr_t t = 0;
    for (; visit && !t; visit &= visit - 1) {
        unsigned s = (unsigned)__builtin_ctz(visit);
        ds_lock_take_shard(DS_LOCK_SHARES, s);
        if (shards[s].count)
            t = share_at_locked(&shards[s], a, b);
        else
            note_empty(s);
        ds_lock_give_shard(DS_LOCK_SHARES, s);
    }
    return t;
}

/* Inline: a host free outside the hull with no sweep due (most frees while
 * a share is live) is answered here, without a call. */
static inline uintptr_t shares_at(uintptr_t a, uint64_t bytes, bool host)
{
    uint32_t live = atomic_load_explicit(&maybe_live, memory_order_relaxed);
    if (!live)
        return 0;
    uintptr_t b = end_of(a, bytes);
    /* Outside the host hull no candidate, but the sweeps still go. */
    bool near = !host || (a < atomic_load_explicit(&host_hi, memory_order_relaxed) &&
                          b > atomic_load_explicit(&host_lo, memory_order_relaxed));
    bool sweep = ++lookups % 64 == 0;
    if (!near && !sweep && !(live & emptied)) {
        emptied = 0;
        return 0;
    }
    return visit_shards(a, b, near, live, sweep);
}

uintptr_t ds_shares_at(uintptr_t a, uint64_t bytes)
{
    return shares_at(a, bytes, false);
}

uintptr_t ds_shares_host_at(uintptr_t a, uint64_t bytes)
{
    return shares_at(a, bytes, true);
}
