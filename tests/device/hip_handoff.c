/*
 * The HIP version of handoff.c's main cases:
 * `hip_handoff unsynced|event|per_thread|stream_callback` (per_thread: the
 * producer writes on its own thread's per-thread default stream,
 * hipStreamPerThread, which the consumer's thread cannot name;
 * stream_callback: a hipStreamAddCallback queued after the write tells the
 * host it is done, and the consumer, told by the host alone, copies on s2;
 * default_consumer: the consumer copies on stream 0, HIP's null stream,
 * which waits for s1).
 *
 * Built with -DHIP_API_PER_THREAD_DEFAULT_STREAM (hip_handoff_spt), as
 * `hipcc -fgpu-default-stream=per-thread` builds it, the stream calls are
 * HIP 6's _spt twins and stream 0 is each thread's own default stream: the
 * default_consumer mode races there.
 * Real HIP calls only; hipLaunchHostFunc is HIP 6 and found at run time,
 * since Debian's HIP 5.2 does not export it (the simulated device does).
 */
#include <dlfcn.h>
#include <dlshim.h>
#include <hip/hip_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HIP_API_PER_THREAD_DEFAULT_STREAM
/* HIP's header turns most calls into their _spt twins itself; HIP 5's
 * lacks these three of HIP 6 (its hipEventRecord macro names an undeclared
 * twin). */
hipError_t hipEventRecord_spt(hipEvent_t event, hipStream_t stream);
hipError_t hipMemsetAsync_spt(void *dst, int value, size_t n, hipStream_t stream);
hipError_t hipStreamAddCallback_spt(hipStream_t stream, hipStreamCallback_t callback,
                                    void *data, unsigned int flags);
#define hipMemsetAsync hipMemsetAsync_spt
#define hipStreamAddCallback hipStreamAddCallback_spt
#define LAUNCH_HOST_FUNC "hipLaunchHostFunc_spt"
#define PER_THREAD_BUILD 1
#else
#define LAUNCH_HOST_FUNC "hipLaunchHostFunc"
#define PER_THREAD_BUILD 0
#endif

#define N 256
#define CHECK(call)                                                   \
    do {                                                              \
        hipError_t e_ = (call);                                       \
        if (e_ != hipSuccess) {                                       \
            printf("%s failed: %d\n", #call, (int)e_);                \
            exit(1);                                                  \
        }                                                             \
    } while (0)

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open;

static void wait_gate(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&gate_lock);
    while (!gate_open)
        pthread_cond_wait(&gate_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
}

static void open_gate(void)
{
    pthread_mutex_lock(&gate_lock);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_lock);
}

static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
static int ready;

static void write_done(hipStream_t s, hipError_t status, void *arg)
{
    (void)s;
    (void)arg;
    pthread_mutex_lock(&ready_lock);
    ready = status == hipSuccess;
    pthread_cond_broadcast(&ready_cond);
    pthread_mutex_unlock(&ready_lock);
}

static void wait_ready(void)
{
    pthread_mutex_lock(&ready_lock);
    while (!ready)
        pthread_cond_wait(&ready_cond, &ready_lock);
    pthread_mutex_unlock(&ready_lock);
}

static int64_t shape[1] = {N};

static void drop(DLManagedTensor *t)
{
    free(t);
}

static hipError_t (*launch_host_func)(hipStream_t, void (*)(void *), void *);
static int *buf;
static DLManagedTensor *shared;

static void produce(hipStream_t s)
{
    CHECK(launch_host_func(s, wait_gate, NULL)); /* the producer's late write */
    CHECK(hipMemsetAsync(buf, 1, N * sizeof(int), s));
    DLManagedTensor *t = calloc(1, sizeof(*t));
    t->dl_tensor.data = buf;
    t->dl_tensor.device.device_type = kDLROCM;
    t->dl_tensor.ndim = 1;
    t->dl_tensor.dtype.code = kDLInt;
    t->dl_tensor.dtype.bits = 32;
    t->dl_tensor.dtype.lanes = 1;
    t->dl_tensor.shape = shape;
    t->deleter = drop;
    dlshim_export(t, "producer");
    shared = t;
}

static void *produce_per_thread(void *arg)
{
    (void)arg;
    produce(hipStreamPerThread);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "unsynced";
    int callback = !strcmp(mode, "stream_callback");
    int default_consumer = !strcmp(mode, "default_consumer");
    /* Ordered before the consumer's copy: by an event, or by the null stream. */
    int synced = !strcmp(mode, "event") || (default_consumer && !PER_THREAD_BUILD);
    setvbuf(stdout, NULL, _IOLBF, 0);
    *(void **)&launch_host_func = dlsym(RTLD_DEFAULT, LAUNCH_HOST_FUNC);
    if (!launch_host_func) {
        printf("%s: not in this HIP runtime\n", LAUNCH_HOST_FUNC);
        return 1;
    }
    hipStream_t s1, s2;
    hipEvent_t ev, copied;
    CHECK(hipMalloc((void **)&buf, N * sizeof(int)));
    CHECK(hipMemset(buf, 0, N * sizeof(int)));
    CHECK(hipStreamCreate(&s1));
    CHECK(hipStreamCreate(&s2));
    CHECK(hipEventCreate(&ev));
    CHECK(hipEventCreate(&copied));

    if (!strcmp(mode, "per_thread")) {
        pthread_t thread;
        pthread_create(&thread, NULL, produce_per_thread, NULL);
        pthread_join(thread, NULL);
    } else {
        produce(s1);
    }
    CHECK(hipEventRecord(ev, s1));
    if (callback)
        CHECK(hipStreamAddCallback(s1, write_done, NULL, 0));
    DLManagedTensor *t = shared;
    if (synced || callback)
        open_gate();
    if (callback)
        wait_ready(); /* no HIP call: the callback's word alone */

    dlshim_import(t, "consumer");
    hipStream_t cs = default_consumer ? (hipStream_t)0 : s2;
    if (!strcmp(mode, "event"))
        CHECK(hipStreamWaitEvent(cs, ev, 0));
    int host[N];
    CHECK(hipMemcpyAsync(host, buf, sizeof(host), hipMemcpyDeviceToHost, cs));
    CHECK(hipEventRecord(copied, cs));
    for (int i = 0; i < 100 && hipEventQuery(copied) != hipSuccess; i++) {
        struct timespec ten_ms = {0, 10 * 1000 * 1000};
        nanosleep(&ten_ms, NULL);
    }
    open_gate();
    CHECK(hipDeviceSynchronize());
    printf("consumer saw %d\n", host[0]);
    t->deleter(t);
    CHECK(hipEventDestroy(ev));
    CHECK(hipEventDestroy(copied));
    CHECK(hipFree(buf));
    return 0;
}
