/* Unit tests of copy accounting (shim/ledger/copies.c) on the core alone,
 * with a fake device API: copies named by direction, sides and owners, with
 * the API's device names (a managed allocation named alike in its alloc and
 * copy events); an export filled by a copy inside the export call (at its
 * line) is a copy for its consumer, one made at an earlier line is not; a
 * device -> host -> device trip between two owners is a roundtrip; a copy
 * repeated between the same buffers is counted each time, and weighed again
 * once an allocation, a share or the recent copies changed. */
#include "ledger/ledger.h"
#include "harness.h"

static const ds_device_api fake = {
    .name = "fake",
    .device_type = {[DS_ALLOC_DEVICE] = "fakedev", [DS_ALLOC_HOST] = "fakedev_host",
                    [DS_ALLOC_MANAGED] = "fakedev_managed", [DS_ALLOC_ASYNC] = "fakedev"},
};
static int api = -1;

#define DEV1 0x7100000000u
#define DEV2 0x7200000000u
#define MANAGED 0x7300000000u
#define SIZE 65536u

static int64_t shape[1] = {SIZE};
static uint8_t host[SIZE];

static void a_function_of_this_module(void) {}
#define CALLER ((const void *)a_function_of_this_module)

/* The line of the interpreted program the thread is at, as a hook family's
 * locator tells the core: a copy made at the export's line was made inside
 * the export call (__dlpack__(dl_device=cpu) under from_dlpack). */
static const char *line = "unit.py:10 in <module>";

static bool here(ds_where *w, char scratch[DS_WHERE_MAX])
{
    size_t n = strlen(line);
    memcpy(scratch, line, n + 1);
    *w = (ds_where){.text = scratch, .len = n, .plain = true, .spaced = true,
                    .site = ds_site_intern(line, n)};
    return true;
}

static int stack(char (*frames)[DS_WHERE_MAX], int max)
{
    (void)frames;
    (void)max;
    return 0;
}

static const ds_locator locator = {here, stack};

static void allocate(uintptr_t base, int kind, const char *owner)
{
    ds_alloc_info a = {.base = base, .size = SIZE, .kind = kind, .api = api};
    ds_alloc_record(&a, ds_name_intern(owner));
}

static void start(const char *events)
{
    const char *env[] = {events, "DLSHIM_SYNC=off", NULL};
    harness_init(env);
    if (api < 0)
        api = ds_device_api_add(&fake);
    ds_context_set_locator(&locator);
    line = "unit.py:10 in <module>";
    ds_stats_after_fork(); /* a fresh account for the summary */
    ds_copies_after_fork();
}

static int setup(void **state)
{
    (void)state;
    start("DLSHIM_EVENTS=all");
    return 0;
}

/* Copy events off: the repeated copy's fast way is taken. */
static int setup_quiet(void **state)
{
    (void)state;
    start("DLSHIM_EVENTS=default");
    return 0;
}

static uint64_t transfers(void)
{
    uint64_t count, bytes, trips;
    ds_copies_totals(&count, &bytes, &trips);
    return count;
}

static void drop(DLManagedTensor *t)
{
    (void)t;
}

static void test_copies_are_named_with_the_apis_devices(void **state)
{
    (void)state;
    allocate(DEV1, DS_ALLOC_DEVICE, "jaxlike");
    allocate(MANAGED, DS_ALLOC_MANAGED, "torchlike");
    ds_copy_record(MANAGED, DEV1, 1024, DS_COPY_INFER, false, CALLER);
    ds_copy_record((uintptr_t)host, MANAGED, 512, DS_COPY_INFER, false, CALLER);
    ds_alloc_forget(DEV1, api, "unit");
    ds_alloc_forget(MANAGED, api, "unit");
    char *log = harness_read_log();
    assert_non_null(strstr(log, "\"device\":\"fakedev_managed:0\",\"kind\":\"managed\",\"api\":\"fake\""));
    assert_non_null(strstr(log, "\"direction\":\"d2d\""));
    assert_non_null(strstr(log, "\"src_owner\":\"jaxlike\",\"src_device\":\"fakedev:0\""));
    assert_non_null(strstr(log, "\"dst_owner\":\"torchlike\",\"dst_device\":\"fakedev_managed:0\""));
    assert_non_null(strstr(log, "\"direction\":\"d2h\""));
    assert_non_null(strstr(log, "\"dst_owner\":null,\"dst_device\":\"cpu:0\""));
    free(log);
    uint64_t count, bytes, trips;
    ds_copies_totals(&count, &bytes, &trips);
    assert_true(count == 2 && bytes == 1536 && trips == 0);
}

/* The host buffer filled from DEV1 at line `copied_at`, then exported,
 * imported and released at line 10: the log. */
static char *host_copy_shared(const char *copied_at)
{
    allocate(DEV1, DS_ALLOC_DEVICE, "jaxlike");
    line = copied_at;
    ds_copy_record((uintptr_t)host, DEV1, SIZE, DS_COPY_D2H, false, CALLER);
    line = "unit.py:10 in <module>";
    DLManagedTensor t = {.dl_tensor = {.data = host, .device = {kDLCPU, 0}, .ndim = 1,
                                       .dtype = {kDLUInt, 8, 1}, .shape = shape},
                         .deleter = drop};
    ds_tensor_export(&t, false, "producer", 0);
    ds_tensor_import(&t, false, "consumer", 0);
    t.deleter(&t);
    ds_alloc_forget(DEV1, api, "unit");
    return harness_read_log();
}

static void test_an_export_filled_by_a_copy_is_a_copy(void **state)
{
    (void)state;
    char *log = host_copy_shared("unit.py:10 in <module>"); /* inside from_dlpack(x) */
    char expect[64];
    snprintf(expect, sizeof(expect), "\"copied_from\":\"0x%lx\"", (unsigned long)DEV1);
    assert_non_null(strstr(log, expect));
    assert_non_null(strstr(log, "\"zero_copy\":false"));
    free(log);
}

static void test_a_copy_made_at_an_earlier_line_is_the_programs_own(void **state)
{
    (void)state;
    char *log = host_copy_shared("unit.py:9 in <module>"); /* x.copy_(src) the line before */
    assert_null(strstr(log, "\"copied_from\""));
    assert_non_null(strstr(log, "\"zero_copy\":true"));
    free(log);
}

static void test_a_trip_through_host_memory_is_a_roundtrip(void **state)
{
    (void)state;
    allocate(DEV1, DS_ALLOC_DEVICE, "jaxlike");
    allocate(DEV2, DS_ALLOC_DEVICE, "torchlike");
    ds_copy_record((uintptr_t)host, DEV1, SIZE, DS_COPY_D2H, false, CALLER);
    ds_copy_record(DEV2, (uintptr_t)host, SIZE, DS_COPY_H2D, false, CALLER);
    ds_alloc_forget(DEV1, api, "unit");
    ds_alloc_forget(DEV2, api, "unit");
    char *log = harness_read_log();
    const char *trip = strstr(log, "\"event\":\"roundtrip\"");
    assert_non_null(trip);
    assert_non_null(strstr(trip, "\"from_owner\":\"jaxlike\",\"from_device\":\"fakedev:0\","
                                 "\"to_owner\":\"torchlike\",\"to_device\":\"fakedev:0\""));
    free(log);
    uint64_t count, bytes, trips;
    ds_copies_totals(&count, &bytes, &trips);
    assert_int_equal(trips, 1);
}

static void copy_host_to_host(int times)
{
    for (int i = 0; i < times; i++)
        ds_copy_record((uintptr_t)host + SIZE / 2, (uintptr_t)host, 64, DS_COPY_D2D, false, CALLER);
}

static void test_a_repeated_copy_is_weighed_again_after_a_change(void **state)
{
    (void)state;
    copy_host_to_host(3); /* nothing tracked: not a copy the shim counts */
    assert_int_equal(transfers(), 0);
    allocate((uintptr_t)host, DS_ALLOC_HOST, "pinned");
    copy_host_to_host(2);
    assert_int_equal(transfers(), 2);
    ds_alloc_forget((uintptr_t)host, api, "unit");
    copy_host_to_host(1);
    assert_int_equal(transfers(), 2);
    DLManagedTensor t = {.dl_tensor = {.data = host + SIZE / 2, .device = {kDLCPU, 0}, .ndim = 1,
                                       .dtype = {kDLUInt, 8, 1}, .shape = shape},
                         .deleter = drop};
    ds_tensor_export(&t, false, "producer", 0); /* the destination is shared now */
    copy_host_to_host(2);
    assert_int_equal(transfers(), 4);
    t.deleter(&t);
}

/* The newest copy into a buffer is the one an export of it names: a device
 * copy repeated after a host copy (memcpy) into the same bytes is the newest
 * again. */
static void test_a_repeated_copy_after_another_is_the_newest(void **state)
{
    (void)state;
    static int64_t small[1] = {64};
    DLManagedTensor t = {.dl_tensor = {.data = host + SIZE / 2, .device = {kDLCPU, 0}, .ndim = 1,
                                       .dtype = {kDLUInt, 8, 1}, .shape = small},
                         .deleter = drop};
    ds_copy_record((uintptr_t)host + 64, (uintptr_t)host, 64, DS_COPY_H2H, false, CALLER);
    ds_tensor_export(&t, false, "producer", 0); /* shares are indexed from the first copy */
    allocate(DEV1, DS_ALLOC_DEVICE, "jaxlike");
    uintptr_t dst = (uintptr_t)host + SIZE / 2, from = 0;
    for (int i = 0; i < 2; i++)
        ds_copy_record(dst, DEV1, 64, DS_COPY_D2D, false, CALLER);
    ds_copy_record(dst, (uintptr_t)host, 64, DS_COPY_H2H, true, CALLER);
    assert_false(ds_copies_filled_by_copy(dst, 64, &from));
    ds_copy_record(dst, DEV1, 64, DS_COPY_D2D, false, CALLER);
    assert_true(ds_copies_filled_by_copy(dst, 64, &from));
    assert_true(from == DEV1);
    t.deleter(&t);
    ds_alloc_forget(DEV1, api, "unit");
}

/* The share a memcpy touches, as its copy event names it ("" when no copy
 * event was written: it touched none). */
static uint8_t region[4u << 20] __attribute__((aligned(1u << 20)));

static const char *share_touched(uintptr_t dst, uint64_t bytes)
{
    static char named[32];
    uint64_t before = transfers();
    ds_copy_record(dst, (uintptr_t)host, bytes, DS_COPY_H2H, true, CALLER);
    named[0] = '\0';
    if (transfers() == before)
        return named;
    char *log = harness_read_log();
    const char *last = NULL;
    for (const char *p = log; (p = strstr(p, "\"dst_share\":")); p++)
        last = p + strlen("\"dst_share\":");
    assert_non_null(last);
    snprintf(named, sizeof(named), "%.*s", (int)strcspn(last, ",}"), last);
    free(log);
    return named;
}

static DLManagedTensor *shared_at(uintptr_t offset, int64_t *bytes)
{
    DLManagedTensor *t = calloc(1, sizeof(*t));
    *t = (DLManagedTensor){.dl_tensor = {.data = region + offset, .device = {kDLCPU, 0},
                                         .ndim = 1, .dtype = {kDLUInt, 8, 1}, .shape = bytes},
                           .deleter = drop};
    ds_tensor_export(t, false, "producer", 0);
    return t;
}

/* Shares of every size are found by any copy overlapping them, and only
 * then: across the edge of a granule of their size class, at their last
 * byte, by a copy far larger than they are; and no longer once released. */
static void test_a_copy_names_the_share_it_overlaps(void **state)
{
    (void)state;
    static int64_t small[1] = {100}, medium[1] = {100 << 10};
    uintptr_t r = (uintptr_t)region;
    share_touched(r, 1); /* the first copy starts the index */
    uintptr_t at_b = (1u << 20) - (50 << 10); /* across a 256 KiB edge, its size class's */
    DLManagedTensor *a = shared_at(4090, small), *b = shared_at(at_b, medium);
    char name_a[32], name_b[32];
    snprintf(name_a, sizeof(name_a), "\"0x%lx\"", (unsigned long)(uintptr_t)a);
    snprintf(name_b, sizeof(name_b), "\"0x%lx\"", (unsigned long)(uintptr_t)b);
    assert_string_equal(share_touched(r + 4095, 1), name_a);      /* past the 4 KiB edge */
    assert_string_equal(share_touched(r + 4000, 90), "");         /* ends just before */
    assert_string_equal(share_touched(r + 4189, 8), name_a);      /* its last byte */
    assert_string_equal(share_touched(r + 4190, 8), "");          /* just after */
    assert_string_equal(share_touched(r + at_b + (100 << 10) - 1, 10), name_b);
    assert_string_equal(share_touched(r + (1u << 20) + 4, 4), name_b);
    assert_string_equal(share_touched(r + at_b - 10, 10), "");
    assert_string_equal(share_touched(r + (2u << 20), 1u << 20), "");   /* many granules */
    assert_string_equal(share_touched(r + (1u << 19), 3u << 20), name_b);
    a->deleter(a);
    assert_string_equal(share_touched(r + 4095, 1), "");
    b->deleter(b);
    assert_string_equal(share_touched(r + (1u << 20) + 4, 4), "");
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_copies_are_named_with_the_apis_devices, setup),
        cmocka_unit_test_setup(test_an_export_filled_by_a_copy_is_a_copy, setup),
        cmocka_unit_test_setup(test_a_copy_made_at_an_earlier_line_is_the_programs_own, setup),
        cmocka_unit_test_setup(test_a_trip_through_host_memory_is_a_roundtrip, setup),
        cmocka_unit_test_setup(test_a_repeated_copy_is_weighed_again_after_a_change, setup_quiet),
        cmocka_unit_test_setup(test_a_repeated_copy_after_another_is_the_newest, setup_quiet),
        cmocka_unit_test_setup(test_a_copy_names_the_share_it_overlaps, setup),
    };
    return cmocka_run_group_tests(tests, NULL, harness_teardown);
}
