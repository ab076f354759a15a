/*
 * exit.c — leaving without exit handlers.
 *
 * Wraps, through every module's GOT: _exit, _Exit.
 * A process that leaves this way (Python's os._exit, the usual end of a
 * multiprocessing or DataLoader worker) skips the shim's destructor, so the
 * log lines still buffered (DLSHIM_LOG_BUFFER) are written here first.
 * Nothing else is done: no summary, which the program chose to skip along
 * with its own handlers.
 * Leaves out: the exit_group system call made directly, and _exit called
 * inside libc (posix_spawn's child), which no GOT slot reaches.
 */
#include <unistd.h>

#include "internal.h"

static void (*real_exit)(int);
static void (*real_Exit)(int);

static void wrap__exit(int status)
{
    ds_log_flush();
    DS_REAL(wrap__exit, real_exit, "_exit")(status);
    __builtin_unreachable();
}

static void wrap__Exit(int status)
{
    ds_log_flush();
    DS_REAL(wrap__Exit, real_Exit, "_Exit")(status);
    __builtin_unreachable();
}

static const ds_got_hook hooks[] = {
    {"_exit", (void *)wrap__exit, (void **)&real_exit, NULL},
    {"_Exit", (void *)wrap__Exit, (void **)&real_Exit, NULL},
};

void ds_exit_install(void)
{
    ds_got_hooks_add(hooks, DS_ARRAY_LEN(hooks));
}
