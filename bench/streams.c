/*
 * bench/streams.c — the stream model's cost per stream operation, measured
 * by bench/run with DLSHIM_SYNC=off/check/enforce and without the shim.
 * Real CUDA runtime calls only.
 *
 *   streams S N      prints {"streams":S,"ns":<per operation>}
 *
 * N operations round-robin over S streams, each a cudaMemsetAsync of its
 * stream's own buffer (a tracked device write); every 8th is followed by an
 * event record on that stream and a wait for it on the next stream, so the
 * vector clocks have real joins to do.  Synchronized at the end.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHECK(call)                                            \
    do {                                                       \
        if ((call) != cudaSuccess) {                           \
            fprintf(stderr, "streams: %s failed\n", #call);    \
            return 1;                                          \
        }                                                      \
    } while (0)

int main(int argc, char **argv)
{
    int s = argc > 2 ? atoi(argv[1]) : 1;
    long n = argc > 2 ? atol(argv[2]) : 1000;
    if (s < 1 || s > 1024 || n < 1)
        return 2;
    cudaStream_t *streams = calloc((size_t)s, sizeof(*streams));
    cudaEvent_t *events = calloc((size_t)s, sizeof(*events));
    void **bufs = calloc((size_t)s, sizeof(*bufs));
    for (int i = 0; i < s; i++) {
        CHECK(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
        CHECK(cudaEventCreateWithFlags(&events[i], cudaEventDisableTiming));
        CHECK(cudaMalloc(&bufs[i], 4096));
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
        int k = (int)(i % s);
        CHECK(cudaMemsetAsync(bufs[k], (int)(i & 0xff), 4096, streams[k]));
        if (i % 8 == 7) {
            CHECK(cudaEventRecord(events[k], streams[k]));
            CHECK(cudaStreamWaitEvent(streams[(k + 1) % s], events[k], 0));
        }
    }
    CHECK(cudaDeviceSynchronize());
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    printf("{\"streams\":%d,\"ns\":%.2f}\n", s, ns / (double)n);
    for (int i = 0; i < s; i++) {
        CHECK(cudaFree(bufs[i]));
        CHECK(cudaEventDestroy(events[i]));
        CHECK(cudaStreamDestroy(streams[i]));
    }
    free(streams), free(events), free(bufs);
    return 0;
}
