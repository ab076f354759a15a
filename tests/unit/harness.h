/* Shared helpers of the unit tests: run the core against a temporary jsonl
 * log and read it back; capture stderr diagnostics; hold a lock on another
 * thread and ask whether work waited for it.  A test includes the
 * header of the layer it tests first: the helpers start that layer and
 * those below it, as start-up would, and nothing above (a test links only
 * those layers' objects, tests/tests.mk). */
#ifndef HARNESS_H
#define HARNESS_H

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/base.h"

#ifdef DS_OUTPUT_H
static char harness_log[64];

/* What start/init.c does at start-up, for the layers this test links. */
static inline void harness_start(char *const *env)
{
    ds_clock_start();
    ds_config_load(&ds_cfg, env);
    ds_context_init(env);
    ds_log_open(ds_cfg.log);
    ds_trace_open(ds_cfg.trace);
#ifdef DS_LEDGER_H
    ds_reg_init((size_t)ds_cfg.max_records);
    ds_violation_set_last_words(ds_summary_write);
#endif
}

/* (Re)initialises the shim with `extra` (NULL-ended; the first occurrence of
 * a variable wins, so these override) and jsonl to a fresh log. */
static inline void harness_init(const char *const *extra)
{
    static char log_var[128];
    const char *env[16];
    ds_log_flush(); /* the previous test's lines, before the log is emptied */
    int n = 0;
    for (; extra && *extra && n < 13; extra++)
        env[n++] = *extra;
    env[n++] = "DLSHIM_FORMAT=jsonl";
    if (!harness_log[0]) {
        strcpy(harness_log, "/tmp/dlshim-unit-XXXXXX");
        int fd = mkstemp(harness_log);
        assert_true(fd >= 0);
        close(fd);
    }
    int fd = open(harness_log, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    close(fd);
    snprintf(log_var, sizeof(log_var), "DLSHIM_LOG=%s", harness_log);
    env[n++] = log_var;
    env[n] = NULL;
    harness_start((char *const *)env);
}

/* The whole log so far (caller frees). */
static inline char *harness_read_log(void)
{
    ds_log_flush(); /* lines to a file are buffered (DLSHIM_LOG_BUFFER) */
    FILE *f = fopen(harness_log, "r");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)size + 1);
    assert_non_null(buf);
    size_t n = fread(buf, 1, (size_t)size, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

#endif /* DS_OUTPUT_H */

static inline int harness_count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* Runs fn with fd 2 redirected to a file; returns what was written. */
static inline char *harness_stderr_of(void (*fn)(void *), void *arg)
{
    char path[] = "/tmp/dlshim-unit-err-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    int saved = dup(2);
    dup2(fd, 2);
    fn(arg);
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    static char buf[1 << 16];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    unlink(path);
    buf[n > 0 ? n : 0] = '\0';
    return strdup(buf);
}

/* Whether work waits for a lock another thread holds: harness_hold starts a
 * thread that takes what `take` takes and keeps it until harness_let_go,
 * or for 5 s at most, so that work which waits for it ends late instead of
 * hanging, and harness_let_go says so. */
typedef struct {
    void (*take)(void *);
    void (*give)(void *);
    void *arg;
    pthread_t thread;
    atomic_bool held, let_go, timed_out;
} harness_holder;

static inline void *harness_holding(void *p)
{
    harness_holder *h = p;
    h->take(h->arg);
    atomic_store(&h->held, true);
    struct timespec nap = {0, 1000000};
    for (int ms = 0; ms < 5000 && !atomic_load(&h->let_go); ms++)
        nanosleep(&nap, NULL);
    atomic_store(&h->timed_out, !atomic_load(&h->let_go));
    h->give(h->arg);
    return NULL;
}

static inline void harness_hold(harness_holder *h)
{
    atomic_store(&h->held, false);
    atomic_store(&h->let_go, false);
    atomic_store(&h->timed_out, false);
    assert_int_equal(pthread_create(&h->thread, NULL, harness_holding, h), 0);
    while (!atomic_load(&h->held))
        sched_yield();
}

/* True: the work done since harness_hold waited for the holder. */
static inline bool harness_let_go(harness_holder *h)
{
    atomic_store(&h->let_go, true);
    assert_int_equal(pthread_join(h->thread, NULL), 0);
    return atomic_load(&h->timed_out);
}

static inline int harness_teardown(void **state)
{
    (void)state;
#ifdef DS_OUTPUT_H
    if (harness_log[0])
        unlink(harness_log);
#endif
    return 0;
}

#endif
