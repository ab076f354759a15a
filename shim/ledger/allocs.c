/*
 * allocs.c — every live device, pinned-host and managed allocation, with its
 * owner, and the policy for frees: free_while_shared, invalid_free, deferred
 * frees under DLSHIM_ON_ERROR=protect, and the leak count at exit.
 *
 * One hash table of size classes (see "the index" below) holds the records
 * themselves, 64 bytes each, in mmap'd memory (never malloc: hooks run inside
 * allocators, deleters and signal handlers), and answers pointer →
 * allocation with one memory access that depends on nothing but the pointer:
 * about one cache miss at a million live allocations, at 81 to 122 bytes per
 * allocation.  Written by hand: no Debian library offers an allocation-free
 * interval map for C.  One lock, a spin lock (locks.def): every handoff
 * looks an allocation up, and a mutex's two calls were a fifth of a lookup's
 * instructions; its rare long holds (growing the table, rebuilding the
 * filter: O(n)) make a waiter yield, then nap.  Nothing is called out of the
 * shim while it is held.
 *
 * Shares: an import of a tensor whose data lies in an allocation counts one
 * share on it until the tensor's release.  Freeing an allocation with shares
 * is free_while_shared; with protect the free is deferred, reported to the
 * caller as done, and performed by the hook family's releaser at the last
 * release.  An alias (ds_alloc_info.alias_of: external memory a second API
 * imported, a host mapping) passes its shares on to the allocation it
 * shows; one that holds it (the import) counts as a mapping of it until it
 * is freed: the same rule, for the same reason.
 *
 * APIs whose allocations are handles, not addresses (the descriptor's
 * `handles`), share the index: a handle is a class of its own, keyed by its
 * value, which address lookups never probe, and the reverse.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "ledger/ledger.h"

#define DS_RECENT_FREES 4096u          /* remembered bases, to name double frees (a power of two) */

/* One live allocation: a slot of the index, one cache line. */
typedef struct {
    uintptr_t base;
    uint64_t size;
    /* No allocation is both stream-ordered and a mapping of another. */
    union {
        void *stream;          /* async allocations: their stream */
        uint64_t alias_offset; /* an alias: where in alias_base its bytes start */
    };
    uintptr_t alias_base;      /* the allocation this one maps (alias_of), or 0 */
    uint32_t dist;        /* slots past its home slot (Robin Hood's order) */
    uint32_t shares;      /* live imports of tensors inside */
    uint32_t generation;  /* tells a reused base from the allocation it replaced */
    uint32_t alias_generation;
    uint16_t owner;       /* name id */
    int16_t device;
    uint16_t maps;        /* live aliases of this allocation (other APIs' mappings) */
    uint8_t kind, api;
    uint8_t klass;        /* its class + 1; 0: an empty slot (as mmap gives it) */
    uint8_t deferred; /* freed while shared under protect: free at the last release */
    uint8_t freed_with; /* the API's free kind (host or device) for the deferred free */
    uint8_t properties;
    uint8_t alias_holds;  /* counted in the aliased allocation's maps */
} node;
_Static_assert(sizeof(node) == 64, "one cache line per tracked allocation");

static uint32_t generation_counter;
static uint64_t live_count, live_bytes;
/* Bumped whenever what a lookup answers may change (ds_alloc_changes). */
static uint64_t changes;
/* Bases freed through a hook, direct-mapped: a collision forgets one (a
 * double free then goes unnamed), never invents one. */
static uintptr_t recent[DS_RECENT_FREES];
/* The last allocations freed, whole (what they were, when, from where): a
 * tensor exported over memory freed just before is named by them. */
#define DS_FREED_KEPT 64u /* a power of two */
typedef struct {
    ds_alloc_info info;
    uint64_t t_free;
    uint16_t site;
} freed;
static freed freed_ring[DS_FREED_KEPT];
static uint64_t nfreed;
static atomic_uint_fast64_t untracked_frees;

static const char *const kind_names[] = {"device", "host_pinned", "managed", "async_pool",
                                         "mapped"};

const char *ds_alloc_kind_name(int kind)
{
    return kind >= 0 && kind < (int)DS_ARRAY_LEN(kind_names) ? kind_names[kind] : "?";
}

static uintptr_t *recent_slot(uintptr_t base)
{
    return &recent[((base >> 8) ^ (base >> 20)) & (DS_RECENT_FREES - 1)];
}

/* ---- who may read and who may change ------------------------------------- */
/* A lookup, a liveness check or a share count takes one shard of ALLOCS,
 * this thread's (by its thread id), so that threads handing over device
 * tensors at once share no lock: in a process with device allocations every
 * handoff, of a host tensor too, looks its tensor up here.  What changes the
 * index or an allocation's state (recorded, freed, a free deferred, the
 * leak report) takes every shard, so no reader is inside meanwhile and the
 * table may move.  A share count changes under a shard: it is the one field
 * written there, atomically (see ds_alloc_share). */
static DS_TLS unsigned char reader_shard; /* + 1; 0: not chosen yet */

static inline __attribute__((always_inline)) unsigned read_begin(void)
{
    if (!reader_shard) /* kept across fork: any shard is right, this one is spread */
        reader_shard = (unsigned char)(1 + (unsigned long)ds_tid() % ds_lock_shards[DS_LOCK_ALLOCS]);
    unsigned s = reader_shard - 1u;
    ds_lock_take_shard(DS_LOCK_ALLOCS, s);
    return s;
}

static inline __attribute__((always_inline)) void read_end(unsigned shard)
{
    ds_lock_give_shard(DS_LOCK_ALLOCS, shard);
}

/* ---- the index: size classes hashed by granule, records in the table -------- */

/* Level k holds the allocations of at most 256 B << 2k bytes (and more than a
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
 * change of the index (exact() finds an allocation again by base and
 * generation).
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
 * (nothing depends on it). */
#define DS_LEVELS 25u               /* 256 B << 48 = 64 PiB: any user-space size */
#define DS_HANDLES DS_LEVELS        /* the class of handles; the levels are the others */
#define DS_CLASSES (DS_LEVELS + 1u)
#define DS_NO_SLOT UINT32_MAX
#define DS_FIRST_SLOTS 1024u
#define DS_MAX_SLOTS (1u << 26)     /* 4 GiB of table, 53 million allocations */
#define DS_HUGE_TABLE (4u << 20)    /* bytes from which a table asks for huge pages */

static node *table; /* capacity slots, then the filter's words, mmap'd together */
static uint32_t capacity;
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
static uint64_t span_of(const node *e)
{
    return e->klass == DS_HANDLES + 1 || !e->size ? 1 : e->size;
}

static uintptr_t granule_of(const node *e) { return e->base >> shift_of(e->klass - 1u); }

static bool straddles(const node *e)
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

static void filter_add(const node *e)
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
static uint32_t place(node e)
{
    uint32_t s = home_of(e.klass - 1u, granule_of(&e)), landed = DS_NO_SLOT;
    for (e.dist = 0;; s = next_slot(s), e.dist++) {
        if (!table[s].klass || table[s].dist < e.dist) {
            node displaced = table[s];
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
    table[s] = (node){0};
}

static size_t table_bytes(uint32_t slots)
{
    return (size_t)slots * sizeof(node) + (size_t)(slots / 8) * sizeof(uint64_t);
}

static node *map_table(uint32_t slots)
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
    if (table && live_count + 1 <= capacity - capacity / 5)
        return true;
    uint32_t slots = !table ? DS_FIRST_SLOTS
                     : capacity < DS_MAX_SLOTS - capacity / 2 ? capacity + capacity / 2
                                                                : DS_MAX_SLOTS;
    node *old = table, *fresh = slots > capacity ? map_table(slots) : NULL;
    if (!fresh)
        return table && live_count + 1 < capacity;
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

static void count(const node *e, int delta)
{
    unsigned k = e->klass - 1u;
    per_class[k] += (uint32_t)delta;
    if (k != DS_HANDLES && per_class[k] > per_class[main_level])
        main_level = k;
    straddling[k] += straddles(e) ? (uint32_t)delta : 0;
    if (k != DS_HANDLES)
        levels_used = per_class[k] ? levels_used | 1u << k : levels_used & ~(1u << k);
    __atomic_store_n(&live_count, live_count + (uint64_t)(int64_t)delta, __ATOMIC_RELAXED);
    live_bytes += (uint64_t)(int64_t)delta * e->size;
}

/* How many entries have key (k, g): they lie together from its home. */
static uint32_t key_entries(unsigned k, uintptr_t g)
{
    unsigned shift = shift_of(k);
    uint32_t n = 0;
    for (uint32_t s = home_of(k, g), d = 0;; s = next_slot(s), d++) {
        const node *e = &table[s];
        if (!e->klass || e->dist < d)
            return n;
        n += e->klass == k + 1 && e->base >> shift == g;
    }
}

/* Indexes e (a handle when `handle`): its slot, or DS_NO_SLOT when there is
 * no memory for the index. */
static uint32_t index_insert(node e, bool handle)
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
        const node *e = &table[s];
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
static uint32_t containing(uintptr_t p, bool handle)
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
    uint32_t s = containing(base, handle);
    return s != DS_NO_SLOT && table[s].base == base ? s : DS_NO_SLOT;
}

/* Unindexes the allocation starting at `base` (*out: its record); false
 * when there is none. */
static bool index_remove(uintptr_t base, bool handle, node *out)
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
static uint32_t exact(uintptr_t base, uint32_t generation)
{
    for (int handle = 0; handle < 2; handle++) {
        uint32_t s = starting_at(base, handle);
        if (s != DS_NO_SLOT && table[s].generation == generation)
            return s;
    }
    return DS_NO_SLOT;
}

static void fill_info(const node *e, ds_alloc_info *out)
{
    *out = (ds_alloc_info){.base = e->base,
                           .size = e->size,
                           .stream = e->alias_base ? NULL : e->stream,
                           .owner = e->owner,
                           .device = e->device,
                           .kind = e->kind,
                           .api = e->api,
                           .generation = e->generation,
                           .properties = e->properties,
                           .alias_of = e->alias_base,
                           .alias_generation = e->alias_generation,
                           .alias_holds = e->alias_holds,
                           .alias_offset = e->alias_base ? e->alias_offset : 0};
}

/* ---- events ----------------------------------------------------------------- */

/* `alias`: what a->alias_of is (its api and owner), when known. */
static void emit(int id, const ds_alloc_info *a, const ds_alloc_info *alias, const char *caller,
                 void *const *frames, int nframes)
{
    if (!ds_event_wanted(id))
        return;
    ds_ev e;
    char device[32];
    const ds_device_api *api = ds_device_api_at(a->api);
    ds_ev_begin(&e, id);
    ds_ev_hex(&e, "base", a->base);
    ds_ev_uint(&e, "bytes", a->size);
    ds_alloc_device_name(device, sizeof(device), a);
    ds_ev_str(&e, "device", device);
    ds_ev_str(&e, "kind", ds_alloc_kind_name(a->kind));
    ds_ev_str(&e, "api", api->name);
    ds_ev_name(&e, "owner", a->owner);
    if (api->property_names) {
        const char *memory[8];
        int n = 0;
        for (unsigned bit = 0; bit < 8; bit++)
            if ((a->properties >> bit) & 1u && api->property_names[bit])
                memory[n++] = api->property_names[bit];
        ds_ev_words(&e, "memory", memory, n);
    }
    if (a->alias_of) {
        ds_ev_hex(&e, "alias_of", a->alias_of);
        if (alias) {
            ds_ev_str(&e, "alias_api", ds_device_api_at(alias->api)->name);
            ds_ev_name(&e, "alias_owner", alias->owner);
        }
    }
    if (caller)
        ds_ev_str(&e, "by", caller);
    if (a->stream)
        ds_ev_hex(&e, "stream", (uintptr_t)a->stream);
    if (frames && nframes > 0)
        ds_backtrace_field(&e, frames, nframes);
    ds_ev_end(&e);
}

/* ---- the API ---------------------------------------------------------------- */

static void release_deferred(uintptr_t base, int api, int kind);

/* Lock held, `gone` unindexed: if it is an alias, the allocation it shows
 * loses its shares and (held) one mapping; true when a free deferred for
 * that one is now due (*mapped: what to free, its kind the free's). */
static bool unmap_alias(const node *gone, ds_alloc_info *mapped)
{
    uint32_t of = gone->alias_base ? exact(gone->alias_base, gone->alias_generation) : DS_NO_SLOT;
    if (of == DS_NO_SLOT)
        return false;
    node *m = &table[of];
    m->shares -= gone->shares < m->shares ? gone->shares : m->shares;
    if (gone->alias_holds && m->maps)
        m->maps--;
    fill_info(m, mapped);
    mapped->kind = m->freed_with;
    return m->deferred && !m->shares && !m->maps;
}

uint32_t ds_alloc_record(const ds_alloc_info *a, uint16_t owner)
{
    ds_note_work();
    ds_alloc_info info = *a, alias = {0}, mapped = {0};
    bool handle = ds_device_api_at(a->api)->handles, aliased = false, release_mapped = false;
    void *frames[DS_BACKTRACE_CAPTURE];
    int nframes = ds_cfg.backtrace > 0 ? ds_backtrace_capture(frames, (int)DS_ARRAY_LEN(frames)) : 0;
    ds_lock_take(DS_LOCK_ALLOCS);
    /* A base still in the index was freed behind our back (an untracked
     * route): the new allocation replaces it. */
    node stale;
    if (index_remove(info.base, handle, &stale))
        release_mapped = unmap_alias(&stale, &mapped);
    info.owner = owner;
    info.generation = ++generation_counter;
    uint32_t n = index_insert((node){.base = info.base, .size = info.size, .stream = info.stream,
                                     .owner = info.owner, .device = (int16_t)info.device,
                                     .kind = (uint8_t)info.kind, .api = (uint8_t)info.api,
                                     .generation = info.generation,
                                     .properties = info.properties},
                              handle);
    /* What it maps, while that is still the allocation it was (no slot
     * moves from here on: n stays n). */
    uint32_t of = n != DS_NO_SLOT && info.alias_of ? exact(info.alias_of, info.alias_generation)
                                                   : DS_NO_SLOT;
    if (of != DS_NO_SLOT && (!info.alias_holds || table[of].maps < UINT16_MAX)) {
        table[of].maps += info.alias_holds;
        table[n].alias_base = info.alias_of;
        table[n].alias_generation = info.alias_generation;
        table[n].alias_holds = info.alias_holds;
        table[n].alias_offset = info.alias_offset;
        fill_info(&table[of], &alias);
        aliased = true;
    }
    if (*recent_slot(info.base) == info.base)
        *recent_slot(info.base) = 0;
    __atomic_store_n(&changes, changes + 1, __ATOMIC_RELEASE);
    ds_lock_give(DS_LOCK_ALLOCS);
    if (release_mapped)
        release_deferred(mapped.base, mapped.api, mapped.kind);
    if (n == DS_NO_SLOT) { /* no memory for the index */
        ds_stats_untracked();
        return 0;
    }
    emit(DS_EV_ALLOC, &info, aliased ? &alias : NULL, NULL, frames, nframes);
    return info.generation;
}

bool ds_alloc_lookup(uintptr_t p, ds_alloc_info *out)
{
    /* No allocation tracked (a CPU-only program): no lock on its handoffs.
     * One inserted meanwhile is as if inserted after the lookup. */
    if (__atomic_load_n(&live_count, __ATOMIC_RELAXED) == 0)
        return false;
    unsigned shard = read_begin();
    uint32_t n = containing(p, false);
    if (n != DS_NO_SLOT)
        fill_info(&table[n], out);
    read_end(shard);
    return n != DS_NO_SLOT;
}

uint64_t ds_alloc_changes(void)
{
    return __atomic_load_n(&changes, __ATOMIC_ACQUIRE);
}

uintptr_t ds_alloc_memory_of(int api, uintptr_t handle, uint64_t *offset)
{
    /* Outside the lock: the family's tables have their own. */
    const ds_device_api *d = ds_device_api_at(api);
    uintptr_t memory;
    if (d->memory_of && d->memory_of(handle, &memory, offset))
        return memory;
    *offset = 0;
    return handle;
}

bool ds_alloc_lookup_tensor(int api, uintptr_t data, uintptr_t address, ds_alloc_info *out)
{
    if (api < 0)
        return ds_alloc_lookup(address, out);
    if (__atomic_load_n(&live_count, __ATOMIC_RELAXED) == 0)
        return false;
    uint64_t offset;
    return ds_alloc_lookup_in(api, ds_alloc_memory_of(api, data, &offset), out);
}

bool ds_alloc_lookup_in(int api, uintptr_t p, ds_alloc_info *out)
{
    unsigned shard = read_begin();
    uint32_t n = containing(p, ds_device_api_at(api)->handles);
    bool found = n != DS_NO_SLOT && table[n].api == api;
    if (found)
        fill_info(&table[n], out);
    read_end(shard);
    return found;
}

/* The first live alias of allocation `n` (another API's mapping), or
 * DS_NO_SLOT. */
static uint32_t first_alias(uint32_t n)
{
    for (uint32_t a = 0; a < capacity; a++)
        if (table[a].klass && table[a].alias_base == table[n].base &&
            table[a].alias_generation == table[n].generation)
            return a;
    return DS_NO_SLOT;
}

bool ds_alloc_alias_range(uintptr_t base, uint32_t generation, uintptr_t data, uint64_t bytes,
                          ds_range *out)
{
    bool found = false;
    unsigned shard = read_begin();
    uint32_t n = exact(base, generation);
    if (n != DS_NO_SLOT) {
        const node *e = &table[n];
        /* Only the bytes the mapping holds are the other allocation's. */
        if (e->alias_base && data >= e->base && data - e->base < e->size && bytes) {
            uint64_t in = data - e->base, left = e->size - in;
            *out = (ds_range){.start = (uintptr_t)(e->alias_offset + in),
                              .len = bytes < left ? bytes : left, .space = e->alias_generation};
            found = true;
        }
    }
    read_end(shard);
    return found;
}

int ds_alloc_free_check(uintptr_t p, int api, int kind, const char *caller)
{
    ds_alloc_info info = {0}, alias = {0};
    char detail[DS_DETAIL_MAX + 2 * DS_NAME_MAX];
    ds_lock_take(DS_LOCK_ALLOCS);
    uint32_t n = containing(p, ds_device_api_at(api)->handles);
    bool inside = n != DS_NO_SLOT, exact = inside && table[n].base == p;
    bool recently_freed = !inside && *recent_slot(p) == p;
    uint32_t shares = exact ? table[n].shares : 0, maps = exact ? table[n].maps : 0;
    uint32_t mapper = maps ? first_alias(n) : DS_NO_SLOT; /* a rare path: a walk is fine */
    if (inside)
        fill_info(&table[n], &info);
    if (mapper != DS_NO_SLOT)
        fill_info(&table[mapper], &alias);
    if (exact && (shares || maps) && ds_cfg.on_error == DS_ON_ERROR_PROTECT) {
        table[n].deferred = 1;
        table[n].freed_with = (uint8_t)kind;
    }
    ds_lock_give(DS_LOCK_ALLOCS);

    if (exact && maps && !shares) {
        ds_fmt(detail, sizeof(detail),
               "%s freed the %llu-byte allocation %p of %s while %s still maps it (%p, "
               "imported by %s); its reads and writes there may now hit freed memory",
               caller, (unsigned long long)info.size, (void *)p, ds_name(info.owner),
               mapper != DS_NO_SLOT ? ds_device_api_at(alias.api)->name : "another API",
               mapper != DS_NO_SLOT ? (void *)alias.base : NULL,
               mapper != DS_NO_SLOT ? ds_name(alias.owner) : "?");
        return ds_violation(DS_VIO_FREE_WHILE_SHARED, "data", p, detail) ? DS_FREE_DEFER
                                                                          : DS_FREE_FORWARD;
    }
    if (exact && shares) {
        ds_fmt(detail, sizeof(detail),
               "%s freed the %llu-byte allocation %p of %s while %u shared tensor%s in it "
               "%s not released; the consumer may still read it",
               caller, (unsigned long long)info.size, (void *)p, ds_name(info.owner), shares,
               shares == 1 ? "" : "s", shares == 1 ? "is" : "are");
        return ds_violation(DS_VIO_FREE_WHILE_SHARED, "data", p, detail) ? DS_FREE_DEFER
                                                                          : DS_FREE_FORWARD;
    }
    if (inside && !exact) {
        ds_fmt(detail, sizeof(detail),
               "%s freed %p, %llu bytes inside the allocation %p of %s, not its start", caller,
               (void *)p, (unsigned long long)(p - info.base), (void *)info.base,
               ds_name(info.owner));
        return ds_violation(DS_VIO_INVALID_FREE, "data", p, detail) ? DS_FREE_REFUSE
                                                                     : DS_FREE_FORWARD;
    }
    if (recently_freed) {
        ds_fmt(detail, sizeof(detail), "%s freed %p again: it was already freed", caller,
               (void *)p);
        return ds_violation(DS_VIO_INVALID_FREE, "data", p, detail) ? DS_FREE_REFUSE
                                                                     : DS_FREE_FORWARD;
    }
    if (!inside) {
        atomic_fetch_add(&untracked_frees, 1);
        ds_note_work();
    }
    return DS_FREE_FORWARD;
}

void ds_alloc_forget(uintptr_t base, int api, const char *caller)
{
    node gone;
    ds_alloc_info info, mapped = {0};
    bool release_mapped = false;
    /* Where the program frees it, asked before the lock (the locator may
     * ask Python): a later export over these bytes names it. */
    uint16_t site = ds_context_wanted() ? ds_context_site() : 0;
    ds_lock_take(DS_LOCK_ALLOCS);
    bool found = index_remove(base, ds_device_api_at(api)->handles, &gone);
    if (found) {
        fill_info(&gone, &info);
        release_mapped = unmap_alias(&gone, &mapped);
        *recent_slot(base) = base;
        freed_ring[nfreed++ % DS_FREED_KEPT] = (freed){info, ds_now_ns(), site};
        __atomic_store_n(&changes, changes + 1, __ATOMIC_RELEASE);
    }
    ds_lock_give(DS_LOCK_ALLOCS);
    if (found) {
        ds_note_work();
        emit(DS_EV_FREE, &info, NULL, caller, NULL, 0);
    }
    if (release_mapped)
        release_deferred(mapped.base, mapped.api, mapped.kind);
}

bool ds_alloc_live(uintptr_t base, uint32_t generation)
{
    unsigned shard = read_begin();
    bool live = exact(base, generation) != DS_NO_SLOT;
    read_end(shard);
    return live;
}

bool ds_alloc_freed_at(uintptr_t p, ds_alloc_info *out, uint64_t *t_free, uint16_t *site)
{
    if (__atomic_load_n(&nfreed, __ATOMIC_RELAXED) == 0)
        return false;
    bool found = false;
    unsigned shard = read_begin();
    uint64_t oldest = nfreed > DS_FREED_KEPT ? nfreed - DS_FREED_KEPT : 0;
    for (uint64_t n = nfreed; n > oldest && !found; n--) {
        const freed *f = &freed_ring[(n - 1) % DS_FREED_KEPT];
        if (f->info.base <= p && p - f->info.base < f->info.size) {
            *out = f->info;
            *t_free = f->t_free;
            *site = f->site;
            found = true;
        }
    }
    read_end(shard);
    return found;
}

void ds_alloc_share(uintptr_t base, uint32_t generation, int delta)
{
    /* The allocation, then what it is an alias of (if any): each counts the
     * share, and a free deferred for either may now be due (the alias's
     * first: a mapping goes before the memory under it).  Under this
     * thread's shard: the count changes atomically, as other threads' may
     * at once; `deferred` and `maps` change only under the whole lock, so
     * the one release that takes a deferred allocation's count to zero sees
     * them as they are. */
    ds_alloc_info due[2];
    int ndue = 0;
    unsigned shard = read_begin();
    uint32_t n = exact(base, generation);
    for (int hop = 0; n != DS_NO_SLOT && hop < 2; hop++) {
        node *e = &table[n];
        uint32_t was, now;
        if (delta > 0) {
            was = __atomic_fetch_add(&e->shares, 1, __ATOMIC_RELAXED);
            now = was + 1;
        } else {
            /* never below zero: a release the count never saw */
            was = __atomic_load_n(&e->shares, __ATOMIC_RELAXED);
            do
                now = was ? was - 1 : 0;
            while (was && !__atomic_compare_exchange_n(&e->shares, &was, now, false,
                                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED));
        }
        /* the last share gone (not a release with none left: that one
         * went before, and its free with it) */
        if (e->deferred && was && now == 0 && e->maps == 0) {
            fill_info(e, &due[ndue]);
            due[ndue++].kind = e->freed_with;
        }
        n = e->alias_base ? exact(e->alias_base, e->alias_generation) : DS_NO_SLOT;
    }
    read_end(shard);
    for (int i = 0; i < ndue; i++)
        release_deferred(due[i].base, due[i].api, due[i].kind);
}

static void release_deferred(uintptr_t base, int api, int kind)
{
    void (*release)(uintptr_t, int) = ds_device_api_at(api)->release;
    if (!release)
        return;
    /* The deferred free, now safe; inside the nesting guard, so that the
     * runtime's own driver call underneath is not recorded again. */
    ds_api_enter();
    release(base, kind);
    ds_api_leave();
    ds_alloc_forget(base, api, "dlshim (deferred free)");
}

#define DS_LEAKS_NAMED 32

typedef struct {
    uint64_t count, bytes;
    ds_alloc_info named[DS_LEAKS_NAMED];
    uint32_t shares[DS_LEAKS_NAMED];
} leak_sum;

static void collect_shared(leak_sum *s)
{
    for (uint32_t n = 0; n < capacity; n++) {
        const node *e = &table[n];
        if (!e->klass || !e->shares || e->deferred)
            continue;
        if (s->count < DS_LEAKS_NAMED) {
            fill_info(e, &s->named[s->count]);
            s->shares[s->count] = e->shares;
        }
        s->count++;
        s->bytes += e->size;
    }
}

bool ds_alloc_totals(uint64_t *live, uint64_t *bytes, uint64_t *untracked)
{
    *untracked = atomic_load(&untracked_frees);
    *live = *bytes = 0;
    if (!ds_lock_take_bounded(DS_LOCK_ALLOCS))
        return false;
    *live = live_count;
    *bytes = live_bytes;
    ds_lock_give(DS_LOCK_ALLOCS);
    return true;
}

void ds_alloc_report_leaks(void)
{
    static leak_sum s; /* once, at exit */
    memset(&s, 0, sizeof(s));
    if (!ds_lock_take_bounded(DS_LOCK_ALLOCS))
        return; /* leaving, and held elsewhere: the summary says partial */
    collect_shared(&s);
    ds_lock_give(DS_LOCK_ALLOCS);
    char detail[DS_DETAIL_MAX];
    for (uint64_t i = 0; i < s.count && i < DS_LEAKS_NAMED; i++) {
        ds_fmt(detail, sizeof(detail),
               "the %llu-byte allocation %p of %s is still shared by %u unreleased tensor%s at exit",
               (unsigned long long)s.named[i].size, (void *)s.named[i].base,
               ds_name(s.named[i].owner), s.shares[i], s.shares[i] == 1 ? "" : "s");
        ds_violation(DS_VIO_LEAK, "data", s.named[i].base, detail);
    }
    if (s.count > DS_LEAKS_NAMED) {
        ds_fmt(detail, sizeof(detail), "%llu more allocations are still shared at exit",
               (unsigned long long)(s.count - DS_LEAKS_NAMED));
        ds_violation(DS_VIO_LEAK, "data", 0, detail);
    }
}

/* A forked child cannot use its parent's device context (CUDA and HIP do not
 * support it), so it starts with no allocations: frees of the parent's
 * memory are untracked there, and its summary and leak report are its own. */
void ds_alloc_after_fork(void)
{
    /* Unmapped, not cleared: clearing would copy every page of the parent's. */
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
    __atomic_store_n(&live_count, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&changes, changes + 1, __ATOMIC_RELEASE);
    live_bytes = 0;
    memset(recent, 0, sizeof(recent));
    atomic_store(&untracked_frees, 0);
}
