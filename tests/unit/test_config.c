/* Unit tests of the option parser (shim/base/config.c), with the DLSHIM_HOOKS
 * names that start-up hands it (shim/start/families.c). */
#include "start/start.h"
#include "harness.h"

static ds_config c;

/* DLSHIM_EVENTS=default: every event but the frequent ones. */
#define DEFAULT_EVENTS                                                                  \
    (((1u << DS_EV_COUNT) - 1) &                                                        \
     ~((1u << DS_EV_ALLOC) | (1u << DS_EV_FREE) | (1u << DS_EV_COPY) | (1u << DS_EV_ENTRY)))

/* Fake hook families, found by the core as hooks/'s are (the ds_families
 * section): DLSHIM_HOOKS takes their names; one is off unless asked, and
 * two share a name, as the CUDA runtime's and driver's do. */
static void nothing(void) {}
#define FAKE_FAMILY(id, ...) \
    __attribute__((used, section("ds_families"))) static const ds_family fake_##id = {__VA_ARGS__}
FAKE_FAMILY(python, .option = "python", .order = 1, .install = nothing);
FAKE_FAMILY(cuda_a, .option = "cuda", .order = 2, .install = nothing);
FAKE_FAMILY(cuda_b, .option = "cuda", .order = 3, .install = nothing);
FAKE_FAMILY(copy, .option = "host-copy", .optional = true, .order = 4, .install = nothing);
FAKE_FAMILY(always, .order = 0, .install = nothing);
enum { PYTHON_BIT = 1u << 0, CUDA_BIT = 1u << 1, COPY_BIT = 1u << 2 };
#define DEFAULT_HOOKS (PYTHON_BIT | CUDA_BIT)

static void load(void *envp)
{
    ds_families_announce();
    ds_config_load(&c, envp);
}

/* Loads envp and returns how many diagnostics it printed. */
static int load_count_warnings(const char **envp)
{
    char *err = harness_stderr_of(load, (void *)envp);
    int n = harness_count(err, "dlshim: ");
    free(err);
    return n;
}

static void test_defaults(void **state)
{
    (void)state;
    const char *env[] = {"PATH=/bin", NULL};
    assert_int_equal(load_count_warnings(env), 0);
    assert_false(c.disable);
    assert_string_equal(c.log, "stderr");
    assert_int_equal(c.format, DS_FORMAT_TEXT);
    assert_int_equal(c.on_error, DS_ON_ERROR_WARN);
    assert_int_equal(c.summary, -1); /* unset: only where something happened */
    assert_int_equal(c.exitcode, -1);
    assert_int_equal(c.backtrace, 0);
    assert_int_equal(c.max_records, 1 << 20);
    assert_int_equal(c.events, DEFAULT_EVENTS);
}

static void test_good_values(void **state)
{
    (void)state;
    const char *env[] = {"DLSHIM_DISABLE=on",        "DLSHIM_FORMAT=jsonl",
                         "DLSHIM_ON_ERROR=protect",  "DLSHIM_SUMMARY=No",
                         "DLSHIM_EXITCODE=255",      "DLSHIM_BACKTRACE=64",
                         "DLSHIM_MAX_RECORDS=2K",    "DLSHIM_LOG=/tmp/x-%p.jsonl",
                         "DLSHIM_EVENTS= import , summary", NULL};
    assert_int_equal(load_count_warnings(env), 0);
    assert_true(c.disable);
    assert_int_equal(c.format, DS_FORMAT_JSONL);
    assert_int_equal(c.on_error, DS_ON_ERROR_PROTECT);
    assert_false(c.summary);
    assert_int_equal(c.exitcode, 255);
    assert_int_equal(c.backtrace, 64);
    assert_int_equal(c.max_records, 2048);
    assert_string_equal(c.log, "/tmp/x-%p.jsonl");
    assert_int_equal(c.events, (1u << DS_EV_IMPORT) | (1u << DS_EV_SUMMARY));
}

static void test_int_edges(void **state)
{
    (void)state;
    const char *suffix[] = {"DLSHIM_MAX_RECORDS=1m", NULL};
    assert_int_equal(load_count_warnings(suffix), 0);
    assert_int_equal(c.max_records, 1 << 20);
    static const char *bad[] = {"-1", "0x10", "1.5", "2KB", "", " 5", "256",
                                "99999999999999999999999", "9223372036854775807G"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char var[64];
        snprintf(var, sizeof(var), "DLSHIM_BACKTRACE=%s", bad[i]);
        const char *env[] = {var, NULL};
        assert_int_equal(load_count_warnings(env), 1);
        assert_int_equal(c.backtrace, 0);
    }
    const char *empty_exitcode[] = {"DLSHIM_EXITCODE=", NULL};
    assert_int_equal(load_count_warnings(empty_exitcode), 0); /* empty: unset */
    assert_int_equal(c.exitcode, -1);
    const char *below_min[] = {"DLSHIM_MAX_RECORDS=10", NULL};
    assert_int_equal(load_count_warnings(below_min), 1);
    assert_int_equal(c.max_records, 1 << 20);
}

static void test_bad_values_warn_and_keep_defaults(void **state)
{
    (void)state;
    const char *env[] = {"DLSHIM_FORMAT=JSONL", "DLSHIM_ON_ERROR=", "DLSHIM_DISABLE=2",
                         "DLSHIM_EVENTS=export,nope", "DLSHIM_EVENTS_TYPO=1", "DLSHIM_LOG=",
                         NULL};
    assert_int_equal(load_count_warnings(env), 6);
    assert_int_equal(c.format, DS_FORMAT_TEXT);
    assert_int_equal(c.on_error, DS_ON_ERROR_WARN);
    assert_false(c.disable);
    assert_int_equal(c.events, DEFAULT_EVENTS);
    assert_string_equal(c.log, "stderr");
}

/* dlshim_attach's check: the warning the same entry gives in the
 * environment, and nothing printed. */
static void test_check_says_what_the_environment_would(void **state)
{
    (void)state;
    char why[768];
    unsigned before = ds_diag_count();
    assert_true(ds_config_check("DLSHIM_ON_ERROR=protect", why, sizeof(why)));
    assert_true(ds_config_check("DLSHIM_EVENTS=export,import", why, sizeof(why)));
    assert_false(ds_config_check("DLSHIM_ON_ERROR=bogus", why, sizeof(why)));
    assert_string_equal(why, "DLSHIM_ON_ERROR=\"bogus\" is not valid (expected "
                             "warn|protect|abort); using the default \"warn\"");
    assert_false(ds_config_check("DLSHIM_EVENTS=export,nope", why, sizeof(why)));
    assert_non_null(strstr(why, ": nope is not one"));
    assert_false(ds_config_check("DLSHIM_COLOUR=blue", why, sizeof(why)));
    assert_string_equal(why, "unknown variable DLSHIM_COLOUR ignored; the options are listed "
                             "by DLSHIM_VERBOSE=1 and in the README");
    assert_int_equal(ds_diag_count(), before);
}

static void test_events_keywords(void **state)
{
    (void)state;
    const char *all[] = {"DLSHIM_EVENTS=all", NULL};
    load_count_warnings(all);
    assert_int_equal(c.events, (1u << DS_EV_COUNT) - 1);
    const char *mixed[] = {"DLSHIM_EVENTS=default,alloc", NULL};
    load_count_warnings(mixed);
    assert_int_equal(c.events, DEFAULT_EVENTS | (1u << DS_EV_ALLOC));
    const char *only_commas[] = {"DLSHIM_EVENTS=,,", NULL};
    assert_int_equal(load_count_warnings(only_commas), 1);
}

static void test_hook_families(void **state)
{
    (void)state;
    const char *none[] = {"PATH=/bin", NULL};
    load_count_warnings(none);
    assert_int_equal(c.hooks, DEFAULT_HOOKS);
    const char *with_copy[] = {"DLSHIM_HOOKS=default,host-copy", NULL};
    assert_int_equal(load_count_warnings(with_copy), 0);
    assert_int_equal(c.hooks, PYTHON_BIT | CUDA_BIT | COPY_BIT);
    const char *only[] = {"DLSHIM_HOOKS=python", NULL};
    load_count_warnings(only);
    assert_int_equal(c.hooks, PYTHON_BIT);
    const char *bad[] = {"DLSHIM_HOOKS=python,opengl", NULL};
    assert_int_equal(load_count_warnings(bad), 1);
    assert_int_equal(c.hooks, DEFAULT_HOOKS);
}

static void test_first_occurrence_wins(void **state)
{
    (void)state;
    const char *env[] = {"DLSHIM_FORMAT=jsonl", "DLSHIM_FORMAT=text", NULL};
    assert_int_equal(load_count_warnings(env), 0);
    assert_int_equal(c.format, DS_FORMAT_JSONL);
}

static void test_long_path_and_hostile_bytes(void **state)
{
    (void)state;
    static char big[DS_PATH_MAX + 100];
    memcpy(big, "DLSHIM_LOG=", 11);
    memset(big + 11, 'a', sizeof(big) - 12);
    const char *env[] = {big, "DLSHIM_FORMAT=\x01\x02\xff\n", "DLSHIM_\xc3\xa9=1", "DLSHIM_", NULL};
    char *err = harness_stderr_of(load, (void *)env);
    assert_int_equal(harness_count(err, "dlshim: "), 4);
    assert_null(strchr(err, '\x01')); /* control bytes are never echoed */
    assert_int_equal(harness_count(err, "\n"), 4); /* one line each */
    free(err);
    assert_string_equal(c.log, "stderr");
}

static void test_event_names_round_trip(void **state)
{
    (void)state;
    for (int i = 0; i < DS_EV_COUNT; i++) {
        char var[64];
        snprintf(var, sizeof(var), "DLSHIM_EVENTS=%s", ds_event_name(i));
        const char *env[] = {var, NULL};
        assert_int_equal(load_count_warnings(env), 0);
        assert_int_equal(c.events, 1u << i);
    }
    /* a longer or shorter name is not a name: one warning, the default kept */
    const char *longer[] = {"DLSHIM_EVENTS=exports", NULL};
    assert_int_equal(load_count_warnings(longer), 1);
    assert_int_equal(c.events, DEFAULT_EVENTS);
    const char *shorter[] = {"DLSHIM_EVENTS=expor", NULL};
    assert_int_equal(load_count_warnings(shorter), 1);
    assert_int_equal(c.events, DEFAULT_EVENTS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_good_values),
        cmocka_unit_test(test_int_edges),
        cmocka_unit_test(test_bad_values_warn_and_keep_defaults),
        cmocka_unit_test(test_check_says_what_the_environment_would),
        cmocka_unit_test(test_events_keywords),
        cmocka_unit_test(test_hook_families),
        cmocka_unit_test(test_first_occurrence_wins),
        cmocka_unit_test(test_long_path_and_hostile_bytes),
        cmocka_unit_test(test_event_names_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, harness_teardown);
}
