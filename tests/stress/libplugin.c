/* A module the stress test loads and unloads in a loop: its cudaMalloc and
 * cudaFree go through its own GOT, which the shim patches on every load. */
#include <cuda_runtime_api.h>
#include <stddef.h>

int plugin_cycle(size_t bytes);

int plugin_cycle(size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes) != cudaSuccess)
        return -1;
    return cudaFree(d) == cudaSuccess ? 0 : -1;
}
