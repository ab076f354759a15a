/*
 * lock.c — every lock the shim owns, declared once in locks.def.
 *
 * One array of lock cells, indexed by the table's ids, so that what fork()
 * must do is a loop and what a thread holds is a bit mask:
 *   - taking and giving back (the spin lock's fast path is inline in
 *     base.h: it is taken on every handoff);
 *   - the order: a thread takes only locks below every one it holds;
 *     DS_DEBUG_LOCKS builds check it on every take;
 *   - fork: all taken in order before, given back in the parent, made fresh
 *     in the child (a lock another thread held at fork() would stay held in
 *     the child, over data that thread left half-updated);
 *   - a bounded try, for the summary written at _exit, which must never
 *     wait for a thread that is about to vanish.
 * A sharded spin lock (SPIN16, SPIN64) is a row of cells; each of the above
 * treats the row as the lock: one bit held, one place in the order, taken
 * whole in shard order (fork, readers of every shard), tried all or none.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "base/base.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

#define DS_CELL_SPIN {.mutex = PTHREAD_MUTEX_INITIALIZER} /* unused: ds_spin_cells */
#define DS_CELL_SPIN16 DS_CELL_SPIN
#define DS_CELL_SPIN64 DS_CELL_SPIN
#define DS_CELL_MUTEX {.mutex = PTHREAD_MUTEX_INITIALIZER}
#define DS_CELL_RW {.rw = PTHREAD_RWLOCK_INITIALIZER}
ds_lock_cell ds_lock_cells[DS_LOCK_COUNT] = {
#define DS_LOCK(ID, kind, what) [DS_LOCK_##ID] = DS_CELL_##kind,
#include "locks.def"
#undef DS_LOCK
};
ds_spin_cell ds_spin_cells[DS_SPIN_CELLS]; /* all free */

static const char *const lock_names[DS_LOCK_COUNT] = {
#define DS_LOCK(ID, kind, what) [DS_LOCK_##ID] = #ID,
#include "locks.def"
#undef DS_LOCK
};

DS_TLS uint32_t ds_locks_held;

void ds_lock_order_check(int id)
{
    uint32_t below_or_same = ds_locks_held & ~((1u << id) - 1);
    if (!below_or_same)
        return;
    int held = __builtin_ctz(below_or_same);
    ds_diag("lock order broken: %s taken while holding %s (shim/base/locks.def)", lock_names[id],
            lock_names[held]);
    abort();
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

/* The spin lock was held: spin while the holder is likely running, then
 * yield, then sleep, so a holder that was descheduled (or is rebuilding a
 * table of a million records) gets the CPU back. */
void ds_spin_wait(atomic_bool *held)
{
    int saved = errno; /* nanosleep may set it */
    for (unsigned tries = 0;; tries++) {
        if (!atomic_load_explicit(held, memory_order_relaxed) &&
            !atomic_exchange_explicit(held, true, memory_order_acquire)) {
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

/* A sharded spin lock taken whole: every shard, in order (two threads
 * doing so meet at the first), for what reads or rebuilds all of its data
 * (the summary, fork). */
void ds_lock_slow_take(int id, bool read)
{
    ds_lock_cell *c = &ds_lock_cells[id];
    if (ds_lock_kind[id] == DS_KIND_SPIN) {
        for (unsigned s = 0; s < ds_lock_shards[id]; s++)
            if (atomic_exchange_explicit(ds_spin_of(id, s), true, memory_order_acquire))
                ds_spin_wait(ds_spin_of(id, s));
    } else if (ds_lock_kind[id] == DS_KIND_MUTEX) {
        pthread_mutex_lock(&c->mutex);
    } else if (read) {
        pthread_rwlock_rdlock(&c->rw);
    } else {
        pthread_rwlock_wrlock(&c->rw);
    }
}

void ds_lock_slow_give(int id)
{
    ds_lock_cell *c = &ds_lock_cells[id];
    if (ds_lock_kind[id] == DS_KIND_SPIN) {
        for (unsigned s = ds_lock_shards[id]; s-- > 0;)
            atomic_store_explicit(ds_spin_of(id, s), false, memory_order_release);
    } else if (ds_lock_kind[id] == DS_KIND_MUTEX) {
        pthread_mutex_unlock(&c->mutex);
    } else {
        pthread_rwlock_unlock(&c->rw);
    }
}

static bool try_spin(atomic_bool *held)
{
    return !atomic_load_explicit(held, memory_order_relaxed) &&
           !atomic_exchange_explicit(held, true, memory_order_acquire);
}

/* One attempt, without waiting.  A sharded lock: every shard or none (the
 * shards taken are given back at the first one held elsewhere). */
static bool try_once(int id, bool read)
{
    ds_lock_cell *c = &ds_lock_cells[id];
    switch (ds_lock_kind[id]) {
    case DS_KIND_SPIN:
        for (unsigned s = 0; s < ds_lock_shards[id]; s++) {
            if (!try_spin(ds_spin_of(id, s))) {
                while (s-- > 0)
                    atomic_store_explicit(ds_spin_of(id, s), false, memory_order_release);
                return false;
            }
        }
        return true;
    case DS_KIND_MUTEX:
        return pthread_mutex_trylock(&c->mutex) == 0;
    default:
        return (read ? pthread_rwlock_tryrdlock(&c->rw) : pthread_rwlock_trywrlock(&c->rw)) == 0;
    }
}

bool ds_lock_try_now(int id, bool read)
{
    if (ds_locks_held & (1u << id))
        return false;
    int saved = errno;
    ds_locks_held |= 1u << id;
    bool took = try_once(id, read);
    if (!took)
        ds_locks_held &= ~(1u << id);
    errno = saved;
    return took;
}

bool ds_lock_try(int id, bool read)
{
    if (ds_locks_held & (1u << id))
        return false; /* this thread holds it: interrupted inside the shim */
    int saved = errno;
    ds_locks_held |= 1u << id;
    /* About a millisecond of tries: a section under any shim lock is
     * shorter, unless its thread was stopped for good (it called _exit's
     * sibling, or was killed) — then the caller does without. */
    for (int tries = 0; tries < 1000; tries++) {
        if (try_once(id, read)) {
            errno = saved;
            return true;
        }
        if (tries < 64)
            cpu_relax();
        else
            sched_yield();
    }
    ds_locks_held &= ~(1u << id);
    errno = saved;
    return false;
}

atomic_bool ds_leaving;

/* ThreadSanitizer models a lock by its address, and a fresh initialisation
 * does not tell it that the lock prepare took is free in the child: it is
 * told so here, as the release it would have seen. */
#if defined(__SANITIZE_THREAD__)
static void forget_held(void *lock)
{
    __tsan_mutex_pre_unlock(lock, 0);
    __tsan_mutex_post_unlock(lock, 0);
}
#else
static void forget_held(void *lock)
{
    (void)lock;
}
#endif

/* Whether prepare took the locks: a thread that forks while it holds one
 * (fork from a signal handler that interrupted the shim) would wait for
 * itself, so then none is taken, and the child makes them all fresh. */
static bool fork_took;

bool ds_locks_fork(ds_fork_phase phase)
{
    if (phase == DS_FORK_PREPARE) {
        fork_took = !ds_holds_lock();
        if (fork_took)
            for (int id = 0; id < DS_LOCK_COUNT; id++)
                ds_lock_take(id);
        return fork_took;
    } else if (phase == DS_FORK_PARENT) {
        if (fork_took)
            for (int id = DS_LOCK_COUNT - 1; id >= 0; id--)
                ds_lock_give(id);
    } else {
        /* Made fresh rather than given back: glibc's RW lock knows its
         * writer by thread id, which the child's one thread no longer has. */
        for (int cell = 0; cell < DS_SPIN_CELLS; cell++)
            atomic_store(&ds_spin_cells[cell].held, false);
        for (int id = 0; id < DS_LOCK_COUNT; id++) {
            ds_lock_cell *c = &ds_lock_cells[id];
            if (ds_lock_kind[id] == DS_KIND_SPIN) {
                continue;
            } else if (ds_lock_kind[id] == DS_KIND_MUTEX) {
                if (fork_took)
                    forget_held(&c->mutex);
                pthread_mutex_init(&c->mutex, NULL);
            } else {
                if (fork_took)
                    forget_held(&c->rw);
                pthread_rwlock_init(&c->rw, NULL);
            }
        }
        ds_locks_held = 0;
    }
    return true;
}
