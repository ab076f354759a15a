/*
 * exit.c — leaving without exit handlers.
 *
 * Wraps, through every module's GOT: _exit, _Exit.
 * A process that leaves this way (Python's os._exit, the usual end of a
 * multiprocessing or DataLoader worker) skips the shim's destructor, so its
 * report is written here: the leaks, the summary with the shares it still
 * holds, and the log lines still buffered — as valgrind and heaptrack do.
 * Async-signal-safe (_exit may be called from a handler): every shim lock is
 * only tried, and what a lock held elsewhere guards is left out (the summary
 * says `partial`).  A forked child that did nothing the shim tracks writes
 * nothing; a vfork child, which shares its parent's memory, touches nothing.
 * DLSHIM_EXITCODE does not apply: the program chose its status.
 * Leaves out: the exit_group system call made directly, and _exit called
 * inside libc (posix_spawn's child), which no GOT slot reaches.
 */
#include <errno.h>
#include <unistd.h>

#include "hooks.h"

static void (*real_exit)(int);
static void (*real_Exit)(int);

static void report(void)
{
    int saved = errno;
    if (getpid() == ds_pid()) /* else a vfork child: its parent's memory */
        ds_finish(true);
    errno = saved;
}

static void wrap__exit(int status)
{
    report();
    DS_REAL(wrap__exit, real_exit, "_exit")(status);
    __builtin_unreachable();
}

static void wrap__Exit(int status)
{
    report();
    DS_REAL(wrap__Exit, real_Exit, "_Exit")(status);
    __builtin_unreachable();
}

static const ds_got_hook hooks[] = {
    {"_exit", (void *)wrap__exit, (void **)&real_exit, NULL},
    {"_Exit", (void *)wrap__Exit, (void **)&real_Exit, NULL},
};

static void install(void)
{
    ds_got_hooks_add(hooks, DS_ARRAY_LEN(hooks));
}

DS_FAMILY(exit, .order = DS_ORDER_OTHER, .install = install);
