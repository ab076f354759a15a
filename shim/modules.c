/*
 * modules.c — the loaded modules: which were patched, what each is called,
 * and the GOT patching of every module against every registered hook.
 *
 * ds_modules_refresh() walks dl_iterate_phdr: modules not seen before get
 * their GOT entries for hooked symbols pointed at the wrappers (elf.c);
 * modules gone since the last walk are forgotten, so a module loaded later
 * at the same address is patched afresh.  It runs at start-up and after
 * every dlopen/dlclose (hooks/dlopen.c).  Patching is idempotent: a slot that
 * already holds the wrapper (the shim exported the symbol, or the module was
 * seen before) is left alone, so no call is ever wrapped twice.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

#define DS_HOOKS_MAX 64
#define DS_HOOK_BUCKETS 256u  /* a power of two, well above DS_HOOKS_MAX */
#define DS_MODULES_MAX 8192

typedef struct {
    uintptr_t lo, hi, base;
    bool seen; /* present in the current walk */
    char name[DS_NAME_MAX];
} module;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static ds_got_hook hooks[DS_HOOKS_MAX];
static int nhooks;
static int16_t bucket[DS_HOOK_BUCKETS]; /* index + 1 into hooks; 0: empty */
static module *mods;                    /* mmap'd, DS_MODULES_MAX */
static int nmods;
static void (*namer)(const char *path, char *out, size_t cap);
static atomic_uint_fast64_t patched_slots;

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static const ds_got_hook *hook_for(const char *name)
{
    for (uint32_t i = name_hash(name);; i++) {
        int16_t b = bucket[i & (DS_HOOK_BUCKETS - 1)];
        if (b == 0)
            return NULL;
        if (strcmp(hooks[b - 1].name, name) == 0)
            return &hooks[b - 1];
    }
}

void ds_got_hooks_add(const ds_got_hook *add, size_t n)
{
    pthread_mutex_lock(&lock);
    for (size_t k = 0; k < n && nhooks < DS_HOOKS_MAX; k++) {
        if (hook_for(add[k].name))
            continue;
        hooks[nhooks] = add[k];
        uint32_t i = name_hash(add[k].name);
        while (bucket[i & (DS_HOOK_BUCKETS - 1)])
            i++;
        bucket[i & (DS_HOOK_BUCKETS - 1)] = (int16_t)(++nhooks);
    }
    pthread_mutex_unlock(&lock);
}

void ds_modules_set_namer(void (*fn)(const char *path, char *out, size_t cap))
{
    namer = fn;
}

uint64_t ds_modules_patched_slots(void)
{
    return atomic_load(&patched_slots);
}

/* ---- patching one module ------------------------------------------------ */

typedef struct {
    ds_elf_module elf;
} patch_ctx;

static void patch_slot(void **slot, const char *name, void *arg)
{
    patch_ctx *c = arg;
    const ds_got_hook *h = hook_for(name);
    if (!h)
        return;
    void *current = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (current == h->wrapper)
        return;
    if (!*h->real) {
        /* A bound slot already holds the real function; a lazy one holds the
         * module's own PLT stub, which is no use. */
        uintptr_t cur = (uintptr_t)current;
        bool bound = current && (cur < c->elf.lo || cur >= c->elf.hi);
        *h->real = bound ? current : ds_resolve_real(name, h->wrapper);
    }
    if (!*h->real)
        return; /* nothing to forward to: leave the module alone */
    if (ds_elf_write_slot(&c->elf, slot, h->wrapper))
        atomic_fetch_add(&patched_slots, 1);
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
    for (int i = 0; i < nmods; i++)
        if (mods[i].base == elf.base && mods[i].lo == elf.lo && mods[i].hi == elf.hi) {
            mods[i].seen = true;
            return 0;
        }
    if ((uintptr_t)&self_anchor >= elf.lo && (uintptr_t)&self_anchor < elf.hi)
        return 0; /* the shim itself */
    if (nmods < DS_MODULES_MAX) {
        module *mod = &mods[nmods++];
        *mod = (module){elf.lo, elf.hi, elf.base, true, ""};
        module_name(info->dlpi_name ? info->dlpi_name : "", mod->name, sizeof(mod->name));
    }
    if (nhooks) {
        patch_ctx c = {elf};
        ds_elf_each_import(&c.elf, patch_slot, &c);
    }
    return 0;
}

void ds_modules_refresh(void)
{
    pthread_mutex_lock(&lock);
    if (!mods) {
        void *p = mmap(NULL, DS_MODULES_MAX * sizeof(module), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        mods = p == MAP_FAILED ? NULL : p;
    }
    if (mods) {
        for (int i = 0; i < nmods; i++)
            mods[i].seen = false;
        dl_iterate_phdr(visit, NULL);
        int kept = 0;
        for (int i = 0; i < nmods; i++)
            if (mods[i].seen)
                mods[kept++] = mods[i];
        nmods = kept;
    }
    pthread_mutex_unlock(&lock);
}

void ds_module_name_at(const void *addr, char *out, size_t cap)
{
    uintptr_t a = (uintptr_t)addr;
    bool found = false;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nmods && !found; i++)
        if (a >= mods[i].lo && a < mods[i].hi) {
            ds_fmt(out, cap, "%s", mods[i].name);
            found = true;
        }
    pthread_mutex_unlock(&lock);
    if (found)
        return;
    Dl_info info; /* a module the walk has not seen yet */
    if (dladdr(addr, &info) && info.dli_fname)
        module_name(info.dli_fname, out, cap);
    else
        ds_fmt(out, cap, "unknown");
}
