/*
 * device.c — what the device-API wrappers (device.h) do for the CUDA
 * runtime, the CUDA driver and HIP alike: turn a successful allocation into
 * a record, a free into a decision, a stream, copy or launch into the stream
 * model's and copy accounting's input.  Errno is the wrapper's to keep.
 */
#include <stdatomic.h>

#include "device.h"

DS_TLS const void *ds_device_caller;

void ds_device_allocated(int api, int kind, const void *out_ptr, size_t ptr_size, uint64_t bytes,
                         int device, uintptr_t stream, const void *caller)
{
    uintptr_t base = 0;
    if (ds_safe_read(&base, out_ptr, ptr_size) == ptr_size && base) {
        ds_alloc_info a = {.base = base, .size = bytes, .stream = (void *)stream,
                           .device = device, .kind = kind, .api = api};
        /* the owner: the module, or the Python package behind ctypes */
        ds_alloc_record(&a, ds_caller_id(caller));
    }
}

int ds_device_free_check(int api, int kind, uintptr_t ptr, const void *caller)
{
    if (!ptr)
        return DS_FREE_FORWARD; /* freeing NULL is legal and does nothing */
    return ds_alloc_free_check(ptr, api, kind, ds_name(ds_caller_id(caller)));
}

void ds_device_freed(int api, uintptr_t ptr, const void *caller)
{
    if (!ptr)
        return;
    ds_alloc_forget(ptr, api, ds_name(ds_caller_id(caller)));
}

/* The descriptor of the external memory (or semaphore) being imported on
 * this thread, between EXTMEM_IMPORTING and EXTMEM_IMPORTED (or
 * EXTSEM_IMPORTED): the runtime closes it.  A semaphore's may be of a
 * timeline. */
static DS_TLS ds_file_id importing;
static DS_TLS bool importing_known, importing_timeline;

void ds_device_extmem_importing(const void *type, size_t type_size, const int *fd, int fd_type,
                                int timeline_type)
{
    int t = 0, f = -1;
    importing_known = type_size == sizeof(t) && ds_safe_read(&t, type, sizeof(t)) == sizeof(t) &&
                      (t == fd_type || (t == timeline_type && t != DS_NO_HANDLE_TYPE)) &&
                      ds_safe_read(&f, fd, sizeof(f)) == sizeof(f) &&
                      ds_extmem_identify(f, &importing);
    importing_timeline = importing_known && t == timeline_type;
}

/* A semaphore imported as a timeline is one of the importer's too: what it
 * stands for when its export was not seen (ds_device_semaphores). */
void ds_device_extmem_imported(int api, const void *out, size_t handle_size, bool semaphore)
{
    uintptr_t handle = 0;
    if (importing_known && handle_size <= sizeof(handle) &&
        ds_safe_read(&handle, out, handle_size) == handle_size) {
        if (!semaphore) {
            ds_extmem_imported(api, handle, &importing);
        } else {
            ds_extsem_imported(api, handle, &importing);
            if (importing_timeline)
                ds_timeline_created(api, handle, 0);
        }
    }
    importing_known = false;
}

void ds_device_extsem_destroyed(int api, uintptr_t handle)
{
    ds_extsem_destroyed(api, handle);
    ds_timeline_destroyed(api, handle);
}

void ds_device_extmem_mapped(int api, const void *out_ptr, size_t ptr_size, uintptr_t mem,
                             const unsigned long long *offset, const unsigned long long *size,
                             int device, const void *caller)
{
    uintptr_t base = 0;
    unsigned long long bytes = 0, at = 0;
    if (ptr_size > sizeof(base) || ds_safe_read(&base, out_ptr, ptr_size) != ptr_size || !base ||
        ds_safe_read(&bytes, size, sizeof(bytes)) != sizeof(bytes) ||
        ds_safe_read(&at, offset, sizeof(at)) != sizeof(at))
        return;
    /* A buffer the program frees like any other: recorded as one, and as
     * an alias of the exported allocation when the import is known, its
     * first byte that allocation's byte `at` (a buffer sub-allocated in a
     * larger memory is mapped at its offset there). */
    ds_alloc_info a = {.base = base, .size = bytes, .device = device, .kind = DS_ALLOC_DEVICE,
                       .api = api, .alias_holds = true, .alias_offset = at};
    ds_extmem_source(api, mem, &a.alias_of, &a.alias_generation);
    ds_alloc_record(&a, ds_module_id_at(caller));
}

/* Each semaphore is an event: the exporter's, when the import is linked
 * to its export (a Vulkan semaphore: the event its queue's submissions
 * signal and wait for), else the import object's own.  A timeline
 * semaphore (the exporter's, or the import's when it is not linked) is an
 * event per value signalled (ds_timeline_signalled), the value its params
 * give. */
void ds_device_semaphores(int api, const void *sems, size_t handle_size, const void *params,
                          size_t params_size, size_t value_at, unsigned n, uintptr_t stream,
                          bool ptsz, bool signal)
{
    for (unsigned i = 0; i < n && i < 64; i++) {
        uintptr_t sem = 0;
        if (handle_size > sizeof(sem) ||
            ds_safe_read(&sem, (const char *)sems + i * handle_size, handle_size) != handle_size)
            return;
        int from = api;
        uintptr_t event = sem;
        ds_extsem_source(api, sem, &from, &event);
        if (!ds_timeline_is(from, event)) {
            if (signal)
                ds_sync_shared_recorded(from, event, api, stream, ptsz);
            else
                ds_sync_shared_waits(api, stream, ptsz, from, event);
            continue;
        }
        uint64_t value = 0;
        if (ds_safe_read(&value, (const char *)params + i * params_size + value_at,
                         sizeof(value)) != sizeof(value))
            return;
        if (signal)
            ds_timeline_signalled(from, event, value, api, stream, ptsz);
        else
            ds_timeline_waited(from, event, value, api, stream, ptsz);
    }
}

/* ---- host functions ---------------------------------------------------------
 * A queued host function's run (or a stream callback's) tells the host that
 * its stream got that far: the stream model hears it as an event recorded
 * where the function was queued and waited for by the host when it runs.
 * Each function in flight takes a slot (its address is the event's handle,
 * which no API hands out).  Slots come in blocks mapped as they are needed
 * and kept (a program that once had 10,000 functions in flight may again);
 * the free ones form one lock-free stack.  Only past HOST_FN_BLOCKS blocks
 * (as many functions in flight as the stream model holds events), or when
 * the kernel refuses a block, is a function queued as it is, and the model
 * learns nothing from it (a later use may then be reported as a race). */
#define HOST_FN_BLOCK 1024u
#define HOST_FN_BLOCKS 256u /* 262,144 in flight, 8 MiB of slots */

typedef struct {
    int api;
    uint32_t index;        /* in the blocks, for the free stack's links */
    _Atomic uint32_t next; /* on the free stack: index + 1 of the next slot, 0 at the end */
    void (*fn)(void);      /* the program's, called as the trampoline that took it */
    void *data;
} host_fn_slot;

static _Atomic(host_fn_slot *) host_fn_blocks[HOST_FN_BLOCKS];
static atomic_uint host_fn_blocks_used;
/* The free stack's top: a count of changes in the high half, the top
 * slot's index + 1 in the low half (0: empty).  The count makes a stale
 * compare-and-swap fail when the top was taken and given back meanwhile
 * (the ABA problem of lock-free stacks). */
static _Atomic uint64_t host_fn_free;

static host_fn_slot *slot_at(uint32_t index)
{
    /* Acquire: the block was published (release) before any of its slots
     * went on the stack. */
    host_fn_slot *block = atomic_load_explicit(&host_fn_blocks[index / HOST_FN_BLOCK],
                                               memory_order_acquire);
    return block + index % HOST_FN_BLOCK;
}

/* Puts the chain first..last (already linked through `next`) on the stack. */
static void push_chain(host_fn_slot *first, host_fn_slot *last)
{
    uint64_t top = atomic_load_explicit(&host_fn_free, memory_order_relaxed);
    uint64_t next;
    do {
        atomic_store_explicit(&last->next, (uint32_t)top, memory_order_relaxed);
        next = ((top >> 32) + 1) << 32 | (first->index + 1);
    } while (!atomic_compare_exchange_weak_explicit(&host_fn_free, &top, next,
                                                    memory_order_release, memory_order_relaxed));
}

static host_fn_slot *pop(void)
{
    uint64_t top = atomic_load_explicit(&host_fn_free, memory_order_acquire);
    while ((uint32_t)top) {
        host_fn_slot *h = slot_at((uint32_t)top - 1);
        /* May be stale when another thread took h meanwhile: then the
         * count has moved and the exchange fails. */
        uint64_t next = ((top >> 32) + 1) << 32 |
                        atomic_load_explicit(&h->next, memory_order_relaxed);
        if (atomic_compare_exchange_weak_explicit(&host_fn_free, &top, next,
                                                  memory_order_acquire, memory_order_acquire))
            return h;
    }
    return NULL;
}

/* A new block: its first slot for the caller, the rest on the stack. */
static host_fn_slot *grow(void)
{
    unsigned n = atomic_load_explicit(&host_fn_blocks_used, memory_order_relaxed);
    do {
        if (n >= HOST_FN_BLOCKS)
            return NULL;
    } while (!atomic_compare_exchange_weak_explicit(&host_fn_blocks_used, &n, n + 1,
                                                    memory_order_relaxed, memory_order_relaxed));
    host_fn_slot *block = ds_map(HOST_FN_BLOCK * sizeof(*block), true);
    if (!block)
        return NULL; /* the index stays unused: no slot names it */
    for (uint32_t i = 0; i < HOST_FN_BLOCK; i++) {
        block[i].index = n * HOST_FN_BLOCK + i;
        atomic_store_explicit(&block[i].next, block[i].index + 2, memory_order_relaxed);
    }
    atomic_store_explicit(&host_fn_blocks[n], block, memory_order_release);
    push_chain(&block[1], &block[HOST_FN_BLOCK - 1]);
    return &block[0];
}

typedef struct {
    void (*fn)(void);
    void *data;
} host_call;

/* A slot given back: its event forgotten, the slot free to take. */
void ds_device_host_fn_unused(void *slot)
{
    host_fn_slot *h = slot;
    ds_sync_event_destroyed(h->api, (uintptr_t)h);
    push_chain(h, h);
}

/* The model hears of the run before the program's function can tell anyone;
 * the slot is free again before that function runs (it may take long). */
static host_call ran(host_fn_slot *h)
{
    host_call call = {h->fn, h->data};
    ds_sync_host_waits_event(h->api, (uintptr_t)h);
    ds_device_host_fn_unused(h);
    return call;
}

/* The trampolines, run on the driver's thread.  A stream callback's stream
 * and status (CUstream and CUresult, cudaStream_t and cudaError_t) pass as
 * a pointer and an int, as the C calling convention passes them. */
static void host_fn_ran(void *arg)
{
    host_call c = ran(arg);
    ((void (*)(void *))c.fn)(c.data);
}

static void stream_callback_ran(void *stream, int status, void *arg)
{
    host_call c = ran(arg);
    ((void (*)(void *, int, void *))c.fn)(stream, status, c.data);
}

void *ds_device_host_fn(int api, uintptr_t stream, bool ptsz, int kind, void (**fn)(void),
                        void **data)
{
    if (!*fn || !ds_sync_enabled())
        return NULL; /* a NULL function is the API's error to report */
    host_fn_slot *h = pop();
    if (!h && !(h = grow()))
        return NULL;
    h->api = api;
    h->fn = *fn;
    h->data = *data;
    ds_sync_event_recorded(api, (uintptr_t)h, stream, ptsz);
    *fn = kind == DS_HOST_FN_STREAM_CALLBACK ? (void (*)(void))stream_callback_ran
                                             : (void (*)(void))host_fn_ran;
    *data = h;
    return h;
}

void ds_device_stream_created(int api, const void *out_stream, size_t ptr_size, bool non_blocking)
{
    uintptr_t s = 0;
    if (ds_safe_read(&s, out_stream, ptr_size) == ptr_size)
        ds_sync_stream_created(api, s, non_blocking);
}

int ds_copy_kind_direction(int kind)
{
    /* cudaMemcpyKind and hipMemcpyKind share these values; 4 is "Default". */
    static const int directions[] = {DS_COPY_H2H, DS_COPY_H2D, DS_COPY_D2H, DS_COPY_D2D};
    return kind >= 0 && kind < 4 ? directions[kind] : DS_COPY_INFER;
}

uint64_t ds_pitched_span(size_t pitch, size_t width, size_t height)
{
    return height ? (uint64_t)pitch * (height - 1) + width : 0;
}

uint64_t ds_pitched_bytes(const size_t *pitch, size_t height)
{
    size_t row = 0;
    return ds_safe_read(&row, pitch, sizeof(row)) == sizeof(row) ? (uint64_t)row * height : 0;
}

void ds_device_lookup_result(const char *name, void **fn, const void *caller)
{
    void *f = NULL;
    if (!fn || !name || ds_safe_read(&f, fn, sizeof(f)) != sizeof(f) || !f)
        return;
    /* A lookup may answer a name with another ABI of it (CUDA 13's driver
     * hands out a cuCtxSynchronize that takes a context): a wrapper calls
     * what it is given with its own name's arguments, so only the very
     * function that name stands for is wrapped.  Anything else passes
     * through untouched, and untracked. */
    if (!ds_hook_named(name) || !ds_defines(f, name))
        return;
    void *w = ds_hook_for_lookup(name, f, caller);
    if (w != f)
        ds_safe_write(fn, &w, sizeof(w));
}

void *ds_device_fn(void **const *known, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        void *k = __atomic_load_n(known[i], __ATOMIC_ACQUIRE);
        if (k)
            return ds_resolve_beside(k, name);
    }
    return NULL;
}
