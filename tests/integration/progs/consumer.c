/* The consumer program of the integration tests: `consumer MODE [ARG]` runs
 * one DLPack exchange scenario with the producer library, using only the
 * annotation API (no dlshim link flag).  It prints the same lines with and
 * without the shim unless the scenario is a bug the shim is asked to stop. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "prod.h"

static double sum(const DLTensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += ((const float *)t->data)[i];
    return s;
}

static int clean(void)
{
    DLManagedTensor *t = prod_make(2, 3);
    dlshim_import(t, "cons");
    printf("sum=%g\n", sum(&t->dl_tensor));
    t->deleter(t);
    return 0;
}

static int versioned(uint64_t flags)
{
    DLManagedTensorVersioned *t = prod_make_versioned(4, flags);
    dlshim_import_versioned(t, "cons");
    printf("sum=%g\n", sum(&t->dl_tensor));
    t->deleter(t);
    return 0;
}

static int double_release(void)
{
    DLManagedTensor *t = prod_make(2, 3);
    dlshim_import(t, "cons");
    void (*release)(DLManagedTensor *) = t->deleter; /* cached, as consumers do */
    release(t);
    release(t); /* the bug: a double free without the shim's protect mode */
    return 0;
}

static int import_after_release(void)
{
    DLManagedTensor *t = prod_make(2, 3);
    dlshim_import(t, "cons");
    t->deleter(t);
    dlshim_import(t, "late"); /* the bug: t is gone */
    return 0;
}

/* A release twice over (swallowed under protect), then the process dies
 * of SIGABRT: the same under every allocator and sanitizer, where a real
 * double free is each one's own report. */
static int double_release_then_abort(void)
{
    double_release();
    abort();
}

static int double_import(void)
{
    DLManagedTensor *t = prod_make(2, 3);
    dlshim_import(t, "cons");
    dlshim_import(t, "other");
    t->deleter(t);
    return 0;
}

static int unconsumed(void)
{
    DLManagedTensor *t = prod_make(1, 5);
    t->deleter(t); /* the producer drops its own capsule */
    return 0;
}

static int null_deleter(void)
{
    static int64_t shape[1] = {3};
    static float data[3] = {1, 2, 3};
    static DLManagedTensor t;
    t.dl_tensor.data = data;
    t.dl_tensor.device.device_type = kDLCPU;
    t.dl_tensor.ndim = 1;
    t.dl_tensor.dtype.code = kDLFloat;
    t.dl_tensor.dtype.bits = 32;
    t.dl_tensor.dtype.lanes = 1;
    t.dl_tensor.shape = shape;
    dlshim_export(&t, "static");
    dlshim_import(&t, "cons");
    printf("sum=%g deleter=%s\n", sum(&t.dl_tensor), t.deleter ? "set" : "null");
    return 0;
}

static void free_plain(DLManagedTensor *t)
{
    free(t->dl_tensor.shape);
    free(t->dl_tensor.data);
    free(t);
}

static int unknown_import(void)
{
    DLManagedTensor *t = calloc(1, sizeof(*t));
    t->dl_tensor.data = calloc(4, sizeof(int64_t));
    t->dl_tensor.device.device_type = kDLCPU;
    t->dl_tensor.ndim = 1;
    t->dl_tensor.dtype.code = kDLInt;
    t->dl_tensor.dtype.bits = 64;
    t->dl_tensor.dtype.lanes = 1;
    t->dl_tensor.shape = calloc(1, sizeof(int64_t));
    t->dl_tensor.shape[0] = 4;
    t->deleter = free_plain;
    dlshim_import(t, "cons"); /* nobody announced the export */
    t->deleter(t);
    return 0;
}

static int malformed(const char *kind)
{
    DLManagedTensor *t = prod_make_malformed(kind);
    dlshim_export(t, "prod");
    dlshim_import(t, "cons");
    t->deleter(t);
    return 0;
}

static int future_version(void)
{
    DLManagedTensorVersioned *t = prod_make_future_version();
    dlshim_export_versioned(t, "prod");
    t->deleter(t); /* the only legal use of a tensor of an unknown major version */
    return 0;
}

static int garbage(void)
{
    dlshim_export(NULL, "prod");
    dlshim_import(NULL, "cons");
    dlshim_export((DLManagedTensor *)(uintptr_t)0xdead0000, "prod");
    dlshim_import_versioned((DLManagedTensorVersioned *)(uintptr_t)0x7, NULL);
    DLManagedTensor *t = prod_make(1, 1);
    dlshim_export(t, (const char *)(uintptr_t)0x10); /* unreadable name */
    t->deleter(t);
    printf("survived\n");
    return 0;
}

static int keep_errno(void)
{
    DLManagedTensor *t = prod_make(2, 2);
    errno = 1234;
    dlshim_import(t, "cons");
    int after_import = errno;
    errno = 4321;
    t->deleter(t);
    printf("errno=%d,%d\n", after_import, errno);
    return 0;
}

/* ---- threads: 8 exporters, then 8 consumers each taking another thread's tensors */
#define NTHREADS 8
static DLManagedTensor **made[NTHREADS];
static int per_thread;

static void *export_many(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < per_thread; i++)
        made[id][i] = prod_make(1, 4);
    return NULL;
}

static void *consume_many(void *arg)
{
    int id = (int)(intptr_t)arg;
    DLManagedTensor **mine = made[(id + 1) % NTHREADS];
    for (int i = 0; i < per_thread; i++) {
        dlshim_import(mine[i], "cons");
        mine[i]->deleter(mine[i]);
    }
    return NULL;
}

static int threads(int n)
{
    pthread_t th[NTHREADS];
    per_thread = n;
    for (int i = 0; i < NTHREADS; i++)
        made[i] = calloc((size_t)n, sizeof(DLManagedTensor *));
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&th[i], NULL, export_many, (void *)(intptr_t)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&th[i], NULL, consume_many, (void *)(intptr_t)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NTHREADS; i++)
        free(made[i]);
    return 0;
}

/* ---- ring: 8 threads handing tensors round a ring at once, each
 * exporting one, passing it to the next thread through a mailbox of one,
 * and importing and releasing the one its neighbour passed it, n times.
 * Then, per `then`: "return" (the threads end, then the program), "_exit"
 * or "segv" from thread 1 while every thread is alive (their lines still
 * held), "fork" from thread 1 while the others are alive (the child does n
 * exchanges of its own and exits; the parent waits for it).  `size`
 * threads (8 unless given, at most RING_MAX).  For the log's
 * slots of lines (shim/output/log.c): every line of every thread, each
 * import after its export. */
#define RING_MAX 64
static DLManagedTensor *_Atomic mailbox[RING_MAX];
static int ring_size;
static pthread_barrier_t ring_done;
static const char *ring_then;
static int cycles(int n);

static void *ring_member(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < per_thread; i++) {
        DLManagedTensor *t = prod_make(1, 4);
        while (atomic_load(&mailbox[(id + 1) % ring_size]))
            sched_yield();
        atomic_store(&mailbox[(id + 1) % ring_size], t);
        DLManagedTensor *mine;
        while (!(mine = atomic_exchange(&mailbox[id], NULL)))
            sched_yield();
        dlshim_import(mine, "cons");
        mine->deleter(mine);
    }
    pthread_barrier_wait(&ring_done);
    if (id == 1 && !strcmp(ring_then, "_exit"))
        _exit(0);
    if (id == 1 && !strcmp(ring_then, "segv")) {
        volatile int *nowhere = NULL;
        *nowhere = 1;
    }
    if (id == 1 && !strcmp(ring_then, "fork")) {
        pid_t pid = fork();
        if (pid == 0) {
            cycles(per_thread);
            exit(0);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
            fprintf(stderr, "consumer: the child failed\n");
    }
    pthread_barrier_wait(&ring_done);
    return NULL;
}

static int ring(int n, const char *then, int size)
{
    pthread_t th[RING_MAX];
    per_thread = n;
    ring_then = then;
    ring_size = size < 2 || size > RING_MAX ? NTHREADS : size;
    pthread_barrier_init(&ring_done, NULL, (unsigned)ring_size);
    for (int i = 0; i < ring_size; i++)
        pthread_create(&th[i], NULL, ring_member, (void *)(intptr_t)i);
    for (int i = 0; i < ring_size; i++)
        pthread_join(th[i], NULL);
    return 0;
}

/* ---- n exchanges one after the other: few live tensors, many released.
 * Each freed tensor's memory is taken by a block held to the end, so every
 * tensor has its own address (malloc would otherwise reuse one, and the
 * shim would simply replace its record). */
static int cycles(int n)
{
    void **held = calloc((size_t)n, sizeof(void *));
    for (int i = 0; i < n; i++) {
        DLManagedTensor *t = prod_make(1, 2);
        dlshim_import(t, "cons");
        t->deleter(t);
        held[i] = malloc(sizeof(DLManagedTensor));
    }
    for (int i = 0; i < n; i++)
        free(held[i]);
    free(held);
    return 0;
}

/* ---- n exchanges, then a pause ("ready" on stdout, a line awaited on
 * stdin) so that a test can read the log of a live process; then, per
 * `then`: "violation" (a double release, caught under protect, and another
 * pause), "_exit" (leaves without exit handlers) or "return". */
static void pause_for(const char *what)
{
    printf("%s\n", what);
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof(line), stdin))
        line[0] = '\0';
}

static int hold(int n, const char *then)
{
    cycles(n);
    pause_for("ready");
    if (!strcmp(then, "violation")) {
        DLManagedTensor *t = prod_make(1, 2);
        dlshim_import(t, "cons");
        void (*deleter)(DLManagedTensor *) = t->deleter;
        deleter(t);
        deleter(t); /* swallowed by DLSHIM_ON_ERROR=protect */
        pause_for("violated");
    }
    if (!strcmp(then, "_exit"))
        _exit(0);
    if (!strcmp(then, "segv")) {
        volatile int *nowhere = NULL;
        *nowhere = 1; /* a fault: the log must hold every line before it */
    }
    return 0;
}

/* ---- the shim opened with dlopen (not preloaded), n handoffs (1 unless
 * given: more fill blocks, which the log's writer thread writes), dlclose:
 * the library's destructor must write what its buffer held, since nothing
 * of it is left to do so at exit.  Pauses after dlclose ("closed") so that
 * the log can be read, then leaves with _exit, or with exit when `then`
 * says so. */
static int close_shim(const char *path, int n, const char *then)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void (*export)(DLManagedTensor *, const char *) =
        lib ? (void (*)(DLManagedTensor *, const char *))dlsym(lib, "dlshim_export") : NULL;
    void (*import)(DLManagedTensor *, const char *) =
        lib ? (void (*)(DLManagedTensor *, const char *))dlsym(lib, "dlshim_import") : NULL;
    if (!export || !import) {
        fprintf(stderr, "consumer: %s\n", dlerror());
        return 2;
    }
    for (int i = 0; i < (n > 0 ? n : 1); i++) {
        DLManagedTensor *t = prod_make(1, 2); /* kept: the shim is gone before a deleter runs */
        export(t, "prod");
        import(t, "cons");
    }
    dlclose(lib);
    pause_for("closed");
    if (!strcmp(then, "exit"))
        exit(0);
    _exit(0);
}

/* ---- n exchanges, fork, n more in the child and n more in the parent:
 * each exchange must be logged once (nothing held for the log may be
 * written by both processes). */
static int fork_cycles(int n)
{
    cycles(n);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    cycles(n);
    if (pid == 0)
        exit(0);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* ---- a deleter that itself exports and imports (re-entrancy) */
static void (*inner_delete)(DLManagedTensor *);

static void reentrant_delete(DLManagedTensor *t)
{
    DLManagedTensor *other = prod_make(1, 2); /* exports from inside a deleter */
    dlshim_import(other, "cons");
    other->deleter(other);
    inner_delete(t);
}

static int deleter_reenters(void)
{
    DLManagedTensor *t = prod_make(2, 2);
    inner_delete = t->deleter;
    t->deleter = reentrant_delete; /* the producer decorates before exporting again */
    dlshim_export(t, "prod");
    dlshim_import(t, "cons");
    t->deleter(t);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "clean";
    const char *arg = argc > 2 ? argv[2] : "";
    int rc;
    if (!strcmp(mode, "clean")) rc = clean();
    else if (!strcmp(mode, "versioned")) rc = versioned(DLPACK_FLAG_BITMASK_READ_ONLY);
    else if (!strcmp(mode, "copied")) rc = versioned(DLPACK_FLAG_BITMASK_IS_COPIED | DLPACK_FLAG_BITMASK_READ_ONLY);
    else if (!strcmp(mode, "double_release")) rc = double_release();
    else if (!strcmp(mode, "double_release_then_abort")) rc = double_release_then_abort();
    else if (!strcmp(mode, "import_after_release")) rc = import_after_release();
    else if (!strcmp(mode, "double_import")) rc = double_import();
    else if (!strcmp(mode, "unconsumed")) rc = unconsumed();
    else if (!strcmp(mode, "null_deleter")) rc = null_deleter();
    else if (!strcmp(mode, "unknown_import")) rc = unknown_import();
    else if (!strcmp(mode, "malformed")) rc = malformed(arg);
    else if (!strcmp(mode, "future_version")) rc = future_version();
    else if (!strcmp(mode, "garbage")) rc = garbage();
    else if (!strcmp(mode, "errno")) rc = keep_errno();
    else if (!strcmp(mode, "threads")) rc = threads(atoi(arg));
    else if (!strcmp(mode, "ring")) rc = ring(atoi(arg), argc > 3 ? argv[3] : "return", argc > 4 ? atoi(argv[4]) : 0);
    else if (!strcmp(mode, "cycles")) rc = cycles(atoi(arg));
    else if (!strcmp(mode, "deleter_reenters")) rc = deleter_reenters();
    else if (!strcmp(mode, "dlclose")) rc = close_shim(arg, argc > 3 ? atoi(argv[3]) : 1, argc > 4 ? argv[4] : "_exit");
    else if (!strcmp(mode, "hold")) rc = hold(atoi(arg), argc > 3 ? argv[3] : "return");
    else if (!strcmp(mode, "fork_cycles")) rc = fork_cycles(atoi(arg));
    else {
        fprintf(stderr, "consumer: unknown mode %s\n", mode);
        return 2;
    }
    printf("live=%d\n", prod_live());
    return rc;
}
