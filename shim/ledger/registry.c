/*
 * registry.c — tensor records keyed by the managed tensor's address.
 *
 * An open-addressing hash table (linear probing, load at most 1/2) in memory
 * from mmap, so the registry never calls malloc and works from a deleter or a
 * signal handler.  One lock guards it (a spin lock: it is taken on every
 * handoff); callers never call out of the shim (deleters, the log) while
 * holding it.  The table grows by doubling up to DLSHIM_MAX_RECORDS records;
 * at the cap, the older half of the released records is evicted in one
 * rebuild, oldest release first.  Live records are never evicted: their
 * trampolines need the original deleter.
 */
#include <string.h>

#include "ledger/ledger.h"

static uint64_t stamps; /* lock held */

/* Until ds_reg_init maps the table (or where it could not), one empty slot:
 * a lookup misses there without a test of its own.  A lookup of key 0 also
 * misses without one: the table always has an empty slot. */
static ds_record no_records[1];
static ds_record *table = no_records;
static size_t cap = 1; /* slots, a power of two */
static size_t used;  /* records in the table */
static size_t max_records = 1u << 20;
static uint64_t evicted;

#define DS_INITIAL_SLOTS 1024u

uint64_t ds_reg_next_stamp(void)
{
    return ++stamps;
}

/* The child keeps its parent's records (it may release those tensors) but
 * does not count them as its own. */
void ds_reg_after_fork(void)
{
    for (size_t i = 0; i < cap; i++)
        table[i].inherited = 1;
}

static ds_record *map_slots(size_t n)
{
    return ds_map(n * sizeof(ds_record), true);
}

static size_t slot_of(uintptr_t key, size_t mask)
{
    /* Fibonacci hashing; tensor structs are at least 8-byte aligned. */
    return (size_t)(((uint64_t)(key >> 3) * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

static ds_record *probe(ds_record *t, size_t n, uintptr_t key)
{
    size_t mask = n - 1;
    for (size_t i = slot_of(key, mask);; i = (i + 1) & mask)
        if (t[i].key == key || t[i].key == 0)
            return &t[i];
}

void ds_reg_init(size_t max)
{
    max_records = max;
    ds_record *mapped = table == no_records ? map_slots(DS_INITIAL_SLOTS) : NULL;
    if (mapped) {
        table = mapped;
        cap = DS_INITIAL_SLOTS;
    }
}

/* Moves every record accepted by `keep` into a fresh table of n slots. */
static bool rebuild(size_t n, uint64_t released_before)
{
    ds_record *fresh = map_slots(n);
    if (!fresh)
        return false;
    size_t kept = 0;
    for (size_t i = 0; i < cap; i++) {
        ds_record *r = &table[i];
        if (r->key == 0)
            continue;
        if (r->state == DS_RELEASED && r->t_release < released_before) {
            evicted++;
            continue;
        }
        *probe(fresh, n, r->key) = *r;
        kept++;
    }
    ds_unmap(table, cap * sizeof(ds_record));
    table = fresh;
    cap = n;
    used = kept;
    return true;
}

/* At the cap: drop released records older than the midpoint of the released
 * records' release times (at least the oldest one). */
static bool evict_released(void)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < cap; i++)
        if (table[i].key && table[i].state == DS_RELEASED) {
            uint64_t t = table[i].t_release;
            lo = t < lo ? t : lo;
            hi = t > hi ? t : hi;
        }
    if (lo == UINT64_MAX)
        return false; /* every record is live */
    return rebuild(cap, lo + (hi - lo) / 2 + 1);
}

/* Inline where it is used (one probe on every handoff and release). */
inline ds_record *ds_reg_find(uintptr_t key)
{
    ds_record *r = probe(table, cap, key);
    return r->key ? r : NULL;
}

/* `r` emptied for a new record under `key`. */
static ds_record *cleared(ds_record *r, uintptr_t key)
{
    memset(r, 0, sizeof(*r));
    r->key = key;
    return r;
}

ds_record *ds_reg_insert(uintptr_t key)
{
    if (table == no_records || key == 0)
        return NULL;
    ds_record *r = probe(table, cap, key);
    if (r->key == 0) {
        if (used >= max_records && !evict_released())
            return NULL;
        if ((used + 1) * 2 > cap && !rebuild(cap * 2, 0))
            return NULL;
        r = probe(table, cap, key);
        used++;
    }
    return cleared(r, key);
}

ds_record *ds_reg_renew(ds_record *r)
{
    return cleared(r, r->key);
}

void ds_reg_foreach(void (*fn)(const ds_record *r, void *arg), void *arg)
{
    for (size_t i = 0; i < cap; i++)
        if (table[i].key)
            fn(&table[i], arg);
}

uint64_t ds_reg_evicted(void)
{
    return evicted;
}
