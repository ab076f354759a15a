/* A bridge library: "libbridge.so:bridge_share(V@export,i32)->void" hands a
 * versioned tensor it is given on to whoever asks with bridge_take(). */
#include <dlpack/dlpack.h>
#include <stdint.h>

#include "dlshim.h"

void bridge_share(DLManagedTensorVersioned *t, int32_t flags);
DLManagedTensorVersioned *bridge_take(void);

static DLManagedTensorVersioned *shared;

void bridge_share(DLManagedTensorVersioned *t, int32_t flags)
{
    t->flags = (uint64_t)flags;
    shared = t;
}

DLManagedTensorVersioned *bridge_take(void)
{
    return shared;
}
