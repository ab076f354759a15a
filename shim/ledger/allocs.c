/*
 * allocs.c — every live device, pinned-host and managed allocation, with its
 * owner, and the policy for frees: free_while_shared, invalid_free, deferred
 * frees under DLSHIM_ON_ERROR=protect, and the leak count at exit.
 *
 * A hash table of size classes (see "the index" below), its nodes in one
 * mmap'd pool (never malloc: hooks run inside allocators, deleters and
 * signal handlers), answers pointer → allocation in constant time at a
 * million live allocations, at 56 bytes per allocation and 4 to 8 for its
 * bucket.  Written by hand: no Debian library offers an allocation-free
 * interval map for C.  One mutex; nothing is called out of the shim while it
 * is held.
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
 * `handles`), share the index: a handle is a one-byte entry marked as one,
 * which address lookups pass over, and the reverse.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

#define DS_ALLOC_NODES_MAX (1u << 24) /* virtual reservation; pages touched on use */
#define DS_RECENT_FREES 4096u          /* remembered bases, to name double frees (a power of two) */

typedef struct {
    uintptr_t base;
    uint64_t size;
    void *stream;
    uintptr_t alias_base;      /* the allocation this one maps (alias_of), or 0 */
    uint32_t next;        /* the next node in its bucket's chain, or on the free list */
    uint32_t shares;      /* live imports of tensors inside */
    uint32_t generation;  /* tells a reused base from the allocation it replaced */
    uint32_t alias_generation;
    uint16_t owner;       /* name id */
    int16_t device;
    uint16_t maps;        /* live aliases of this allocation (other APIs' mappings) */
    uint8_t kind, api, level; /* level: DS_LEVEL_FREE when not in use */
    uint8_t deferred; /* freed while shared under protect: free at the last release */
    uint8_t freed_with; /* the API's free kind (host or device) for the deferred free */
    uint8_t properties;
    uint8_t handle;       /* base is an API's handle (its descriptor's `handles`) */
    uint8_t alias_holds;  /* counted in the aliased allocation's maps */
} node;
_Static_assert(sizeof(node) <= 64, "at most 64 bytes per tracked allocation");

static node *pool;              /* pool[0] is the null node */
static uint32_t next_free_node, free_list;
static uint32_t generation_counter;
static uint64_t live_count, live_bytes;
/* Bumped whenever what a lookup answers may change (ds_alloc_changes). */
static uint64_t changes;
/* Bases freed through a hook, direct-mapped: a collision forgets one (a
 * double free then goes unnamed), never invents one. */
static uintptr_t recent[DS_RECENT_FREES];
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

static bool pool_ready(void)
{
    if (pool)
        return true;
    void *p = mmap(NULL, (size_t)DS_ALLOC_NODES_MAX * sizeof(node), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return false;
    pool = p;
    next_free_node = 1;
    return true;
}

static uint32_t new_node(void)
{
    uint32_t n = free_list;
    if (n) {
        free_list = pool[n].next;
    } else if (next_free_node < DS_ALLOC_NODES_MAX) {
        n = next_free_node++;
    }
    return n;
}

/* ---- the index: size classes hashed by granule ------------------------------ */

/* Level k holds the allocations of at most 1 KiB << 2k bytes (and more than a
 * quarter of that, above level 0), chained in a hash table by the granule of
 * that size their base lies in.  An allocation holding p then starts in p's
 * granule or the one before it, so a lookup probes two buckets per level in
 * use, however many allocations there are: one or two cache misses at a
 * million, where a balanced tree took twenty.  Chains are short because
 * allocations do not overlap: at most four of one level start in a granule
 * (more only at level 0, for allocations under 256 bytes). */
#define DS_LEVELS 20u               /* 1 KiB << 38 = 256 TiB: any user-space size */
#define DS_LEVEL_FREE 0xffu         /* a node on the free list */
#define DS_FIRST_BUCKET_BITS 10u

static uint32_t *buckets; /* chain heads (node indices; 0: none), mmap'd */
static unsigned bucket_bits;
static uint32_t per_level[DS_LEVELS]; /* live allocations of each level */
static uint32_t levels_used;          /* bit k: level k has any (lookups skip the rest) */

static unsigned shift_of(unsigned k) { return 10u + 2u * k; }

static unsigned level_of(uint64_t size)
{
    unsigned k = 0;
    while (k + 1 < DS_LEVELS && size > (uint64_t)1 << shift_of(k))
        k++;
    return k;
}

static uint32_t *bucket_of(uint32_t *table, unsigned bits, unsigned k, uintptr_t granule)
{
    uint64_t h = ((uint64_t)granule ^ (uint64_t)k << 56) * 0x9e3779b97f4a7c15ull;
    return &table[h >> (64u - bits)];
}

static uint32_t *new_table(unsigned bits)
{
    void *t = mmap(NULL, sizeof(uint32_t) << bits, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return t == MAP_FAILED ? NULL : t;
}

/* Twice the buckets once there are more allocations than buckets, so chains
 * stay short (an O(n) pass, one allocation in n pays it).  Failing to map
 * keeps the old table: longer chains, nothing lost. */
static void grow(void)
{
    unsigned bits = buckets ? bucket_bits + 1 : DS_FIRST_BUCKET_BITS;
    if (buckets && live_count < (uint64_t)1 << bucket_bits)
        return;
    uint32_t *table = new_table(bits);
    if (!table)
        return;
    if (buckets) {
        for (size_t b = 0; b < (size_t)1 << bucket_bits; b++)
            for (uint32_t n = buckets[b], next; n; n = next) {
                next = pool[n].next;
                uint32_t *head = bucket_of(table, bits, pool[n].level,
                                           pool[n].base >> shift_of(pool[n].level));
                pool[n].next = *head;
                *head = n;
            }
        munmap(buckets, sizeof(uint32_t) << bucket_bits);
    }
    buckets = table;
    bucket_bits = bits;
}

/* The bytes a node answers lookups for: a handle is one key. */
static uint64_t span_of(uint32_t n)
{
    return pool[n].handle || !pool[n].size ? 1 : pool[n].size;
}

static void index_insert(uint32_t n)
{
    grow();
    if (!buckets) {
        pool[n].level = DS_LEVEL_FREE; /* caller frees it */
        return;
    }
    unsigned k = level_of(span_of(n));
    uint32_t *head = bucket_of(buckets, bucket_bits, k, pool[n].base >> shift_of(k));
    pool[n].level = (uint8_t)k;
    pool[n].next = *head;
    *head = n;
    per_level[k]++;
    levels_used |= 1u << k;
}

/* Unlinks the allocation starting at `base` (an address, or a handle when
 * `handle`): its node, or 0. */
static uint32_t index_remove(uintptr_t base, bool handle)
{
    if (!buckets)
        return 0;
    for (uint32_t used = levels_used; used; used &= used - 1) {
        unsigned k = (unsigned)__builtin_ctz(used);
        for (uint32_t *link = bucket_of(buckets, bucket_bits, k, base >> shift_of(k)); *link;
             link = &pool[*link].next) {
            uint32_t n = *link;
            if (pool[n].base == base && pool[n].level == k && pool[n].handle == handle) {
                *link = pool[n].next;
                if (--per_level[k] == 0)
                    levels_used &= ~(1u << k);
                return n;
            }
        }
    }
    return 0;
}

/* The allocation holding p (an address, or a handle when `handle`); where
 * an untracked free let two overlap, the one starting last. */
static uint32_t containing(uintptr_t p, bool handle)
{
    uint32_t best = 0;
    if (!buckets)
        return 0;
    for (uint32_t used = levels_used; used; used &= used - 1) {
        unsigned k = (unsigned)__builtin_ctz(used);
        uintptr_t g = p >> shift_of(k);
        for (uintptr_t back = 0; back < 2 && back <= g; back++) {
            for (uint32_t n = *bucket_of(buckets, bucket_bits, k, g - back); n; n = pool[n].next)
                if (p - pool[n].base < span_of(n) && pool[n].handle == handle &&
                    (!best || pool[n].base > pool[best].base))
                    best = n;
        }
    }
    return best;
}

/* The allocation starting at `base` with this generation (either space), or 0. */
static uint32_t exact(uintptr_t base, uint32_t generation)
{
    for (int handle = 0; handle < 2 && pool; handle++) {
        uint32_t n = containing(base, handle);
        if (n && pool[n].base == base && pool[n].generation == generation)
            return n;
    }
    return 0;
}

static void free_node(uint32_t n)
{
    pool[n].level = DS_LEVEL_FREE;
    pool[n].next = free_list;
    free_list = n;
}

static void fill_info(uint32_t n, ds_alloc_info *out)
{
    *out = (ds_alloc_info){.base = pool[n].base,
                           .size = pool[n].size,
                           .stream = pool[n].stream,
                           .owner = pool[n].owner,
                           .device = pool[n].device,
                           .kind = pool[n].kind,
                           .api = pool[n].api,
                           .generation = pool[n].generation,
                           .properties = pool[n].properties,
                           .alias_of = pool[n].alias_base,
                           .alias_generation = pool[n].alias_generation,
                           .alias_holds = pool[n].alias_holds};
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

/* Lock held, node n leaving: if it is an alias, the allocation it shows
 * loses its shares and (held) one mapping; true when a free deferred for
 * that one is now due (*mapped: what to free, its kind the free's). */
static bool unmap_alias(uint32_t n, ds_alloc_info *mapped)
{
    uint32_t of = pool[n].alias_base ? exact(pool[n].alias_base, pool[n].alias_generation) : 0;
    if (!of)
        return false;
    pool[of].shares -= pool[n].shares < pool[of].shares ? pool[n].shares : pool[of].shares;
    if (pool[n].alias_holds && pool[of].maps)
        pool[of].maps--;
    fill_info(of, mapped);
    mapped->kind = pool[of].freed_with;
    return pool[of].deferred && !pool[of].shares && !pool[of].maps;
}

void ds_alloc_record(const ds_alloc_info *a, uint16_t owner)
{
    ds_note_work();
    ds_alloc_info info = *a, alias = {0}, mapped = {0};
    bool handle = ds_device_api_at(a->api)->handles, aliased = false, release_mapped = false;
    void *frames[DS_BACKTRACE_CAPTURE];
    int nframes = ds_cfg.backtrace > 0 ? ds_backtrace_capture(frames, (int)DS_ARRAY_LEN(frames)) : 0;
    ds_lock_take(DS_LOCK_ALLOCS);
    uint32_t n = pool_ready() ? new_node() : 0;
    if (n) {
        /* A base still in the index was freed behind our back (an untracked
         * route): the new allocation replaces it. */
        uint32_t stale = index_remove(info.base, handle);
        if (stale) {
            release_mapped = unmap_alias(stale, &mapped);
            __atomic_store_n(&live_count, live_count - 1, __ATOMIC_RELAXED);
            live_bytes -= pool[stale].size;
            free_node(stale);
        }
        info.owner = owner;
        info.generation = ++generation_counter;
        pool[n] = (node){.base = info.base, .size = info.size, .stream = info.stream,
                         .owner = info.owner, .device = (int16_t)info.device,
                         .kind = (uint8_t)info.kind, .api = (uint8_t)info.api,
                         .generation = info.generation, .properties = info.properties,
                         .handle = handle};
        __atomic_store_n(&live_count, live_count + 1, __ATOMIC_RELAXED);
        index_insert(n);
        if (pool[n].level == DS_LEVEL_FREE) { /* no memory for the index */
            __atomic_store_n(&live_count, live_count - 1, __ATOMIC_RELAXED);
            free_node(n);
            n = 0;
        } else {
            live_bytes += info.size;
            /* What it maps, while that is still the allocation it was. */
            uint32_t of = info.alias_of ? exact(info.alias_of, info.alias_generation) : 0;
            if (of && (!info.alias_holds || pool[of].maps < UINT16_MAX)) {
                pool[of].maps += info.alias_holds;
                pool[n].alias_base = info.alias_of;
                pool[n].alias_generation = info.alias_generation;
                pool[n].alias_holds = info.alias_holds;
                fill_info(of, &alias);
                aliased = true;
            }
        }
        if (*recent_slot(info.base) == info.base)
            *recent_slot(info.base) = 0;
        __atomic_store_n(&changes, changes + 1, __ATOMIC_RELEASE);
    }
    ds_lock_give(DS_LOCK_ALLOCS);
    if (release_mapped)
        release_deferred(mapped.base, mapped.api, mapped.kind);
    if (!n) {
        ds_stats_untracked();
        return;
    }
    emit(DS_EV_ALLOC, &info, aliased ? &alias : NULL, NULL, frames, nframes);
}

bool ds_alloc_lookup(uintptr_t p, ds_alloc_info *out)
{
    /* No allocation tracked (a CPU-only program): no lock on its handoffs.
     * One inserted meanwhile is as if inserted after the lookup. */
    if (__atomic_load_n(&live_count, __ATOMIC_RELAXED) == 0)
        return false;
    ds_lock_take(DS_LOCK_ALLOCS);
    uint32_t n = pool ? containing(p, false) : 0;
    if (n)
        fill_info(n, out);
    ds_lock_give(DS_LOCK_ALLOCS);
    return n != 0;
}

uint64_t ds_alloc_changes(void)
{
    return __atomic_load_n(&changes, __ATOMIC_ACQUIRE);
}

bool ds_alloc_lookup_tensor(int api, uintptr_t data, uintptr_t address, ds_alloc_info *out)
{
    if (api < 0)
        return ds_alloc_lookup(address, out);
    if (__atomic_load_n(&live_count, __ATOMIC_RELAXED) == 0)
        return false;
    /* A handle: the allocation's own, or what the API maps it to (outside
     * the lock: the family's tables have their own). */
    const ds_device_api *d = ds_device_api_at(api);
    uintptr_t memory = data;
    if (d->memory_of && !d->memory_of(data, &memory))
        memory = data;
    return ds_alloc_lookup_in(api, memory, out);
}

bool ds_alloc_lookup_in(int api, uintptr_t p, ds_alloc_info *out)
{
    ds_lock_take(DS_LOCK_ALLOCS);
    uint32_t n = pool ? containing(p, ds_device_api_at(api)->handles) : 0;
    if (n && pool[n].api != api)
        n = 0;
    if (n)
        fill_info(n, out);
    ds_lock_give(DS_LOCK_ALLOCS);
    return n != 0;
}

/* The first live alias of allocation `n` (another API's mapping), or 0. */
static uint32_t first_alias(uint32_t n)
{
    for (uint32_t a = 1; a < next_free_node; a++)
        if (pool[a].level != DS_LEVEL_FREE && pool[a].alias_base == pool[n].base &&
            pool[a].alias_generation == pool[n].generation)
            return a;
    return 0;
}

int ds_alloc_free_check(uintptr_t p, int api, int kind, const char *caller)
{
    ds_alloc_info info, alias;
    char detail[DS_DETAIL_MAX + 2 * DS_NAME_MAX];
    ds_lock_take(DS_LOCK_ALLOCS);
    uint32_t n = pool ? containing(p, ds_device_api_at(api)->handles) : 0;
    bool exact = n && pool[n].base == p;
    bool recently_freed = !n && *recent_slot(p) == p;
    uint32_t shares = exact ? pool[n].shares : 0, maps = exact ? pool[n].maps : 0;
    uint32_t mapper = maps ? first_alias(n) : 0; /* a rare path: a walk is fine */
    if (n)
        fill_info(n, &info);
    if (mapper)
        fill_info(mapper, &alias);
    if (exact && (shares || maps) && ds_cfg.on_error == DS_ON_ERROR_PROTECT) {
        pool[n].deferred = 1;
        pool[n].freed_with = (uint8_t)kind;
    }
    ds_lock_give(DS_LOCK_ALLOCS);

    if (exact && maps && !shares) {
        ds_fmt(detail, sizeof(detail),
               "%s freed the %llu-byte allocation %p of %s while %s still maps it (%p, "
               "imported by %s); its reads and writes there may now hit freed memory",
               caller, (unsigned long long)info.size, (void *)p, ds_name(info.owner),
               mapper ? ds_device_api_at(alias.api)->name : "another API",
               mapper ? (void *)alias.base : NULL, mapper ? ds_name(alias.owner) : "?");
        return ds_violation(DS_VIO_FREE_WHILE_SHARED, "data", p, detail) ? DS_FREE_DEFER
                                                                          : DS_FREE_FORWARD;
    }
    if (exact && shares) {
        ds_fmt(detail, sizeof(detail),
               "%s freed the %llu-byte allocation %p of %s while %u imported tensor%s in it "
               "%s not released; the consumer may still read it",
               caller, (unsigned long long)info.size, (void *)p, ds_name(info.owner), shares,
               shares == 1 ? "" : "s", shares == 1 ? "is" : "are");
        return ds_violation(DS_VIO_FREE_WHILE_SHARED, "data", p, detail) ? DS_FREE_DEFER
                                                                          : DS_FREE_FORWARD;
    }
    if (n && !exact) {
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
    if (!n) {
        atomic_fetch_add(&untracked_frees, 1);
        ds_note_work();
    }
    return DS_FREE_FORWARD;
}

void ds_alloc_forget(uintptr_t base, int api, const char *caller)
{
    uint32_t n = 0;
    ds_alloc_info info, mapped = {0};
    bool release_mapped = false;
    ds_lock_take(DS_LOCK_ALLOCS);
    n = index_remove(base, ds_device_api_at(api)->handles);
    if (n) {
        fill_info(n, &info);
        release_mapped = unmap_alias(n, &mapped);
        __atomic_store_n(&live_count, live_count - 1, __ATOMIC_RELAXED);
        live_bytes -= pool[n].size;
        free_node(n);
        *recent_slot(base) = base;
        __atomic_store_n(&changes, changes + 1, __ATOMIC_RELEASE);
    }
    ds_lock_give(DS_LOCK_ALLOCS);
    if (n) {
        ds_note_work();
        emit(DS_EV_FREE, &info, NULL, caller, NULL, 0);
    }
    if (release_mapped)
        release_deferred(mapped.base, mapped.api, mapped.kind);
}

void ds_alloc_share(uintptr_t base, uint32_t generation, int delta)
{
    /* The allocation, then what it is an alias of (if any): each counts the
     * share, and a free deferred for either may now be due (the alias's
     * first: a mapping goes before the memory under it). */
    ds_alloc_info due[2];
    int ndue = 0;
    ds_lock_take(DS_LOCK_ALLOCS);
    uint32_t n = pool ? exact(base, generation) : 0;
    for (int hop = 0; n && hop < 2; hop++) {
        if (delta > 0)
            pool[n].shares++;
        else if (pool[n].shares)
            pool[n].shares--;
        if (pool[n].deferred && pool[n].shares == 0 && pool[n].maps == 0) {
            fill_info(n, &due[ndue]);
            due[ndue++].kind = pool[n].freed_with;
        }
        n = pool[n].alias_base ? exact(pool[n].alias_base, pool[n].alias_generation) : 0;
    }
    ds_lock_give(DS_LOCK_ALLOCS);
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
    for (uint32_t n = 1; n < next_free_node; n++) {
        if (pool[n].level == DS_LEVEL_FREE || !pool[n].shares || pool[n].deferred)
            continue;
        if (s->count < DS_LEAKS_NAMED) {
            fill_info(n, &s->named[s->count]);
            s->shares[s->count] = pool[n].shares;
        }
        s->count++;
        s->bytes += pool[n].size;
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
    if (pool)
        collect_shared(&s);
    ds_lock_give(DS_LOCK_ALLOCS);
    char detail[DS_DETAIL_MAX];
    for (uint64_t i = 0; i < s.count && i < DS_LEAKS_NAMED; i++) {
        ds_fmt(detail, sizeof(detail),
               "the %llu-byte allocation %p of %s is still shared by %u unreleased import%s at exit",
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
    free_list = 0;
    next_free_node = 1;
    if (buckets)
        memset(buckets, 0, sizeof(uint32_t) << bucket_bits);
    memset(per_level, 0, sizeof(per_level));
    levels_used = 0;
    __atomic_store_n(&live_count, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&changes, changes + 1, __ATOMIC_RELEASE);
    live_bytes = 0;
    memset(recent, 0, sizeof(recent));
    atomic_store(&untracked_frees, 0);
}
