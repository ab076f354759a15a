/* A library whose names only look like hooked ones (as cuBLAS, cuDNN and
 * curl's do): the shim must leave every one of them alone. */
#include <stddef.h>

int cuMemAlloc(unsigned int *dptr, unsigned int bytesize); /* the v1 name, not cuMemAlloc_v2 */
int cuMemAlloc_v2x(void **p, size_t n);
int cudaMallocFancy(void **p, size_t n);
int cublasCreate_v2(void **handle);
int curl_global_init(long flags);

int cuMemAlloc(unsigned int *dptr, unsigned int bytesize)
{
    *dptr = bytesize + 1;
    return 11;
}

int cuMemAlloc_v2x(void **p, size_t n)
{
    *p = (void *)(n + 2);
    return 12;
}

int cudaMallocFancy(void **p, size_t n)
{
    *p = (void *)(n + 3);
    return 13;
}

int cublasCreate_v2(void **handle)
{
    *handle = (void *)0x42;
    return 14;
}

int curl_global_init(long flags)
{
    return (int)flags + 15;
}
