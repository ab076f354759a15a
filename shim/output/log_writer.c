/*
 * log_writer.c — the writer thread (DLSHIM_LOG_WRITER=thread).
 *
 * A thread whose block filled (or aged) takes every slot's lines as a flush
 * does, a pointer swap under LOG, and hands the held blocks to the writer:
 * under LOG they become each slot's third block, `out`, which the writer
 * merges and writes without LOG while the threads go on filling their
 * blocks and handing them over (log_flush.c): the write(2), the merge and
 * the compression leave the thread that made the events.  No queue: one
 * hand-over waits in the held blocks while the writer writes the one
 * before; a thread that fills its block before the writer took that one
 * sleeps on a futex until it has.  Flushes that must be done before
 * something (a violation, the summary, exit, _exit, a fatal signal, fork,
 * a reopen) wait for the writer the same way, then write in place what is
 * held, then the blocks being filled.  The writer sleeps on a futex, the
 * count of hand-overs; it is started at the first
 * hand-over of a process (never in a forked child, which writes in place),
 * from outside every shim lock, with every signal blocked (the program's
 * handlers never run on it), and stopped and joined by the library's
 * destructor.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "log.h"

enum { WRITER_NONE, WRITER_STARTING, WRITER_RUNNING, WRITER_OFF };
static atomic_int writer_state;
static _Atomic uint32_t writer_work;  /* futex word: hand-overs made */
static atomic_bool writer_stop;
static atomic_bool writer_start_owed; /* a hand-over found no writer yet */
static atomic_bool writer_wake_owed;  /* set under LOG, acted on after it */
static pthread_t writer_thread;

static bool writer_wanted(void)
{
    return ds_cfg.log_writer == DS_LOG_WRITER_THREAD;
}

static void *writer_main(void *unused)
{
    (void)unused;
    prctl(PR_SET_NAME, (unsigned long)"dlshim-log", 0, 0, 0);
    unsigned tries = 0;
    for (;;) {
        uint32_t work = atomic_load(&writer_work);
        if (ds_log_claim_given())
            ds_log_write_claimed(); /* without LOG: the threads fill and hand over meanwhile */
        if (atomic_load(&writer_stop))
            break;
        if (ds_log_held_waiting()) {
            /* Handed over while it wrote: taken now.  LOG is only tried,
             * since its holder may be waiting for the writer (given what
             * was held meanwhile, at the loop's top).  Leaving: the thread
             * that leaves writes everything itself. */
            if (!ds_lock_try_now(DS_LOCK_LOG, false)) {
                if (atomic_load(&ds_leaving))
                    break;
                struct timespec nap = {0, 20000};
                if (++tries < 1024)
                    sched_yield();
                else
                    nanosleep(&nap, NULL);
                continue;
            }
            tries = 0;
            int fd = atomic_load_explicit(&ds_log_fd, memory_order_relaxed);
            if (fd >= 0 && ds_log_buffered)
                ds_log_give_out(fd, false);
            ds_lock_give(DS_LOCK_LOG);
            continue;
        }
        ds_futex_wait(&writer_work, work, 0);
    }
    return NULL;
}

/* The writer told to end, and joined where that cannot wait forever: a
 * thread inside the shim, or leaving, might hold the LOG it waits for
 * (then the process is ending, and the writer with it). */
static void writer_halt(void)
{
    atomic_store(&writer_stop, true);
    atomic_fetch_add(&writer_work, 1);
    ds_futex_wake(&writer_work, 1);
    if (!ds_holds_lock() && !atomic_load(&ds_leaving))
        pthread_join(writer_thread, NULL);
}

/* Outside every shim lock (pthread_create allocates): the writer started
 * when a hand-over asked for it.  Its signal mask is inherited: all
 * blocked, so that no signal meant for the program is delivered to it. */
void ds_log_writer_start_if_owed(void)
{
    /* Leaving (_exit, a fatal signal: maybe in a handler) starts none: what
     * is left is written in place. */
    if (!atomic_load_explicit(&writer_start_owed, memory_order_relaxed) || ds_holds_lock() ||
        atomic_load_explicit(&ds_leaving, memory_order_relaxed))
        return;
    int none = WRITER_NONE;
    if (!atomic_compare_exchange_strong(&writer_state, &none, WRITER_STARTING))
        return;
    atomic_store(&writer_start_owed, false);
    int saved = errno;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    atomic_store(&writer_stop, false);
    int err = pthread_create(&writer_thread, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    int starting = WRITER_STARTING;
    if (err != 0)
        atomic_store(&writer_state, WRITER_OFF);
    else if (!atomic_compare_exchange_strong(&writer_state, &starting, WRITER_RUNNING))
        writer_halt(); /* stopped as it started (the library's destructor) */
    errno = saved;
}

void ds_log_writer_wake_if_owed(void)
{
    if (atomic_load_explicit(&writer_wake_owed, memory_order_relaxed) &&
        atomic_exchange(&writer_wake_owed, false))
        ds_futex_wake(&writer_work, 1);
}

bool ds_log_hand_over_locked(int fd)
{
    if (!writer_wanted())
        return ds_log_flush_locked(fd);
    if (atomic_load(&writer_state) != WRITER_RUNNING) {
        if (atomic_load_explicit(&writer_state, memory_order_relaxed) == WRITER_NONE)
            atomic_store_explicit(&writer_start_owed, true, memory_order_relaxed);
        return ds_log_flush_locked(fd);
    }
    /* Three blocks a slot: the one filling, the one handed over, the one
     * the writer writes.  The last hand-over not yet taken by the writer
     * (still busy with the one before): it is waited for, on a futex, and
     * given that one, so that nothing is written ahead of it. */
    if (!ds_log_give_out(fd, true))
        return false; /* leaving, and the writer does not finish */
    if (!ds_lock_take_bounded(DS_LOCK_LOG_LINES))
        return false;
    bool fits = ds_log_take_blocks(fd);
    ds_lock_give(DS_LOCK_LOG_LINES);
    ds_log_give_out(fd, false); /* now if it is idle, else as it finishes */
    atomic_fetch_add(&writer_work, 1);
    atomic_store_explicit(&writer_wake_owed, true, memory_order_relaxed);
    return fits;
}

bool ds_log_writer_stop(void)
{
    /* STARTING: the thread starting it halts it (ds_log_writer_start_if_owed) */
    if (atomic_exchange(&writer_state, WRITER_OFF) != WRITER_RUNNING)
        return false;
    writer_halt();
    return true;
}

/* The parent's writer is not here, and none is started: a child of a
 * process with threads may only call what is async-signal-safe until it
 * execs (pthread_create is not; ThreadSanitizer kills such a child).  Its
 * blocks are written in place. */
void ds_log_writer_after_fork(void)
{
    atomic_store(&writer_state, WRITER_OFF);
    atomic_store(&writer_work, 0);
    atomic_store(&writer_stop, false);
    atomic_store(&writer_start_owed, false);
    atomic_store(&writer_wake_owed, false);
}
