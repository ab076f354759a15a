/* An owner of device memory for the copy tests, built twice (libjaxlike.so,
 * libtorchlike.so) so the two sides of a roundtrip are different modules:
 *   OWNER_to_host(host, n)    device buffer of OWNER → host (device→host)
 *   OWNER_from_host(host, n)  host → a new device buffer of OWNER          */
#include <cuda_runtime_api.h>
#include <stddef.h>

#define CAT(a, b) a##b
#define NAME(a, b) CAT(a, b)

int NAME(OWNER, _to_host)(void *host, size_t n);
int NAME(OWNER, _from_host)(const void *host, size_t n);

int NAME(OWNER, _to_host)(void *host, size_t n)
{
    void *d;
    if (cudaMalloc(&d, n) != cudaSuccess || cudaMemset(d, 3, n) != cudaSuccess ||
        cudaMemcpy(host, d, n, cudaMemcpyDeviceToHost) != cudaSuccess)
        return -1;
    return cudaFree(d) == cudaSuccess ? 0 : -1;
}

int NAME(OWNER, _from_host)(const void *host, size_t n)
{
    void *d;
    if (cudaMalloc(&d, n) != cudaSuccess ||
        cudaMemcpy(d, host, n, cudaMemcpyHostToDevice) != cudaSuccess)
        return -1;
    return cudaFree(d) == cudaSuccess ? 0 : -1;
}
