/* Unit tests of shim/ledger/allocs.c and its index, alloc_index.c (range
 * lookup, removal, reuse of a base) at scale and across sizes, shares and the
 * free policy. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "ledger/ledger.h"
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
static bool buffer_memory(uintptr_t handle, uintptr_t *memory, uint64_t *offset)
{
    if (handle != 0xb0)
        return false;
    *memory = 0xa0;
    *offset = 0x40;
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

/* ---- an oracle: the allocations the index should hold, searched linearly -- */

#define ORACLE_MAX 8000

typedef struct {
    uintptr_t base;
    uint64_t size;
    bool live;
} known;

static known oracle[ORACLE_MAX];
static int oracle_count;

static uint64_t next_random(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static uint64_t span(const known *k)
{
    return k->size ? k->size : 1;
}

/* Records it in the index and the oracle; a live base recorded again was
 * freed behind the shim's back, and the new allocation replaces it. */
static int oracle_record(uintptr_t base, uint64_t size)
{
    for (int i = 0; i < oracle_count; i++)
        if (oracle[i].live && oracle[i].base == base)
            oracle[i].live = false;
    assert_true(oracle_count < ORACLE_MAX);
    oracle[oracle_count] = (known){base, size, true};
    record(base, size);
    return oracle_count++;
}

static void oracle_forget(int i)
{
    ds_alloc_forget(oracle[i].base, api, "unit");
    oracle[i].live = false;
}

static void oracle_forget_all(void)
{
    for (int i = 0; i < oracle_count; i++)
        if (oracle[i].live)
            oracle_forget(i);
    oracle_count = 0;
    uint64_t live, bytes, untracked;
    ds_alloc_totals(&live, &bytes, &untracked);
    assert_int_equal(live, 0);
    assert_int_equal(bytes, 0);
}

/* The live allocation holding p; where two overlap, the one starting last. */
static int oracle_holding(uintptr_t p)
{
    int best = -1;
    for (int i = 0; i < oracle_count; i++)
        if (oracle[i].live && p - oracle[i].base < span(&oracle[i]) &&
            (best < 0 || oracle[i].base > oracle[best].base))
            best = i;
    return best;
}

static void check_point(uintptr_t p)
{
    ds_alloc_info a;
    int want = oracle_holding(p);
    bool found = ds_alloc_lookup(p, &a);
    if (found != (want >= 0) || (found && a.base != oracle[want].base))
        fail_msg("lookup of %#lx: %s %#lx, the oracle says %#lx", (unsigned long)p,
                 found ? "found" : "none", found ? (unsigned long)a.base : 0ul,
                 want >= 0 ? (unsigned long)oracle[want].base : 0ul);
    if (found)
        assert_int_equal(a.size, oracle[want].size);
}

/* Every allocation's first and last byte, the bytes either side, and one
 * inside at random. */
static void check_all(uint64_t *rng)
{
    for (int i = 0; i < oracle_count; i++) {
        const known *k = &oracle[i];
        check_point(k->base);
        check_point(k->base + span(k) - 1);
        check_point(k->base + span(k));
        check_point(k->base - 1);
        check_point(k->base + next_random(rng) % span(k));
    }
}

/* check_all, then again without every `step`th allocation from `first`,
 * then all forgotten. */
static void check_before_and_after_forgetting(int first, int step, uint64_t *rng)
{
    check_all(rng);
    for (int i = first; i < oracle_count; i += step)
        if (oracle[i].live)
            oracle_forget(i);
    check_all(rng);
    oracle_forget_all();
}

/* Sizes from 0 bytes to 64 GiB, so every size class of the index holds some,
 * packed with random gaps: every lookup agrees with a linear search, before
 * and after removing every other allocation (an allocation's first and last
 * byte, one past its end, and pointers deep inside large ones). */
static void test_lookup_agrees_across_sizes(void **state)
{
    (void)state;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    uintptr_t at = 0x100000000000ull;
    for (int i = 0; i < 3000; i++) {
        unsigned log2 = (unsigned)(next_random(&rng) % 37); /* up to 64 GiB */
        uint64_t size = i % 50 == 0 ? 0 : ((uint64_t)1 << log2) + next_random(&rng) % ((uint64_t)1 << log2);
        at += next_random(&rng) % 3 == 0 ? 0 : next_random(&rng) % 8192; /* some back to back */
        oracle_record(at, size);
        at += size ? size : 1;
    }
    check_before_and_after_forgetting(0, 2, &rng);
}

/* Around every power of four from 256 bytes to 1 GiB (the index's size
 * classes and granules), allocations of a quarter plus one, one less, as
 * many and one more bytes: aligned to it, ending exactly on a multiple of
 * it, and straddling one by half their size. */
static void test_granule_boundaries(void **state)
{
    (void)state;
    uint64_t rng = 7;
    uintptr_t region = 0x300000000000ull;
    /* Alone in the index, one whose last byte is the first of the next. */
    for (uint64_t g = 256; g <= (1ull << 30); g <<= 2) {
        oracle_record(region + 4 * g - g / 2, g / 2 + 1);
        check_all(&rng);
        oracle_forget_all();
    }
    for (uint64_t g = 256; g <= (1ull << 30); g <<= 2) {
        uint64_t sizes[] = {g / 4 + 1, g - 1, g, g + 1};
        for (size_t i = 0; i < DS_ARRAY_LEN(sizes); i++) {
            uint64_t s = sizes[i];
            region += 16 * g;
            oracle_record(region, s);                    /* aligned */
            oracle_record(region + 4 * g - s, s);        /* ends on a multiple */
            oracle_record(region + 8 * g - s / 2, s);    /* straddles one */
        }
    }
    /* Without the straddlers, the granules after theirs hold nothing. */
    check_before_and_after_forgetting(2, 3, &rng);
}

/* Allocations freed by an untracked route stay in the index; one allocated
 * over them is the answer where it lies, whichever size class each is in. */
static void test_the_one_starting_last(void **state)
{
    (void)state;
    uint64_t rng = 11;
    uintptr_t x = 0x400000000000ull;
    int big = oracle_record(x, 1ull << 30), small = oracle_record(x + 4096, 100);
    ds_alloc_info a;
    assert_true(ds_alloc_lookup(x + 4096 + 50, &a) && a.base == oracle[small].base);
    assert_true(ds_alloc_lookup(x + 8192, &a) && a.base == oracle[big].base);
    /* A later start wins even when it is the larger one. */
    int early = oracle_record(x + (2ull << 30), 1000);
    int late = oracle_record(x + (2ull << 30) + 500, 1ull << 30);
    assert_true(ds_alloc_lookup(x + (2ull << 30) + 600, &a) && a.base == oracle[late].base);
    assert_true(ds_alloc_lookup(x + (2ull << 30) + 400, &a) && a.base == oracle[early].base);
    /* Many, of sizes from 1 byte to 16 MiB, in 64 MiB: most overlap others. */
    for (int i = 0; i < 2500; i++) {
        uint64_t size = (uint64_t)1 << (next_random(&rng) % 25);
        oracle_record(x + (4ull << 30) + next_random(&rng) % (64u << 20),
                      size + next_random(&rng) % size);
    }
    for (int i = 0; i < 4000; i++)
        check_point(x + (4ull << 30) + next_random(&rng) % (80u << 20));
    check_before_and_after_forgetting(0, 2, &rng);
}

/* From an empty index (as a forked child starts) to five thousand
 * allocations of sizes from 256 bytes to 256 KiB (several size classes: the
 * index grows five times), then as many again coming and going (enough
 * removals to rebuild its filter): no allocation is ever lost or kept. */
static void test_growth_and_churn(void **state)
{
    (void)state;
    uint64_t rng = 13;
    uintptr_t at = 0x500000000000ull;
    ds_alloc_after_fork();
    for (int i = 0; i < 5000; i++) {
        uint64_t size = (256ull << next_random(&rng) % 10) + next_random(&rng) % 256;
        oracle_record(at, size);
        at += size + next_random(&rng) % 4096;
        if ((i & (i - 1)) == 0 || i % 700 == 0)
            check_all(&rng);
    }
    check_all(&rng);
    for (int round = 0; round < 2800; round++) {
        int gone = (int)(next_random(&rng) % (uint64_t)oracle_count);
        while (!oracle[gone].live)
            gone = (gone + 1) % oracle_count;
        uintptr_t base = oracle[gone].base;
        oracle_forget(gone);
        check_point(base);
        uint64_t size = (256ull << next_random(&rng) % 10) + next_random(&rng) % 256;
        int fresh = oracle_record(at, size);
        at += size + 512;
        check_point(oracle[fresh].base + size - 1);
    }
    check_all(&rng);
    oracle_forget_all();
}

/* Two hundred one-byte allocations side by side (one granule of the smallest
 * class: one key), then every other one gone. */
static void test_many_in_one_granule(void **state)
{
    (void)state;
    uint64_t rng = 17;
    for (uintptr_t b = 0x600000000000ull; b < 0x600000000000ull + 200; b++)
        oracle_record(b, 1);
    oracle_record(0x600000000000ull + 200, 4096); /* straddles into the next */
    check_before_and_after_forgetting(0, 2, &rng);
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

/* Handles are plain numbers, often consecutive: three thousand of them, and
 * an address allocation over the same numbers; each space finds its own,
 * before and after half the handles go. */
static void test_handles_and_addresses_share_values(void **state)
{
    (void)state;
    enum { H = 3000 };
    const uintptr_t first = 0x10000;
    uint32_t generation[H];
    for (uintptr_t i = 0; i < H; i++) {
        ds_alloc_info a = {.base = first + i, .size = 4096, .kind = DS_ALLOC_DEVICE, .api = hapi};
        ds_alloc_record(&a, ds_name_intern("unit"));
        assert_true(ds_alloc_lookup_in(hapi, first + i, &a));
        generation[i] = a.generation;
    }
    record(first, 64 << 10);
    for (uintptr_t i = 0; i < H; i++) {
        ds_alloc_info a;
        assert_true(ds_alloc_lookup_in(hapi, first + i, &a));
        assert_int_equal(a.base, first + i);
        assert_int_equal(a.generation, generation[i]);
        assert_true(ds_alloc_lookup(first + i, &a));
        assert_int_equal(a.base, first);
    }
    for (uintptr_t i = 1; i < H; i += 2)
        ds_alloc_forget(first + i, hapi, "unit");
    for (uintptr_t i = 0; i < H; i++) {
        ds_alloc_info a;
        assert_int_equal(ds_alloc_lookup_in(hapi, first + i, &a), i % 2 == 0);
        assert_true(ds_alloc_lookup(first + i, &a) && a.base == first);
    }
    /* A share finds the handle's allocation by base and generation. */
    ds_alloc_share(first + 2, generation[2], +1);
    assert_int_equal(ds_alloc_free_check(first + 2, hapi, DS_ALLOC_DEVICE, "unit"),
                     DS_FREE_FORWARD);
    ds_alloc_share(first + 2, generation[2], -1);
    for (uintptr_t i = 0; i < H; i += 2)
        ds_alloc_forget(first + i, hapi, "unit");
    ds_alloc_forget(first, api, "unit");
    uint64_t live, bytes, untracked;
    ds_alloc_totals(&live, &bytes, &untracked);
    assert_int_equal(live, 0);
    char *log = harness_read_log();
    assert_int_equal(harness_count(log, "\"kind\":\"free_while_shared\""), 1);
    free(log);
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

/* Threads handing over device tensors at once: a lookup, a liveness check
 * and a share count take the thread's own shard of ALLOCS (by its thread
 * id), so a thread held inside another shard (as a thread preempted there
 * is) stops no other.  With one ALLOCS lock this thread waited for the
 * holder: this fails instead of hanging (the holder lets go after 5 s). */
static uintptr_t shared_base;
static uint32_t shared_generation;

static void take_alloc_shard(void *arg)
{
    ds_lock_take_shard(DS_LOCK_ALLOCS, *(const unsigned *)arg);
}

static void give_alloc_shard(void *arg)
{
    ds_lock_give_shard(DS_LOCK_ALLOCS, *(const unsigned *)arg);
}

static void test_lookups_on_other_threads_do_not_wait(void **state)
{
    (void)state;
    shared_base = 0x7600000000;
    record(shared_base, 4096);
    ds_alloc_info a;
    assert_true(ds_alloc_lookup(shared_base, &a));
    shared_generation = a.generation;
    /* Another thread holds a shard that is not this thread's. */
    unsigned mine = (unsigned)((unsigned long)ds_tid() % ds_lock_shards[DS_LOCK_ALLOCS]);
    unsigned other = (mine + 1) % ds_lock_shards[DS_LOCK_ALLOCS];
    harness_holder holder = {.take = take_alloc_shard, .give = give_alloc_shard, .arg = &other};
    harness_hold(&holder);
    bool ok = ds_alloc_lookup(shared_base + 8, &a) && a.generation == shared_generation &&
              ds_alloc_live(shared_base, shared_generation);
    ds_alloc_share(shared_base, shared_generation, +1);
    ds_alloc_share(shared_base, shared_generation, -1);
    assert_false(harness_let_go(&holder));
    assert_true(ok);
    assert_int_equal(ds_alloc_free_check(shared_base, api, DS_ALLOC_DEVICE, "unit"),
                     DS_FREE_FORWARD);
    ds_alloc_forget(shared_base, api, "unit");
}

/* Share counts change under a shard, from many threads at once: none is
 * lost, and under protect the free deferred by the first thread's shares
 * comes exactly once, at the last release (with a plain increment under
 * the shards counts can be lost, and ThreadSanitizer names the race). */
#define SHARING_THREADS 8
#define SHARES_EACH 20000
static atomic_int shares_taken, shares_released;
static atomic_bool free_deferred;

static void *share_and_release(void *arg)
{
    (void)arg;
    for (int i = 0; i < SHARES_EACH; i++)
        ds_alloc_share(shared_base, shared_generation, +1);
    atomic_fetch_add(&shares_taken, 1);
    while (!atomic_load(&free_deferred))
        sched_yield();
    for (int i = 0; i < SHARES_EACH; i++) {
        ds_alloc_share(shared_base, shared_generation, +1);
        ds_alloc_share(shared_base, shared_generation, -1);
        ds_alloc_share(shared_base, shared_generation, -1);
    }
    atomic_fetch_add(&shares_released, 1);
    return NULL;
}

static void test_shares_counted_from_many_threads(void **state)
{
    (void)state;
    const char *env[] = {"DLSHIM_ON_ERROR=protect", NULL};
    harness_init(env);
    deferred_frees = 0;
    shared_base = 0x7700000000;
    ds_alloc_info a = {.base = shared_base, .size = 1 << 20, .kind = DS_ALLOC_DEVICE, .api = api};
    ds_alloc_record(&a, ds_name_intern("unit"));
    assert_true(ds_alloc_lookup(shared_base, &a));
    shared_generation = a.generation;
    atomic_store(&shares_taken, 0);
    atomic_store(&shares_released, 0);
    atomic_store(&free_deferred, false);
    pthread_t t[SHARING_THREADS];
    for (int i = 0; i < SHARING_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, share_and_release, NULL), 0);
    while (atomic_load(&shares_taken) < SHARING_THREADS)
        sched_yield();
    /* every share counted: the free is deferred, and says how many */
    assert_int_equal(ds_alloc_free_check(shared_base, api, DS_ALLOC_DEVICE, "unit"),
                     DS_FREE_DEFER);
    atomic_store(&free_deferred, true);
    for (int i = 0; i < SHARING_THREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(deferred_frees, 1);
    assert_false(ds_alloc_lookup(shared_base, &a));
    char *log = harness_read_log();
    char expect[96];
    snprintf(expect, sizeof(expect), "while %d shared tensors in it", SHARING_THREADS * SHARES_EACH);
    assert_non_null(strstr(log, expect));
    free(log);
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
        cmocka_unit_test_setup(test_growth_and_churn, setup),
        cmocka_unit_test_setup(test_range_lookup_at_scale, setup),
        cmocka_unit_test_setup(test_lookup_agrees_across_sizes, setup),
        cmocka_unit_test_setup(test_granule_boundaries, setup),
        cmocka_unit_test_setup(test_the_one_starting_last, setup),
        cmocka_unit_test_setup(test_many_in_one_granule, setup),
        cmocka_unit_test_setup(test_reused_base_replaces_stale_record, setup),
        cmocka_unit_test_setup(test_free_policy, setup),
        cmocka_unit_test_setup(test_protect_defers_to_the_last_release, setup),
        cmocka_unit_test_setup(test_handles_are_apart_from_addresses, setup),
        cmocka_unit_test_setup(test_handles_and_addresses_share_values, setup),
        cmocka_unit_test_setup(test_alias_holds_what_it_maps, setup),
        cmocka_unit_test_setup(test_lookups_on_other_threads_do_not_wait, setup),
        cmocka_unit_test_setup(test_shares_counted_from_many_threads, setup),
        cmocka_unit_test_setup(test_million_lookups, setup),
    };
    return cmocka_run_group_tests(tests, NULL, harness_teardown);
}
