/*
 * bench/streams.c — the stream model's cost per stream operation, measured
 * by bench/run with DLSHIM_SYNC=off/check/enforce and without the shim.
 * Real CUDA runtime calls only: it runs unchanged on a GPU.
 *
 *   streams S N          prints {"streams":S,"ns":<per operation>}
 *   streams OP SHARES N  prints {"op":OP,"shares":SHARES,"ns":<per operation>}
 *
 * streams S N: N operations round-robin over S streams, each a
 * cudaMemsetAsync of its stream's own buffer (a tracked device write); every
 * 8th is followed by an event record on that stream and a wait for it on the
 * next stream, so the vector clocks have real joins to do.
 *
 * streams OP SHARES N: N times one operation on one stream, while SHARES
 * tensors are shared: each in its own device allocation, written on the
 * stream, synchronized, exported by a producer and imported by a consumer,
 * and held until the end.  OP is
 *   launch  cudaLaunchKernel of an empty kernel (PTX loaded with
 *           cudaLibraryLoadData, found with cudaLibraryGetKernel)
 *   copy    cudaMemcpyAsync device to device between two tracked buffers
 *   record  cudaEventRecord
 * bench/run counts the instructions of runs of two lengths: their
 * difference is the operations' alone.  Synchronized at the end.
 */
#include <cuda_runtime_api.h>
#include <dlshim.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "streams"
#include "device.h"

#define BYTES 256

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int64_t shape[1] = {BYTES};

static void drop(DLManagedTensor *t)
{
    free(t);
}

/* `n` tensors, each in its own allocation, written on `s`, synchronized,
 * exported and imported; held until shares_release. */
static DLManagedTensor **shares_make(int n, cudaStream_t s, void ***bufs)
{
    DLManagedTensor **t = calloc((size_t)n, sizeof(*t));
    *bufs = calloc((size_t)n, sizeof(**bufs));
    for (int i = 0; i < n; i++) {
        CHECK(cudaMalloc(&(*bufs)[i], BYTES));
        CHECK(cudaMemsetAsync((*bufs)[i], 1, BYTES, s));
    }
    CHECK(cudaStreamSynchronize(s));
    for (int i = 0; i < n; i++) {
        t[i] = calloc(1, sizeof(*t[i]));
        t[i]->dl_tensor.data = (*bufs)[i];
        t[i]->dl_tensor.device.device_type = kDLCUDA;
        t[i]->dl_tensor.ndim = 1;
        t[i]->dl_tensor.dtype.code = kDLUInt;
        t[i]->dl_tensor.dtype.bits = 8;
        t[i]->dl_tensor.dtype.lanes = 1;
        t[i]->dl_tensor.shape = shape;
        t[i]->deleter = drop;
        dlshim_export(t[i], "producer");
        dlshim_import(t[i], "consumer");
    }
    return t;
}

static void shares_release(DLManagedTensor **t, void **bufs, int n)
{
    for (int i = 0; i < n; i++) {
        t[i]->deleter(t[i]);
        CHECK(cudaFree(bufs[i]));
    }
    free(t);
    free(bufs);
}

static int one_op(const char *op, int nshares, long n)
{
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void **bufs;
    DLManagedTensor **shares = shares_make(nshares, s, &bufs);
    cudaLibrary_t lib;
    cudaKernel_t kernel;
    CHECK(cudaLibraryLoadData(&lib, noop_ptx, NULL, NULL, 0, NULL, NULL, 0));
    CHECK(cudaLibraryGetKernel(&kernel, lib, "noop"));
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    void *src, *dst;
    CHECK(cudaMalloc(&src, BYTES));
    CHECK(cudaMalloc(&dst, BYTES));
    CHECK(cudaMemsetAsync(src, 2, BYTES, s));
    dim3 one = {1, 1, 1};
    double t0 = now_ns();
    if (!strcmp(op, "launch")) {
        for (long i = 0; i < n; i++)
            CHECK(cudaLaunchKernel((const void *)kernel, one, one, NULL, 0, s));
    } else if (!strcmp(op, "copy")) {
        for (long i = 0; i < n; i++)
            CHECK(cudaMemcpyAsync(dst, src, BYTES, cudaMemcpyDeviceToDevice, s));
    } else if (!strcmp(op, "record")) {
        for (long i = 0; i < n; i++)
            CHECK(cudaEventRecord(ev, s));
    } else {
        return 2;
    }
    CHECK(cudaStreamSynchronize(s));
    double t1 = now_ns();
    printf("{\"op\":\"%s\",\"shares\":%d,\"ns\":%.2f}\n", op, nshares, (t1 - t0) / (double)n);
    CHECK(cudaFree(src));
    CHECK(cudaFree(dst));
    CHECK(cudaEventDestroy(ev));
    CHECK(cudaLibraryUnload(lib));
    shares_release(shares, bufs, nshares);
    CHECK(cudaStreamDestroy(s));
    return 0;
}

static int round_robin(int s, long n)
{
    cudaStream_t *streams = calloc((size_t)s, sizeof(*streams));
    cudaEvent_t *events = calloc((size_t)s, sizeof(*events));
    void **bufs = calloc((size_t)s, sizeof(*bufs));
    for (int i = 0; i < s; i++) {
        CHECK(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
        CHECK(cudaEventCreateWithFlags(&events[i], cudaEventDisableTiming));
        CHECK(cudaMalloc(&bufs[i], 4096));
    }
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        int k = (int)(i % s);
        CHECK(cudaMemsetAsync(bufs[k], (int)(i & 0xff), 4096, streams[k]));
        if (i % 8 == 7) {
            CHECK(cudaEventRecord(events[k], streams[k]));
            CHECK(cudaStreamWaitEvent(streams[(k + 1) % s], events[k], 0));
        }
    }
    CHECK(cudaDeviceSynchronize());
    double t1 = now_ns();
    printf("{\"streams\":%d,\"ns\":%.2f}\n", s, (t1 - t0) / (double)n);
    for (int i = 0; i < s; i++) {
        CHECK(cudaFree(bufs[i]));
        CHECK(cudaEventDestroy(events[i]));
        CHECK(cudaStreamDestroy(streams[i]));
    }
    free(streams), free(events), free(bufs);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4) {
        int shares = atoi(argv[2]);
        long n = atol(argv[3]);
        if (shares < 0 || shares > 100000 || n < 1)
            return 2;
        return one_op(argv[1], shares, n);
    }
    int s = argc > 2 ? atoi(argv[1]) : 1;
    long n = argc > 2 ? atol(argv[2]) : 1000;
    if (s < 1 || s > 1024 || n < 1)
        return 2;
    return round_robin(s, n);
}
