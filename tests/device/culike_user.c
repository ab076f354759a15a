/* Calls libculike's look-alike names; prints what they returned. */
#include <stdio.h>

int cuMemAlloc(unsigned int *dptr, unsigned int bytesize);
int cuMemAlloc_v2x(void **p, size_t n);
int cudaMallocFancy(void **p, size_t n);
int cublasCreate_v2(void **handle);
int curl_global_init(long flags);

int main(void)
{
    unsigned int d;
    void *p, *q, *h;
    int a = cuMemAlloc(&d, 10), b = cuMemAlloc_v2x(&p, 20), c = cudaMallocFancy(&q, 30),
        e = cublasCreate_v2(&h), f = curl_global_init(1);
    printf("%d %u %d %zu %d %zu %d %p %d\n", a, d, b, (size_t)p, c, (size_t)q, e, h, f);
    return 0;
}
