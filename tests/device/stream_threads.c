/*
 * Threads on streams of their own hand tensors round a ring, for the
 * stream model under many threads (tests/integration/test_stream_threads.py,
 * run under ThreadSanitizer too): `stream_threads T ROUNDS RACY_EVERY`.
 * Real CUDA runtime calls only.
 *
 * Each of T threads has a non-blocking stream, a buffer, an event and a
 * destination.  A round has three steps, every thread at each step before
 * any goes on (barriers: no sleeps, nothing timed):
 *   1. each thread fills its buffer on its stream, records its event after
 *      the fill, and exports the buffer as a tensor (producer "producer");
 *   2. each imports the next thread's tensor (consumer "consumer"), makes
 *      its stream wait for that thread's event — except every RACY_EVERY-th
 *      round (0: never), where it does not — and copies the tensor into its
 *      destination on its stream: the handoff's first use, ordered after
 *      the fill or, in a racy round, not;
 *   3. each queues a host function on its stream, synchronizes the stream,
 *      and lets the tensor it imported go (its deleter).
 * In a racy round each thread's copy races with the fill it reads (no
 * thread has waited for another's stream since the fill), so the model
 * sees exactly T unsynchronized handoffs a racy round, and none in the
 * others.  Prints the host functions that ran and the rounds.
 */
#include <cuda_runtime_api.h>
#include <dlshim.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define N 64
#define MAX_THREADS 16
#define CHECK(call)                                                   \
    do {                                                              \
        cudaError_t e_ = (call);                                      \
        if (e_ != cudaSuccess) {                                      \
            printf("%s failed: %d\n", #call, (int)e_);                \
            exit(1);                                                  \
        }                                                             \
    } while (0)

static int threads, rounds, racy_every;
static pthread_barrier_t step;
static cudaStream_t streams[MAX_THREADS];
static cudaEvent_t events[MAX_THREADS];
static int *bufs[MAX_THREADS], *dsts[MAX_THREADS];
static DLManagedTensor *tensors[MAX_THREADS];
static atomic_int host_fns_ran, released;
static int64_t shape[1] = {N};

static void CUDART_CB count_run(void *arg)
{
    (void)arg;
    atomic_fetch_add(&host_fns_ran, 1);
}

static void drop(DLManagedTensor *t)
{
    atomic_fetch_add(&released, 1);
    free(t);
}

static DLManagedTensor *tensor_of(int *buf)
{
    DLManagedTensor *t = calloc(1, sizeof(*t));
    t->dl_tensor.data = buf;
    t->dl_tensor.device.device_type = kDLCUDA;
    t->dl_tensor.ndim = 1;
    t->dl_tensor.dtype.code = kDLInt;
    t->dl_tensor.dtype.bits = 32;
    t->dl_tensor.dtype.lanes = 1;
    t->dl_tensor.shape = shape;
    t->deleter = drop;
    return t;
}

static void *run(void *arg)
{
    int me = (int)(intptr_t)arg, next = (me + 1) % threads;
    cudaStream_t s = streams[me];
    for (int r = 0; r < rounds; r++) {
        CHECK(cudaMemsetAsync(bufs[me], r & 0xff, N * sizeof(int), s));
        CHECK(cudaEventRecord(events[me], s));
        tensors[me] = tensor_of(bufs[me]);
        dlshim_export(tensors[me], "producer");
        pthread_barrier_wait(&step);

        DLManagedTensor *t = tensors[next];
        dlshim_import(t, "consumer");
        if (!racy_every || r % racy_every != racy_every - 1)
            CHECK(cudaStreamWaitEvent(s, events[next], 0));
        CHECK(cudaMemcpyAsync(dsts[me], t->dl_tensor.data, N * sizeof(int),
                              cudaMemcpyDeviceToDevice, s));
        pthread_barrier_wait(&step);

        CHECK(cudaLaunchHostFunc(s, count_run, NULL));
        CHECK(cudaStreamSynchronize(s));
        t->deleter(t);
        pthread_barrier_wait(&step);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: stream_threads THREADS ROUNDS RACY_EVERY\n");
        return 2;
    }
    threads = atoi(argv[1]);
    rounds = atoi(argv[2]);
    racy_every = atoi(argv[3]);
    if (threads < 2 || threads > MAX_THREADS || rounds < 1 || racy_every < 0)
        return 2;
    for (int i = 0; i < threads; i++) {
        CHECK(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
        CHECK(cudaEventCreateWithFlags(&events[i], cudaEventDisableTiming));
        CHECK(cudaMalloc((void **)&bufs[i], N * sizeof(int)));
        CHECK(cudaMalloc((void **)&dsts[i], N * sizeof(int)));
    }
    pthread_barrier_init(&step, NULL, (unsigned)threads);
    pthread_t tid[MAX_THREADS];
    for (int i = 0; i < threads; i++)
        if (pthread_create(&tid[i], NULL, run, (void *)(intptr_t)i) != 0)
            return 1;
    for (int i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < threads; i++) {
        CHECK(cudaFree(bufs[i]));
        CHECK(cudaFree(dsts[i]));
        CHECK(cudaEventDestroy(events[i]));
        CHECK(cudaStreamDestroy(streams[i]));
    }
    printf("host functions ran %d, released %d, rounds %d\n", atomic_load(&host_fns_ran),
           atomic_load(&released), rounds);
    return 0;
}
