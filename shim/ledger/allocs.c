/*
 * allocs.c — every live device, pinned-host and managed allocation, with its
 * owner, and the policy for frees: free_while_shared, invalid_free, deferred
 * frees under DLSHIM_ON_ERROR=protect, and the leak count at exit.
 *
 * The records live in the index (alloc_index.c: pointer or handle ->
 * allocation, one cache miss at a million).  One lock, a spin lock
 * (locks.def, sharded: below): every handoff looks an allocation up, and a
 * mutex's two calls were a fifth of a lookup's instructions; its rare long
 * holds (growing the table, rebuilding the index's filter: O(n)) make a
 * waiter yield, then nap.  Nothing is called out of the shim while it is
 * held.
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
#include <stdatomic.h>
#include <string.h>

#include "alloc_index.h"

#define table ds_alloc_table
#define capacity ds_alloc_capacity
typedef ds_alloc_node node;

#define DS_RECENT_FREES 4096u          /* remembered bases, to name double frees (a power of two) */

static uint32_t generation_counter;
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
    uint32_t of = gone->alias_base
                      ? ds_alloc_index_exact(gone->alias_base, gone->alias_generation)
                      : DS_NO_SLOT;
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
    if (ds_alloc_index_remove(info.base, handle, &stale))
        release_mapped = unmap_alias(&stale, &mapped);
    info.owner = owner;
    info.generation = ++generation_counter;
    node fresh = {.base = info.base, .size = info.size, .stream = info.stream,
                  .owner = info.owner, .device = (int16_t)info.device, .kind = (uint8_t)info.kind,
                  .api = (uint8_t)info.api, .generation = info.generation,
                  .properties = info.properties};
    uint32_t n = ds_alloc_index_insert(fresh, handle);
    /* What it maps, while that is still the allocation it was (no slot
     * moves from here on: n stays n). */
    uint32_t of = n != DS_NO_SLOT && info.alias_of
                      ? ds_alloc_index_exact(info.alias_of, info.alias_generation)
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
    if (ds_alloc_index_empty()) /* a CPU-only program: no lock on its handoffs */
        return false;
    unsigned shard = read_begin();
    uint32_t n = ds_alloc_index_containing(p, false);
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
    if (ds_alloc_index_empty())
        return false;
    uint64_t offset;
    return ds_alloc_lookup_in(api, ds_alloc_memory_of(api, data, &offset), out);
}

bool ds_alloc_lookup_in(int api, uintptr_t p, ds_alloc_info *out)
{
    unsigned shard = read_begin();
    uint32_t n = ds_alloc_index_containing(p, ds_device_api_at(api)->handles);
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
    uint32_t n = ds_alloc_index_exact(base, generation);
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

/* What a free of p finds in the index (ALLOCS held: a shard at least):
 * the allocation it lies in (*info) and, where that is mapped by another
 * API, the first such mapping (*alias). */
typedef struct {
    uint32_t n, shares, maps;
    bool inside, exact, recently_freed, mapped; /* mapped: *alias is filled */
} free_seen;

static free_seen see_free(uintptr_t p, bool handles, ds_alloc_info *info, ds_alloc_info *alias)
{
    free_seen f = {.n = ds_alloc_index_containing(p, handles)};
    f.inside = f.n != DS_NO_SLOT;
    f.exact = f.inside && table[f.n].base == p;
    f.recently_freed = !f.inside && *recent_slot(p) == p;
    f.shares = f.exact ? __atomic_load_n(&table[f.n].shares, __ATOMIC_RELAXED) : 0;
    f.maps = f.exact ? table[f.n].maps : 0;
    uint32_t mapper = f.maps ? first_alias(f.n) : DS_NO_SLOT; /* a rare path: a walk is fine */
    if (f.inside)
        fill_info(&table[f.n], info);
    f.mapped = mapper != DS_NO_SLOT;
    if (f.mapped)
        fill_info(&table[mapper], alias);
    return f;
}

int ds_alloc_free_check(uintptr_t p, int api, int kind, const char *caller)
{
    ds_alloc_info info = {0}, alias = {0};
    char detail[DS_DETAIL_MAX + 2 * DS_NAME_MAX];
    bool handles = ds_device_api_at(api)->handles;
    /* Looked at as a lookup is, under this thread's shard: a free changes
     * nothing here unless it is deferred, and the whole lock (which waits
     * for every other thread's lookups) is for that alone.  A deferred
     * free is marked under it, from a second look as things are then, so
     * that the release taking the last share sees the mark (ds_alloc_share). */
    unsigned shard = read_begin();
    free_seen f = see_free(p, handles, &info, &alias);
    read_end(shard);
    if (f.exact && (f.shares || f.maps) && ds_cfg.on_error == DS_ON_ERROR_PROTECT) {
        ds_lock_take(DS_LOCK_ALLOCS);
        f = see_free(p, handles, &info, &alias);
        if (f.exact && (f.shares || f.maps)) {
            table[f.n].deferred = 1;
            table[f.n].freed_with = (uint8_t)kind;
        }
        ds_lock_give(DS_LOCK_ALLOCS);
    }
    if (f.exact && f.maps && !f.shares) {
        ds_fmt(detail, sizeof(detail),
               "%s freed the %llu-byte allocation %p of %s while %s still maps it (%p, "
               "imported by %s); its reads and writes there may now hit freed memory",
               caller, (unsigned long long)info.size, (void *)p, ds_name(info.owner),
               f.mapped ? ds_device_api_at(alias.api)->name : "another API",
               f.mapped ? (void *)alias.base : NULL, f.mapped ? ds_name(alias.owner) : "?");
        return ds_violation(DS_VIO_FREE_WHILE_SHARED, "data", p, detail) ? DS_FREE_DEFER
                                                                          : DS_FREE_FORWARD;
    }
    if (f.exact && f.shares) {
        ds_fmt(detail, sizeof(detail),
               "%s freed the %llu-byte allocation %p of %s while %u shared tensor%s in it "
               "%s not released; the consumer may still read it",
               caller, (unsigned long long)info.size, (void *)p, ds_name(info.owner), f.shares,
               f.shares == 1 ? "" : "s", f.shares == 1 ? "is" : "are");
        return ds_violation(DS_VIO_FREE_WHILE_SHARED, "data", p, detail) ? DS_FREE_DEFER
                                                                          : DS_FREE_FORWARD;
    }
    if (f.inside && !f.exact) {
        ds_fmt(detail, sizeof(detail),
               "%s freed %p, %llu bytes inside the allocation %p of %s, not its start", caller,
               (void *)p, (unsigned long long)(p - info.base), (void *)info.base,
               ds_name(info.owner));
        return ds_violation(DS_VIO_INVALID_FREE, "data", p, detail) ? DS_FREE_REFUSE
                                                                     : DS_FREE_FORWARD;
    }
    if (f.recently_freed) {
        ds_fmt(detail, sizeof(detail), "%s freed %p again: it was already freed", caller,
               (void *)p);
        return ds_violation(DS_VIO_INVALID_FREE, "data", p, detail) ? DS_FREE_REFUSE
                                                                     : DS_FREE_FORWARD;
    }
    if (!f.inside) {
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
    bool found = ds_alloc_index_remove(base, ds_device_api_at(api)->handles, &gone);
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
    bool live = ds_alloc_index_exact(base, generation) != DS_NO_SLOT;
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
    uint32_t n = ds_alloc_index_exact(base, generation);
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
        n = e->alias_base ? ds_alloc_index_exact(e->alias_base, e->alias_generation) : DS_NO_SLOT;
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
    *live = ds_alloc_live_count;
    *bytes = ds_alloc_live_bytes;
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
    ds_alloc_index_reset();
    __atomic_store_n(&changes, changes + 1, __ATOMIC_RELEASE);
    memset(recent, 0, sizeof(recent));
    atomic_store(&untracked_frees, 0);
}
