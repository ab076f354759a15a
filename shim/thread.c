/*
 * thread.c — the clock and per-thread identity used by every event.
 * All of it is async-signal-safe: the clock is the vDSO's, the thread id is
 * cached per thread and re-read after fork.
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

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
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    return t > load_ns ? t - load_ns : 0; /* the coarse clock lags by up to a tick */
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

void ds_thread_after_fork(void)
{
    atomic_store(&pid, (int)getpid());
    atomic_fetch_add_explicit(&fork_generation, 1, memory_order_relaxed);
}

static DS_TLS unsigned api_depth;

bool ds_api_enter(void)
{
    return api_depth++ == 0;
}

void ds_api_leave(void)
{
    if (api_depth)
        api_depth--;
}

/* Counted before the lock is taken and after it is given back, so a signal
 * arriving at any point while this thread holds (or waits for) a shim lock
 * sees a non-zero count. */
DS_TLS unsigned ds_locks_held;

void ds_lock(pthread_mutex_t *m)
{
    ds_locks_held++;
    pthread_mutex_lock(m);
}

void ds_unlock(pthread_mutex_t *m)
{
    pthread_mutex_unlock(m);
    ds_locks_held--;
}

void ds_fork_lock(pthread_mutex_t *m, ds_fork_phase phase)
{
    if (phase == DS_FORK_PREPARE) {
        ds_lock(m);
    } else if (phase == DS_FORK_PARENT) {
        ds_unlock(m);
    } else {
        pthread_mutex_init(m, NULL);
        ds_locks_held--;
    }
}

/* A pause in a spin loop: tells the CPU (and a hypervisor watching for
 * spinning guests) that this thread waits. */
static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* The lock was held: spin while the holder is likely running, then yield,
 * then sleep, so a holder that was descheduled (or is rebuilding a table of
 * a million records) gets the CPU back. */
void ds_spin_wait(ds_spin *l)
{
    int saved = errno; /* nanosleep may set it */
    for (unsigned tries = 0;; tries++) {
        if (!atomic_load_explicit(&l->held, memory_order_relaxed) &&
            !atomic_exchange_explicit(&l->held, true, memory_order_acquire)) {
            errno = saved;
            return;
        }
        if (tries < 64) {
            cpu_relax();
        } else if (tries < 1024) {
            sched_yield();
        } else {
            struct timespec nap = {0, 20000};
            nanosleep(&nap, NULL);
        }
    }
}

void ds_fork_spin(ds_spin *l, ds_fork_phase phase)
{
    if (phase == DS_FORK_PREPARE) {
        ds_spin_lock(l);
    } else if (phase == DS_FORK_PARENT) {
        ds_spin_unlock(l);
    } else {
        atomic_store(&l->held, false);
        ds_locks_held--;
    }
}
