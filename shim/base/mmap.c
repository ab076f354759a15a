/*
 * mmap.c — the one place the shim asks the kernel for memory of its own.
 *
 * Hooks run inside the allocator, inside deleters and in signal handlers,
 * so no table of the shim comes from malloc: each is an anonymous private
 * mapping, zeroed by the kernel (an empty table needs no initialisation).
 */
#include <sys/mman.h>

#include "base/base.h"

void *ds_map(size_t bytes, bool reserve)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | (reserve ? 0 : MAP_NORESERVE);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void ds_unmap(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes);
}
