/*
 * Stress programs for the shim: `stress MODE [ARGS]`.  Real CUDA runtime
 * calls only (the simulated device in CI) and the annotation API through
 * libprod; every count is printed so the tests can compare the summary.
 *
 *   exchange T N       T threads, each exporting N tensors that the next
 *                      thread imports and releases, and making N
 *                      cudaMalloc/cudaFree pairs, all at once
 *   fork T N           exchange threads running while the main thread forks;
 *                      the child makes CHILD_WORK exchanges and allocations
 *   spawn HOW          fork+exec | vfork+exec | posix_spawn of `stress exchange 1 5`
 *   dlopen N HOW       dlopen/dlclose of libplugin.so N times (global | local
 *                      | deepbind), one cudaMalloc/cudaFree through it each time
 *   leave HOW T N      exchange threads running while a side thread leaves:
 *                      exit | _exit | abort | sigterm (a handler that exits)
 *                      | sigkill (nothing runs: the log ends where it ends)
 *   signal N           cudaMalloc/cudaFree pairs (N at least) until another
 *                      thread sent N SIGUSR1, whose handler allocates and frees
 *   signal_streams N   the same with handoffs of a device tensor (each
 *                      import takes the stream model's lock) while the
 *                      handler queries an event (a stream wrapper, which
 *                      would take it too)
 *   log N              N exchanges, for logs that fail (/dev/full, closed pipe)
 *   ledger T N         T threads at once, each N export + import + release
 *                      of its own tensor (producer pI, consumer cI); every
 *                      4th also one of SHARED tensors every thread hands
 *                      over in turn (the same addresses, the same registry
 *                      and share shards, from every thread); every 8th a
 *                      device tensor written on its own stream, whose event
 *                      a stream all threads share waits for
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "asan_fork_gate.h"
#include "prod.h"

#define MAX_THREADS 64
#define CHILD_WORK 10

extern char **environ;

static void die(const char *what)
{
    printf("%s failed\n", what);
    fflush(stdout);
    _exit(1);
}

/* Under ASan (asan_fork_gate.h) the exchange threads make, free and
 * cudaMalloc inside the fork gate (seen: a child hung in its first calloc,
 * one run in about twelve): only their imports still run in the shim while
 * it forks (the plain, TSan and valgrind runs keep the whole exchange racing
 * the fork). */

static void alloc_free(size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes) != cudaSuccess || cudaFree(d) != cudaSuccess)
        die("cudaMalloc/cudaFree");
}

/* ---- exchange: thread i exports into its row, thread i+1 consumes it ---- */
static int nthreads, per_thread;
static DLManagedTensor **rows[MAX_THREADS];
static atomic_int made[MAX_THREADS];
static atomic_long progress;   /* exchanges completed, all threads */

static void *exchange_thread(void *arg)
{
    int id = (int)(intptr_t)arg, from = (id + nthreads - 1) % nthreads;
    int consumed = 0;
    for (int i = 0; i < per_thread || consumed < per_thread;) {
        if (i < per_thread) {
            FORK_GATE_ENTER();
            rows[id][i] = prod_make(1, 4);
            FORK_GATE_LEAVE();
            atomic_store(&made[id], ++i);
            FORK_GATE_ENTER();
            alloc_free(256);
            FORK_GATE_LEAVE();
        }
        /* The deleter runs on this thread, not on the exporting one. */
        while (consumed < atomic_load(&made[from])) {
            DLManagedTensor *t = rows[from][consumed++];
            dlshim_import(t, "cons");
            FORK_GATE_ENTER();
            t->deleter(t);
            FORK_GATE_LEAVE();
            atomic_fetch_add(&progress, 1);
        }
        if (i == per_thread && consumed < per_thread)
            sched_yield();
    }
    return NULL;
}

static pthread_t workers[MAX_THREADS];

static void start_exchange(int t, int n)
{
    if (t < 1 || t > MAX_THREADS || n < 1)
        die("arguments");
    nthreads = t, per_thread = n;
    for (int i = 0; i < t; i++)
        if (!(rows[i] = calloc((size_t)n, sizeof(DLManagedTensor *))))
            die("calloc");
    for (int i = 0; i < t; i++)
        if (pthread_create(&workers[i], NULL, exchange_thread, (void *)(intptr_t)i))
            die("pthread_create");
}

static void join_exchange(void)
{
    for (int i = 0; i < nthreads; i++)
        pthread_join(workers[i], NULL);
}

static void wait_for_progress(long n)
{
    while (atomic_load(&progress) < n)
        sched_yield();
}

static int exchange(int t, int n)
{
    start_exchange(t, n);
    join_exchange();
    printf("exchanges=%ld allocations=%d live=%d\n", atomic_load(&progress), t * n, prod_live());
    return 0;
}

/* ---- fork while other threads exchange ---------------------------------- */
static int fork_midway(int t, int n)
{
    cudaFree(NULL); /* the runtime is set up before fork, as programs do */
    start_exchange(t, n);
    wait_for_progress((long)t * n / 4);
    FORK_GATE_ENTER();
    pid_t pid = fork();
    FORK_GATE_LEAVE(); /* in the child too: this thread holds it there */
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        /* Only this thread exists here; the exchange threads' tensors are
         * the parent's business. */
        for (int i = 0; i < CHILD_WORK; i++) {
            DLManagedTensor *m = prod_make(2, 2);
            dlshim_import(m, "child");
            m->deleter(m);
            alloc_free(512);
        }
        printf("child done\n");
        exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    join_exchange();
    printf("child=%d status=%d exchanges=%ld\n", (int)pid, status, atomic_load(&progress));
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* ---- fork+exec, vfork+exec, posix_spawn --------------------------------- */
static int spawn(const char *how, const char *self)
{
    char *args[] = {(char *)self, "exchange", "1", "5", NULL};
    DLManagedTensor *m = prod_make(1, 1); /* the parent has its own work */
    dlshim_import(m, "cons");
    m->deleter(m);
    fflush(stdout);
    pid_t pid;
    if (!strcmp(how, "fork")) {
        if ((pid = fork()) == 0) {
            execve(self, args, environ);
            _exit(127);
        }
    } else if (!strcmp(how, "vfork")) {
        if ((pid = vfork()) == 0) {
            execve(self, args, environ);
            _exit(127);
        }
    } else if (!strcmp(how, "posix_spawn")) {
        if (posix_spawn(&pid, self, NULL, NULL, args, environ) != 0)
            pid = -1;
    } else {
        die("spawn kind");
        return 1;
    }
    if (pid < 0)
        die("spawn");
    int status;
    waitpid(pid, &status, 0);
    printf("child=%d status=%d\n", (int)pid, status);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* ---- dlopen/dlclose of a module whose calls are hooked ------------------ */
static int reload(int n, const char *how, const char *self)
{
    int flags = RTLD_NOW;
    if (!strcmp(how, "local"))
        flags |= RTLD_LOCAL;
    else if (!strcmp(how, "deepbind"))
        flags |= RTLD_LOCAL | RTLD_DEEPBIND;
    else if (!strcmp(how, "global"))
        flags |= RTLD_GLOBAL;
    else
        die("dlopen kind");
    char path[4096];
    snprintf(path, sizeof(path), "%s", self);
    char *slash = strrchr(path, '/');
    snprintf(slash ? slash + 1 : path, sizeof(path) - (size_t)(slash ? slash + 1 - path : 0),
             "libplugin.so");
    int ok = 0;
    for (int i = 0; i < n; i++) {
        void *h = dlopen(path, flags);
        if (!h)
            die(dlerror());
        int (*cycle)(size_t) = (int (*)(size_t))dlsym(h, "plugin_cycle");
        if (cycle && cycle(1024) == 0)
            ok++;
        dlclose(h);
    }
    printf("cycles=%d\n", ok);
    return ok == n ? 0 : 1;
}

/* ---- leaving while other threads exchange ------------------------------- */
static void exit_on_sigterm(int sig)
{
    (void)sig;
    exit(9); /* not async-signal-safe, and programs do it anyway */
}

static const char *leave_how;

static void *leaver(void *arg)
{
    (void)arg;
    wait_for_progress((long)nthreads * per_thread / 4);
    if (!strcmp(leave_how, "exit"))
        exit(7);
    if (!strcmp(leave_how, "_exit"))
        _exit(7);
    if (!strcmp(leave_how, "abort"))
        abort();
    if (!strcmp(leave_how, "sigterm"))
        kill(getpid(), SIGTERM);
    if (!strcmp(leave_how, "sigkill"))
        kill(getpid(), SIGKILL);
    return NULL;
}

static int leave(const char *how, int t, int n)
{
    leave_how = how;
    if (!strcmp(how, "sigterm"))
        signal(SIGTERM, exit_on_sigterm);
    start_exchange(t, n);
    pthread_t side;
    pthread_create(&side, NULL, leaver, NULL);
    pthread_join(side, NULL);
    join_exchange(); /* sigterm: the handler may run on any thread */
    /* Still here: ThreadSanitizer's runtime defers a signal to the next
     * call it intercepts on the thread that took it, and drops it if that
     * thread ends first (this program without the shim, under TSan: 32 of
     * 200 runs waited here forever).  Sent again, from this thread. */
    if (!strcmp(how, "sigterm"))
        raise(SIGTERM);
    for (;;)
        pause();
    return 0;
}

/* ---- a signal handler that allocates through the hooked API ------------- */
static atomic_int handled;
static atomic_int signals_sent;

static void allocate_in_handler(int sig)
{
    (void)sig;
    int saved = errno;
    void *d = NULL;
    if (cudaMalloc(&d, 64) == cudaSuccess && cudaFree(d) == cudaSuccess)
        atomic_fetch_add(&handled, 1);
    errno = saved;
}

static cudaEvent_t handler_event;

static void stream_work_in_handler(int sig)
{
    (void)sig;
    int saved = errno;
    if (cudaEventQuery(handler_event) != cudaErrorInvalidResourceHandle)
        atomic_fetch_add(&handled, 1);
    errno = saved;
}

static void drop_nothing(DLManagedTensor *t)
{
    (void)t;
}

static pthread_t main_thread;

static void *signaller(void *arg)
{
    int n = (int)(intptr_t)arg;
    for (int i = 0; i < n; i++) {
        pthread_kill(main_thread, SIGUSR1);
        atomic_fetch_add(&signals_sent, 1);
        sched_yield();
    }
    return NULL;
}

static int signals(int n, bool streams)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = streams ? stream_work_in_handler : allocate_in_handler;
    sa.sa_flags = SA_RESTART;
    /* The first allocation sets up the runtime's context and the shim's
     * helpers (dlopen, malloc): neither is async-signal-safe, so it comes
     * before any handler may allocate, as in any program that does this. */
    alloc_free(4096);
    /* The handler's event, and a device tensor the loop hands over: only the
     * handler calls the runtime during the loop, so the runtime (not
     * async-signal-safe) is never re-entered; the shim must not be either. */
    void *d = NULL;
    static int64_t shape[1] = {1024};
    DLManagedTensor t = {.dl_tensor = {.device = {kDLCUDA, 0}, .ndim = 1,
                                       .dtype = {kDLFloat, 32, 1}, .shape = shape}};
    if (streams && (cudaEventCreate(&handler_event) != cudaSuccess ||
                    cudaMalloc(&d, 4096) != cudaSuccess ||
                    cudaMemset(d, 0, 4096) != cudaSuccess)) /* a write: the import is checked */
        die("stream set-up");
    t.dl_tensor.data = d;
    sigaction(SIGUSR1, &sa, NULL);
    main_thread = pthread_self();
    pthread_t th;
    pthread_create(&th, NULL, signaller, (void *)(intptr_t)n);
    /* The loop runs until every signal was sent, not for a fixed count: a
     * scheduler that runs one thread at a time (valgrind's) may otherwise
     * finish it before the signaller ever ran, and nothing is tested. */
    int loops = 0;
    for (; loops < n || atomic_load(&signals_sent) < n; loops++) {
        if (!streams) {
            alloc_free(4096);
        } else {
            t.deleter = drop_nothing;
            dlshim_export(&t, "producer");
            dlshim_import(&t, "consumer");
            t.deleter(&t);
        }
    }
    pthread_join(th, NULL);
    printf("allocations=%d handled=%d\n", loops, atomic_load(&handled));
    return atomic_load(&handled) > 0 ? 0 : 1;
}

/* ---- a plain run, for logs that fail ------------------------------------ */
static int plain(int n)
{
    for (int i = 0; i < n; i++) {
        DLManagedTensor *m = prod_make(1, 8);
        dlshim_import(m, "cons");
        m->deleter(m);
    }
    printf("exchanges=%d live=%d\n", n, prod_live());
    return 0;
}

/* ---- ledger: threads on their own and on the same tensors and streams ---- */
#define SHARED 4
static pthread_mutex_t shared_lock[SHARED] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                                              PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};
static DLManagedTensor shared_tensor[SHARED];
static float shared_data[SHARED][4];
static int64_t four = 4;
static atomic_long ledger_deletes;
static cudaStream_t common_stream;

static void count_delete(DLManagedTensor *t)
{
    (void)t;
    atomic_fetch_add_explicit(&ledger_deletes, 1, memory_order_relaxed);
}

static void fill(DLManagedTensor *t, void *data, DLDeviceType where)
{
    memset(t, 0, sizeof(*t));
    t->dl_tensor = (DLTensor){data, {where, 0}, 1, {kDLFloat, 32, 1}, &four, NULL, 0};
    t->deleter = count_delete;
}

static void *ledger_thread(void *arg)
{
    int id = (int)(intptr_t)arg;
    char producer[16], consumer[16];
    snprintf(producer, sizeof(producer), "p%d", id);
    snprintf(consumer, sizeof(consumer), "c%d", id);
    float data[4];
    DLManagedTensor own, dev;
    cudaStream_t s;
    cudaEvent_t ev;
    void *buf;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess ||
        cudaMalloc(&buf, 16) != cudaSuccess)
        die("stream, event or allocation");
    for (int i = 0; i < per_thread; i++) {
        fill(&own, data, kDLCPU);
        dlshim_export(&own, producer);
        dlshim_import(&own, consumer);
        own.deleter(&own);
        if (i % 4 == 0) {
            int k = (id + i / 4) % SHARED;
            pthread_mutex_lock(&shared_lock[k]);
            fill(&shared_tensor[k], shared_data[k], kDLCPU);
            dlshim_export(&shared_tensor[k], "shared-p");
            dlshim_import(&shared_tensor[k], "shared-c");
            shared_tensor[k].deleter(&shared_tensor[k]);
            pthread_mutex_unlock(&shared_lock[k]);
        }
        if (i % 8 == 0) {
            if (cudaMemsetAsync(buf, i & 0xff, 16, s) != cudaSuccess ||
                cudaEventRecord(ev, s) != cudaSuccess ||
                cudaStreamWaitEvent(common_stream, ev, 0) != cudaSuccess ||
                cudaStreamSynchronize(s) != cudaSuccess)
                die("stream work");
            fill(&dev, buf, kDLCUDA);
            dlshim_export(&dev, "dev-p");
            dlshim_import(&dev, "dev-c");
            dev.deleter(&dev);
        }
    }
    if (cudaFree(buf) != cudaSuccess || cudaEventDestroy(ev) != cudaSuccess ||
        cudaStreamDestroy(s) != cudaSuccess)
        die("cleanup");
    return NULL;
}

static int ledger(int t, int n)
{
    if (t < 1 || t > MAX_THREADS || n < 1)
        die("arguments");
    nthreads = t, per_thread = n;
    if (cudaStreamCreateWithFlags(&common_stream, cudaStreamNonBlocking) != cudaSuccess)
        die("cudaStreamCreate");
    for (int i = 0; i < t; i++)
        if (pthread_create(&workers[i], NULL, ledger_thread, (void *)(intptr_t)i))
            die("pthread_create");
    join_exchange();
    if (cudaStreamSynchronize(common_stream) != cudaSuccess ||
        cudaStreamDestroy(common_stream) != cudaSuccess)
        die("common stream");
    printf("deletes=%ld\n", atomic_load(&ledger_deletes));
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int a = argc > 2 ? atoi(argv[2]) : 0, b = argc > 3 ? atoi(argv[3]) : 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "exchange"))
        return exchange(a, b);
    if (!strcmp(mode, "fork"))
        return fork_midway(a, b);
    if (!strcmp(mode, "spawn") && argc > 2)
        return spawn(argv[2], argv[0]);
    if (!strcmp(mode, "dlopen") && argc > 3)
        return reload(a, argv[3], argv[0]);
    if (!strcmp(mode, "leave") && argc > 4)
        return leave(argv[2], atoi(argv[3]), atoi(argv[4]));
    if (!strcmp(mode, "signal"))
        return signals(a, false);
    if (!strcmp(mode, "signal_streams"))
        return signals(a, true);
    if (!strcmp(mode, "log"))
        return plain(a);
    if (!strcmp(mode, "ledger"))
        return ledger(a, b);
    fprintf(stderr, "usage: stress exchange|fork|spawn|dlopen|leave|signal|signal_streams|log|ledger ...\n");
    return 2;
}
