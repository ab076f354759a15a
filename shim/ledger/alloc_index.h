/*
 * alloc_index.h — the index of live allocations (alloc_index.c), for
 * allocs.c alone: pointer or handle -> the allocation's record.  The index
 * knows no lock: its caller holds ALLOCS, a shard to look up, the whole lock
 * to insert or remove (allocs.c, "who may read and who may change").
 */
#ifndef DS_ALLOC_INDEX_H
#define DS_ALLOC_INDEX_H

#include "ledger/ledger.h"

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
} ds_alloc_node;
_Static_assert(sizeof(ds_alloc_node) == 64, "one cache line per tracked allocation");

#define DS_NO_SLOT UINT32_MAX

/* The records, in their slots (an empty slot's klass is 0); a slot number
 * holds only until the index next changes. */
extern ds_alloc_node *ds_alloc_table;
extern uint32_t ds_alloc_capacity;
/* Live allocations and their bytes: the count is read without the lock
 * (ds_alloc_index_empty), both are changed under the whole lock. */
extern uint64_t ds_alloc_live_count, ds_alloc_live_bytes;

/* No allocation indexed: a CPU-only program's handoffs ask no lock.  One
 * inserted meanwhile is as if inserted after the question. */
static inline bool ds_alloc_index_empty(void)
{
    return __atomic_load_n(&ds_alloc_live_count, __ATOMIC_RELAXED) == 0;
}

uint32_t ds_alloc_index_insert(ds_alloc_node e, bool handle);
uint32_t ds_alloc_index_containing(uintptr_t p, bool handle);
bool ds_alloc_index_remove(uintptr_t base, bool handle, ds_alloc_node *out);
uint32_t ds_alloc_index_exact(uintptr_t base, uint32_t generation);
void ds_alloc_index_reset(void);

#endif
