/*
 * thread.c — the clock and per-thread identity used by every event.
 * All of it is async-signal-safe: the clock is the vDSO's, the thread id is
 * cached per thread and re-read after fork.
 */
#include <errno.h>
#include <stdatomic.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

static uint64_t load_ns;
static atomic_uint fork_generation;
static atomic_int pid; /* getpid() is a real syscall since glibc 2.25 */

typedef struct {
    long tid;
    unsigned generation;
} tid_cache;

static DS_TLS tid_cache cached;

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ds_ns_of(ts);
}

void ds_clock_start(void)
{
    if (load_ns == 0)
        load_ns = monotonic_ns();
    atomic_store(&pid, (int)getpid());
}

int ds_pid(void)
{
    return atomic_load_explicit(&pid, memory_order_relaxed);
}

uint64_t ds_clock_origin_ns(void)
{
    return load_ns;
}

uint64_t ds_now_ns(void)
{
    return monotonic_ns() - load_ns;
}

uint64_t ds_now_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    uint64_t t = ds_ns_of(ts);
    return t > load_ns ? t - load_ns : 0; /* the coarse clock lags by up to a tick */
}

uint64_t ds_file_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return ds_ns_of(ts);
}

void ds_futex_wait(_Atomic uint32_t *word, uint32_t seen, uint64_t timeout_ns)
{
    struct timespec limit = {(time_t)(timeout_ns / 1000000000u), (long)(timeout_ns % 1000000000u)};
    int saved = errno;
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, timeout_ns ? &limit : NULL, NULL, 0);
    errno = saved;
}

void ds_futex_wake(_Atomic uint32_t *word, int n)
{
    int saved = errno;
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
    errno = saved;
}

long ds_tid(void)
{
    /* generation + 1 so that a zeroed cache never matches. */
    unsigned gen = atomic_load_explicit(&fork_generation, memory_order_relaxed) + 1;
    if (cached.generation != gen) {
        cached.tid = (long)syscall(SYS_gettid);
        cached.generation = gen;
    }
    return cached.tid;
}

bool ds_forked_child(void)
{
    return atomic_load_explicit(&fork_generation, memory_order_relaxed) != 0;
}

void ds_thread_after_fork(void)
{
    atomic_store(&pid, (int)getpid());
    atomic_fetch_add_explicit(&fork_generation, 1, memory_order_relaxed);
}

/* Device API calls this thread is inside (base.h's ds_api_enter). */
DS_TLS unsigned ds_api_depth;
