/*
 * external.c — what one API exports as a file descriptor and another
 * imports: memory (Vulkan's vkGetMemoryFdKHR → cudaImportExternalMemory),
 * one allocation seen from two APIs; and semaphores (vkGetSemaphoreFdKHR →
 * cudaImportExternalSemaphore), one edge of the stream model seen from two.
 *
 * The exporting family tells which allocation a descriptor carries; the
 * importing family, handed the same descriptor, learns which allocation its
 * import object (cudaExternalMemory_t) stands for; a buffer it then maps is
 * recorded as an alias of that allocation (allocs.c), so that freeing the
 * exported memory while the alias lives is freed_while_shared.
 *
 * A semaphore goes the same way: its import object (cudaExternalSemaphore_t)
 * stands for the exporter's semaphore, and the importer's signals and waits
 * are made on the exporter's event of the stream model (ds_extsem_source),
 * so that a Vulkan submission's signal orders a CUDA stream's wait, and the
 * reverse; a timeline semaphore's signals and waits are of values of the
 * exporter's timeline (timelines.c), which the importer reads from its
 * calls' params.  A semaphore's export is consumed by its import: the importer
 * owns the descriptor from then on and closes it, and its number, free
 * again, must not link a later import to this semaphore.
 *
 * A descriptor is known by its number and the file it refers to (device
 * and inode): a number alone is reused as soon as it is closed, and a file
 * alone is one device node for every export on some drivers.  Both tables
 * are small rings: programs export and import a few large allocations and
 * a few semaphores, and a forgotten entry only means an import is not
 * linked (for a semaphore: its edge is missed, as before it was linked).
 */
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>

#include "ledger/ledger.h"

#define DS_EXPORTS 64u  /* remembered exports (a power of two) */
#define DS_IMPORTS 256u /* live import objects (a power of two) */

typedef struct {
    uint64_t dev, ino;
    int fd;
    int api;
    uintptr_t base; /* the exported allocation, or semaphore; 0: none */
    uint32_t generation;
    bool semaphore;
} exported;

typedef struct {
    uintptr_t handle; /* the importer's object; 0: free */
    uintptr_t base;   /* the exported allocation, or semaphore */
    int api;
    int from_api; /* a semaphore's exporter */
    uint32_t generation;
    bool semaphore;
} imported;

static exported exports[DS_EXPORTS];
static unsigned next_export;
static imported imports[DS_IMPORTS];
/* Whether a semaphore import was ever linked: until then every signal and
 * wait of a CUDA or HIP program (XLA's, for one) passes without the lock. */
static atomic_bool semaphores_linked;

bool ds_extmem_identify(int fd, ds_file_id *out)
{
    struct stat st;
    if (fd < 0 || ds_fstat(fd, &st) != 0)
        return false;
    *out = (ds_file_id){.dev = (uint64_t)st.st_dev, .ino = (uint64_t)st.st_ino, .fd = fd};
    return true;
}

void ds_extmem_exported(int api, uintptr_t memory, int fd)
{
    ds_file_id id;
    ds_alloc_info a;
    if (!ds_extmem_identify(fd, &id) || !ds_alloc_lookup_in(api, memory, &a) || a.base != memory)
        return;
    ds_lock_take(DS_LOCK_EXTMEM);
    exports[next_export++ & (DS_EXPORTS - 1)] =
        (exported){id.dev, id.ino, id.fd, api, a.base, a.generation, false};
    ds_lock_give(DS_LOCK_EXTMEM);
}

void ds_extsem_exported(int api, uintptr_t semaphore, int fd)
{
    ds_file_id id;
    if (!semaphore || !ds_extmem_identify(fd, &id))
        return;
    ds_lock_take(DS_LOCK_EXTMEM);
    exports[next_export++ & (DS_EXPORTS - 1)] =
        (exported){id.dev, id.ino, id.fd, api, semaphore, 0, true};
    ds_lock_give(DS_LOCK_EXTMEM);
}

/* Lock held.  The entry of an import object of memory or of a semaphore,
 * or (insert) the first free one for it; the whole table is looked at,
 * since freed entries leave holes. */
static imported *find_import(int api, uintptr_t handle, bool semaphore, bool insert)
{
    imported *hole = NULL;
    for (unsigned i = 0; i < DS_IMPORTS; i++) {
        imported *m = &imports[(handle / 8 + i) & (DS_IMPORTS - 1)];
        if (m->handle == handle && m->api == api && m->semaphore == semaphore)
            return m;
        if (!m->handle && !hole)
            hole = m;
    }
    return insert ? hole : NULL;
}

/* Lock held.  The newest export of that descriptor, of memory or of a
 * semaphore: an older one with the same number was closed since. */
static exported *find_export(const ds_file_id *id, bool semaphore)
{
    for (unsigned i = 1; i <= DS_EXPORTS; i++) {
        exported *e = &exports[(next_export - i) & (DS_EXPORTS - 1)];
        if (e->base && e->fd == id->fd && e->dev == id->dev && e->ino == id->ino &&
            e->semaphore == semaphore)
            return e;
    }
    return NULL;
}

void ds_extmem_imported(int api, uintptr_t handle, const ds_file_id *id)
{
    if (!handle)
        return;
    ds_lock_take(DS_LOCK_EXTMEM);
    const exported *from = find_export(id, false);
    imported *slot = from ? find_import(api, handle, false, true) : NULL;
    if (slot)
        *slot = (imported){handle, from->base, api, from->api, from->generation, false};
    ds_lock_give(DS_LOCK_EXTMEM);
}

void ds_extsem_imported(int api, uintptr_t handle, const ds_file_id *id)
{
    if (!handle)
        return;
    ds_lock_take(DS_LOCK_EXTMEM);
    exported *from = find_export(id, true);
    imported *slot = from ? find_import(api, handle, true, true) : NULL;
    if (slot) {
        *slot = (imported){handle, from->base, api, from->api, 0, true};
        atomic_store_explicit(&semaphores_linked, true, memory_order_relaxed);
    }
    if (from)
        from->base = 0; /* the importer owns the descriptor now */
    ds_lock_give(DS_LOCK_EXTMEM);
}

bool ds_extmem_source(int api, uintptr_t handle, uintptr_t *base, uint32_t *generation)
{
    ds_lock_take(DS_LOCK_EXTMEM);
    const imported *m = handle ? find_import(api, handle, false, false) : NULL;
    if (m) {
        *base = m->base;
        *generation = m->generation;
    }
    ds_lock_give(DS_LOCK_EXTMEM);
    return m != NULL;
}

bool ds_extsem_source(int api, uintptr_t handle, int *from_api, uintptr_t *semaphore)
{
    /* Relaxed: a link made on another thread is ordered before this call
     * by the program's own synchronization, which the lock then completes. */
    if (!atomic_load_explicit(&semaphores_linked, memory_order_relaxed))
        return false;
    ds_lock_take(DS_LOCK_EXTMEM);
    const imported *m = handle ? find_import(api, handle, true, false) : NULL;
    if (m) {
        *from_api = m->from_api;
        *semaphore = m->base;
    }
    ds_lock_give(DS_LOCK_EXTMEM);
    return m != NULL;
}

static void import_destroyed(int api, uintptr_t handle, bool semaphore)
{
    ds_lock_take(DS_LOCK_EXTMEM);
    imported *m = handle ? find_import(api, handle, semaphore, false) : NULL;
    if (m)
        m->handle = 0;
    ds_lock_give(DS_LOCK_EXTMEM);
}

void ds_extmem_destroyed(int api, uintptr_t handle)
{
    import_destroyed(api, handle, false);
}

void ds_extsem_destroyed(int api, uintptr_t handle)
{
    import_destroyed(api, handle, true);
}

/* The exporter's semaphore is gone, and its event with it: an import of it
 * goes back to an event of its own (what it signals, it alone waits for),
 * so that a semaphore made later with the same handle is not linked. */
void ds_extsem_semaphore_gone(int api, uintptr_t semaphore)
{
    if (!semaphore)
        return;
    ds_lock_take(DS_LOCK_EXTMEM);
    for (unsigned i = 0; i < DS_EXPORTS; i++)
        if (exports[i].semaphore && exports[i].api == api && exports[i].base == semaphore)
            exports[i].base = 0;
    for (unsigned i = 0; i < DS_IMPORTS; i++)
        if (imports[i].semaphore && imports[i].from_api == api && imports[i].base == semaphore)
            imports[i].handle = 0;
    ds_lock_give(DS_LOCK_EXTMEM);
}

void ds_extmem_after_fork(void)
{
    memset(exports, 0, sizeof(exports));
    memset(imports, 0, sizeof(imports));
    next_export = 0;
    atomic_store_explicit(&semaphores_linked, false, memory_order_relaxed);
}
