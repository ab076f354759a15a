/*
 * cuda_check.h — for the test programs that call the CUDA runtime (the
 * device programs here, and tests/vulkan's vk_share and vk_extsem): a failed
 * CUDA call ends the program, naming the call.
 */
#ifndef CUDA_CHECK_H
#define CUDA_CHECK_H

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
