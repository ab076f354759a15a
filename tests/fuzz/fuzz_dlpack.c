/* libFuzzer target: the DLPack validator fed raw bytes as the struct.  The
 * first byte picks the layout (DLManagedTensor or the versioned one) and
 * which of the struct's pointers are aimed back into the input (so shape and
 * strides arrays are read too); every other pointer is whatever the bytes
 * say, which the validator must survive.  The input's length picks whether
 * the strides are copied or only proven readable (odd: copied). */
#include <stdint.h>
#include <string.h>

#include "ledger/ledger.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static union {
    uint64_t align;
    unsigned char bytes[4096];
} mem;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    unsigned mode = data[0];
    bool versioned = mode & 1;
    memset(&mem, 0, sizeof(mem));
    size_t n = size - 1 < sizeof(mem) ? size - 1 : sizeof(mem);
    memcpy(mem.bytes, data + 1, n);
    DLTensor *t = versioned ? &((DLManagedTensorVersioned *)mem.bytes)->dl_tensor
                            : &((DLManagedTensor *)mem.bytes)->dl_tensor;
    size_t header = versioned ? sizeof(DLManagedTensorVersioned) : sizeof(DLManagedTensor);
    /* Arrays placed after the struct, inside the input. */
    if (mode & 2)
        t->shape = (int64_t *)(mem.bytes + header);
    if (mode & 4)
        t->strides = (int64_t *)(mem.bytes + header + 8 * (mode >> 4));
    if (mode & 8)
        t->data = mem.bytes + header;
    ds_tensor_view v;
    char why[DS_DETAIL_MAX];
    if (ds_dlpack_read_struct(mem.bytes, versioned, &v, why, sizeof(why)))
        ds_dlpack_check(&v, size & 1, why, sizeof(why));
    if (!memchr(why, 0, sizeof(why)))
        __builtin_trap();
    return 0;
}
