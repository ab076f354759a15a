/*
 * bench/threads.c — how the shim scales with threads: T threads, each on
 * its own tensor or its own stream, measured by bench/run with and without
 * the shim preloaded (issue 53: threads handing over different tensors, or
 * working on different streams, should share no lock).
 *
 *   threads cycle T N    each thread N times dlshim_export + dlshim_import +
 *                        deleter of its own tensor (the annotation API)
 *   threads gcycle T N   the same with a device tensor: each thread's own
 *                        cudaMalloc'd buffer exported as kDLCUDA (in a
 *                        process with device allocations, every handoff
 *                        looks its tensor up among them)
 *   threads device T N   each thread N times a cudaLaunchKernel, a
 *                        cudaMemcpyAsync device to device and a
 *                        cudaEventRecord on its own stream, between its own
 *                        buffers; synchronized at the end
 *   threads pdevice T N  the same, while a handoff waits: each thread first
 *                        hands over a tensor its stream wrote, which nothing
 *                        then uses (a tensor given to a consumer that has
 *                        not used it yet)
 *
 * Prints {"mode":…,"threads":T,"ns":<wall time of the whole run>,
 * "per_s":<cycles per second, all threads together>,"cores":<the
 * process's CPU time over the wall time: how many cores it really had>}.
 * The threads start together (a barrier) and the clocks run from the
 * barrier to the last join.  On a shared machine "cores" tells a run that
 * did not scale because its threads shared something (cores near T, little
 * work done) from one that did not get the cores (cores near 1).  Real CUDA and DLPack calls only: it runs unchanged on a GPU.
 */
#include <cuda_runtime_api.h>
#include <dlpack/dlpack.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlshim.h"

#define BENCH_NAME "threads"
#include "device.h"

#define MAX_THREADS 64
#define BYTES 256

static long cycles;
static pthread_barrier_t start;
static cudaKernel_t kernel;
static atomic_long deleted;

static double clock_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Counted per thread, added once at the end: the program's own counter must
 * not be the shared cache line that stops it scaling. */
static _Thread_local long my_deletes;

static void deleter(DLManagedTensor *t)
{
    (void)t;
    my_deletes++;
}

static void tensor_over(DLManagedTensor *t, void *data, DLDeviceType type, int64_t *shape)
{
    memset(t, 0, sizeof(*t));
    t->dl_tensor = (DLTensor){data, {type, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
    t->deleter = deleter;
}

/* arg NULL: a host tensor (the thread's own array); else a device tensor
 * over the thread's own cudaMalloc. */
static void *cycle_thread(void *arg)
{
    static _Thread_local float host[16];
    void *data = host;
    bool device = arg != NULL;
    if (device)
        CHECK(cudaMalloc(&data, sizeof(host)));
    int64_t shape[1] = {16};
    DLManagedTensor t;
    pthread_barrier_wait(&start);
    for (long i = 0; i < cycles; i++) {
        tensor_over(&t, data, device ? kDLCUDA : kDLCPU, shape);
        dlshim_export(&t, "bench-producer");
        dlshim_import(&t, "bench-consumer");
        t.deleter(&t);
    }
    atomic_fetch_add(&deleted, my_deletes);
    if (device)
        CHECK(cudaFree(data));
    return NULL;
}

/* arg non-NULL: with a handoff waiting (pdevice). */
static void *device_thread(void *arg)
{
    bool pending = arg != NULL;
    cudaStream_t s;
    cudaEvent_t ev;
    void *src, *dst, *handed = NULL;
    int64_t shape[1] = {BYTES / sizeof(float)};
    DLManagedTensor t;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CHECK(cudaMalloc(&src, BYTES));
    CHECK(cudaMalloc(&dst, BYTES));
    CHECK(cudaMemsetAsync(src, 2, BYTES, s));
    if (pending) {
        CHECK(cudaMalloc(&handed, BYTES));
        CHECK(cudaMemsetAsync(handed, 3, BYTES, s));
        tensor_over(&t, handed, kDLCUDA, shape);
        dlshim_export(&t, "bench-producer");
        dlshim_import(&t, "bench-consumer");
    }
    dim3 one = {1, 1, 1};
    pthread_barrier_wait(&start);
    for (long i = 0; i < cycles; i++) {
        CHECK(cudaLaunchKernel((const void *)kernel, one, one, NULL, 0, s));
        CHECK(cudaMemcpyAsync(dst, src, BYTES, cudaMemcpyDeviceToDevice, s));
        CHECK(cudaEventRecord(ev, s));
    }
    CHECK(cudaStreamSynchronize(s));
    if (pending) {
        t.deleter(&t);
        CHECK(cudaFree(handed));
    }
    CHECK(cudaFree(src));
    CHECK(cudaFree(dst));
    CHECK(cudaEventDestroy(ev));
    CHECK(cudaStreamDestroy(s));
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: threads cycle|gcycle|device|pdevice T N\n");
        return 2;
    }
    const char *mode = argv[1];
    int threads = atoi(argv[2]);
    cycles = atol(argv[3]);
    if (threads < 1 || threads > MAX_THREADS || cycles < 1)
        return 2;
    void *(*body)(void *);
    cudaLibrary_t lib = NULL;
    if (!strcmp(mode, "cycle") || !strcmp(mode, "gcycle")) {
        body = cycle_thread;
    } else if (!strcmp(mode, "device") || !strcmp(mode, "pdevice")) {
        body = device_thread;
        CHECK(cudaLibraryLoadData(&lib, noop_ptx, NULL, NULL, 0, NULL, NULL, 0));
        CHECK(cudaLibraryGetKernel(&kernel, lib, "noop"));
    } else {
        fprintf(stderr, "threads: mode %s?\n", mode);
        return 2;
    }
    pthread_t tid[MAX_THREADS];
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&tid[i], NULL, body, mode[0] == 'g' || mode[0] == 'p' ? (void *)1 : NULL) != 0)
            return 1;
    pthread_barrier_wait(&start);
    double t0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    double spent = clock_ns(CLOCK_MONOTONIC) - t0;
    double cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0;
    if (lib)
        CHECK(cudaLibraryUnload(lib));
    if (body == cycle_thread && atomic_load(&deleted) != (long)threads * cycles) {
        fprintf(stderr, "threads: %ld deleter calls, %ld expected\n", atomic_load(&deleted),
                (long)threads * cycles);
        return 1;
    }
    printf("{\"mode\":\"%s\",\"threads\":%d,\"ns\":%.0f,\"per_s\":%.0f,\"cores\":%.2f}\n", mode,
           threads, spent, (double)threads * (double)cycles / spent * 1e9, cpu / spent);
    return 0;
}
