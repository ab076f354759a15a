/*
 * modules.c — the loaded modules: which were patched, what each is called,
 * and the GOT patching of every module against every registered hook.
 *
 * ds_modules_refresh() walks dl_iterate_phdr: modules not seen before get
 * their GOT entries for hooked symbols pointed at the wrappers (elf.c);
 * modules gone since the last walk are forgotten, so a module loaded later
 * at the same address is patched afresh.  It runs at start-up and after
 * every dlopen/dlclose (hooks/dlopen.c).  Patching is idempotent: a slot that
 * already holds the wrapper is left alone, so no call is wrapped twice.
 *
 * Each patched module keeps the function its own slot pointed to: two
 * modules may bind one name to different definitions (RTLD_LOCAL and
 * RTLD_DEEPBIND scopes, two bundled copies of a runtime), and a definition
 * dies with its library.  A wrapper asks ds_got_original() for its caller's
 * one; calls from elsewhere (dlsym, the shim's own exports) get the global
 * definition.
 *
 * Those two questions (which definition for this wrapper and caller, which
 * module is at this address) come on every hooked call, so they are answered
 * without the lock: where every module holds the one global definition of a
 * hook (the usual case) that is the answer; otherwise (a hook "diverged")
 * each thread memoizes answers tagged with the table's generation, which any
 * change to the table or to an original bumps.  That also makes the hot path
 * safe in a signal handler that interrupted a refresh on the same thread.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "image/image.h"

#define DS_HOOKS_MAX 256
#define DS_HOOK_BUCKETS 1024u /* a power of two, well above DS_HOOKS_MAX */
#define DS_MODULES_MAX 4096

typedef struct {
    uintptr_t lo, hi, base;
    bool seen; /* present in the current walk */
    char name[DS_NAME_MAX];
    void *original[DS_HOOKS_MAX]; /* by hook index; NULL: slot not patched */
} module;

static ds_got_hook hooks[DS_HOOKS_MAX];
/* By hook index: modules whose file name starts with one of these keep
 * their own slot (NULL: none do); see ds_got_hooks_add_except. */
static const char *const *except_files[DS_HOOKS_MAX];
/* By hook index: the word raised when it diverges (NULL: none). */
static atomic_uint *diverged_gates[DS_HOOKS_MAX];
static int nhooks;
static int16_t bucket[DS_HOOK_BUCKETS]; /* by name: index + 1 into hooks; 0: empty */
static int16_t by_wrapper[DS_HOOK_BUCKETS]; /* by wrapper address, likewise; read without
                                              * the lock (atomic, published after hooks[]) */
/* A module's original for the hook differs from the global definition (or a
 * definition was forgotten): its callers need their own.  Sticky. */
static atomic_bool diverged[DS_HOOKS_MAX];
/* Each hook's next definition after the shim (RTLD_NEXT), looked up outside
 * every lock before the modules are walked: dlsym takes the loader's lock,
 * which a thread inside dlopen holds while it waits for the one
 * dl_iterate_phdr holds (and perhaps for ours). */
static void *_Atomic fallback[DS_HOOKS_MAX];
atomic_bool ds_any_diverged; /* while false, no hook needs its index looked up */
static module *mods;                    /* mmap'd, DS_MODULES_MAX */
static int nmods;
static atomic_uint generation = 1;   /* changes whenever mods[] or an original does; never 0 */
static void (*namer)(const char *path, char *out, size_t cap);
static bool rescan; /* hooks were added since the last walk: re-read every module */

/* mods[] by address, rebuilt at each change, for a binary search. */
typedef struct {
    uintptr_t lo, hi;
    int index;
} module_range;
static module_range ranges[DS_MODULES_MAX];

/* Per-thread memos (see the top).  generation 0 marks an entry being
 * written, so a signal handler that interrupts the update misses. */
typedef struct {
    uintptr_t caller;
    const void *wrapper;
    void *fn;
    unsigned generation;
} original_memo;
/* A power of two, and few: the shim's TLS is initial-exec, and a library
 * dlopen'ed with such TLS must fit what glibc keeps for them after start
 * (~1.5 KB once PyTorch is loaded: test_python).  Only a call through a
 * function the modules define differently comes here. */
#define DS_ORIGINAL_MEMOS 4
static DS_TLS original_memo original_memos[DS_ORIGINAL_MEMOS];
_Static_assert(DS_ORIGINAL_MEMOS == 4, "the memo is the hash's top 2 bits");

typedef struct {
    uintptr_t lo, hi;
    unsigned generation;
    uint16_t id;
} module_memo;
/* A few, searched in full and replaced in turn: a handoff alternates
 * between two frameworks' modules, so one entry would miss every time, and
 * indexing by address collides (large modules sit at 2 MiB boundaries). */
#define DS_MODULE_MEMOS 4
static DS_TLS module_memo module_memos[DS_MODULE_MEMOS];
static DS_TLS unsigned module_memo_next;

/* In front of those, the answer for one exact address, by a hash of it:
 * the addresses asked about are return addresses and hooked functions, a
 * few call sites asked again and again, and a hit costs a fraction of
 * searching the ranges.  Two sites that share a slot take turns
 * in it and fall back on the ranges.  A slot is one word, the address in
 * its low 48 bits (user-space code lies below) and the id above, so that a
 * signal handler that refills it leaves one answer or the other whole; its
 * generation in an array beside it (12 bytes a slot, where a struct took
 * 16: the TLS reserve, above). */
/* 32, not fewer: a Python round trip asks from about six call sites, which
 * 8 direct-mapped slots made collide on most runs. */
#define DS_SITE_MEMOS 32 /* a power of two */
#define DS_SITE_ADDR_BITS 48
static DS_TLS uint64_t site_keys[DS_SITE_MEMOS];
static DS_TLS unsigned site_generations[DS_SITE_MEMOS];

static unsigned site_slot(uintptr_t a)
{
    return (unsigned)((a * 0x9E3779B97F4A7C15ull) >> 59);
}
_Static_assert(DS_SITE_MEMOS == 32, "site_slot takes the hash's top 5 bits");

static void bump_generation(void)
{
    if (atomic_fetch_add_explicit(&generation, 1, memory_order_release) + 1 == 0)
        atomic_fetch_add_explicit(&generation, 1, memory_order_release);
}

/* Every symbol a module imports is looked up here as it is patched (over
 * a hundred thousand at start-up of PyTorch, C++ names of 100 bytes and
 * more), and almost none is a hook: so the hash reads the length (strlen,
 * vectorised) and three words, the first 16 bytes and the last 8, not
 * every byte.  Names that agree there meet in a bucket chain, where strcmp
 * tells them apart.  (Every word read lies within the name.) */
static uint32_t name_hash(const char *s)
{
    size_t n = strlen(s);
    uint64_t w[3] = {0, 0, 0};
    if (n >= 8) {
        memcpy(&w[0], s, 8);
        memcpy(&w[2], s + n - 8, 8);
        if (n >= 16)
            memcpy(&w[1], s + 8, 8);
    } else {
        for (size_t i = 0; i < n; i++)
            w[0] |= (uint64_t)(unsigned char)s[i] << (8 * i);
    }
    uint64_t h = (n + 1) * 0x9e3779b97f4a7c15ull; /* multiply-xor rounds, as in splitmix64 */
    for (int k = 0; k < 3; k++) {
        h = (h ^ w[k]) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    return (uint32_t)(h >> 32);
}

static int hook_index(const char *name)
{
    for (uint32_t i = name_hash(name);; i++) {
        int16_t b = bucket[i & (DS_HOOK_BUCKETS - 1)];
        if (b == 0)
            return -1;
        if (strcmp(hooks[b - 1].name, name) == 0)
            return b - 1;
    }
}

static uint32_t wrapper_hash(const void *w)
{
    return (uint32_t)(((uintptr_t)w >> 4) * 2654435761u);
}

/* Needs no lock: entries are published after the hook they index. */
static int wrapper_index(const void *w)
{
    for (uint32_t i = wrapper_hash(w);; i++) {
        int16_t b = __atomic_load_n(&by_wrapper[i & (DS_HOOK_BUCKETS - 1)], __ATOMIC_ACQUIRE);
        if (b == 0 || hooks[b - 1].wrapper == w)
            return b - 1;
    }
}

static void mark_diverged(int h)
{
    if (!atomic_exchange(&diverged[h], true) && diverged_gates[h])
        atomic_fetch_add(diverged_gates[h], 1);
    atomic_store(&ds_any_diverged, true);
}

/* Lock held (read or write): the function f stands for.  A canonical PLT entry of a
 * non-PIE executable (elf.c) jumps through that executable's GOT slot:
 * behind it is what the slot holds, or, once the slot holds the wrapper,
 * what it held before (the executable's original).  Calling the entry
 * itself would come back to the wrapper, for ever. */
static int module_at(uintptr_t a);
static void *behind_stub(int h, void *f)
{
    void **slot = ds_elf_plt_slot(f);
    void *held = NULL;
    if (!slot || ds_safe_read(&held, slot, sizeof(held)) != sizeof(held) || !held)
        return f;
    if (held != hooks[h].wrapper)
        return held;
    int m = mods ? module_at((uintptr_t)slot) : -1;
    if (m >= 0 && mods[m].original[h])
        return mods[m].original[h];
    /* Not known yet: the next definition after the shim, which is not the
     * executable's canonical entry (the executable comes before the shim). */
    void *next = atomic_load_explicit(&fallback[h], memory_order_acquire);
    return next ? next : f;
}

/* Write lock held: a module's own definition for hook h is f. */
static void note_original(int h, void *f)
{
    void *global = __atomic_load_n(hooks[h].real, __ATOMIC_ACQUIRE);
    if (!global)
        __atomic_store_n(hooks[h].real, f, __ATOMIC_RELEASE);
    else if (global != f)
        mark_diverged(h);
}

void ds_got_hooks_add_except(const ds_got_hook *add, size_t n, const char *const *file_prefixes)
{
    ds_got_hooks_add_gated(add, n, file_prefixes, NULL);
}

void ds_got_hooks_add_gated(const ds_got_hook *add, size_t n, const char *const *file_prefixes,
                            atomic_uint *diverged_gate)
{
    ds_lock_take(DS_LOCK_MODULES);
    for (size_t k = 0; k < n && nhooks < DS_HOOKS_MAX; k++) {
        if (hook_index(add[k].name) >= 0)
            continue;
        hooks[nhooks] = add[k];
        except_files[nhooks] = file_prefixes;
        diverged_gates[nhooks] = diverged_gate;
        uint32_t i = name_hash(add[k].name);
        while (bucket[i & (DS_HOOK_BUCKETS - 1)])
            i++;
        bucket[i & (DS_HOOK_BUCKETS - 1)] = (int16_t)(nhooks + 1);
        rescan = true;
        for (i = wrapper_hash(add[k].wrapper); by_wrapper[i & (DS_HOOK_BUCKETS - 1)]; i++) {
        }
        __atomic_store_n(&by_wrapper[i & (DS_HOOK_BUCKETS - 1)], (int16_t)(nhooks + 1),
                         __ATOMIC_RELEASE);
        nhooks++;
    }
    ds_lock_give(DS_LOCK_MODULES);
}

void ds_got_hooks_add(const ds_got_hook *add, size_t n)
{
    ds_got_hooks_add_except(add, n, NULL);
}

void ds_modules_set_namer(void (*fn)(const char *path, char *out, size_t cap))
{
    namer = fn;
}

/* Lock held (read or write).  -1 if no module holds addr. */
static int module_at(uintptr_t a)
{
    int lo = 0, hi = nmods; /* ranges[] is sorted by lo and never overlaps */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (a < ranges[mid].lo)
            hi = mid;
        else if (a >= ranges[mid].hi)
            lo = mid + 1;
        else
            return ranges[mid].index;
    }
    return -1;
}

/* Write lock held.  A Shell sort: no allocation (qsort may call malloc,
 * and this runs inside the program's dlopen). */
static void sort_ranges(void)
{
    for (int i = 0; i < nmods; i++)
        ranges[i] = (module_range){mods[i].lo, mods[i].hi, i};
    for (int gap = nmods / 2; gap > 0; gap /= 2)
        for (int i = gap; i < nmods; i++) {
            module_range x = ranges[i];
            int j = i;
            for (; j >= gap && ranges[j - gap].lo > x.lo; j -= gap)
                ranges[j] = ranges[j - gap];
            ranges[j] = x;
        }
}

/* The caller module's own definition of hook h (-1: not a hook), else the
 * global one.  A thread that already holds a shim lock (a signal handler
 * that interrupted the shim, perhaps while it patched modules) must not
 * wait for the table: it tries once, and without it takes the global one. */
__attribute__((noinline)) static void *original_from_table(int h, const void *wrapper,
                                                           void **global_real, const char *name,
                                                           const void *caller)
{
    void *f = NULL;
    bool locked = true;
    if (ds_holds_lock())
        locked = ds_lock_try_now(DS_LOCK_MODULES, true);
    else
        ds_lock_read(DS_LOCK_MODULES);
    if (locked) {
        int m = mods && h >= 0 ? module_at((uintptr_t)caller) : -1;
        if (m >= 0)
            f = mods[m].original[h];
        if (f && h >= 0)
            f = behind_stub(h, f);
        ds_lock_give(DS_LOCK_MODULES);
    }
    if (f)
        return f;
    f = __atomic_load_n(global_real, __ATOMIC_ACQUIRE);
    if (!f) {
        f = ds_resolve_real(name, wrapper);
        __atomic_store_n(global_real, f, __ATOMIC_RELEASE);
    }
    return f;
}

void *ds_got_original_slow(const void *wrapper, void **global_real, const char *name,
                           const void *caller)
{
    /* A hook that did not diverge still has the one global definition. */
    int h = wrapper_index(wrapper);
    if (h >= 0 && !atomic_load_explicit(&diverged[h], memory_order_relaxed)) {
        void *global = __atomic_load_n(global_real, __ATOMIC_ACQUIRE);
        if (global)
            return global;
    }
    uintptr_t c = (uintptr_t)caller;
    unsigned gen = atomic_load_explicit(&generation, memory_order_acquire);
    uint64_t hash = ((uint64_t)c ^ ((uint64_t)(uintptr_t)wrapper << 17)) * 0x9e3779b97f4a7c15ull;
    original_memo *memo = &original_memos[hash >> 62];
    if (memo->generation == gen && memo->caller == c && memo->wrapper == wrapper)
        return memo->fn;
    void *f = original_from_table(h, wrapper, global_real, name, caller);
    if (f) {
        memo->generation = 0;
        atomic_signal_fence(memory_order_seq_cst);
        *memo = (original_memo){c, wrapper, f, 0};
        atomic_signal_fence(memory_order_seq_cst);
        memo->generation = gen;
    }
    return f;
}

bool ds_module_range(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
    ds_lock_read(DS_LOCK_MODULES);
    int m = mods ? module_at((uintptr_t)addr) : -1;
    if (m >= 0)
        *lo = mods[m].lo, *hi = mods[m].hi;
    ds_lock_give(DS_LOCK_MODULES);
    return m >= 0;
}

bool ds_hook_named(const char *name)
{
    if (!name)
        return false;
    ds_lock_take(DS_LOCK_MODULES);
    bool named = hook_index(name) >= 0;
    ds_lock_give(DS_LOCK_MODULES);
    return named;
}

void *ds_hook_for_lookup(const char *name, void *real, const void *caller)
{
    if (!name || !real)
        return real;
    void *wrapper = NULL;
    ds_lock_take(DS_LOCK_MODULES);
    int h = hook_index(name);
    if (h >= 0 && real != hooks[h].wrapper && (!hooks[h].only || real == hooks[h].only)) {
        wrapper = hooks[h].wrapper;
        real = behind_stub(h, real);
        int m = mods ? module_at((uintptr_t)caller) : -1;
        if (m >= 0)
            mods[m].original[h] = real;
        note_original(h, real);
        bump_generation();
    }
    ds_lock_give(DS_LOCK_MODULES);
    return wrapper ? wrapper : real;
}

/* ---- patching one module ------------------------------------------------ */

typedef struct {
    ds_elf_module elf;
    module *mod;
    const char *file; /* the module's file name, without its directory */
} patch_ctx;

static bool excepted(const char *file, const char *const *prefixes)
{
    for (; prefixes && *prefixes; prefixes++)
        if (!strncmp(file, *prefixes, strlen(*prefixes)))
            return true;
    return false;
}

static void patch_slot(void **slot, const char *name, void *arg)
{
    patch_ctx *c = arg;
    int h = hook_index(name);
    if (h < 0)
        return;
    if (excepted(c->file, except_files[h]))
        return; /* another family sees this module's calls, or the wrapper must not */
    void *current = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (current == hooks[h].wrapper)
        return;
    uintptr_t bound = (uintptr_t)current;
    bool is_bound = current && (bound < c->elf.lo || bound >= c->elf.hi);
    if (hooks[h].only && current != hooks[h].only &&
        (is_bound || atomic_load_explicit(&fallback[h], memory_order_acquire) != hooks[h].only))
        return; /* bound to another definition of the same name */
    /* A bound slot holds this module's definition.  A lazy one holds the
     * module's own PLT stub, no use: the global definition stands in (found
     * only where the module's scope is the global one). */
    uintptr_t cur = (uintptr_t)current;
    void *original = current && (cur < c->elf.lo || cur >= c->elf.hi)
                         ? current
                         : atomic_load_explicit(&fallback[h], memory_order_acquire);
    if (!original)
        return; /* nothing to forward to: leave the slot alone */
    original = behind_stub(h, original);
    c->mod->original[h] = original;
    note_original(h, original);
    ds_elf_write_slot(&c->elf, slot, hooks[h].wrapper);
}

static void module_name(const char *path, char *out, size_t cap)
{
    if (namer) {
        namer(path, out, cap);
    } else {
        const char *base = strrchr(path, '/');
        ds_printable(out, cap, base ? base + 1 : path, SIZE_MAX);
    }
}

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    static char self_anchor;
    ds_elf_module elf;
    if (ds_elf_open(&elf, info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum) != NULL)
        return 0; /* static image, vDSO oddities: nothing to patch */
    const char *path = info->dlpi_name ? info->dlpi_name : "", *slash = strrchr(path, '/');
    const char *file = slash ? slash + 1 : path;
    for (int i = 0; i < nmods; i++)
        if (mods[i].base == elf.base && mods[i].lo == elf.lo && mods[i].hi == elf.hi) {
            mods[i].seen = true;
            if (rescan) {
                patch_ctx c = {elf, &mods[i], file};
                ds_elf_each_import(&c.elf, patch_slot, &c);
            }
            return 0;
        }
    if ((uintptr_t)&self_anchor >= elf.lo && (uintptr_t)&self_anchor < elf.hi)
        return 0; /* the shim itself */
    if (nmods == DS_MODULES_MAX)
        return 0;
    module *mod = &mods[nmods++];
    *mod = (module){.lo = elf.lo, .hi = elf.hi, .base = elf.base, .seen = true};
    module_name(path, mod->name, sizeof(mod->name));
    if (nhooks) {
        patch_ctx c = {elf, mod, file};
        ds_elf_each_import(&c.elf, patch_slot, &c);
    }
    return 0;
}

/* A global definition that lived in a module now gone must not be used. */
static void forget_definitions_in(const module *gone)
{
    for (int h = 0; h < nhooks; h++) {
        uintptr_t f = (uintptr_t)*hooks[h].real;
        if (f >= gone->lo && f < gone->hi) {
            mark_diverged(h); /* the next global one may not be theirs */
            __atomic_store_n(hooks[h].real, NULL, __ATOMIC_RELEASE);
        }
    }
}

/* What a lazy slot for hook h would be bound to: the first definition in
 * the global scope, as the loader finds it (a sanitizer's free, preloaded
 * before the shim: its blocks are not libc's).  A non-PIE executable's
 * canonical entry stands for what its own slot is bound to (the entry
 * itself leads back to the wrapper once that slot holds it); where that is
 * not known, or the first is the shim's own, the next definition after the
 * shim. */
static void *bound_definition(int h)
{
    void *first = ds_real_dlsym(RTLD_DEFAULT, hooks[h].name);
    if (first == hooks[h].wrapper)
        first = NULL;
    void **slot = first ? ds_elf_plt_slot(first) : NULL;
    if (slot) {
        void *held = NULL;
        bool bound = false;
        if (ds_safe_read(&held, slot, sizeof(held)) == sizeof(held) && held &&
            held != hooks[h].wrapper) {
            ds_lock_read(DS_LOCK_MODULES);
            int m = module_at((uintptr_t)slot);
            bound = m >= 0 && module_at((uintptr_t)held) != m;
            ds_lock_give(DS_LOCK_MODULES);
        }
        first = bound ? held : NULL;
    }
    return first ? first : ds_resolve_real(hooks[h].name, hooks[h].wrapper);
}

/* Every hook's fallback, looked up where still unknown: the names taken
 * under the lock, the lookups made outside it (the table only grows). */
static void resolve_fallbacks(void)
{
    ds_lock_read(DS_LOCK_MODULES);
    int n = nhooks;
    ds_lock_give(DS_LOCK_MODULES);
    for (int h = 0; h < n; h++)
        if (!atomic_load_explicit(&fallback[h], memory_order_acquire))
            atomic_store_explicit(&fallback[h], bound_definition(h), memory_order_release);
}

void ds_modules_refresh(void)
{
    resolve_fallbacks();
    ds_lock_take(DS_LOCK_MODULES);
    if (!mods)
        mods = ds_map(DS_MODULES_MAX * sizeof(module), true);
    if (mods) {
        for (int i = 0; i < nmods; i++)
            mods[i].seen = false;
        dl_iterate_phdr(visit, NULL);
        rescan = false;
        int kept = 0;
        for (int i = 0; i < nmods; i++) {
            if (mods[i].seen) {
                if (kept != i)
                    mods[kept] = mods[i];
                kept++;
            } else {
                forget_definitions_in(&mods[i]);
            }
        }
        nmods = kept;
        sort_ranges();
        bump_generation(); /* patching may have recorded originals, too */
    }
    ds_lock_give(DS_LOCK_MODULES);
}

/* ds_module_id_at past its memos, out of line so that the memo probe costs
 * no more than it does.  A module the walk has not seen yet is named
 * through dladdr (and not memoized). */
__attribute__((noinline)) static uint16_t module_id_slow(const void *addr, unsigned gen)
{
    uintptr_t a = (uintptr_t)addr;
    char name[DS_NAME_MAX];
    ds_lock_read(DS_LOCK_MODULES);
    int m = mods ? module_at(a) : -1;
    uintptr_t lo = 0, hi = 0;
    if (m >= 0) {
        lo = mods[m].lo;
        hi = mods[m].hi;
        memcpy(name, mods[m].name, sizeof(name));
    }
    ds_lock_give(DS_LOCK_MODULES);
    if (m < 0) {
        Dl_info info;
        if (dladdr(addr, &info) && info.dli_fname)
            module_name(info.dli_fname, name, sizeof(name));
        else
            ds_fmt(name, sizeof(name), "unknown");
        return ds_name_intern(name);
    }
    uint16_t id = ds_name_intern(name);
    module_memo *memo = &module_memos[module_memo_next++ % DS_MODULE_MEMOS];
    memo->generation = 0;
    atomic_signal_fence(memory_order_seq_cst);
    *memo = (module_memo){lo, hi, 0, id};
    atomic_signal_fence(memory_order_seq_cst);
    memo->generation = gen;
    return id;
}

static void site_remember(unsigned slot, uintptr_t a, unsigned gen, uint16_t id)
{
    if (a >> DS_SITE_ADDR_BITS)
        return; /* no room for the id: asked of the ranges each time */
    site_generations[slot] = 0;
    atomic_signal_fence(memory_order_seq_cst);
    site_keys[slot] = (uint64_t)a | (uint64_t)id << DS_SITE_ADDR_BITS;
    atomic_signal_fence(memory_order_seq_cst);
    site_generations[slot] = gen;
}

/* ds_module_id_at past the exact address: the ranges, then the walk. */
__attribute__((noinline)) static uint16_t module_id_of_range(uintptr_t a, unsigned gen,
                                                             unsigned slot)
{
    for (int i = 0; i < DS_MODULE_MEMOS; i++) {
        const module_memo *m = &module_memos[i];
        if (m->generation == gen && a >= m->lo && a < m->hi) {
            site_remember(slot, a, gen, m->id);
            return m->id;
        }
    }
    return module_id_slow((const void *)a, gen);
}

/* Inline into the hooks that name their caller (link-time optimisation):
 * the memo's probe is a few loads, its call was as many again. */
inline __attribute__((always_inline)) uint16_t ds_module_id_at(const void *addr)
{
    uintptr_t a = (uintptr_t)addr;
    unsigned gen = atomic_load_explicit(&generation, memory_order_acquire);
    unsigned slot = site_slot(a);
    /* The generation first: a signal handler that refills the slot after
     * this read writes a key valid now, and one before it left a
     * consistent slot. */
    unsigned slot_gen = site_generations[slot];
    atomic_signal_fence(memory_order_seq_cst);
    uint64_t key = site_keys[slot];
    if (slot_gen == gen && (key & ((1ull << DS_SITE_ADDR_BITS) - 1)) == a)
        return (uint16_t)(key >> DS_SITE_ADDR_BITS);
    return module_id_of_range(a, gen, slot);
}

static uint16_t (*_Atomic caller_namer)(uint16_t module);

void ds_modules_set_caller_namer(uint16_t (*fn)(uint16_t module))
{
    atomic_store_explicit(&caller_namer, fn, memory_order_release);
}

uint16_t ds_module_caller_at(const void *addr)
{
    uint16_t id = ds_module_id_at(addr);
    uint16_t (*namer_fn)(uint16_t) = atomic_load_explicit(&caller_namer, memory_order_acquire);
    return namer_fn ? namer_fn(id) : id;
}
