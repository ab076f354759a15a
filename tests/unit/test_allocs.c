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

/* An API whose allocations are handles (Vulkan's VkDeviceMemory), carried
 * by tensors of one device type; handle 0xb0 is a buffer bound to 0xa0. */
static int released_handles;
static void release_handle(uintptr_t base, int kind)
{
    (void)base;
    (void)kind;
    released_handles++;
}
static bool buffer_memory(uintptr_t handle, uintptr_t *memory)
{
    if (handle != 0xb0)
        return false;
    *memory = 0xa0;
    return true;
}
static const ds_device_api handle_api = {
    .name = "handles", .device_type = {[DS_ALLOC_DEVICE] = "handledev"},
    .release = release_handle, .handles = true, .tensor_device_type = 7,
    .memory_of = buffer_memory};
static int hapi = -1;

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
    if (hapi < 0)
        hapi = ds_device_api_add(&handle_api);
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
        ds_alloc_forget(base_of(i), api, "unit");
    ds_alloc_totals(&live, &bytes, &untracked);
    assert_int_equal(live, N / 2);
    for (uint32_t i = 0; i < 1000; i++) {
        ds_alloc_info a;
        assert_int_equal(ds_alloc_lookup(base_of(i) + 8, &a), i % 2 == 1);
    }
    for (uint32_t i = 1; i < N; i += 2)
        ds_alloc_forget(base_of(i), api, "unit");
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
        ds_alloc_forget(mixed_base[i], api, "unit");
        mixed_live[i] = false;
    }
    check_against_linear_search(&rng);
    for (int i = 1; i < MIXED; i += 2)
        ds_alloc_forget(mixed_base[i], api, "unit");
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
    ds_alloc_forget(0x7000000000, api, "unit");
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
    ds_alloc_forget(b, api, "unit");
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

static void test_handles_are_apart_from_addresses(void **state)
{
    (void)state;
    ds_alloc_info a = {.base = 0xa0, .size = 1 << 20, .kind = DS_ALLOC_DEVICE, .api = hapi};
    ds_alloc_record(&a, ds_name_intern("unit"));
    record(0x7400000000, 4096);
    /* A handle is one key, not a range; an address lookup never finds it,
     * nor a handle lookup an address. */
    assert_false(ds_alloc_lookup(0xa0, &a));
    assert_false(ds_alloc_lookup_in(hapi, 0xa1, &a));
    assert_true(ds_alloc_lookup_in(hapi, 0xa0, &a));
    assert_int_equal(a.size, 1 << 20);
    /* A tensor of the API's device type carrying the handle, or a buffer
     * bound to it; another device type is an address. */
    int t = ds_device_api_for_tensors(7);
    assert_int_equal(t, hapi);
    assert_int_equal(ds_device_api_for_tensors(2), -1);
    assert_true(ds_alloc_lookup_tensor(t, 0xa0, 0xa0, &a) && a.base == 0xa0);
    assert_true(ds_alloc_lookup_tensor(t, 0xb0, 0xb0, &a) && a.base == 0xa0);
    assert_false(ds_alloc_lookup_tensor(t, 0x7400000000, 0x7400000000, &a));
    assert_true(ds_alloc_lookup_tensor(-1, 0x7400000000, 0x7400000010, &a));
    ds_alloc_forget(0x7400000000, api, "unit");
    ds_alloc_forget(0xa0, hapi, "unit");
    assert_false(ds_alloc_lookup_in(hapi, 0xa0, &a));
}

static void test_alias_holds_what_it_maps(void **state)
{
    (void)state;
    const char *env[] = {"DLSHIM_ON_ERROR=protect", NULL};
    harness_init(env);
    ds_alloc_info m = {.base = 0xc0, .size = 8192, .kind = DS_ALLOC_DEVICE, .api = hapi};
    ds_alloc_record(&m, ds_name_intern("exporter"));
    assert_true(ds_alloc_lookup_in(hapi, 0xc0, &m));
    ds_alloc_info alias = {.base = 0x7500000000, .size = 8192, .kind = DS_ALLOC_DEVICE,
                           .api = api, .alias_of = 0xc0, .alias_generation = m.generation,
                           .alias_holds = true};
    ds_alloc_record(&alias, ds_name_intern("importer"));
    /* Freeing the exported memory while the alias lives: reported, and
     * deferred until the alias goes. */
    int before = released_handles;
    assert_int_equal(ds_alloc_free_check(0xc0, hapi, DS_ALLOC_DEVICE, "unit"), DS_FREE_DEFER);
    assert_int_equal(released_handles, before);
    ds_alloc_forget(0x7500000000, api, "unit");
    assert_int_equal(released_handles, before + 1);
    assert_false(ds_alloc_lookup_in(hapi, 0xc0, &m));
    /* An alias of an allocation gone (a stale generation) holds nothing. */
    ds_alloc_record(&m, ds_name_intern("exporter"));
    assert_true(ds_alloc_lookup_in(hapi, 0xc0, &m));
    alias.alias_generation = m.generation + 100;
    ds_alloc_record(&alias, ds_name_intern("importer"));
    assert_int_equal(ds_alloc_free_check(0xc0, hapi, DS_ALLOC_DEVICE, "unit"), DS_FREE_FORWARD);
    ds_alloc_forget(0xc0, hapi, "unit");
    ds_alloc_forget(0x7500000000, api, "unit");
    /* An alias freed behind the shim's back (its base allocated again)
     * maps nothing any more. */
    ds_alloc_record(&m, ds_name_intern("exporter"));
    assert_true(ds_alloc_lookup_in(hapi, 0xc0, &m));
    alias.alias_generation = m.generation;
    ds_alloc_record(&alias, ds_name_intern("importer"));
    record(0x7500000000, 8192);
    assert_int_equal(ds_alloc_free_check(0xc0, hapi, DS_ALLOC_DEVICE, "unit"), DS_FREE_FORWARD);
    ds_alloc_forget(0xc0, hapi, "unit");
    ds_alloc_forget(0x7500000000, api, "unit");
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
        ds_alloc_forget(0x200000000000ull + (uintptr_t)i * 256, api, "unit");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_range_lookup_at_scale, setup),
        cmocka_unit_test_setup(test_lookup_agrees_across_sizes, setup),
        cmocka_unit_test_setup(test_reused_base_replaces_stale_record, setup),
        cmocka_unit_test_setup(test_free_policy, setup),
        cmocka_unit_test_setup(test_protect_defers_to_the_last_release, setup),
        cmocka_unit_test_setup(test_handles_are_apart_from_addresses, setup),
        cmocka_unit_test_setup(test_alias_holds_what_it_maps, setup),
        cmocka_unit_test_setup(test_million_lookups, setup),
    };
    return cmocka_run_group_tests(tests, NULL, harness_teardown);
}
