/*
 * alloc_index.c — the index of live allocations: pointer (or handle) -> the
 * allocation holding it, for allocs.c, which holds the lock (alloc_index.h).
 *
 * One hash table of size classes holds the records themselves, 64 bytes
 * each, in mmap'd memory (never malloc: hooks run inside allocators,
 * deleters and signal handlers), and answers pointer -> allocation with one
 * memory access that depends on nothing but the pointer: about one cache
 * miss at a million live allocations, at 81 to 122 bytes per allocation.
 * Written by hand: no Debian library offers an allocation-free interval map
 * for C.
 *
 * Level k holds the allocations of at most 256 B << 2k bytes (and more than a
 * quarter of that, above level 0), keyed by (k, the granule of that size
 * their base lies in).  An allocation holding p then starts in p's granule
 * or, if it straddles a granule's end, in the one before: a lookup probes one
 * key per level in use, two where the level has a straddler (allocations
 * aligned to their size never straddle), however many allocations there are.
 * Keys are unique but for small allocations: at most four of a level start
 * in a granule (more only in level 0, under 64 bytes each).  Handles are a
 * class apart from the levels, keyed by the handle's value, so that
 * consecutive handles do not crowd one key: one probe, one entry per key.
 *
 * The records live in the table itself (open addressing, Robin Hood linear
 * probing), not behind an index of node numbers: a probe's address depends
 * on the pointer alone, and the record is on the first cache line it
 * fetches, where a chain of node numbers cost a dependent miss per link (265
 * ns a lookup at 1e6: four misses and their TLB walks).  A B-tree or a radix
 * tree over addresses would cost a dependent miss per level below the cached
 * ones, then one for the record.  Robin Hood keeps each home's entries
 * together, so a probe stops at the first slot whose entry sits nearer its
 * own home than we are to ours, or, in a class whose keys each have one
 * entry (counted as entries come and go), at the key's entry itself.  A
 * record moves when its neighbours do: nothing holds a slot number across a
 * change of the index (ds_alloc_index_exact finds an allocation again by
 * base and generation).
 *
 * Mixed sizes put many levels in use, and a probe each would be a miss each
 * at scale: a filter of two bits per key, both in one word (a byte per slot,
 * after the slots), rules out before its probe most keys no entry has, and
 * the probes left are prefetched together.  Only the level with the most
 * entries is probed without asking: most pointers lie there.
 *
 * The table grows by half when four fifths full, so it stays more than half
 * full (65 bytes a slot over a load of 0.53 to 0.8: 81 to 122 bytes per
 * allocation); a table of many megabytes asks for transparent huge pages,
 * each of which saves a page walk per probe where the kernel grants them
 * (nothing depends on it).
 */
#include <string.h>
#include <sys/mman.h>

#include "alloc_index.h"

#define table ds_alloc_table
#define capacity ds_alloc_capacity

#define DS_LEVELS 25u               /* 256 B << 48 = 64 PiB: any user-space size */
#define DS_HANDLES DS_LEVELS        /* the class of handles; the levels are the others */
#define DS_CLASSES (DS_LEVELS + 1u)
#define DS_FIRST_SLOTS 1024u
#define DS_MAX_SLOTS (1u << 26)     /* 4 GiB of table, 53 million allocations */
#define DS_HUGE_TABLE (4u << 20)    /* bytes from which a table asks for huge pages */

ds_alloc_node *ds_alloc_table; /* capacity slots, then the filter's words, mmap'd together */
uint32_t ds_alloc_capacity;
uint64_t ds_alloc_live_count, ds_alloc_live_bytes;
static uint64_t *filter;
static uint32_t filter_words, filter_stale; /* stale: entries gone since it was built */
static uint32_t per_class[DS_CLASSES]; /* live entries of each class */
static uint32_t straddling[DS_CLASSES]; /* those that cross their granule's end */
static uint32_t doubled[DS_CLASSES];    /* those past the first of their key: 0, keys unique */
static uint32_t levels_used;            /* bit k: level k has any (lookups skip the rest) */
static unsigned main_level;             /* the level that had the most entries */

static unsigned level_shift(unsigned k) { return 8u + 2u * k; }

static unsigned shift_of(unsigned k) { return k == DS_HANDLES ? 0 : level_shift(k); }

static unsigned level_of(uint64_t size)
{
    unsigned k = 0;
    while (k + 1 < DS_LEVELS && size > (uint64_t)1 << level_shift(k))
        k++;
    return k;
}

/* The bytes an entry answers lookups for: a handle is one key. */
static uint64_t span_of(const ds_alloc_node *e)
{
    return e->klass == DS_HANDLES + 1 || !e->size ? 1 : e->size;
}

static uintptr_t granule_of(const ds_alloc_node *e) { return e->base >> shift_of(e->klass - 1u); }

static bool straddles(const ds_alloc_node *e)
{
    return ((e->base + span_of(e) - 1) >> shift_of(e->klass - 1u)) != granule_of(e);
}

/* Multiplicative hashing spreads consecutive granules evenly (each class's
 * moved far from the others' by a multiple of an odd constant); the high
 * half scaled to the capacity (which is not a power of two) picks the home. */
static uint64_t key_hash(unsigned k, uintptr_t granule)
{
    return ((uint64_t)granule + (uint64_t)k * 0xc2b2ae3d27d4eb4full) * 0x9e3779b97f4a7c15ull;
}

static uint32_t home_at(uint64_t h) { return (uint32_t)(((h >> 32) * capacity) >> 32); }

static uint32_t home_of(unsigned k, uintptr_t granule) { return home_at(key_hash(k, granule)); }

/* The filter's word for key hash h, and *bits: two of its bits, from the
 * hash mixed again (the home took its high half). */
static uint64_t *filter_bits(uint64_t h, uint64_t *bits)
{
    uint64_t x = (h ^ h >> 31) * 0xbf58476d1ce4e5b9ull;
    *bits = 1ull << (x & 63) | 1ull << (x >> 6 & 63);
    return &filter[((x >> 32) * filter_words) >> 32];
}

static void filter_add(const ds_alloc_node *e)
{
    if (e->klass == DS_HANDLES + 1)
        return;
    uint64_t bits, *word = filter_bits(key_hash(e->klass - 1u, granule_of(e)), &bits);
    *word |= bits;
}

/* False: no entry has the key of hash h.  True: one may (a false positive
 * for about one key in 20 to 30). */
static bool maybe_present(uint64_t h)
{
    uint64_t bits, word = *filter_bits(h, &bits);
    return (word & bits) == bits;
}

/* Bits cannot be cleared one key at a time (keys share them), so entries
 * gone leave theirs set until the filter is built again from the table:
 * when they come to a quarter of the slots, an O(n) pass that as many
 * removals pay for. */
static void filter_rebuild(void)
{
    memset(filter, 0, (size_t)filter_words * sizeof(uint64_t));
    for (uint32_t s = 0; s < capacity; s++)
        if (table[s].klass)
            filter_add(&table[s]);
    filter_stale = 0;
}

static uint32_t next_slot(uint32_t s) { return s + 1 == capacity ? 0 : s + 1; }

/* Robin Hood: walking from its home, e takes the slot of the first entry
 * nearer its own home, which goes on looking.  Returns e's slot. */
static uint32_t place(ds_alloc_node e)
{
    uint32_t s = home_of(e.klass - 1u, granule_of(&e)), landed = DS_NO_SLOT;
    for (e.dist = 0;; s = next_slot(s), e.dist++) {
        if (!table[s].klass || table[s].dist < e.dist) {
            ds_alloc_node displaced = table[s];
            table[s] = e;
            if (landed == DS_NO_SLOT)
                landed = s;
            if (!displaced.klass)
                return landed;
            e = displaced;
        }
    }
}

/* Empties slot s: the entries after it, up to one at its home, move back. */
static void unplace(uint32_t s)
{
    for (uint32_t t = next_slot(s); table[t].klass && table[t].dist; s = t, t = next_slot(t)) {
        table[s] = table[t];
        table[s].dist--;
    }
    table[s] = (ds_alloc_node){0};
}

static size_t table_bytes(uint32_t slots)
{
    return (size_t)slots * sizeof(ds_alloc_node) + (size_t)(slots / 8) * sizeof(uint64_t);
}

static ds_alloc_node *map_table(uint32_t slots)
{
    size_t bytes = table_bytes(slots);
    void *t = ds_map(bytes, false);
    if (!t)
        return NULL;
    if (bytes >= DS_HUGE_TABLE)
        (void)madvise(t, bytes, MADV_HUGEPAGE); /* refused: small pages, slower */
    return t;
}

/* Room for one more entry: the table grows by half past four fifths full (an
 * O(n) pass, one insertion in n/3 pays it).  Failing to map keeps the old
 * table, fuller: longer probes, nothing lost, and one slot always empty. */
static bool reserve_slot(void)
{
    if (table && ds_alloc_live_count + 1 <= capacity - capacity / 5)
        return true;
    uint32_t slots = !table ? DS_FIRST_SLOTS
                     : capacity < DS_MAX_SLOTS - capacity / 2 ? capacity + capacity / 2
                                                                : DS_MAX_SLOTS;
    ds_alloc_node *old = table, *fresh = slots > capacity ? map_table(slots) : NULL;
    if (!fresh)
        return table && ds_alloc_live_count + 1 < capacity;
    uint32_t old_capacity = old ? capacity : 0;
    table = fresh;
    capacity = slots;
    filter = (uint64_t *)(fresh + slots);
    filter_words = slots / 8;
    filter_stale = 0;
    for (uint32_t s = 0; s < old_capacity; s++)
        if (old[s].klass) {
            place(old[s]);
            filter_add(&old[s]);
        }
    if (old)
        ds_unmap(old, table_bytes(old_capacity));
    return true;
}

static void count(const ds_alloc_node *e, int delta)
{
    unsigned k = e->klass - 1u;
    per_class[k] += (uint32_t)delta;
    if (k != DS_HANDLES && per_class[k] > per_class[main_level])
        main_level = k;
    straddling[k] += straddles(e) ? (uint32_t)delta : 0;
    if (k != DS_HANDLES)
        levels_used = per_class[k] ? levels_used | 1u << k : levels_used & ~(1u << k);
    __atomic_store_n(&ds_alloc_live_count, ds_alloc_live_count + (uint64_t)(int64_t)delta,
                     __ATOMIC_RELAXED);
    ds_alloc_live_bytes += (uint64_t)(int64_t)delta * e->size;
}

/* How many entries have key (k, g): they lie together from its home. */
static uint32_t key_entries(unsigned k, uintptr_t g)
{
    unsigned shift = shift_of(k);
    uint32_t n = 0;
    for (uint32_t s = home_of(k, g), d = 0;; s = next_slot(s), d++) {
        const ds_alloc_node *e = &table[s];
        if (!e->klass || e->dist < d)
            return n;
        n += e->klass == k + 1 && e->base >> shift == g;
    }
}

/* Indexes e (a handle when `handle`): its slot, or DS_NO_SLOT when there is
 * no memory for the index. */
uint32_t ds_alloc_index_insert(ds_alloc_node e, bool handle)
{
    if (!reserve_slot())
        return DS_NO_SLOT;
    e.klass = (uint8_t)((handle ? DS_HANDLES : level_of(e.size ? e.size : 1)) + 1);
    count(&e, +1);
    filter_add(&e);
    doubled[e.klass - 1u] += key_entries(e.klass - 1u, granule_of(&e)) > 0;
    return place(e);
}

/* One probe: of the entries keyed (k, g), which start at `home`, the one
 * holding p that starts last, if it starts after `best`'s.  Where no key of
 * the class has two entries (no two of its allocations start in one
 * granule, as in most programs), the probe ends at the key's entry: the slot
 * after it, which only tells where the key's run ends, is often a cache line
 * more to wait for. */
static inline __attribute__((always_inline)) uint32_t probe(unsigned k, uintptr_t g, uint32_t home,
                                                             uintptr_t p, uint32_t best)
{
    unsigned shift = shift_of(k);
    bool one_per_key = !doubled[k];
    for (uint32_t s = home, d = 0;; s = next_slot(s), d++) {
        const ds_alloc_node *e = &table[s];
        if (!e->klass || e->dist < d)
            return best;
        if (e->klass == k + 1 && e->base >> shift == g) {
            /* Keyed (k, g): then a handle is p itself, and span_of is this. */
            if (p - e->base < e->size + !e->size &&
                (best == DS_NO_SLOT || e->base > table[best].base))
                best = s;
            if (one_per_key)
                return best;
        }
    }
}

typedef struct {
    uintptr_t g;
    unsigned k;
    uint32_t home;
} key;

/* Key (k, g), unless the filter rules it out (the main level is probed
 * unasked: it is the likely answer), its home prefetched, so that the
 * probes of a lookup wait for memory together, not one after another. */
static inline __attribute__((always_inline)) unsigned consider(key *keys, unsigned nkeys,
                                                               unsigned k, uintptr_t g)
{
    uint64_t h = key_hash(k, g);
    if (k != main_level && !maybe_present(h))
        return nkeys;
    keys[nkeys] = (key){g, k, home_at(h)};
    __builtin_prefetch(&table[keys[nkeys].home]);
    return nkeys + 1;
}

/* The allocation holding p (an address, or a handle when `handle`); where
 * an untracked free let two overlap, the one starting last. */
uint32_t ds_alloc_index_containing(uintptr_t p, bool handle)
{
    key keys[2 * DS_LEVELS];
    unsigned nkeys = 0;
    if (handle)
        return per_class[DS_HANDLES] ? probe(DS_HANDLES, p, home_of(DS_HANDLES, p), p, DS_NO_SLOT)
                                     : DS_NO_SLOT;
    if (levels_used == 1u << main_level && !straddling[main_level]) {
        /* One size class, none across a granule's end (a pool of equal
         * blocks): one key, without the general way's list of them. */
        uintptr_t g = p >> level_shift(main_level);
        return probe(main_level, g, home_of(main_level, g), p, DS_NO_SLOT);
    }
    for (uint32_t used = levels_used; used; used &= used - 1) {
        unsigned k = (unsigned)__builtin_ctz(used);
        uintptr_t g = p >> level_shift(k);
        nkeys = consider(keys, nkeys, k, g);
        if (straddling[k] && g)
            nkeys = consider(keys, nkeys, k, g - 1);
    }
    uint32_t best = DS_NO_SLOT;
    for (unsigned i = 0; i < nkeys; i++)
        best = probe(keys[i].k, keys[i].g, keys[i].home, p, best);
    return best;
}

/* The allocation starting at `base` (an address, or a handle when `handle`):
 * bases are unique in each space, so it is the one holding base that starts
 * last, if that starts there. */
static uint32_t starting_at(uintptr_t base, bool handle)
{
    uint32_t s = ds_alloc_index_containing(base, handle);
    return s != DS_NO_SLOT && table[s].base == base ? s : DS_NO_SLOT;
}

/* Unindexes the allocation starting at `base` (*out: its record); false
 * when there is none. */
bool ds_alloc_index_remove(uintptr_t base, bool handle, ds_alloc_node *out)
{
    uint32_t s = starting_at(base, handle);
    if (s == DS_NO_SLOT)
        return false;
    *out = table[s];
    count(out, -1);
    unplace(s);
    doubled[out->klass - 1u] -= key_entries(out->klass - 1u, granule_of(out)) > 0;
    if (++filter_stale > capacity / 4)
        filter_rebuild();
    return true;
}

/* The allocation starting at `base` with this generation (either space). */
uint32_t ds_alloc_index_exact(uintptr_t base, uint32_t generation)
{
    for (int handle = 0; handle < 2; handle++) {
        uint32_t s = starting_at(base, handle);
        if (s != DS_NO_SLOT && table[s].generation == generation)
            return s;
    }
    return DS_NO_SLOT;
}

/* A forked child starts with an empty index (allocs.c says why); the
 * parent's table is unmapped, not cleared: clearing would copy every page. */
void ds_alloc_index_reset(void)
{
    ds_unmap(table, table_bytes(capacity));
    table = NULL;
    capacity = 0;
    filter = NULL;
    filter_words = filter_stale = 0;
    main_level = 0;
    memset(per_class, 0, sizeof(per_class));
    memset(straddling, 0, sizeof(straddling));
    memset(doubled, 0, sizeof(doubled));
    levels_used = 0;
    __atomic_store_n(&ds_alloc_live_count, 0, __ATOMIC_RELAXED);
    ds_alloc_live_bytes = 0;
}
