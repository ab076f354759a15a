/*
 * external.c — memory one API exports as a file descriptor and another
 * imports (Vulkan's vkGetMemoryFdKHR → cudaImportExternalMemory): one
 * allocation seen from two APIs.
 *
 * The exporting family tells which allocation a descriptor carries; the
 * importing family, handed the same descriptor, learns which allocation its
 * import object (cudaExternalMemory_t) stands for; a buffer it then maps is
 * recorded as an alias of that allocation (allocs.c), so that freeing the
 * exported memory while the alias lives is freed_while_shared.
 *
 * A descriptor is known by its number and the file it refers to (device
 * and inode): a number alone is reused as soon as it is closed, and a file
 * alone is one device node for every export on some drivers.  Both tables
 * are small rings: programs export and import a few large allocations, and
 * a forgotten entry only means an import is not linked.
 */
#include <string.h>
#include <sys/stat.h>

#include "ledger/ledger.h"

#define DS_EXPORTS 64u  /* remembered exports (a power of two) */
#define DS_IMPORTS 256u /* live import objects (a power of two) */

typedef struct {
    uint64_t dev, ino;
    int fd;
    int api;
    uintptr_t base;
    uint32_t generation;
} exported;

typedef struct {
    uintptr_t handle; /* the importer's object; 0: free */
    uintptr_t base;   /* the exported allocation */
    int api;
    uint32_t generation;
} imported;

static exported exports[DS_EXPORTS];
static unsigned next_export;
static imported imports[DS_IMPORTS];

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
        (exported){id.dev, id.ino, id.fd, api, a.base, a.generation};
    ds_lock_give(DS_LOCK_EXTMEM);
}

/* Lock held.  The entry of an import object, or (insert) the first free
 * one for it; the whole table is looked at, since freed entries leave holes. */
static imported *find_import(int api, uintptr_t handle, bool insert)
{
    imported *hole = NULL;
    for (unsigned i = 0; i < DS_IMPORTS; i++) {
        imported *m = &imports[(handle / 8 + i) & (DS_IMPORTS - 1)];
        if (m->handle == handle && m->api == api)
            return m;
        if (!m->handle && !hole)
            hole = m;
    }
    return insert ? hole : NULL;
}

void ds_extmem_imported(int api, uintptr_t handle, const ds_file_id *id)
{
    if (!handle)
        return;
    ds_lock_take(DS_LOCK_EXTMEM);
    const exported *from = NULL;
    /* The newest export of that descriptor. */
    for (unsigned i = 1; i <= DS_EXPORTS && !from; i++) {
        const exported *e = &exports[(next_export - i) & (DS_EXPORTS - 1)];
        if (e->base && e->fd == id->fd && e->dev == id->dev && e->ino == id->ino)
            from = e;
    }
    imported *slot = from ? find_import(api, handle, true) : NULL;
    if (slot)
        *slot = (imported){handle, from->base, api, from->generation};
    ds_lock_give(DS_LOCK_EXTMEM);
}

bool ds_extmem_source(int api, uintptr_t handle, uintptr_t *base, uint32_t *generation)
{
    ds_lock_take(DS_LOCK_EXTMEM);
    const imported *m = handle ? find_import(api, handle, false) : NULL;
    if (m) {
        *base = m->base;
        *generation = m->generation;
    }
    ds_lock_give(DS_LOCK_EXTMEM);
    return m != NULL;
}

void ds_extmem_destroyed(int api, uintptr_t handle)
{
    ds_lock_take(DS_LOCK_EXTMEM);
    imported *m = handle ? find_import(api, handle, false) : NULL;
    if (m)
        m->handle = 0;
    ds_lock_give(DS_LOCK_EXTMEM);
}

void ds_extmem_after_fork(void)
{
    memset(exports, 0, sizeof(exports));
    memset(imports, 0, sizeof(imports));
    next_export = 0;
}
