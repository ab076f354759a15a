/* Compiled by test_header.py as C and as C++, against Debian's DLPack 0.6
 * header and a DLPack 1.x one: a program that uses only include/dlshim.h. */
#include <dlshim.h>
#include <stdio.h>
#include <string.h>

static void drop(DLManagedTensorVersioned *t) { (void)t; }

int main(void)
{
    static int64_t shape[1] = {2};
    static float data[2] = {1.0f, 2.0f};
    DLManagedTensorVersioned t;
    memset(&t, 0, sizeof(t));
    t.version.major = DLSHIM_DLPACK_MAJOR;
    t.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
    t.dl_tensor.data = data;
    t.dl_tensor.device.device_type = kDLCPU;
    t.dl_tensor.ndim = 1;
    t.dl_tensor.dtype.code = kDLFloat;
    t.dl_tensor.dtype.bits = 32;
    t.dl_tensor.dtype.lanes = 1;
    t.dl_tensor.shape = shape;
    t.deleter = drop;
    dlshim_export_versioned(&t, "header_user");
    dlshim_import_versioned(&t, "header_user");
    t.deleter(&t);
    printf("ok\n");
    return 0;
}
