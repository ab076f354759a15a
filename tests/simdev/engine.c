/* engine.c — see engine.h. */
#include "engine.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- configuration --------------------------------------------------------- */

/* A switch set to 1 in the environment, read once into *cache (atomic: any
 * thread, or a signal handler, may ask first). */
static bool switched_on(int *cache, const char *name)
{
    int r = __atomic_load_n(cache, __ATOMIC_RELAXED);
    if (r < 0) {
        const char *v = getenv(name);
        r = v && *v == '1';
        __atomic_store_n(cache, r, __ATOMIC_RELAXED);
    }
    return r;
}

/* Read once, as a driver finds its devices once: no getenv per call, whose
 * cost grows with the environment (a preloaded shim's variables added to
 * every call the bench counts). */
bool sim_no_device(void)
{
    static int none = -1;
    return switched_on(&none, "SIMDEV_NO_DEVICE");
}

void sim_log(const char *what, const void *p)
{
    const char *path = getenv("SIMDEV_LOG");
    if (!path)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    char line[128];
    int n = snprintf(line, sizeof(line), "%s %p\n", what, p);
    if (write(fd, line, (size_t)n) < 0) {
        /* a test double's log: nothing to do */
    }
    close(fd);
}

/* ---- memory ----------------------------------------------------------------- */

typedef struct alloc {
    char *base;
    size_t size;
    int kind;
    struct alloc *next;
} alloc;

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static alloc *live_allocs; /* newest first: a free usually finds its block at once */
static alloc *dead_allocs; /* freed, kept for reuse (SIMDEV_REUSE only) */

/* SIMDEV_REUSE=1 (make bench): a freed block is handed out again, unpoisoned,
 * so that an allocate/free pair costs no system call and the shim's own cost
 * per call can be seen.  Tests keep the default, where memory is never reused
 * and a read after free gives wrong numbers. */
static bool reuse_freed(void)
{
    static int reuse = -1;
    return switched_on(&reuse, "SIMDEV_REUSE");
}

/* Allocation and free are async-signal-safe (the stress test allocates from
 * a signal handler): signals are held while the lists' lock is held. */
static void lock_lists(sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, old);
    pthread_mutex_lock(&mem_lock);
}

static void unlock_lists(const sigset_t *old)
{
    pthread_mutex_unlock(&mem_lock);
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* Records come from mmap'd chunks, not malloc (which a handler may not call). */
static alloc *new_record(void)
{
    static alloc *chunk;
    static size_t left;
    if (!left) {
        void *c = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (c == MAP_FAILED)
            return NULL;
        chunk = c;
        left = (1 << 16) / sizeof(alloc);
    }
    left--;
    return chunk++;
}

/* Lock held: unlinks and returns the first record of *list that matches. */
static alloc *take(alloc **list, const char *base, size_t size, int kind)
{
    for (alloc **a = list; *a; a = &(*a)->next)
        if ((*a)->kind == kind && (base ? (*a)->base == base : (*a)->size == size)) {
            alloc *found = *a;
            *a = found->next;
            return found;
        }
    return NULL;
}

void *sim_alloc(size_t size, int kind)
{
    size_t len = size ? size : 1;
    sigset_t old;
    alloc *a = NULL;
    if (reuse_freed()) {
        lock_lists(&old);
        a = take(&dead_allocs, NULL, len, kind);
        if (a) {
            a->next = live_allocs;
            live_allocs = a;
        }
        unlock_lists(&old);
        if (a)
            return a->base;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    lock_lists(&old);
    a = new_record();
    if (a) {
        *a = (alloc){p, len, kind, live_allocs};
        live_allocs = a;
    }
    unlock_lists(&old);
    if (!a) {
        munmap(p, len);
        return NULL;
    }
    return p;
}

int sim_free(void *p, int kind)
{
    sigset_t old;
    bool reuse = reuse_freed();
    lock_lists(&old);
    alloc *found = p ? take(&live_allocs, p, 0, kind) : NULL;
    if (found && reuse) {
        found->next = dead_allocs;
        dead_allocs = found;
    }
    unlock_lists(&old);
    if (!found)
        return -1;
    if (!reuse)
        memset(found->base, 0xdd, found->size); /* poisoned, never reused (its record is dropped) */
    return 0;
}

/* ---- external memory --------------------------------------------------------- */

/* The memory is the exporter's too (a Vulkan driver's): never poisoned. */
struct sim_extmem {
    char *base;
    size_t size;
    int buffers;    /* mapped buffers not yet freed */
    bool destroyed; /* handle gone: the range is reserved until buffers is 0 */
    sim_extmem *next;
};

typedef struct extbuf {
    char *p;
    sim_extmem *m;
    struct extbuf *next;
} extbuf;

/* Both under mem_lock (lock_lists), like the allocations. */
static sim_extmem *live_extmems;
static extbuf *extbufs;

int sim_extmem_import(int fd, size_t size, sim_extmem **out)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return EBADF;
    /* Past the file's end a mapping gives SIGBUS, not memory. */
    if (size == 0 || (S_ISREG(st.st_mode) && (uint64_t)st.st_size < size))
        return EINVAL;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return errno;
    sim_extmem *m = malloc(sizeof(*m));
    if (!m) {
        munmap(p, size);
        return ENOMEM;
    }
    sigset_t old;
    lock_lists(&old);
    *m = (sim_extmem){p, size, 0, false, live_extmems};
    live_extmems = m;
    unlock_lists(&old);
    close(fd); /* ours now, as the CUDA driver's; the mapping keeps the file */
    *out = m;
    return 0;
}

/* Lock held: the link to m in the live list, or NULL. */
static sim_extmem **find_extmem(sim_extmem *m)
{
    for (sim_extmem **l = &live_extmems; *l; l = &(*l)->next)
        if (*l == m)
            return l;
    return NULL;
}

int sim_extmem_map(sim_extmem *m, uint64_t offset, uint64_t size, void **out)
{
    extbuf *b = malloc(sizeof(*b));
    if (!b)
        return ENOMEM;
    sigset_t old;
    lock_lists(&old);
    int err = !find_extmem(m)                                          ? EBADF
              : size == 0 || offset > m->size || size > m->size - offset ? EINVAL
                                                                       : 0;
    if (!err) {
        *b = (extbuf){m->base + offset, m, extbufs};
        extbufs = b;
        m->buffers++;
        *out = b->p;
    }
    unlock_lists(&old);
    if (err)
        free(b);
    return err;
}

int sim_extmem_free_buffer(void *p)
{
    sigset_t old;
    lock_lists(&old);
    extbuf *b = NULL;
    for (extbuf **l = &extbufs; *l; l = &(*l)->next)
        if ((*l)->p == p) {
            b = *l;
            *l = b->next;
            break;
        }
    sim_extmem *gone = b && --b->m->buffers == 0 && b->m->destroyed ? b->m : NULL;
    unlock_lists(&old);
    if (!b)
        return -1;
    free(b);
    if (gone) {
        munmap(gone->base, gone->size);
        free(gone);
    }
    return 0;
}

int sim_extmem_destroy(sim_extmem *m)
{
    sigset_t old;
    lock_lists(&old);
    sim_extmem **l = find_extmem(m);
    if (l) {
        *l = m->next;
        m->destroyed = true;
        /* Buffers not yet freed: a use now faults, and their addresses are
         * not handed out again before cuMemFree releases them. */
        if (m->buffers)
            mmap(m->base, m->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                 -1, 0);
    }
    bool gone = l && !m->buffers;
    unlock_lists(&old);
    if (!l)
        return -1;
    if (gone) {
        munmap(m->base, m->size);
        free(m);
    }
    return 0;
}

/* ---- streams ------------------------------------------------------------------ */

typedef struct op {
    void (*fn)(void *);
    void *arg;
    struct op *next;
} op;

struct sim_stream {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    op *head, *tail;
    uint64_t queued, done; /* ops enqueued / completed */
    bool blocking, stop;
    pthread_t worker;
    struct sim_stream *next_stream;
};

static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;
static sim_stream *streams; /* every live stream, for device sync and legacy ordering */
static sim_stream *legacy;
static __thread sim_stream *per_thread;

static void *run(void *arg)
{
    sim_stream *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->cond, &s->lock);
        if (!s->head)
            break;
        op *o = s->head;
        s->head = o->next;
        if (!s->head)
            s->tail = NULL;
        pthread_mutex_unlock(&s->lock);
        o->fn(o->arg);
        free(o);
        pthread_mutex_lock(&s->lock);
        s->done++;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static sim_stream *new_stream(bool blocking)
{
    sim_stream *s = calloc(1, sizeof(*s));
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->blocking = blocking;
    pthread_create(&s->worker, NULL, run, s);
    pthread_mutex_lock(&streams_lock);
    s->next_stream = streams;
    streams = s;
    pthread_mutex_unlock(&streams_lock);
    return s;
}

sim_stream *sim_stream_create(unsigned flags)
{
    return new_stream(!(flags & SIM_STREAM_NON_BLOCKING));
}

/* SIMDEV_IMMEDIATE=1 (make bench's instruction counts): every operation runs
 * as it is queued, on the calling thread, as a device that finishes each one
 * before the call returns would (in order, so every ordering CUDA promises
 * holds).  Then what a run costs does not depend on how valgrind interleaves
 * the stream workers with the program, which moved the count per operation
 * by a hundred instructions from one build of the shim to the next.  A
 * stream operation that waits for the host (a gate in a host function)
 * would wait for ever: tests keep the workers.  Done at once, an operation
 * keeps no record of itself on the heap either (a copy's arguments, an
 * event's mark): a real runtime's asynchronous calls do not call the
 * program's malloc and free, which the shim checks while a host tensor is
 * shared, and each such free was counted as the device hook's cost. */
static bool immediate(void)
{
    static int now = -1;
    return switched_on(&now, "SIMDEV_IMMEDIATE");
}

static void push(sim_stream *s, void (*fn)(void *), void *arg)
{
    if (immediate()) {
        fn(arg);
        return;
    }
    op *o = malloc(sizeof(*o));
    *o = (op){fn, arg, NULL};
    pthread_mutex_lock(&s->lock);
    if (s->tail)
        s->tail->next = o;
    else
        s->head = o;
    s->tail = o;
    s->queued++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

sim_stream *sim_stream_of(void *handle)
{
    if ((uintptr_t)handle == 0 || (uintptr_t)handle == 1) {
        pthread_mutex_lock(&streams_lock);
        sim_stream *l = legacy;
        pthread_mutex_unlock(&streams_lock);
        if (!l) {
            l = new_stream(true);
            pthread_mutex_lock(&streams_lock);
            if (!legacy)
                legacy = l;
            l = legacy;
            pthread_mutex_unlock(&streams_lock);
        }
        return l;
    }
    if ((uintptr_t)handle == 2) {
        if (!per_thread)
            per_thread = new_stream(true);
        return per_thread;
    }
    return handle;
}

/* ---- events -------------------------------------------------------------------- */

struct sim_event {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t recorded, completed;
    int refs; /* the owner's, and one per queued op that uses it */
};

sim_event *sim_event_create(void)
{
    sim_event *e = calloc(1, sizeof(*e));
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    e->refs = 1;
    return e;
}

static void event_unref(sim_event *e)
{
    pthread_mutex_lock(&e->lock);
    int left = --e->refs;
    pthread_mutex_unlock(&e->lock);
    if (left == 0) {
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->cond);
        free(e);
    }
}

/* Queued ops may still use it: freed when the last of them is done. */
void sim_event_destroy(sim_event *e)
{
    event_unref(e);
}

typedef struct {
    sim_event *e;
    uint64_t generation;
} mark;

static void complete(void *arg)
{
    mark *m = arg;
    pthread_mutex_lock(&m->e->lock);
    if (m->e->completed < m->generation)
        m->e->completed = m->generation;
    pthread_cond_broadcast(&m->e->cond);
    pthread_mutex_unlock(&m->e->lock);
    event_unref(m->e);
    free(m);
}

static void wait_mark(void *arg)
{
    mark *m = arg;
    pthread_mutex_lock(&m->e->lock);
    while (m->e->completed < m->generation)
        pthread_cond_wait(&m->e->cond, &m->e->lock);
    pthread_mutex_unlock(&m->e->lock);
    event_unref(m->e);
    free(m);
}

/* Without the legacy-stream ordering: the building block. */
static void record_raw(sim_event *e, sim_stream *s)
{
    if (immediate()) { /* all work before it is done: so is the mark */
        pthread_mutex_lock(&e->lock);
        e->completed = ++e->recorded;
        pthread_cond_broadcast(&e->cond);
        pthread_mutex_unlock(&e->lock);
        return;
    }
    mark *m = malloc(sizeof(*m));
    pthread_mutex_lock(&e->lock);
    m->e = e;
    m->generation = ++e->recorded;
    e->refs++;
    pthread_mutex_unlock(&e->lock);
    push(s, complete, m);
}

static void wait_raw(sim_stream *s, sim_event *e)
{
    if (immediate())
        return; /* every mark recorded is complete */
    mark *m = malloc(sizeof(*m));
    pthread_mutex_lock(&e->lock);
    m->e = e;
    m->generation = e->recorded;
    e->refs++;
    pthread_mutex_unlock(&e->lock);
    push(s, wait_mark, m);
}

/* Work on the legacy default stream waits for all blocking streams, and work
 * on a blocking stream waits for the legacy stream (CUDA's implicit
 * synchronization); non-blocking streams take no part. */
static void order_with_legacy(sim_stream *s)
{
    if (!s->blocking || immediate())
        return; /* nothing on any stream is left to wait for */
    sim_stream *l = sim_stream_of(NULL);
    pthread_mutex_lock(&streams_lock);
    sim_stream *all[256];
    int n = 0;
    for (sim_stream *t = streams; t && n < 256; t = t->next_stream)
        all[n++] = t;
    pthread_mutex_unlock(&streams_lock);
    if (s == l) {
        for (int i = 0; i < n; i++)
            if (all[i] != l && all[i]->blocking) {
                sim_event *e = sim_event_create();
                record_raw(e, all[i]);
                wait_raw(l, e);
                event_unref(e); /* the two ops keep it while they need it */
            }
    } else {
        sim_event *e = sim_event_create();
        record_raw(e, l);
        wait_raw(s, e);
        event_unref(e);
    }
}

void sim_enqueue(sim_stream *s, void (*fn)(void *), void *arg)
{
    order_with_legacy(s);
    push(s, fn, arg);
}

void sim_event_record(sim_event *e, sim_stream *s)
{
    order_with_legacy(s);
    record_raw(e, s);
}

void sim_stream_wait_event(sim_stream *s, sim_event *e)
{
    wait_raw(s, e);
}

void sim_event_sync(sim_event *e)
{
    pthread_mutex_lock(&e->lock);
    uint64_t target = e->recorded;
    while (e->completed < target)
        pthread_cond_wait(&e->cond, &e->lock);
    pthread_mutex_unlock(&e->lock);
}

bool sim_event_done(sim_event *e)
{
    pthread_mutex_lock(&e->lock);
    bool done = e->completed >= e->recorded;
    pthread_mutex_unlock(&e->lock);
    return done;
}

void sim_stream_sync(sim_stream *s)
{
    pthread_mutex_lock(&s->lock);
    uint64_t target = s->queued;
    while (s->done < target)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

void sim_stream_destroy(sim_stream *s)
{
    /* Work already queued completes first, as with cudaStreamDestroy. */
    sim_stream_sync(s);
}

void sim_device_sync(void)
{
    pthread_mutex_lock(&streams_lock);
    sim_stream *all[256];
    int n = 0;
    for (sim_stream *t = streams; t && n < 256; t = t->next_stream)
        all[n++] = t;
    pthread_mutex_unlock(&streams_lock);
    for (int i = 0; i < n; i++)
        sim_stream_sync(all[i]);
}

/* ---- copies and fills ------------------------------------------------------------ */

typedef struct {
    void *dst;
    const void *src;
    size_t n;
    int value;
} transfer;

static void do_copy(void *arg)
{
    transfer *t = arg;
    memcpy(t->dst, t->src, t->n);
    free(t);
}

static void do_fill(void *arg)
{
    transfer *t = arg;
    memset(t->dst, t->value, t->n);
    free(t);
}

static void submit(sim_stream *s, void (*fn)(void *), transfer *t, bool sync)
{
    if (!sync) {
        sim_enqueue(s, fn, t);
        return;
    }
    sim_event *done = sim_event_create();
    sim_enqueue(s, fn, t);
    record_raw(done, s);
    sim_event_sync(done);
    event_unref(done);
}

void sim_memcpy(void *dst, const void *src, size_t n, sim_stream *s, bool sync)
{
    if (immediate()) {
        memcpy(dst, src, n);
        return;
    }
    transfer *t = malloc(sizeof(*t));
    *t = (transfer){dst, src, n, 0};
    submit(s, do_copy, t, sync);
}

void sim_memset(void *dst, int value, size_t n, sim_stream *s, bool sync)
{
    if (immediate()) {
        memset(dst, value, n);
        return;
    }
    transfer *t = malloc(sizeof(*t));
    *t = (transfer){dst, NULL, n, value};
    submit(s, do_fill, t, sync);
}

struct sim_semaphore {
    sim_event *e;
    bool timeline;
    _Atomic uint64_t count; /* a timeline's highest value signalled here */
};

int sim_semaphore_import(int fd, bool timeline, sim_semaphore **out)
{
    if (fcntl(fd, F_GETFD) < 0)
        return EBADF;
    sim_semaphore *sem = calloc(1, sizeof(*sem));
    *sem = (sim_semaphore){sim_event_create(), timeline, 0};
    *out = sem;
    close(fd); /* ownership passes to the runtime on success */
    return 0;
}

int sim_semaphores(void *const *sems, const void *params, size_t stride, unsigned n,
                   sim_stream *s, bool signal)
{
    if (n && (!sems || !params))
        return EINVAL;
    for (unsigned i = 0; i < n; i++)
        if (!sems[i])
            return EBADF;
    for (unsigned i = 0; i < n; i++) {
        sim_semaphore *sem = sems[i];
        uint64_t value;
        memcpy(&value, (const char *)params + i * stride, sizeof(value));
        if (signal) {
            sim_event_record(sem->e, s);
            uint64_t c = atomic_load(&sem->count);
            while (sem->timeline && value > c && !atomic_compare_exchange_weak(&sem->count, &c, value))
                ;
        } else if (!sem->timeline || atomic_load(&sem->count) >= value) {
            sim_stream_wait_event(s, sem->e);
        }
    }
    return 0;
}

void sim_semaphore_destroy(sim_semaphore *sem)
{
    sim_event_destroy(sem->e);
    free(sem);
}
