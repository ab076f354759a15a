/*
 * vk_cuda.h — for the Vulkan test programs that also call the CUDA runtime
 * (vk_share, vk_extsem): a failed CUDA call ends the program, naming the
 * call.  Apart from vk_setup.h, which the Vulkan-only programs include too.
 */
#ifndef VK_CUDA_H
#define VK_CUDA_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define CUDA_CHECK(call)                                                     \
    do {                                                                     \
        cudaError_t e_ = (call);                                             \
        if (e_ != cudaSuccess) {                                             \
            printf("%s failed: %d\n", #call, (int)e_);                       \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

#endif
