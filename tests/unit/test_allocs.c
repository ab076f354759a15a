/* Unit tests of shim/ledger/allocs.c: the allocation index (range lookup, removal,
 * reuse of a base) at scale and across sizes, shares and the free policy. */
#include <time.h>

#include "harness.h"

#define N 100000
#define STRIDE 4096u

static uintptr_t base_of(uint32_t i)
{
    return 0x100000000ull + (uintptr_t)i * STRIDE;
}

/* A fake device API (a hook family would describe a real runtime so). */
static int deferred_frees;
static void count_release(uintptr_t base, int kind)
{
    (void)base;
    (void)kind;
    deferred_frees++;
}
static const ds_device_api fake_api = {
    .name = "fake",
    .device_type = {[DS_ALLOC_DEVICE] = "fakedev", [DS_ALLOC_HOST] = "fakedev_host",
                    [DS_ALLOC_MANAGED] = "fakedev_managed", [DS_ALLOC_ASYNC] = "fakedev"},
    .release = count_release,
};
static int api = -1;

static void record(uintptr_t base, uint64_t size)
{
    ds_alloc_info a = {.base = base, .size = size, .kind = DS_ALLOC_DEVICE, .api = api};
    ds_alloc_record(&a, ds_name_intern("unit"));
}

static int setup(void **state)
{
    (void)state;
    harness_init(NULL);
    if (api < 0)
        api = ds_device_api_add(&fake_api);
    return 0;
}

static void test_range_lookup_at_scale(void **state)
{
    (void)state;
    /* Insert in a scrambled order (7919 is prime to N: a permutation). */
    for (uint64_t k = 0; k < N; k++)
        record(base_of((uint32_t)(k * 7919 % N)), STRIDE / 2);
    uint64_t live, bytes, untracked;
    ds_alloc_totals(&live, &bytes, &untracked);
    assert_int_equal(live, N);
    for (uint32_t i = 0; i < N; i += 97) {
        ds_alloc_info a;
        assert_true(ds_alloc_lookup(base_of(i) + 100, &a));      /* interior */
        assert_int_equal(a.base, base_of(i));
        assert_false(ds_alloc_lookup(base_of(i) + STRIDE / 2, &a)); /* just past the end */
    }
    for (uint32_t i = 0; i < N; i += 2)
        ds_alloc_forget(base_of(i), "unit");
    ds_alloc_totals(&live, &bytes, &untracked);
    assert_int_equal(live, N / 2);
    for (uint32_t i = 0; i < 1000; i++) {
        ds_alloc_info a;
        assert_int_equal(ds_alloc_lookup(base_of(i) + 8, &a), i % 2 == 1);
    }
    for (uint32_t i = 1; i < N; i += 2)
        ds_alloc_forget(base_of(i), "unit");
    ds_alloc_totals(&live, &bytes, &untracked);
    assert_int_equal(live, 0);
    assert_int_equal(bytes, 0);
}

/* Sizes from 0 bytes to 64 GiB, so every size class of the index holds some,
 * packed with random gaps: every lookup agrees with a linear search, before
 * and after removing every other allocation (an allocation's first and last
 * byte, one past its end, and pointers deep inside large ones). */
#define MIXED 3000

static uint64_t next_random(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static uintptr_t mixed_base[MIXED];
static uint64_t mixed_size[MIXED];
static bool mixed_live[MIXED];

static int linear_search(uintptr_t p)
{
    for (int i = 0; i < MIXED; i++)
        if (mixed_live[i] && p - mixed_base[i] < (mixed_size[i] ? mixed_size[i] : 1))
            return i;
    return -1;
}

static void check_against_linear_search(uint64_t *rng)
{
    for (int i = 0; i < MIXED; i++) {
        uint64_t size = mixed_size[i] ? mixed_size[i] : 1;
        uintptr_t probes[] = {mixed_base[i], mixed_base[i] + size - 1, mixed_base[i] + size,
                              mixed_base[i] - 1, mixed_base[i] + next_random(rng) % size};
        for (size_t k = 0; k < DS_ARRAY_LEN(probes); k++) {
            ds_alloc_info a;
            int want = linear_search(probes[k]);
            bool found = ds_alloc_lookup(probes[k], &a);
            assert_int_equal(found, want >= 0);
            if (found)
                assert_int_equal(a.base, mixed_base[want]);
        }
    }
}

static void test_lookup_agrees_across_sizes(void **state)
{
    (void)state;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    uintptr_t at = 0x100000000000ull;
    for (int i = 0; i < MIXED; i++) {
        unsigned log2 = (unsigned)(next_random(&rng) % 37); /* up to 64 GiB */
        uint64_t size = i % 50 == 0 ? 0 : ((uint64_t)1 << log2) + next_random(&rng) % ((uint64_t)1 << log2);
        at += next_random(&rng) % 3 == 0 ? 0 : next_random(&rng) % 8192; /* some back to back */
        mixed_base[i] = at;
        mixed_size[i] = size;
        mixed_live[i] = true;
        record(at, size);
        at += size ? size : 1;
    }
    check_against_linear_search(&rng);
    for (int i = 0; i < MIXED; i += 2) {
        ds_alloc_forget(mixed_base[i], "unit");
        mixed_live[i] = false;
    }
    check_against_linear_search(&rng);
    for (int i = 1; i < MIXED; i += 2)
        ds_alloc_forget(mixed_base[i], "unit");
    uint64_t live, bytes, untracked;
    ds_alloc_totals(&live, &bytes, &untracked);
    assert_int_equal(live, 0);
    assert_int_equal(bytes, 0);
}

static void test_reused_base_replaces_stale_record(void **state)
{
    (void)state;
    record(0x7000000000, 100);
    record(0x7000000000, 200); /* freed through an untracked route, then reused */
    ds_alloc_info a;
    assert_true(ds_alloc_lookup(0x7000000000 + 150, &a));
    assert_int_equal(a.size, 200);
    ds_alloc_forget(0x7000000000, "unit");
    assert_false(ds_alloc_lookup(0x7000000000, &a));
}

static void test_free_policy(void **state)
{
    (void)state;
    uintptr_t b = 0x7100000000;
    record(b, 1024);
    ds_alloc_info a;
    assert_true(ds_alloc_lookup(b, &a));
    /* Not shared: forwarded, no violation. */
    assert_int_equal(ds_alloc_free_check(b, api, DS_ALLOC_DEVICE, "unit"),
                     DS_FREE_FORWARD);
    /* Shared: free_while_shared; warn forwards. */
    ds_alloc_share(b, a.generation, +1);
    assert_int_equal(ds_alloc_free_check(b, api, DS_ALLOC_DEVICE, "unit"),
                     DS_FREE_FORWARD);
    /* Interior pointer: invalid_free. */
    assert_int_equal(ds_alloc_free_check(b + 8, api, DS_ALLOC_DEVICE, "unit"),
                     DS_FREE_FORWARD);
    ds_alloc_share(b, a.generation, -1);
    ds_alloc_forget(b, "unit");
    /* Freed: a second free is a double free; an unknown address is not ours. */
    assert_int_equal(ds_alloc_free_check(b, api, DS_ALLOC_DEVICE, "unit"),
                     DS_FREE_FORWARD);
    assert_int_equal(ds_alloc_free_check(0x7200000000, api, DS_ALLOC_DEVICE, "unit"),
                     DS_FREE_FORWARD);
    char *log = harness_read_log();
    assert_int_equal(harness_count(log, "\"kind\":\"free_while_shared\""), 1);
    assert_int_equal(harness_count(log, "\"kind\":\"invalid_free\""), 2);
    free(log);
}

static void test_protect_defers_to_the_last_release(void **state)
{
    (void)state;
    const char *env[] = {"DLSHIM_ON_ERROR=protect", NULL};
    harness_init(env);
    uintptr_t b = 0x7300000000;
    ds_alloc_info a = {.base = b, .size = 64, .kind = DS_ALLOC_DEVICE, .api = api};
    ds_alloc_record(&a, ds_name_intern("unit"));
    assert_true(ds_alloc_lookup(b, &a));
    ds_alloc_share(b, a.generation, +1);
    ds_alloc_share(b, a.generation, +1);
    assert_int_equal(ds_alloc_free_check(b, api, DS_ALLOC_DEVICE, "unit"), DS_FREE_DEFER);
    ds_alloc_share(b, a.generation, -1);
    assert_int_equal(deferred_frees, 0);
    ds_alloc_share(b, a.generation, -1);
    assert_int_equal(deferred_frees, 1);
    assert_false(ds_alloc_lookup(b, &a));
    assert_int_equal(ds_alloc_free_check(b + 1, api, DS_ALLOC_DEVICE, "unit"),
                     DS_FREE_FORWARD); /* unknown now */
}

/* Not an assertion on time (CI never fails on timing): prints the cost of a
 * lookup among 1e6 live allocations for docs/performance.md. */
static void test_million_lookups(void **state)
{
    (void)state;
    enum { M = 1000000 };
    for (uint32_t i = 0; i < M; i++)
        record(0x200000000000ull + (uintptr_t)i * 256, 128);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint32_t found = 0;
    for (uint32_t i = 0; i < M; i++) {
        ds_alloc_info a;
        found += ds_alloc_lookup(0x200000000000ull + (uintptr_t)((i * 7919u) % M) * 256 + 64, &a);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(found, M);
    double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / M;
    printf("[ INFO     ] lookup among 1e6 live allocations: %.0f ns\n", ns);
    for (uint32_t i = 0; i < M; i++)
        ds_alloc_forget(0x200000000000ull + (uintptr_t)i * 256, "unit");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_range_lookup_at_scale, setup),
        cmocka_unit_test_setup(test_lookup_agrees_across_sizes, setup),
        cmocka_unit_test_setup(test_reused_base_replaces_stale_record, setup),
        cmocka_unit_test_setup(test_free_policy, setup),
        cmocka_unit_test_setup(test_protect_defers_to_the_last_release, setup),
        cmocka_unit_test_setup(test_million_lookups, setup),
    };
    return cmocka_run_group_tests(tests, NULL, harness_teardown);
}
