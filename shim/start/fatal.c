/*
 * fatal.c — the log kept when the program dies of a signal.
 *
 * Lines gather in the log's buffer (output/log.c) and are written when it
 * fills, every 100 ms, after each violation and at exit: a program that
 * dies of SIGSEGV (a deleter called in a library already unloaded, a read
 * of freed memory) would lose the last ones, the handoffs that explain the
 * crash.  So, for each fatal signal whose disposition is the default when
 * the shim starts, a handler writes the report as _exit does (init.c
 * hands it over: every lock only tried, async-signal-safe), puts the
 * default back and lets the signal end the process as it would have: a
 * fault happens again when the handler returns, a signal sent is raised
 * again.  A program that
 * installs its own handler later replaces this one, as it would replace the
 * default.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "start/start.h"

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
static void (*write_report)(void);

static void on_fatal(int sig, siginfo_t *info, void *context)
{
    (void)context;
    int saved = errno;
    if (getpid() == ds_pid()) /* else a vfork child: its parent's memory */
        write_report();
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    errno = saved;
    /* A fault (si_code > 0, from the kernel) comes again at the faulting
     * instruction; a signal sent (kill, raise, abort) must be sent again:
     * blocked while this handler runs, it ends the process as it returns. */
    if (!info || info->si_code <= 0)
        raise(sig);
}

void ds_fatal_install(void (*report)(void))
{
    write_report = report;
    for (size_t i = 0; i < DS_ARRAY_LEN(fatal_signals); i++) {
        struct sigaction old, act;
        if (sigaction(fatal_signals[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
            (old.sa_flags & SA_SIGINFO))
            continue; /* the program's own handler, or one inherited: left as it is */
        memset(&act, 0, sizeof(act));
        act.sa_sigaction = on_fatal;
        act.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&act.sa_mask);
        sigaction(fatal_signals[i], &act, NULL);
    }
}
