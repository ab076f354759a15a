/*
 * python_exchange.c — the DLPack 1.3 exchange table (DLPackExchangeAPI), a
 * C table a framework publishes through a capsule named
 * "dlpack_exchange_api" (python_capsule.c hands out the wrapped copy made
 * here).  Its entries that move a tensor are wrapped per table:
 *   managed_tensor_allocator, managed_tensor_from_py_object_no_sync
 *        the table's owner made a tensor for the caller: an export by the
 *        owner, an import by the caller
 *   managed_tensor_to_py_object_no_sync
 *        the caller hands its tensor to the owner, which takes it
 * The others are left as they are: dltensor_from_py_object_no_sync (a
 * borrowed view: no ownership moves) and current_work_stream.
 */
#include <errno.h>

#include "python_capsule.h"

typedef int (*allocator_fn)(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                            void (*set_error)(void *error_ctx, const char *kind, const char *msg));
typedef int (*from_py_fn)(void *py_object, DLManagedTensorVersioned **out);
typedef int (*to_py_fn)(DLManagedTensorVersioned *tensor, void **out_py_object);

/* DLPackExchangeAPI (dlpack.h 1.3), declared here because Debian's header
 * predates it. */
typedef struct {
    DLPackVersion version;
    void *prev_api;
    allocator_fn managed_tensor_allocator;
    from_py_fn managed_tensor_from_py_object_no_sync;
    to_py_fn managed_tensor_to_py_object_no_sync;
    void *dltensor_from_py_object_no_sync;
    void *current_work_stream;
} exchange_api;

/* Tables are static in each framework, so a few slots suffice; C has no
 * closures, so each slot has its own wrapper functions.  A slot is claimed
 * by one thread, filled, then published (`ready`); it never changes after. */
#define DS_EXCHANGE_SLOTS 8
static struct {
    const exchange_api *orig;
    exchange_api wrapped;
    uint16_t owner; /* the framework the table belongs to */
    atomic_bool ready;
} slots[DS_EXCHANGE_SLOTS];
static atomic_int slots_claimed;

static uint16_t exchange_api_name(void)
{
    return DS_NAME_ONCE("exchange_api");
}

/* The table's owner made a tensor for the caller, who now owns it (the
 * allocator and from_py_object): an export by the owner, an import by the
 * caller. */
static void made_for_caller(int i, DLManagedTensorVersioned *t, const void *caller)
{
    int saved = errno;
    if (ds_active()) {
        ds_tensor_export_by(t, true, slots[i].owner, exchange_api_name());
        ds_tensor_import_by(t, true, ds_caller_id(caller), exchange_api_name());
    }
    errno = saved;
}

static int exchange_allocate(int i, DLTensor *prototype, DLManagedTensorVersioned **out, void *ctx,
                             void (*set_error)(void *, const char *, const char *),
                             const void *caller)
{
    int result = slots[i].orig->managed_tensor_allocator(prototype, out, ctx, set_error);
    if (result == 0 && out && *out)
        made_for_caller(i, *out, caller);
    return result;
}

static int exchange_from_py(int i, void *py_object, DLManagedTensorVersioned **out,
                            const void *caller)
{
    int result = slots[i].orig->managed_tensor_from_py_object_no_sync(py_object, out);
    if (result == 0 && out && *out)
        made_for_caller(i, *out, caller);
    return result;
}

/* The caller hands a tensor it made to the owner, which takes it (ownership
 * is stolen): recorded before the call, after which the tensor may already
 * be gone. */
static int exchange_to_py(int i, DLManagedTensorVersioned *tensor, void **out, const void *caller)
{
    int saved = errno;
    if (tensor && ds_active()) {
        ds_tensor_export_by(tensor, true, ds_caller_id(caller), exchange_api_name());
        ds_tensor_import_by(tensor, true, slots[i].owner, exchange_api_name());
    }
    errno = saved;
    return slots[i].orig->managed_tensor_to_py_object_no_sync(tensor, out);
}

#define DS_SLOT_WRAPPERS(i)                                                                  \
    static int allocate_##i(DLTensor *p, DLManagedTensorVersioned **o, void *c,              \
                            void (*e)(void *, const char *, const char *))                   \
    {                                                                                        \
        return exchange_allocate(i, p, o, c, e, __builtin_return_address(0));                \
    }                                                                                        \
    static int from_py_##i(void *obj, DLManagedTensorVersioned **o)                          \
    {                                                                                        \
        return exchange_from_py(i, obj, o, __builtin_return_address(0));                     \
    }                                                                                        \
    static int to_py_##i(DLManagedTensorVersioned *t, void **o)                              \
    {                                                                                        \
        return exchange_to_py(i, t, o, __builtin_return_address(0));                         \
    }
DS_SLOT_WRAPPERS(0)
DS_SLOT_WRAPPERS(1)
DS_SLOT_WRAPPERS(2)
DS_SLOT_WRAPPERS(3)
DS_SLOT_WRAPPERS(4)
DS_SLOT_WRAPPERS(5)
DS_SLOT_WRAPPERS(6)
DS_SLOT_WRAPPERS(7)
#undef DS_SLOT_WRAPPERS

static const struct {
    allocator_fn allocate;
    from_py_fn from_py;
    to_py_fn to_py;
} slot_fns[DS_EXCHANGE_SLOTS] = {
    {allocate_0, from_py_0, to_py_0}, {allocate_1, from_py_1, to_py_1},
    {allocate_2, from_py_2, to_py_2}, {allocate_3, from_py_3, to_py_3},
    {allocate_4, from_py_4, to_py_4}, {allocate_5, from_py_5, to_py_5},
    {allocate_6, from_py_6, to_py_6}, {allocate_7, from_py_7, to_py_7},
};

void *ds_py_exchange_api(void *table)
{
    for (int i = 0; i < DS_EXCHANGE_SLOTS; i++)
        if (atomic_load_explicit(&slots[i].ready, memory_order_acquire) &&
            (slots[i].orig == table || &slots[i].wrapped == table))
            return &slots[i].wrapped;
    exchange_api copy;
    if (ds_safe_read(&copy, table, sizeof(copy)) != sizeof(copy) ||
        copy.version.major != DLSHIM_DLPACK_MAJOR || !copy.managed_tensor_allocator ||
        !copy.managed_tensor_from_py_object_no_sync || !copy.managed_tensor_to_py_object_no_sync)
        return table;
    int i = atomic_fetch_add_explicit(&slots_claimed, 1, memory_order_relaxed);
    if (i >= DS_EXCHANGE_SLOTS)
        return table;
    slots[i].orig = table;
    slots[i].owner = ds_module_id_at((const void *)copy.managed_tensor_from_py_object_no_sync);
    copy.managed_tensor_allocator = slot_fns[i].allocate;
    copy.managed_tensor_from_py_object_no_sync = slot_fns[i].from_py;
    copy.managed_tensor_to_py_object_no_sync = slot_fns[i].to_py;
    slots[i].wrapped = copy;
    atomic_store_explicit(&slots[i].ready, true, memory_order_release);
    return &slots[i].wrapped;
}
