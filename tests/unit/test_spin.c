/* Unit tests of the registry's lock (ds_spin, shim/thread.c): mutual
 * exclusion under contention, a holder that sleeps (waiters reach the yield
 * and sleep stages), and the per-thread held count signal handlers rely on. */
#include <pthread.h>
#include <time.h>

#include "harness.h"

enum { THREADS = 4, ROUNDS = 200000 };

static ds_spin lock;
static unsigned long counter; /* guarded by `lock` only */

static void *add_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        ds_spin_lock(&lock);
        counter++;
        ds_spin_unlock(&lock);
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
    ds_spin_lock(&lock);
    atomic_store(&holder_in, true);
    struct timespec nap = {0, 30 * 1000 * 1000}; /* long enough for waiters to stop spinning */
    nanosleep(&nap, NULL);
    counter = 7;
    ds_spin_unlock(&lock);
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
    ds_spin_lock(&lock); /* returns only after the holder's write */
    assert_int_equal(counter, 7);
    ds_spin_unlock(&lock);
    assert_int_equal(pthread_join(holder, NULL), 0);
}

static void test_counts_as_held(void **state)
{
    (void)state;
    assert_false(ds_holds_lock());
    ds_spin_lock(&lock);
    assert_true(ds_holds_lock());
    ds_spin_unlock(&lock);
    assert_false(ds_holds_lock());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_excludes),
        cmocka_unit_test(test_waits_for_a_sleeping_holder),
        cmocka_unit_test(test_counts_as_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
