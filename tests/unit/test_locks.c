/* Unit tests of the lock table (shim/base/lock.c, locks.def): the registry's spin
 * lock excludes under contention and waits for a holder that sleeps; every
 * lock counts as held while taken; fork() takes them all and the child gets
 * them fresh; the order check stops a lock taken out of order; a bounded try
 * gives up on a lock held elsewhere.  A sharded lock (REGISTRY): a shard
 * excludes its own holders only, the whole lock excludes every shard's, a
 * bounded try of the whole takes all shards or none, and a second shard
 * taken while one is held breaks the order. */
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>

#include "base/base.h"
#include "harness.h"

enum { THREADS = 4, ROUNDS = 200000 };

static unsigned long counter; /* guarded by the registry lock only */

static void *add_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        ds_lock_take(DS_LOCK_REGISTRY);
        counter++;
        ds_lock_give(DS_LOCK_REGISTRY);
    }
    return NULL;
}

static void test_excludes(void **state)
{
    (void)state;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, add_many, NULL), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(counter, (unsigned long)THREADS * ROUNDS);
}

static atomic_bool holder_in;

static void *hold_while_sleeping(void *arg)
{
    (void)arg;
    ds_lock_take(DS_LOCK_REGISTRY);
    atomic_store(&holder_in, true);
    struct timespec nap = {0, 30 * 1000 * 1000}; /* long enough for waiters to stop spinning */
    nanosleep(&nap, NULL);
    counter = 7;
    ds_lock_give(DS_LOCK_REGISTRY);
    return NULL;
}

static void test_waits_for_a_sleeping_holder(void **state)
{
    (void)state;
    counter = 0;
    pthread_t holder;
    assert_int_equal(pthread_create(&holder, NULL, hold_while_sleeping, NULL), 0);
    while (!atomic_load(&holder_in))
        sched_yield();
    ds_lock_take(DS_LOCK_REGISTRY); /* returns only after the holder's write */
    assert_int_equal(counter, 7);
    ds_lock_give(DS_LOCK_REGISTRY);
    assert_int_equal(pthread_join(holder, NULL), 0);
}

/* Threads on the same shard exclude each other; threads on other shards
 * never wait for them (each holds its own shard throughout). */
enum { SHARD_ROUNDS = 100000 };
static unsigned long per_shard[4]; /* [i]: guarded by REGISTRY's shard i % 2 */

static void *add_on_shard(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg, shard = i % 2;
    for (int r = 0; r < SHARD_ROUNDS; r++) {
        ds_lock_take_shard(DS_LOCK_REGISTRY, shard);
        assert_true(ds_holds(DS_LOCK_REGISTRY));
        per_shard[shard]++;
        ds_lock_give_shard(DS_LOCK_REGISTRY, shard);
    }
    assert_false(ds_holds_lock());
    return NULL;
}

static void *whole_lock_adds(void *arg)
{
    (void)arg;
    for (int r = 0; r < SHARD_ROUNDS / 10; r++) {
        ds_lock_take(DS_LOCK_REGISTRY); /* every shard: excludes both groups */
        per_shard[0]++;
        per_shard[1]++;
        ds_lock_give(DS_LOCK_REGISTRY);
    }
    return NULL;
}

static void test_shards_exclude_their_own_holders(void **state)
{
    (void)state;
    assert_int_equal(ds_lock_shards[DS_LOCK_REGISTRY], 64);
    pthread_t t[5];
    for (uintptr_t i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, add_on_shard, (void *)i), 0);
    assert_int_equal(pthread_create(&t[4], NULL, whole_lock_adds, NULL), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(per_shard[0], 2ul * SHARD_ROUNDS + SHARD_ROUNDS / 10);
    assert_int_equal(per_shard[1], 2ul * SHARD_ROUNDS + SHARD_ROUNDS / 10);
}

static atomic_bool shard_go;

static void *hold_last_shard_until_told(void *arg)
{
    (void)arg;
    ds_lock_take_shard(DS_LOCK_REGISTRY, 63);
    atomic_store(&holder_in, true);
    while (!atomic_load(&shard_go))
        sched_yield();
    ds_lock_give_shard(DS_LOCK_REGISTRY, 63);
    return NULL;
}

/* The summary at _exit tries the whole registry: with one shard held
 * elsewhere it gives up within its millisecond and holds no shard after
 * (another thread can take any other). */
static void test_try_takes_every_shard_or_none(void **state)
{
    (void)state;
    atomic_store(&holder_in, false);
    atomic_store(&shard_go, false);
    pthread_t holder;
    assert_int_equal(pthread_create(&holder, NULL, hold_last_shard_until_told, NULL), 0);
    while (!atomic_load(&holder_in))
        sched_yield();
    assert_false(ds_lock_try(DS_LOCK_REGISTRY, false));
    assert_false(ds_lock_try_now(DS_LOCK_REGISTRY, false));
    assert_false(ds_holds_lock());
    for (unsigned s = 0; s < 63; s++) /* none left taken by the failed tries */
        assert_false(atomic_load(ds_spin_of(DS_LOCK_REGISTRY, s)));
    atomic_store(&shard_go, true);
    assert_int_equal(pthread_join(holder, NULL), 0);
    assert_true(ds_lock_try(DS_LOCK_REGISTRY, false));
    for (unsigned s = 0; s < 64; s++)
        assert_true(atomic_load(ds_spin_of(DS_LOCK_REGISTRY, s)));
    ds_lock_give(DS_LOCK_REGISTRY);
    for (unsigned s = 0; s < 64; s++)
        assert_false(atomic_load(ds_spin_of(DS_LOCK_REGISTRY, s)));
    assert_false(ds_holds_lock());
}

static void test_every_lock_counts_as_held(void **state)
{
    (void)state;
    for (int id = 0; id < DS_LOCK_COUNT; id++) {
        assert_false(ds_holds_lock());
        ds_lock_take(id);
        assert_true(ds_holds_lock() && ds_holds(id));
        ds_lock_give(id);
    }
    assert_false(ds_holds_lock());
    ds_lock_read(DS_LOCK_MODULES);
    assert_true(ds_holds(DS_LOCK_MODULES));
    ds_lock_give(DS_LOCK_MODULES);
    assert_false(ds_holds_lock());
}

static void *hold_names_until_told(void *arg)
{
    ds_lock_take(DS_LOCK_NAMES);
    atomic_store(&holder_in, true);
    while (!atomic_load((atomic_bool *)arg))
        sched_yield();
    ds_lock_give(DS_LOCK_NAMES);
    return NULL;
}

static void test_try_gives_up_on_a_lock_held_elsewhere(void **state)
{
    (void)state;
    static atomic_bool release;
    atomic_store(&holder_in, false);
    pthread_t holder;
    assert_int_equal(pthread_create(&holder, NULL, hold_names_until_told, &release), 0);
    while (!atomic_load(&holder_in))
        sched_yield();
    assert_false(ds_lock_try(DS_LOCK_NAMES, false));
    assert_false(ds_lock_try_now(DS_LOCK_NAMES, false));
    assert_false(ds_holds_lock()); /* a failed try holds nothing */
    atomic_store(&release, true);
    assert_int_equal(pthread_join(holder, NULL), 0);
    assert_true(ds_lock_try(DS_LOCK_NAMES, false));
    assert_false(ds_lock_try(DS_LOCK_NAMES, false)); /* this thread's own: never */
    ds_lock_give(DS_LOCK_NAMES);
}

/* The one-attempt try takes a lock out of order (a thread inside the shim
 * reading the module table), and never one this thread holds. */
static void test_try_now_ignores_the_order(void **state)
{
    (void)state;
    ds_lock_take(DS_LOCK_NAMES);
    assert_true(ds_lock_try_now(DS_LOCK_MODULES, true)); /* above NAMES: no abort */
    assert_true(ds_holds(DS_LOCK_MODULES));
    ds_lock_give(DS_LOCK_MODULES);
    assert_false(ds_lock_try_now(DS_LOCK_NAMES, false));
    assert_true(ds_holds(DS_LOCK_NAMES)); /* still this thread's */
    ds_lock_give(DS_LOCK_NAMES);
    assert_false(ds_holds_lock());
}

static atomic_bool forked;

/* Holds NAMES until told, then stays alive until the fork is done: a thread
 * that ended unjoined before the fork would be a leak ThreadSanitizer
 * reports in the child, as the prepare handler's time decides. */
static void *hold_names_across_fork(void *arg)
{
    hold_names_until_told(arg);
    while (!atomic_load(&forked))
        sched_yield();
    return NULL;
}

/* The fork handlers start-up installs (shim/start/init.c), lock by lock. */
static void fork_prepare(void)
{
    ds_locks_fork(DS_FORK_PREPARE);
}
static void fork_parent(void)
{
    ds_locks_fork(DS_FORK_PARENT);
}
static void fork_child(void)
{
    ds_locks_fork(DS_FORK_CHILD);
}

/* A lock another thread holds when this one forks is free in the child (the
 * prepare handler waited for it), and every lock works there. */
static void test_fork_gives_the_child_every_lock(void **state)
{
    (void)state;
    static atomic_bool release;
    atomic_store(&holder_in, false);
    atomic_store(&forked, false);
    pthread_t holder;
    assert_int_equal(pthread_create(&holder, NULL, hold_names_across_fork, &release), 0);
    while (!atomic_load(&holder_in))
        sched_yield();
    atomic_store(&release, true); /* prepare waits for the holder to give it back */
    pid_t pid = fork();
    if (pid == 0) {
        bool ok = !ds_holds_lock();
        for (int id = 0; id < DS_LOCK_COUNT && ok; id++) {
            ok = ds_lock_try(id, false);
            ds_lock_give(id);
        }
        _exit(ok ? 0 : 1);
    }
    atomic_store(&forked, true);
    assert_false(ds_holds_lock());
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(pthread_join(holder, NULL), 0);
}

/* Whether `take_then_check` stops its process (a child: its diagnostic
 * goes to /dev/null). */
static bool aborts(void (*take_then_check)(void))
{
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        take_then_check();
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static void names_then_registry(void)
{
    ds_lock_take(DS_LOCK_NAMES);
    ds_lock_order_check(DS_LOCK_REGISTRY);
}

/* Taking an outer lock while holding an inner one is the order that can
 * deadlock against another thread: the check stops the process. */
static void test_order_check_aborts(void **state)
{
    (void)state;
    assert_true(aborts(names_then_registry));
}

static void shard_then_shard(void)
{
    ds_lock_take_shard(DS_LOCK_REGISTRY, 3);
    ds_lock_order_check(DS_LOCK_REGISTRY); /* what taking shard 4 checks first */
}

/* Two shards of one lock held together have no order between them (two
 * threads could take them crosswise): a thread holding one shard that
 * takes another is stopped as any lock taken out of order. */
static void test_second_shard_aborts(void **state)
{
    (void)state;
    assert_true(aborts(shard_then_shard));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_excludes),
        cmocka_unit_test(test_waits_for_a_sleeping_holder),
        cmocka_unit_test(test_every_lock_counts_as_held),
        cmocka_unit_test(test_try_gives_up_on_a_lock_held_elsewhere),
        cmocka_unit_test(test_try_now_ignores_the_order),
        cmocka_unit_test(test_fork_gives_the_child_every_lock),
        cmocka_unit_test(test_order_check_aborts),
        cmocka_unit_test(test_shards_exclude_their_own_holders),
        cmocka_unit_test(test_try_takes_every_shard_or_none),
        cmocka_unit_test(test_second_shard_aborts),
    };
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
