/*
 * registry.c — tensor records keyed by the managed tensor's address.
 *
 * An open-addressing hash table (linear probing, load at most 1/2) in memory
 * from mmap, so the registry never calls malloc and works from a deleter or a
 * signal handler.  It is DS_REG_SHARDS tables, a tensor's by a hash of its
 * address, each guarded by its shard of the REGISTRY lock (a spin lock: one
 * is taken on every handoff), so threads handing over different tensors
 * neither wait for each other nor write a common cache line; callers never
 * call out of the shim (deleters, the log) while holding one.  A shard's
 * table grows by doubling up to its part of DLSHIM_MAX_RECORDS; at that
 * cap, the older half of its released records is evicted in one rebuild,
 * oldest release first.  Live records are never evicted: their
 * trampolines need the original deleter.
 */
#include <string.h>

#include "ledger/ledger.h"

/* A shard: its own table, counters and lock (REGISTRY's shard of the same
 * index), on cache lines of its own, so that threads handing over different
 * tensors write nothing in common.  From ds_reg_init until a shard's first
 * insert maps its table (or where it could not), the table is one shared
 * empty slot: a lookup misses there without a test of its own.  A lookup of key 0 also
 * misses without one: a table always has an empty slot. */
typedef struct {
    _Alignas(64) ds_record *table;
    size_t cap;  /* slots, a power of two */
    size_t mask; /* cap - 1, what a lookup needs */
    size_t used; /* records in the table */
    uint64_t stamps;
    uint64_t evicted;
} shard;

static const ds_record no_records[1];
static shard shards[DS_REG_SHARDS]; /* tables NULL (cap 0) until ds_reg_init */
static size_t max_records = (1u << 20) / DS_REG_SHARDS; /* per shard */

#define DS_INITIAL_SLOTS 64u /* per shard: 4,096 in all */

uint64_t ds_reg_next_stamp(uint64_t hash)
{
    return ++shards[ds_reg_shard(hash)].stamps;
}

/* The child keeps its parent's records (it may release those tensors) but
 * does not count them as its own. */
void ds_reg_after_fork(void)
{
    for (unsigned s = 0; s < DS_REG_SHARDS; s++)
        for (size_t i = 0; shards[s].table != no_records && i < shards[s].cap; i++)
            shards[s].table[i].inherited = 1;
}

static ds_record *map_slots(size_t n)
{
    return ds_map(n * sizeof(ds_record), true);
}

/* The shard takes the hash's top bits (ds_reg_shard), the slot bits below
 * them (a table has at most 2^32 slots). */
static size_t slot_of(uint64_t hash, size_t mask)
{
    return (size_t)(hash >> 17) & mask;
}

static ds_record *probe(ds_record *t, size_t mask, uint64_t hash, uintptr_t key)
{
    for (size_t i = slot_of(hash, mask);; i = (i + 1) & mask)
        if (t[i].key == key || t[i].key == 0)
            return &t[i];
}

/* DLSHIM_MAX_RECORDS is shared out among the shards (rounded up), so each
 * evicts on its own: records hash evenly over them. */
void ds_reg_init(size_t max)
{
    max_records = (max + DS_REG_SHARDS - 1) / DS_REG_SHARDS;
    for (unsigned s = 0; s < DS_REG_SHARDS; s++)
        if (!shards[s].table) {
            shards[s].table = (ds_record *)no_records; /* never written: no key is 0 */
            shards[s].cap = 1;
            shards[s].mask = 0;
        }
}

/* Moves every record of shard `sh` not evicted into a fresh table of n
 * slots: released records stamped before `released_before` are evicted. */
static bool rebuild(shard *sh, size_t n, uint64_t released_before)
{
    ds_record *fresh = map_slots(n);
    if (!fresh)
        return false;
    size_t kept = 0;
    for (size_t i = 0; sh->table != no_records && i < sh->cap; i++) { /* NULL: cap 0 */
        ds_record *r = &sh->table[i];
        if (r->key == 0)
            continue;
        if (r->state == DS_RELEASED && r->t_release < released_before) {
            sh->evicted++;
            continue;
        }
        *probe(fresh, n - 1, ds_reg_hash(r->key), r->key) = *r;
        kept++;
    }
    if (sh->table && sh->table != no_records)
        ds_unmap(sh->table, sh->cap * sizeof(ds_record));
    sh->table = fresh;
    sh->cap = n;
    sh->mask = n - 1;
    sh->used = kept;
    return true;
}

/* At the cap: drop released records older than the midpoint of the released
 * records' release times (at least the oldest one). */
static bool evict_released(shard *sh)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < sh->cap; i++)
        if (sh->table[i].key && sh->table[i].state == DS_RELEASED) {
            uint64_t t = sh->table[i].t_release;
            lo = t < lo ? t : lo;
            hi = t > hi ? t : hi;
        }
    if (lo == UINT64_MAX)
        return false; /* every record is live */
    return rebuild(sh, sh->cap, lo + (hi - lo) / 2 + 1);
}

/* Inline where it is used (one probe on every handoff and release). */
inline ds_record *ds_reg_find(uint64_t hash, uintptr_t key)
{
    const shard *sh = &shards[ds_reg_shard(hash)];
    ds_record *r = probe(sh->table, sh->mask, hash, key);
    return r->key ? r : NULL;
}

/* `r` emptied for a new record under `key`. */
static ds_record *cleared(ds_record *r, uintptr_t key)
{
    memset(r, 0, sizeof(*r));
    r->key = key;
    return r;
}

ds_record *ds_reg_insert(uint64_t hash, uintptr_t key)
{
    shard *sh = &shards[ds_reg_shard(hash)];
    if (key == 0 || !sh->table)
        return NULL;
    if (sh->table == no_records && !rebuild(sh, DS_INITIAL_SLOTS, 0))
        return NULL;
    ds_record *r = probe(sh->table, sh->mask, hash, key);
    if (r->key == 0) {
        if (sh->used >= max_records && !evict_released(sh))
            return NULL;
        if ((sh->used + 1) * 2 > sh->cap && !rebuild(sh, sh->cap * 2, 0))
            return NULL;
        r = probe(sh->table, sh->mask, hash, key);
        sh->used++;
    }
    return cleared(r, key);
}

ds_record *ds_reg_renew(ds_record *r)
{
    return cleared(r, r->key);
}

void ds_reg_foreach(void (*fn)(const ds_record *r, void *arg), void *arg)
{
    for (unsigned s = 0; s < DS_REG_SHARDS; s++)
        for (size_t i = 0; i < shards[s].cap; i++)
            if (shards[s].table[i].key)
                fn(&shards[s].table[i], arg);
}

uint64_t ds_reg_evicted(void)
{
    uint64_t n = 0;
    for (unsigned s = 0; s < DS_REG_SHARDS; s++)
        n += shards[s].evicted;
    return n;
}
