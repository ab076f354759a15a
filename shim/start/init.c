/*
 * init.c — start-up and shutdown.
 *
 * The shim initialises on whichever comes first: its constructor or the first
 * hooked call (another library's constructor may call in before ours ran).
 * One thread initialises; others wait for it (a few microseconds, once);
 * the initialising thread itself, and anything re-entering the shim while it
 * holds the registry lock, are passed through untouched.
 *
 * Secure-execution processes (setuid/setgid, AT_SECURE) never read the
 * environment and stay disabled: a preloaded library must not become a way
 * into a privileged program.
 */
#include <execinfo.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "start/start.h"

extern char **environ;

/* WAITING: loaded by dlshim.attach(), which starts it with its options
 * (ds_attach); until then nothing is tracked and nothing initialises. */
enum { UNINIT, INITIALISING, ACTIVE, DISABLED, WAITING };
static atomic_int state = UNINIT;
static atomic_bool finished;
static DS_TLS bool initialising_here;

/* fork(): every shim lock is taken before (locks.def, in order), so that no
 * table is half-updated by a thread that does not exist in the child; the
 * child then starts its own account. */
static void atfork_prepare(void)
{
    if (ds_locks_fork(DS_FORK_PREPARE))
        ds_log_before_fork();
}

static void atfork_parent(void)
{
    ds_locks_fork(DS_FORK_PARENT);
}

static void atfork_child(void)
{
    ds_locks_fork(DS_FORK_CHILD);
    ds_thread_after_fork();
    ds_reg_after_fork();
    ds_alloc_after_fork();
    ds_copies_after_fork();
    ds_sync_after_fork();
    ds_extmem_after_fork();
    ds_log_after_fork();
    ds_trace_after_fork();
    ds_stats_after_fork();
}

/* Dying of a signal: the report written as at _exit. */
static void finish_now(void)
{
    ds_finish(true);
}

/* The first process of a run (no DLSHIM_RUN in its environment) names the
 * run's start for the processes it starts, so that one run writes one log
 * (output/log.c).  Set in the environment while the program has not begun
 * (a constructor, or a hook another library's constructor called). */
static void join_run(void)
{
    bool first = ds_cfg.run < 0;
    if (first) {
        ds_cfg.run = (int64_t)ds_file_clock_ns();
        char value[24];
        ds_fmt(value, sizeof(value), "%lld", (long long)ds_cfg.run);
        setenv("DLSHIM_RUN", value, 1);
    }
    ds_log_set_run((uint64_t)ds_cfg.run, first, ds_cfg.log_append);
}

static int setup(char *const *envp)
{
    ds_clock_start();
    if (getauxval(AT_SECURE))
        return DISABLED;
    ds_families_announce();
    ds_config_load(&ds_cfg, envp);
    if (ds_cfg.disable)
        return DISABLED;
    ds_context_init(envp);
    join_run();
    ds_zstd_load();
    ds_log_open(ds_cfg.log);
    ds_trace_open(ds_cfg.trace);
    ds_reg_init((size_t)ds_cfg.max_records);
    ds_violation_set_last_words(ds_summary_write);
    if (ds_cfg.backtrace > 0) {
        /* The first backtrace() loads libgcc_s (dlopen, malloc): do it now,
         * not later inside a deleter or a signal handler. */
        void *frame[2];
        backtrace(frame, 2);
    }
    ds_families_install();
    static atomic_bool fork_handlers;
    if (!atomic_exchange(&fork_handlers, true)) {
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
        ds_fatal_install(finish_now);
    }
    if (ds_cfg.verbose)
        ds_config_dump(&ds_cfg);
    ds_families_started();
    return ACTIVE;
}

atomic_bool ds_tracking;

static void settle(int result)
{
    atomic_store_explicit(&state, result, memory_order_release);
    atomic_store_explicit(&ds_tracking, result == ACTIVE, memory_order_release);
}

bool ds_active_slow(void)
{
    int s = atomic_load_explicit(&state, memory_order_acquire);
    if (s == ACTIVE)
        return !ds_holds_lock();
    if (s == DISABLED || s == WAITING || initialising_here)
        return false;
    int expected = UNINIT;
    if (atomic_compare_exchange_strong(&state, &expected, INITIALISING)) {
        initialising_here = true;
        int result = setup(environ);
        initialising_here = false;
        settle(result);
        return result == ACTIVE;
    }
    while ((s = atomic_load_explicit(&state, memory_order_acquire)) == INITIALISING)
        sched_yield();
    return s == ACTIVE && !ds_holds_lock();
}

void ds_init_with_env(char *const *envp)
{
    atomic_store(&ds_tracking, false);
    atomic_store(&state, INITIALISING);
    settle(setup(envp));
}

void ds_finish(bool now)
{
    if (atomic_load(&state) != ACTIVE || atomic_exchange(&finished, true))
        return;
    /* Leaving without exit handlers, or exit() from a signal handler that
     * interrupted this thread inside the shim (which holds a lock the
     * summary would wait for): every lock only tried. */
    if (now || ds_holds_lock())
        atomic_store(&ds_leaving, true);
    /* Nothing of its own to report: a forked child that did no tracked work
     * (a fork+exec helper), or a process that leaves through _exit without
     * any (a helper the program ran, ending as helpers do). */
    if (!atomic_load(&ds_worked) && (now || ds_forked_child())) {
        ds_trace_close();
        return;
    }
    ds_alloc_report_leaks();
    ds_summary_write();
    ds_log_flush(); /* with DLSHIM_SUMMARY=0 nothing above did */
    ds_trace_close();
    if (!now && ds_cfg.exitcode >= 0 && ds_stats_violations() > 0) {
        /* Runs after the program's atexit handlers; stdio is flushed here
         * because _exit skips it. */
        fflush(NULL);
        _exit((int)ds_cfg.exitcode);
    }
}

/* The marker dlshim.attach() sets in the environment around its dlopen of
 * the library (not a DLSHIM_ name: no option, never passed on by it). */
#define ATTACH_MARKER "_DLSHIM_ATTACHING"

#define ATTACH_ENTRIES_MAX 64

static bool attached;

bool ds_attached(void)
{
    return attached;
}

int ds_attach(const char *options, char *why, size_t cap)
{
    char unused[8];
    if (!why || !cap) {
        why = unused;
        cap = sizeof(unused);
    }
    why[0] = '\0';
    /* Checked before anything starts: a bad keyword is the caller's error,
     * raised, not a warning and a default as in the environment. */
    char text[8192];
    size_t len = ds_fmt(text, sizeof(text), "%s", options ? options : "");
    if (len + 1 >= sizeof(text)) {
        ds_fmt(why, cap, "options longer than %zu bytes", sizeof(text) - 1);
        return -1;
    }
    char *entry[ATTACH_ENTRIES_MAX + 1];
    int n = 0;
    for (char *p = text; *p;) {
        char *end = p + strcspn(p, "\n");
        bool last = !*end;
        *end = '\0';
        if (*p) {
            if (n == ATTACH_ENTRIES_MAX) {
                ds_fmt(why, cap, "more than %d options", ATTACH_ENTRIES_MAX);
                return -1;
            }
            if (!ds_config_check(p, why, cap))
                return -1;
            entry[n++] = p;
        }
        if (last)
            break;
        p = end + 1;
    }
    int expected = WAITING;
    if (!atomic_compare_exchange_strong(&state, &expected, INITIALISING)) {
        expected = UNINIT; /* loaded without the marker: nothing started it yet */
        if (!atomic_compare_exchange_strong(&state, &expected, INITIALISING)) {
            while ((expected = atomic_load(&state)) == INITIALISING)
                sched_yield();
            return expected == ACTIVE ? 1 : 2;
        }
    }
    /* The keywords first: the first entry of a name wins (ds_config_load),
     * so they override the environment's. */
    int count = 0;
    for (char **e = environ; e && *e; e++)
        count++;
    char **envp = calloc((size_t)n + (size_t)count + 1, sizeof(*envp));
    if (!envp) {
        settle(DISABLED);
        ds_fmt(why, cap, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++)
        envp[i] = entry[i];
    for (int i = 0; i < count; i++)
        envp[n + i] = environ[i];
    attached = true;
    initialising_here = true;
    int result = setup(envp);
    initialising_here = false;
    settle(result);
    /* Start-up copies what it keeps of the environment (options, rank). */
    free(envp);
    return result == ACTIVE ? 0 : 2;
}

__attribute__((constructor)) static void ds_load(void)
{
    int expected = UNINIT;
    if (getenv(ATTACH_MARKER) && atomic_compare_exchange_strong(&state, &expected, WAITING))
        return;
    ds_active();
}

__attribute__((destructor)) static void ds_unload(void)
{
    ds_finish(false);
    /* no thread of the shim's may outlive its code */
    ds_log_stop_writer();
}
