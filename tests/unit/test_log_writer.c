/* Unit tests of the log's blocks with the writer thread (shim/output/
 * log_flush.c, log_writer.c), driven step by step without the thread: the
 * test plays the writer.  A slot has three blocks, so a thread keeps
 * filling while one block waits for the writer and another is being
 * written; a thread that must write in place while the writer is busy
 * sleeps on a futex (not in the spin lock's naps) until it is done, and
 * writes them itself where the writer has not begun. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>

#include "output/log.h"
#include "harness.h"

static int fd_of_log(void)
{
    return atomic_load(&ds_log_fd);
}

/* LOG held: lines first..first+n-1 into this thread's slot. */
static void add_lines(int first, int n)
{
    for (int i = first; i < first + n; i++) {
        char line[64];
        int len = snprintf(line, sizeof(line), "{\"n\":%05d,\"pad\":\"xxxxxxxxxxxxxxxxxxxx\"}\n", i);
        assert_true(ds_log_add_own(line, (size_t)len, (uint64_t)i + 1, true));
    }
}

/* LOG held: every slot's lines taken into their held blocks. */
static void take(void)
{
    ds_lock_take(DS_LOCK_LOG_LINES);
    assert_true(ds_log_take_blocks(fd_of_log()));
    ds_lock_give(DS_LOCK_LOG_LINES);
}

/* The numbers of the lines the file holds, in its order, -1 after them. */
static void file_lines(int *out, int max)
{
    FILE *f = fopen(harness_log, "r");
    assert_non_null(f);
    char line[128];
    int n = 0;
    while (n < max - 1 && fgets(line, sizeof(line), f))
        assert_int_equal(sscanf(line, "{\"n\":%d", &out[n++]), 1);
    out[n] = -1;
    fclose(f);
}

static void check_file(int count)
{
    int got[64];
    file_lines(got, 64);
    for (int i = 0; i < count; i++)
        assert_int_equal(got[i], i);
    assert_int_equal(got[count], -1);
}

static _Atomic long waiter_tid;
static atomic_bool waiter_done;

/* A flush that must be done in place (a violation, the summary): under
 * LOG, it waits for the writer's blocks. */
static void *flush_in_place(void *unused)
{
    (void)unused;
    atomic_store(&waiter_tid, (long)syscall(SYS_gettid));
    ds_lock_take(DS_LOCK_LOG);
    ds_log_flush_locked(fd_of_log());
    ds_lock_give(DS_LOCK_LOG);
    atomic_store(&waiter_done, true);
    return NULL;
}

/* The system call a thread of this process is in (-1: running). */
static long syscall_of(long tid)
{
    char path[64], text[64] = {0};
    snprintf(path, sizeof(path), "/proc/self/task/%ld/syscall", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -2;
    long nr = -2;
    if (fgets(text, sizeof(text), f))
        nr = strcmp(text, "running\n") == 0 ? -1 : strtol(text, NULL, 10);
    fclose(f);
    return nr;
}

static void test_three_blocks_and_a_futex_wait(void **state)
{
    (void)state;
    const char *env[] = {"DLSHIM_LOG_WRITER=thread", "DLSHIM_LOG_BUFFER=4096", NULL};
    harness_init(env);
    int fd = fd_of_log();
    assert_true(fd > 2);

    ds_lock_take(DS_LOCK_LOG);
    add_lines(0, 10);
    take();
    assert_true(ds_log_give_out(fd, false)); /* to the writer, which is now busy */
    add_lines(10, 10);
    take();
    /* the writer busy: this hand-over waits in the held blocks */
    assert_false(ds_log_give_out(fd, false));
    assert_true(ds_log_held_waiting());
    /* and the thread goes on filling: its slot's third block */
    add_lines(20, 10);
    ds_lock_give(DS_LOCK_LOG);
    check_file(0); /* nothing written yet */

    /* The writer begins: a flush in place now waits for it, asleep on a
     * futex. */
    assert_true(ds_log_claim_given());
    atomic_store(&waiter_done, false);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, flush_in_place, NULL), 0);
    long nr = -2;
    for (int i = 0; i < 2000 && nr != SYS_futex; i++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        long tid = atomic_load(&waiter_tid);
        nr = tid ? syscall_of(tid) : -2;
    }
    assert_int_equal(nr, SYS_futex);
    assert_false(atomic_load(&waiter_done));
    check_file(0);

    /* The writer writes what it was given; the flush then writes the rest
     * in place, after it, in order. */
    ds_log_write_claimed();
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_true(atomic_load(&waiter_done));
    check_file(30);
}

/* A writer that has not begun (not given a core) is not waited for: the
 * thread that cannot wait writes what it was given itself, then its own,
 * in order; the writer then finds nothing to claim. */
static void test_a_writer_not_begun_is_not_waited_for(void **state)
{
    (void)state;
    const char *env[] = {"DLSHIM_LOG_WRITER=thread", "DLSHIM_LOG_BUFFER=4096", NULL};
    harness_init(env);
    int fd = fd_of_log();
    ds_lock_take(DS_LOCK_LOG);
    add_lines(0, 10);
    take();
    assert_true(ds_log_give_out(fd, false));
    add_lines(10, 10);
    take();
    assert_false(ds_log_give_out(fd, false));
    add_lines(20, 10);
    assert_true(ds_log_flush_locked(fd));
    ds_lock_give(DS_LOCK_LOG);
    assert_false(ds_log_claim_given());
    check_file(30);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_blocks_and_a_futex_wait),
        cmocka_unit_test(test_a_writer_not_begun_is_not_waited_for),
    };
    return cmocka_run_group_tests(tests, NULL, harness_teardown);
}
