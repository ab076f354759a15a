/* Unit tests of copy accounting (shim/ledger/copies.c) on the core alone,
 * with a fake device API: copies named by direction, sides and owners, with
 * the API's device names (a managed allocation named alike in its alloc and
 * copy events); an export filled by a copy is a copy for its consumer; a
 * device -> host -> device trip between two owners is a roundtrip. */
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

static void allocate(uintptr_t base, int kind, const char *owner)
{
    ds_alloc_info a = {.base = base, .size = SIZE, .kind = kind, .api = api};
    ds_alloc_record(&a, ds_name_intern(owner));
}

static int setup(void **state)
{
    (void)state;
    const char *env[] = {"DLSHIM_EVENTS=all", "DLSHIM_SYNC=off", NULL};
    harness_init(env);
    if (api < 0)
        api = ds_device_api_add(&fake);
    ds_stats_after_fork(); /* a fresh account for the summary */
    ds_copies_after_fork();
    return 0;
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

static void test_an_export_filled_by_a_copy_is_a_copy(void **state)
{
    (void)state;
    allocate(DEV1, DS_ALLOC_DEVICE, "jaxlike");
    ds_copy_record((uintptr_t)host, DEV1, SIZE, DS_COPY_D2H, false, CALLER);
    DLManagedTensor t = {.dl_tensor = {.data = host, .device = {kDLCPU, 0}, .ndim = 1,
                                       .dtype = {kDLUInt, 8, 1}, .shape = shape},
                         .deleter = drop};
    ds_tensor_export(&t, false, "producer", 0);
    ds_tensor_import(&t, false, "consumer", 0);
    t.deleter(&t);
    ds_alloc_forget(DEV1, api, "unit");
    char *log = harness_read_log();
    char expect[64];
    snprintf(expect, sizeof(expect), "\"copied_from\":\"0x%lx\"", (unsigned long)DEV1);
    assert_non_null(strstr(log, expect));
    assert_non_null(strstr(log, "\"zero_copy\":false"));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_copies_are_named_with_the_apis_devices, setup),
        cmocka_unit_test_setup(test_an_export_filled_by_a_copy_is_a_copy, setup),
        cmocka_unit_test_setup(test_a_trip_through_host_memory_is_a_roundtrip, setup),
    };
    return cmocka_run_group_tests(tests, NULL, harness_teardown);
}
