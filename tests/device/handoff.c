/*
 * A producer hands a device buffer to a consumer on another stream, for the
 * stream-model tests: `handoff MODE`.  Real CUDA runtime calls only.
 *
 * The producer's write is made late on purpose: a host function on its
 * stream waits on a gate before the fill runs.  In the racy modes the gate
 * opens only once the consumer's copy has finished (or after a second, when
 * an enforced barrier makes the copy wait for the producer), so the race is
 * deterministic: without a barrier the consumer reads the old contents.
 *
 *   unsynced          consumer copies on s2 with no synchronization (race)
 *   event             event recorded after the write, consumer stream waits
 *   event_driver      as event, the consumer's stream made to wait with the
 *                     driver's cuStreamWaitEvent (CuPy waits on PyTorch's
 *                     events so)
 *   event_before      event recorded before the write (race)
 *   host_sync         producer synchronizes its stream before handing over
 *   same_stream       consumer uses the producer's stream
 *   legacy_blocking   producer on the legacy default stream, consumer on a
 *                     blocking stream (ordered by CUDA)
 *   legacy_nonblocking  same, consumer on a non-blocking stream (race)
 *   per_thread        producer in another thread on its per-thread default
 *                     stream, consumer on a blocking stream (race)
 *   settled           as unsynced, the producer's stream settled by a fill of
 *                     another buffer first: the write handed over takes the
 *                     hooks' way that calls nothing (race)
 *   driver_consumer   as unsynced, the consumer's copy made with the CUDA
 *                     driver (as CuPy does) on the runtime's stream (race)
 *   errno             no handoff: a fill, a copy, a host function and an event
 *                     record on a stream, each twice (the second time the way
 *                     that calls nothing), errno set before each and printed
 *                     after
 *   host_fn           a host function queued after the write tells the
 *                     host it is done (XLA marks buffers ready so); the
 *                     consumer, told by the host alone, copies on s2
 *   host_fn_driver    the same, the host function queued with the CUDA
 *                     driver's cuLaunchHostFunc (as XLA does)
 *   stream_callback   as host_fn, with the older cudaStreamAddCallback (as
 *                     CuPy's Stream.add_callback)
 *   stream_callback_driver  the same with the driver's cuStreamAddCallback
 *                     (as Numba's)
 *   host_fn_many [N]  as host_fn, with N (10,000) host functions queued behind the
 *                     gate first (more than the shim's table holds): each
 *                     runs once, and the count is printed
 *   semaphore         an imported external semaphore signalled after the
 *                     write, waited for by the consumer's stream (the
 *                     simulated device takes any descriptor; a GPU needs one
 *                     another API exported, so bin/gpu-check skips it)
 *   driver_default_consumer  as driver_consumer, the copy on stream 0: the
 *                     legacy default stream, ordered after s1 by CUDA; built
 *                     per-thread, this thread's default stream (race)
 *   ring T ROUNDS RACY_EVERY  T threads on non-blocking streams of their own
 *                     hand tensors round a ring, ROUNDS times (see ring())
 *
 * Built with -DCUDA_API_PER_THREAD_DEFAULT_STREAM (handoff_ptsz), as
 * `nvcc --default-stream per-thread` builds it, the header turns the stream
 * calls into their _ptsz twins and the synchronous ones into _ptds, stream
 * 0 is each thread's own default stream, and driver functions looked up
 * with cudaEnableDefault are the per-thread ones.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlshim.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>

#include "cuda_check.h"

#define N 256
/* A flag one thread sets and another waits for; both are host functions
 * too (argument: the flag).  `gate`: opened by the host to let the
 * producer's late write run; `ready` (host_fn and stream_callback modes):
 * set by a host function once the write queued before it is done. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int set;
} flag;

static flag gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
static flag ready = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

static void CUDART_CB wait_flag(void *arg)
{
    flag *f = arg;
    pthread_mutex_lock(&f->lock);
    while (!f->set)
        pthread_cond_wait(&f->cond, &f->lock);
    pthread_mutex_unlock(&f->lock);
}

static void CUDART_CB set_flag(void *arg)
{
    flag *f = arg;
    pthread_mutex_lock(&f->lock);
    f->set = 1;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
}

static void CUDART_CB set_flag_callback(cudaStream_t s, cudaError_t status, void *arg)
{
    (void)s;
    if (status == cudaSuccess)
        set_flag(arg);
}

static void CUDA_CB set_flag_driver_callback(CUstream s, CUresult status, void *arg)
{
    (void)s;
    if (status == CUDA_SUCCESS)
        set_flag(arg);
}

static atomic_int host_fns_ran;

static void CUDART_CB count_run(void *arg)
{
    (void)arg;
    atomic_fetch_add(&host_fns_ran, 1);
}

/* The driver, reached as CuPy and XLA reach it: a function looked up, and
 * a call that must succeed. */
#define DRIVER_LOOKUP(name, fn)                                                          \
    do {                                                                                 \
        enum cudaDriverEntryPointQueryResult found_;                                     \
        CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, (void **)&(fn), 13000,              \
                                               cudaEnableDefault, &found_));             \
    } while (0)
#define DRIVER_CHECK(call)                                                               \
    do {                                                                                 \
        if ((call) != CUDA_SUCCESS) {                                                    \
            printf("%s failed\n", #call);                                                \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

static void driver_host_func(cudaStream_t s, CUhostFn fn, void *data)
{
    __typeof__(cuLaunchHostFunc) *launch = NULL;
    DRIVER_LOOKUP("cuLaunchHostFunc", launch);
    DRIVER_CHECK(launch((CUstream)s, fn, data));
}

static void driver_stream_callback(cudaStream_t s, CUstreamCallback fn, void *data)
{
    __typeof__(cuStreamAddCallback) *add = NULL;
    DRIVER_LOOKUP("cuStreamAddCallback", add);
    DRIVER_CHECK(add((CUstream)s, fn, data, 0));
}

static int64_t shape[1] = {N};

static void drop(DLManagedTensor *t)
{
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

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define PER_THREAD_BUILD 1
#else
#define PER_THREAD_BUILD 0
#endif

static const char *mode;
static int many; /* host_fn_many's count */
static int *buf, *other;
static cudaEvent_t ev;
static cudaExternalSemaphore_t sem;
static DLManagedTensor *shared;

/* The producer: a late fill of buf with 0x01 bytes on `s`, then the export. */
static void produce(cudaStream_t s, int record)
{
    if (record == 1)
        CUDA_CHECK(cudaEventRecord(ev, s)); /* too early: before the write */
    CUDA_CHECK(cudaLaunchHostFunc(s, wait_flag, &gate));
    for (int i = 0; !strcmp(mode, "host_fn_many") && i < many; i++)
        CUDA_CHECK(cudaLaunchHostFunc(s, count_run, NULL));
    if (!strcmp(mode, "settled"))
        CUDA_CHECK(cudaMemsetAsync(other, 1, N * sizeof(int), s));
    CUDA_CHECK(cudaMemsetAsync(buf, 1, N * sizeof(int), s));
    if (record == 2)
        CUDA_CHECK(cudaEventRecord(ev, s));
    if (record == 4)
        CUDA_CHECK(cudaLaunchHostFunc(s, set_flag, &ready));
    if (record == 5)
        driver_host_func(s, set_flag, &ready);
    if (record == 6)
        CUDA_CHECK(cudaStreamAddCallback(s, set_flag_callback, &ready, 0));
    if (record == 7)
        driver_stream_callback(s, set_flag_driver_callback, &ready);
    if (record == 3) {
        struct cudaExternalSemaphoreSignalParams signal = {0};
        CUDA_CHECK(cudaSignalExternalSemaphoresAsync(&sem, &signal, 1, s));
    }
    shared = tensor_of(buf);
    dlshim_export(shared, "producer");
}

static void *produce_per_thread(void *arg)
{
    (void)arg;
    produce(cudaStreamPerThread, 0);
    return NULL;
}

static int racy(void)
{
    return !strcmp(mode, "unsynced") || !strcmp(mode, "event_before") ||
           !strcmp(mode, "legacy_nonblocking") || !strcmp(mode, "per_thread") ||
           !strcmp(mode, "settled") || !strcmp(mode, "driver_consumer") ||
           (PER_THREAD_BUILD && !strcmp(mode, "driver_default_consumer"));
}

static void CUDART_CB nothing(void *arg)
{
    (void)arg;
}

/* errno mode: what errno each stream operation leaves, set to a new value
 * before each. */
static int errno_kept(cudaStream_t s, cudaEvent_t e)
{
    for (int i = 0; i < 2; i++) {
        errno = 100 + i;
        CUDA_CHECK(cudaMemsetAsync(buf, 1, N * sizeof(int), s));
        printf("fill errno=%d\n", errno);
        errno = 200 + i;
        CUDA_CHECK(cudaMemcpyAsync(other, buf, N * sizeof(int), cudaMemcpyDeviceToDevice, s));
        printf("copy errno=%d\n", errno);
        errno = 300 + i;
        CUDA_CHECK(cudaLaunchHostFunc(s, nothing, NULL));
        printf("host function errno=%d\n", errno);
        errno = 400 + i;
        CUDA_CHECK(cudaEventRecord(e, s));
        printf("record errno=%d\n", errno);
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
    return 0;
}

/* ring: threads on streams of their own hand tensors round a ring, for
 * the stream model under many threads (test_stream_threads.py, under
 * ThreadSanitizer too).  Each of T threads has a non-blocking stream, a
 * buffer, an event and a destination.  A round has three steps, every
 * thread at each step before any goes on (barriers: no sleeps, nothing
 * timed):
 *   1. each thread fills its buffer on its stream, records its event after
 *      the fill, and exports the buffer (producer "producer");
 *   2. each imports the next thread's tensor (consumer "consumer"), makes
 *      its stream wait for that thread's event — except every RACY_EVERY-th
 *      round (0: never) — and copies the tensor into its destination on its
 *      stream: the handoff's first use, ordered after the fill or, in a
 *      racy round, not;
 *   3. each queues a host function on its stream, synchronizes the stream,
 *      and lets the tensor it imported go (its deleter).
 * In a racy round each copy races with the fill it reads (no thread waited
 * for another's stream since), so the model sees exactly T unsynchronized
 * handoffs a racy round, and none in the others.  Prints the host
 * functions that ran. */
#define RING_MAX 16
static struct {
    int threads, rounds, racy_every;
    pthread_barrier_t step;
    cudaStream_t streams[RING_MAX];
    cudaEvent_t events[RING_MAX];
    int *bufs[RING_MAX], *dsts[RING_MAX];
    DLManagedTensor *tensors[RING_MAX];
} ring_;

static void *ring_thread(void *arg)
{
    int me = (int)(intptr_t)arg, next = (me + 1) % ring_.threads;
    cudaStream_t s = ring_.streams[me];
    for (int r = 0; r < ring_.rounds; r++) {
        CUDA_CHECK(cudaMemsetAsync(ring_.bufs[me], r & 0xff, N * sizeof(int), s));
        CUDA_CHECK(cudaEventRecord(ring_.events[me], s));
        ring_.tensors[me] = tensor_of(ring_.bufs[me]);
        dlshim_export(ring_.tensors[me], "producer");
        pthread_barrier_wait(&ring_.step);

        DLManagedTensor *t = ring_.tensors[next];
        dlshim_import(t, "consumer");
        if (!ring_.racy_every || r % ring_.racy_every != ring_.racy_every - 1)
            CUDA_CHECK(cudaStreamWaitEvent(s, ring_.events[next], 0));
        CUDA_CHECK(cudaMemcpyAsync(ring_.dsts[me], t->dl_tensor.data, N * sizeof(int),
                              cudaMemcpyDeviceToDevice, s));
        pthread_barrier_wait(&ring_.step);

        CUDA_CHECK(cudaLaunchHostFunc(s, count_run, NULL));
        CUDA_CHECK(cudaStreamSynchronize(s));
        t->deleter(t);
        pthread_barrier_wait(&ring_.step);
    }
    return NULL;
}

static int ring(int argc, char **argv)
{
    ring_.threads = argc > 2 ? atoi(argv[2]) : 4;
    ring_.rounds = argc > 3 ? atoi(argv[3]) : 100;
    ring_.racy_every = argc > 4 ? atoi(argv[4]) : 0;
    if (ring_.threads < 2 || ring_.threads > RING_MAX || ring_.rounds < 1 || ring_.racy_every < 0)
        return 2;
    for (int i = 0; i < ring_.threads; i++) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&ring_.streams[i], cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&ring_.events[i], cudaEventDisableTiming));
        CUDA_CHECK(cudaMalloc((void **)&ring_.bufs[i], N * sizeof(int)));
        CUDA_CHECK(cudaMalloc((void **)&ring_.dsts[i], N * sizeof(int)));
    }
    pthread_barrier_init(&ring_.step, NULL, (unsigned)ring_.threads);
    pthread_t tid[RING_MAX];
    for (int i = 0; i < ring_.threads; i++)
        if (pthread_create(&tid[i], NULL, ring_thread, (void *)(intptr_t)i) != 0)
            return 1;
    for (int i = 0; i < ring_.threads; i++)
        pthread_join(tid[i], NULL);
    CUDA_CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < ring_.threads; i++) {
        CUDA_CHECK(cudaFree(ring_.bufs[i]));
        CUDA_CHECK(cudaFree(ring_.dsts[i]));
        CUDA_CHECK(cudaEventDestroy(ring_.events[i]));
        CUDA_CHECK(cudaStreamDestroy(ring_.streams[i]));
    }
    printf("host functions ran %d\n", atomic_load(&host_fns_ran));
    return 0;
}

int main(int argc, char **argv)
{
    mode = argc > 1 ? argv[1] : "unsynced";
    many = argc > 2 ? atoi(argv[2]) : 10000;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "ring"))
        return ring(argc, argv);
    cudaStream_t s1, s2;
    CUDA_CHECK(cudaMalloc((void **)&buf, N * sizeof(int)));
    CUDA_CHECK(cudaMalloc((void **)&other, N * sizeof(int)));
    CUDA_CHECK(cudaMemset(buf, 0, N * sizeof(int)));
    CUDA_CHECK(cudaEventCreate(&ev));
    CUDA_CHECK(cudaStreamCreate(&s1));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s2, !strcmp(mode, "legacy_nonblocking")
                                             ? cudaStreamNonBlocking
                                             : cudaStreamDefault));
    if (!strcmp(mode, "errno"))
        return errno_kept(s1, ev);

    if (!strcmp(mode, "per_thread")) {
        pthread_t t;
        pthread_create(&t, NULL, produce_per_thread, NULL);
        pthread_join(t, NULL);
    } else {
        cudaStream_t ps = !strncmp(mode, "legacy", 6) ? (cudaStream_t)0 : s1;
        if (!strcmp(mode, "semaphore")) {
            struct cudaExternalSemaphoreHandleDesc desc = {
                .type = cudaExternalSemaphoreHandleTypeOpaqueFd, .handle.fd = eventfd(0, 0)};
            CUDA_CHECK(cudaImportExternalSemaphore(&sem, &desc));
        }
        produce(ps, !strcmp(mode, "event_before") ? 1
                    : !strcmp(mode, "event") || !strcmp(mode, "event_driver") ? 2
                    : !strcmp(mode, "semaphore")  ? 3
                    : !strcmp(mode, "host_fn")    ? 4
                    : !strcmp(mode, "host_fn_many") ? 4
                    : !strcmp(mode, "host_fn_driver") ? 5
                    : !strcmp(mode, "stream_callback") ? 6
                    : !strcmp(mode, "stream_callback_driver") ? 7
                                                  : 0);
        if (!strcmp(mode, "host_sync")) {
            set_flag(&gate);
            CUDA_CHECK(cudaStreamSynchronize(s1));
        }
    }
    if (!racy())
        set_flag(&gate);
    if (!strncmp(mode, "host_fn", 7) || !strncmp(mode, "stream_callback", 15))
        wait_flag(&ready); /* no CUDA call: the host function's word alone */

    /* The consumer. */
    cudaStream_t cs = !strcmp(mode, "same_stream")               ? s1
                      : !strcmp(mode, "driver_default_consumer") ? (cudaStream_t)0
                                                                 : s2;
    dlshim_import(shared, "consumer");
    if (!strcmp(mode, "event") || !strcmp(mode, "event_before"))
        CUDA_CHECK(cudaStreamWaitEvent(cs, ev, 0));
    if (!strcmp(mode, "event_driver")) {
        __typeof__(cuStreamWaitEvent) *wait_event = NULL;
        DRIVER_LOOKUP("cuStreamWaitEvent", wait_event);
        DRIVER_CHECK(wait_event((CUstream)cs, (CUevent)ev, 0));
    }
    if (!strcmp(mode, "semaphore")) {
        struct cudaExternalSemaphoreWaitParams wait = {0};
        CUDA_CHECK(cudaWaitExternalSemaphoresAsync(&sem, &wait, 1, cs));
    }
    /* Pinned: a GPU copies to pageable memory synchronously, and under an
     * enforced barrier would wait for the gate that opens after it. */
    int *host;
    CUDA_CHECK(cudaMallocHost((void **)&host, N * sizeof(int)));
    memset(host, 0xff, N * sizeof(int));
    cudaEvent_t copied;
    CUDA_CHECK(cudaEventCreate(&copied));
    if (!strncmp(mode, "driver_", 7) && strstr(mode, "consumer")) {
        __typeof__(cuMemcpyDtoHAsync) *copy_async = NULL;
        DRIVER_LOOKUP("cuMemcpyDtoHAsync", copy_async);
        DRIVER_CHECK(copy_async(host, (CUdeviceptr)shared->dl_tensor.data, N * sizeof(int),
                                (CUstream)cs));
    } else {
        CUDA_CHECK(cudaMemcpyAsync(host, shared->dl_tensor.data, N * sizeof(int),
                              cudaMemcpyDeviceToHost, cs));
    }
    CUDA_CHECK(cudaEventRecord(copied, cs));
    /* Racy modes: let the copy finish first (it cannot while an enforced
     * barrier holds it behind the gate: then give up after a second). */
    for (int i = 0; i < 100 && cudaEventQuery(copied) != cudaSuccess; i++) {
        struct timespec ten_ms = {0, 10 * 1000 * 1000};
        nanosleep(&ten_ms, NULL);
    }
    set_flag(&gate);
    CUDA_CHECK(cudaDeviceSynchronize());
    printf("consumer saw %d\n", host[0]);
    if (!strcmp(mode, "host_fn_many"))
        printf("host functions ran %d\n", atomic_load(&host_fns_ran));
    shared->deleter(shared);
    CUDA_CHECK(cudaFree(buf));
    CUDA_CHECK(cudaFree(other));
    CUDA_CHECK(cudaFreeHost(host));
    if (sem)
        CUDA_CHECK(cudaDestroyExternalSemaphore(sem));
    return 0;
}
