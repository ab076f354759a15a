/* Unit tests of the event writer (shim/output/event.c) and the formatter (fmt.c):
 * strings escaped, every line valid JSON, overflow dropped not cut. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "output/output.h"
#include "harness.h"
#include "json_check.h"

static void check_escape(const char *in, size_t n, const char *want)
{
    char out[256];
    size_t w = ds_json_escape(out, sizeof(out), in, n);
    assert_int_not_equal(w, (size_t)-1);
    out[w] = '\0';
    assert_string_equal(out, want);
}

static void test_escape(void **state)
{
    (void)state;
    check_escape("plain", 5, "plain");
    check_escape("a\"b\\c", 5, "a\\\"b\\\\c");
    check_escape("\n\t\x01\x1f", 4, "\\u000a\\u0009\\u0001\\u001f");
    check_escape("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    check_escape("\xff", 1, "\\ufffd");                 /* never valid */
    check_escape("\xc3", 1, "\\ufffd");                 /* truncated */
    check_escape("\xc0\xaf", 2, "\\ufffd\\ufffd");      /* overlong */
    check_escape("\xed\xa0\x80", 3, "\\ufffd\\ufffd\\ufffd"); /* surrogate */
    check_escape("\xf4\x90\x80\x80", 4, "\\ufffd\\ufffd\\ufffd\\ufffd"); /* > U+10FFFF */
    check_escape("\x80x", 2, "\\ufffdx");               /* stray continuation */
    char small[4];
    assert_int_equal(ds_json_escape(small, sizeof(small), "\"\"\"", 3), (size_t)-1);
}

/* Every line of the log parses as one JSON object. */
static int check_lines(const char *log)
{
    int lines = 0;
    for (const char *p = log; *p;) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        assert_true(json_is_object(p, (size_t)(nl - p)));
        lines++;
        p = nl + 1;
    }
    return lines;
}

static void test_every_line_is_json(void **state)
{
    (void)state;
    harness_init(NULL);
    static const char *const nasty[] = {
        "", "\"", "\\", "\x7f", "\x01\x02\x03", "\xff\xfe", "tab\there", "\xe2\x82",
        "quote\"and\\slash/", "\xf0\x9f\x98\x80 ok"};
    for (size_t i = 0; i < sizeof(nasty) / sizeof(nasty[0]); i++) {
        ds_ev e;
        ds_ev_begin(&e, DS_EV_VIOLATION);
        ds_ev_str(&e, "kind", nasty[i]);
        ds_ev_str(&e, "null", NULL);
        ds_ev_int(&e, "neg", INT64_MIN);
        ds_ev_uint(&e, "big", UINT64_MAX);
        ds_ev_hex(&e, "ptr", UINTPTR_MAX);
        ds_ev_bool(&e, "b", i % 2);
        int64_t arr[3] = {-1, 0, 1};
        ds_ev_int_array(&e, "arr", arr, 3);
        ds_ev_int_array(&e, "none", NULL, 0);
        ds_ev_int_array(&e, "empty", arr, 0);
        ds_ev_open(&e, "obj", '{');
        ds_ev_open(&e, "inner", '[');
        ds_ev_str(&e, NULL, nasty[i]);
        ds_ev_close(&e);
        ds_ev_close(&e);
        ds_ev_end(&e);
    }
    char *log = harness_read_log();
    assert_int_equal(check_lines(log), 10);
    assert_int_equal(harness_count(log, "\"neg\":-9223372036854775808"), 10);
    assert_int_equal(harness_count(log, "\"big\":18446744073709551615"), 10);
    assert_int_equal(harness_count(log, "\"ptr\":\"0xffffffffffffffff\""), 10);
    assert_int_equal(harness_count(log, "\"arr\":[-1,0,1]"), 10);
    assert_int_equal(harness_count(log, "\"none\":null,\"empty\":[]"), 10);
    free(log);
}

/* Threads logging at once share no lock (shim/output/log.c: a slot each):
 * a line written while another thread holds its own slot (between
 * ds_log_reserve and ds_log_commit) goes in without waiting for it, where
 * one buffer under one lock made it wait; the file has every line, merged
 * by their times. */
static atomic_int slot_step;

static void *write_while_another_holds_its_slot(void *arg)
{
    (void)arg;
    while (atomic_load(&slot_step) != 1)
        sched_yield();
    static const char line[] = "{\"event\":\"mark\",\"pid\":1,\"tid\":2,\"t_ns\":2}\n";
    bool written = ds_log_write_at(line, sizeof(line) - 1, 2);
    atomic_store(&slot_step, written ? 2 : 3);
    return NULL;
}

static void test_threads_write_in_slots_of_their_own(void **state)
{
    (void)state;
    harness_init(NULL);
    static const char first[] = "{\"event\":\"mark\",\"pid\":1,\"tid\":1,\"t_ns\":1}\n";
    static const char last[] = "{\"event\":\"mark\",\"pid\":1,\"tid\":1,\"t_ns\":3}\n";
    assert_true(ds_log_write_at(first, sizeof(first) - 1, 1)); /* takes this thread's slot */
    atomic_store(&slot_step, 0);
    pthread_t other;
    assert_int_equal(pthread_create(&other, NULL, write_while_another_holds_its_slot, NULL), 0);
    char *p = ds_log_reserve(3);
    assert_non_null(p);
    atomic_store(&slot_step, 1);
    /* a bound for a deadlock, not a timing: it answers in microseconds */
    for (long spins = 0; atomic_load(&slot_step) == 1; spins++) {
        if (spins > 20000000)
            fail_msg("the other thread waits for this one's slot");
        sched_yield();
    }
    assert_int_equal(atomic_load(&slot_step), 2);
    memcpy(p, last, sizeof(last) - 1);
    ds_log_commit(p + sizeof(last) - 1, 3);
    assert_int_equal(pthread_join(other, NULL), 0);
    char *log = harness_read_log();
    const char *a = strstr(log, "\"t_ns\":1}"), *b = strstr(log, "\"tid\":2"),
               *c = strstr(log, "\"t_ns\":3}");
    assert_true(a && b && c && a < b && b < c);
    assert_int_equal(check_lines(log), 3);
    free(log);
}

static void test_overflow_is_dropped_and_counted(void **state)
{
    (void)state;
    harness_init(NULL);
    uint64_t before = ds_log_dropped();
    static char huge[DS_LINE_MAX];
    memset(huge, '"', sizeof(huge) - 1); /* escapes to twice its size */
    ds_ev e;
    ds_ev_begin(&e, DS_EV_EXPORT);
    ds_ev_open(&e, "a", '[');
    ds_ev_str(&e, NULL, huge);
    ds_ev_end(&e); /* closes the open array itself */
    /* Nesting past the limit also overflows rather than corrupts. */
    ds_ev_begin(&e, DS_EV_EXPORT);
    for (int i = 0; i < DS_EV_DEPTH + 3; i++)
        ds_ev_open(&e, NULL, '[');
    ds_ev_end(&e);
    char *log = harness_read_log();
    assert_string_equal(log, "");
    assert_int_equal(ds_log_dropped() - before, 2);
    free(log);
}

static void test_filtered_events_are_not_wanted(void **state)
{
    (void)state;
    const char *env[] = {"DLSHIM_EVENTS=import", NULL};
    harness_init(env);
    assert_true(ds_event_wanted(DS_EV_IMPORT));
    assert_false(ds_event_wanted(DS_EV_EXPORT));
    const char *off[] = {"DLSHIM_LOG=off", NULL};
    harness_init(off);
    assert_false(ds_event_wanted(DS_EV_IMPORT));
}

static void check_text(const char *json, const char *want)
{
    char line[512];
    size_t n = strlen(json);
    memcpy(line, json, n + 1);
    size_t len = ds_text_from_json(line, n);
    if (!want) {
        assert_int_equal(len, 0);
        return;
    }
    assert_int_not_equal(len, 0);
    line[len] = '\0';
    assert_string_equal(line, want);
}

static void test_text_rendering(void **state)
{
    (void)state;
    check_text("{\"event\":\"import\",\"pid\":7,\"tid\":8,\"t_ns\":1500000001,\"tensor\":\"0x1\","
               "\"ok\":true,\"who\":null,\"n\":-3,\"x\":1.500000}",
               "dlshim:    1.500000 7/8 import    tensor=0x1 ok=true who=- n=-3 x=1.500000\n");
    /* quotes only around spaces or emptiness; quotes and control bytes as '?' */
    check_text("{\"event\":\"violation\",\"pid\":1,\"tid\":1,\"t_ns\":0,\"detail\":\"a \\\"b\\\"\","
               "\"e\":\"\",\"c\":\"x\\u0001y\\\\z\",\"u\":\"\\ufffd\"}",
               "dlshim:    0.000000 1/1 violation detail=\"a ?b?\" e=\"\" c=x?y\\z u=\xef\xbf\xbd\n");
    /* nested: brackets kept, keys as k=, ',' inside */
    check_text("{\"event\":\"export\",\"pid\":1,\"tid\":2,\"t_ns\":3,\"shape\":[2,3],"
               "\"p\":{\"a\":1,\"b\":[]},\"flags\":[]}",
               "dlshim:    0.000000 1/2 export    shape=[2,3] p={a=1,b=[]} flags=[]\n");
    check_text("{\"event\":\"summary\",\"pid\":1,\"tid\":2,\"t_ns\":3}",
               "dlshim:    0.000000 1/2 summary   \n");
    check_text("not json", NULL);
    check_text("{\"event\":\"x\",\"pid\":1}", NULL);
    check_text("{\"event\":\"x\",\"pid\":1,\"tid\":2,\"t_ns\":3,\"a\":\"open", NULL);
}

/* The text log is built directly (event.c) and, beside a trace, rendered
 * from the JSON (text.c): every kind of field, built both ways, must give
 * the same line after the timestamp, for every event name. */
static void fill(ds_ev *e, const char *s)
{
    ds_ev_str(e, "s", s);
    ds_ev_str(e, "null", NULL);
    ds_ev_str(e, "empty", "");
    ds_ev_int(e, "neg", INT64_MIN);
    ds_ev_uint(e, "big", UINT64_MAX);
    ds_ev_uint(e, "zero", 0);
    ds_ev_hex(e, "p0", 0);
    ds_ev_hex(e, "p1", 0xabc);
    ds_ev_hex(e, "pmax", UINTPTR_MAX);
    ds_ev_double(e, "x", -1234.5678905);
    ds_ev_double(e, "nan", 0.0 / 0.0);
    ds_ev_double(e, "huge", 1e30);
    ds_ev_bool(e, "t", true);
    ds_ev_bool(e, "f", false);
    ds_ev_word(e, "w", "cuda:0");
    ds_ev_word(e, "wnull", NULL);
    ds_ev_name(e, "name", ds_name_intern(s)); /* escaped as any string, or written as a word */
    ds_ev_name(e, "unknown", DS_NAME_UNKNOWN);
    int64_t arr[3] = {-1, 0, 99};
    ds_ev_int_array(e, "arr", arr, 3);
    ds_ev_int_array(e, "none", NULL, 0);
    ds_ev_open(e, "obj", '{');
    ds_ev_str(e, "k", s);
    ds_ev_open(e, "list", '[');
    ds_ev_str(e, NULL, s);
    ds_ev_hex(e, NULL, 16);
    ds_ev_word(e, NULL, "read_only");
    ds_ev_name(e, NULL, ds_name_intern(s));
    ds_ev_close(e);
    ds_ev_close(e);
}

/* The generated writers (flat.c) with every kind of field, edge values
 * included; `s` also as the label's text. */
static void fill_flat(ds_ev *e, const char *s)
{
    static const char *const flags[] = {"read_only", "bit7"};
    int64_t shape[3] = {1000, 0, INT64_MAX}, strides[3] = {-1, 1, INT64_MIN};
    ds_export_fields x = {.tensor = UINTPTR_MAX,
                          .versioned = true,
                          .producer = {ds_name_intern(s), s},
                          .api = ds_name_intern("capsule"),
                          .data = 0,
                          .byte_offset = 12345678901234567ull,
                          .device = {"cuda:1", 6},
                          .dtype = {.len = 0}, /* null */
                          .shape = {shape, 3},
                          .strides = {strides, 3},
                          .bytes = UINT64_MAX,
                          .flags = {flags, 2},
                          .allocation = 0x7f0000001000,
                          .allocation_owner = ds_name_intern(s),
                          .copied_from = 0x10};
    ds_ev_export(e, &x);
    x.producer.text = NULL;
    x.api = DS_NAME_UNKNOWN;
    x.shape.v = NULL;
    x.flags.n = 0;
    x.allocation = x.copied_from = 0;
    ds_ev_export(e, &x);
    ds_ev_import(e, &(ds_import_fields){.tensor = 1, .consumer = ds_name_intern(s),
                                        .producer = DS_NAME_UNKNOWN, .zero_copy = false,
                                        .bytes = 99999999});
    ds_ev_release(e, &(ds_release_fields){.tensor = 0xabcdef, .consumed = false,
                                          .lifetime_ns = 100000000, .producer = DS_NAME_OTHER,
                                          .consumer = -1, .copy_on_import = true,
                                          .bytes_copied = 10});
}

/* The line as ds_ev_end would write it, without the log. */
static size_t finish(ds_ev *e)
{
    assert_true(ds_ev_finish(e));
    return ds_ev_len(e);
}

/* The line after "dlshim:", its spaces and the time. */
static const char *after_time(const char *line)
{
    const char *p = line + strlen("dlshim:");
    while (*p == ' ')
        p++;
    return strchr(p, ' ');
}

static void test_direct_text_matches_the_json_rendering(void **state)
{
    (void)state;
    static const char *const strings[] = {
        "plain", "", "with space", "\"q\"", "back\\slash", "\x01ctl\x1f", "\xff\xfe bad",
        "caf\xc3\xa9 \xf0\x9f\x98\x80", "\xe2\x82", "\x7f"};
    const char *jsonl[] = {"DLSHIM_FORMAT=jsonl", NULL};
    const char *text[] = {"DLSHIM_FORMAT=text", NULL};
    for (int id = 0; id < DS_EV_COUNT; id++) {
        for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
            ds_ev j, t;
            harness_init(jsonl);
            ds_ev_begin(&j, id);
            if (i > 0) { /* the first: the common fields alone */
                fill(&j, strings[i]);
                fill_flat(&j, strings[i]);
            }
            size_t n = finish(&j);
            assert_false(j.text);
            assert_true(json_is_object(j.buf, n));
            char converted[DS_LINE_MAX + 1];
            memcpy(converted, j.buf, n);
            n = ds_text_from_json(converted, n);
            assert_int_not_equal(n, 0);
            converted[n] = '\0';
            harness_init(text);
            ds_ev_begin(&t, id);
            if (i > 0) {
                fill(&t, strings[i]);
                fill_flat(&t, strings[i]);
            }
            n = finish(&t);
            assert_true(t.text);
            t.buf[n++] = '\n';
            t.buf[n] = '\0';
            assert_string_equal(after_time(t.buf), after_time(converted));
        }
    }
}

/* put.h's digits against printf's, at every length and around each power. */
static void test_numbers_match_printf(void **state)
{
    (void)state;
    char got[48], want[48];
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift: every bit length */
        uint64_t v = i < 64 ? (uint64_t)i : x >> (x % 64);
        if (i >= 64 && i < 64 + 3 * 20) { /* 10^k - 1, 10^k, 10^k + 1 */
            uint64_t p = 1;
            for (int k = 0; k < (i - 64) / 3; k++)
                p *= 10;
            v = p + (uint64_t)((i - 64) % 3) - 1;
        }
        *ds_put_uint(got, v) = '\0';
        snprintf(want, sizeof(want), "%llu", (unsigned long long)v);
        assert_string_equal(got, want);
        int64_t sv = (int64_t)v * (i % 2 ? -1 : 1);
        *ds_put_int(got, sv) = '\0';
        snprintf(want, sizeof(want), "%lld", (long long)sv);
        assert_string_equal(got, want);
        *ds_put_hex(got, (uintptr_t)v, true) = '\0';
        snprintf(want, sizeof(want), "0x%llx", (unsigned long long)v);
        assert_string_equal(got, want);
        *ds_put_hex(got, (uintptr_t)v, false) = '\0';
        snprintf(want, sizeof(want), "\"0x%llx\"", (unsigned long long)v);
        assert_string_equal(got, want);
        *ds_put_six_decimals(got, (uint32_t)(v % 1000000)) = '\0';
        snprintf(want, sizeof(want), ".%06u", (unsigned)(v % 1000000));
        assert_string_equal(got, want);
    }
    *ds_put_int(got, INT64_MIN) = '\0';
    assert_string_equal(got, "-9223372036854775808");
}

/* A generated writer keeps the builder's bound exactly: a line that ends
 * at the limit is written, one byte more and it is dropped whole. */
static void test_generated_fields_keep_the_line_limit(void **state)
{
    (void)state;
    const char *jsonl[] = {"DLSHIM_FORMAT=jsonl", NULL};
    harness_init(jsonl);
    static char pad[DS_LINE_MAX];
    memset(pad, 'x', sizeof(pad) - 1);
    size_t longest = 0;
    bool dropped_after = false;
    for (size_t n = DS_LINE_MAX - 400; n < DS_LINE_MAX - 100; n++) {
        ds_ev e;
        ds_ev_begin(&e, DS_EV_IMPORT);
        pad[n] = '\0';
        ds_ev_str(&e, "pad", pad);
        pad[n] = 'x';
        ds_ev_import(&e, &(ds_import_fields){.tensor = 0x7fffffff1234, .consumer = DS_NAME_OTHER,
                                             .producer = DS_NAME_UNKNOWN, .bytes = 4000000});
        if (ds_ev_finish(&e)) {
            assert_false(longest > 0 && dropped_after); /* nothing fits after a drop */
            longest = ds_ev_len(&e);
            assert_true(json_is_object(e.buf, longest));
        } else {
            dropped_after = longest > 0;
        }
    }
    /* "}" and "\n" fit in the reserve past the fields' limit */
    assert_int_equal(longest, DS_LINE_MAX - DS_EV_RESERVE + 1);
    assert_true(dropped_after);
}

/* The handoff events are written in the log's buffer itself
 * (ds_emit_<event>); the same fields built on the stack and copied
 * (ds_ev_<event> between begin and end) give the same line, in both
 * renderings, with a test's name among the context's fields. */
static void test_emitted_lines_match_built_ones(void **state)
{
    (void)state;
    static const char *const formats[][2] = {{"DLSHIM_FORMAT=jsonl", NULL},
                                             {"DLSHIM_FORMAT=text", NULL}};
    for (int f = 0; f < 2; f++) {
        harness_init(formats[f]);
        ds_context_set_test("tests/x.py::test_\"quoted\" name");
        ds_release_fields r = {.tensor = 0x1234, .consumed = true, .lifetime_ns = 77,
                               .producer = ds_name_intern("torch"), .consumer = -1};
        ds_emit_release(&r, ds_now_ns());
        ds_ev e;
        ds_ev_begin(&e, DS_EV_RELEASE);
        ds_ev_release(&e, &r);
        ds_ev_end(&e);
        ds_context_set_test(NULL);
        char *log = harness_read_log();
        char *second = strchr(log, '\n');
        assert_non_null(second);
        *second++ = '\0';
        second[strcspn(second, "\n")] = '\0';
        const char *a = f ? after_time(log) : strstr(log, "\"tid\""),
                   *b = f ? after_time(second) : strstr(second, "\"tid\"");
        assert_non_null(a);
        assert_non_null(b);
        if (!f) { /* past t_ns, which differs */
            a = strchr(strstr(a, "t_ns"), ',');
            b = strchr(strstr(b, "t_ns"), ',');
        }
        assert_string_equal(a, b);
        assert_non_null(strstr(log, "test"));
        free(log);
    }
}

/* A line written in place that is longer than DS_LINE_MAX is dropped
 * whole and counted; the buffer goes on with the next one. */
static void test_emitted_line_too_long_is_dropped(void **state)
{
    (void)state;
    harness_init(NULL);
    static char name[DS_TEST_MAX];
    memset(name, '\x01', sizeof(name) - 1); /* escapes to six times its size */
    ds_context_set_test(name);
    int64_t big[DS_MAX_NDIM];
    for (int i = 0; i < DS_MAX_NDIM; i++)
        big[i] = INT64_MIN;
    uint64_t before = ds_log_dropped();
    ds_export_fields x = {.tensor = 1, .shape = {big, DS_MAX_NDIM}, .strides = {big, DS_MAX_NDIM}};
    ds_emit_export(&x, ds_now_ns());
    ds_context_set_test(NULL);
    x.shape.n = x.strides.n = 1;
    ds_emit_export(&x, ds_now_ns());
    assert_int_equal(ds_log_dropped() - before, 1);
    char *log = harness_read_log();
    assert_int_equal(check_lines(log), 1);
    assert_int_equal(harness_count(log, "\"shape\":[-9223372036854775808]"), 1);
    free(log);
}

/* Written in place, a short array is remembered and copied when it comes
 * again (flat.c keeps the last rendering of a few): arrays that repeat,
 * arrays that share their slots, the same numbers in a longer array, each
 * reads back as it was. */
static void test_emitted_arrays_come_back_as_they_were(void **state)
{
    (void)state;
    harness_init(NULL);
    for (int round = 0; round < 2; round++)
        for (int64_t i = 0; i < 40; i++) {
            int64_t shape[3] = {i, i * 1000, -i}, strides[2] = {i % 3, 7};
            ds_export_fields x = {.tensor = (uintptr_t)i + 1,
                                  .shape = {shape, 1 + (int)(i % 3)},
                                  .strides = {strides, 2}};
            ds_emit_export(&x, ds_now_ns());
        }
    char *log = harness_read_log();
    assert_int_equal(check_lines(log), 80);
    for (long long i = 0; i < 40; i++) {
        char want[96];
        if (i % 3 == 0)
            snprintf(want, sizeof(want), "\"shape\":[%lld],\"strides\":[0,7]", i);
        else if (i % 3 == 1)
            snprintf(want, sizeof(want), "\"shape\":[%lld,%lld],\"strides\":[1,7]", i, i * 1000);
        else
            snprintf(want, sizeof(want), "\"shape\":[%lld,%lld,%lld],\"strides\":[2,7]", i,
                     i * 1000, -i);
        assert_int_equal(harness_count(log, want), 2);
    }
    free(log);
}

static void test_formatter(void **state)
{
    (void)state;
    char b[64];
    ds_fmt(b, sizeof(b), "%d|%5d|%-5d|%05d|%u|%x|%s|%c|%%", -42, 7, 7, 42, 4000000000u, 255,
           "str", 'z');
    assert_string_equal(b, "-42|    7|7    |00042|4000000000|ff|str|z|%");
    ds_fmt(b, sizeof(b), "%lld %llu %zu %ld %lx", (long long)INT64_MIN, 18446744073709551615ull,
           (size_t)12, -5L, 0xabcdefUL);
    assert_string_equal(b, "-9223372036854775808 18446744073709551615 12 -5 abcdef");
    ds_fmt(b, sizeof(b), "%p %s %-4s|", (void *)0x1234, (const char *)NULL, "ab");
    assert_string_equal(b, "0x1234 (null) ab  |");
    char tiny[5];
    assert_int_equal(ds_fmt(tiny, sizeof(tiny), "%s", "truncated"), 4);
    assert_string_equal(tiny, "trun");
    assert_int_equal(ds_fmt(tiny, 0, "x"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_every_line_is_json),
        cmocka_unit_test(test_overflow_is_dropped_and_counted),
        cmocka_unit_test(test_filtered_events_are_not_wanted),
        cmocka_unit_test(test_text_rendering),
        cmocka_unit_test(test_direct_text_matches_the_json_rendering),
        cmocka_unit_test(test_numbers_match_printf),
        cmocka_unit_test(test_generated_fields_keep_the_line_limit),
        cmocka_unit_test(test_emitted_lines_match_built_ones),
        cmocka_unit_test(test_emitted_line_too_long_is_dropped),
        cmocka_unit_test(test_emitted_arrays_come_back_as_they_were),
        cmocka_unit_test(test_formatter),
        cmocka_unit_test(test_threads_write_in_slots_of_their_own),
    };
    return cmocka_run_group_tests(tests, NULL, harness_teardown);
}
