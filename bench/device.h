/*
 * bench/device.h — what the device bench programs share: a CUDA call that
 * must succeed, and an empty kernel to launch (PTX, loaded with
 * cudaLibraryLoadData).  BENCH_NAME names the program in the message.
 */
#ifndef BENCH_DEVICE_H
#define BENCH_DEVICE_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                \
    do {                                                           \
        if ((call) != cudaSuccess) {                               \
            fprintf(stderr, BENCH_NAME ": %s failed\n", #call);    \
            exit(1);                                               \
        }                                                          \
    } while (0)

static const char noop_ptx[] = ".version 7.0\n"
                               ".target sm_75\n"
                               ".address_size 64\n"
                               ".visible .entry noop()\n"
                               "{\n"
                               "    ret;\n"
                               "}\n";

#endif
