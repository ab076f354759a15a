/* Unit tests of shim/image/entry_spec.c: the DLSHIM_ENTRY grammar, and every
 * error saying where and why. */
#include "image/image.h"
#include "harness.h"

static ds_entry_spec spec;
static char why[256];

static bool parse(const char *text)
{
    return ds_entry_parse(text, strlen(text), &spec, why, sizeof(why));
}

static void test_the_three_examples(void **state)
{
    (void)state;
    assert_true(parse("libprod.so:prod_make(i64,i64)->T@export"));
    assert_string_equal(spec.module, "libprod.so");
    assert_string_equal(spec.symbol, "prod_make");
    assert_int_equal(spec.nargs, 2);
    assert_int_equal(spec.arg_type[0], DS_ET_I64);
    assert_int_equal(spec.ret_type, DS_ET_T);
    assert_int_equal(spec.ret_role, DS_ER_EXPORT);

    assert_true(parse("libcons.so:cons_take(T@import,ptr)->i32"));
    assert_int_equal(spec.arg_type[0], DS_ET_T);
    assert_int_equal(spec.arg_role[0], DS_ER_IMPORT);
    assert_int_equal(spec.arg_type[1], DS_ET_PTR);
    assert_int_equal(spec.ret_type, DS_ET_I32);

    assert_true(parse("libbridge.so:bridge_share(V@export,i32)->void"));
    assert_int_equal(spec.arg_type[0], DS_ET_V);
    assert_int_equal(spec.arg_role[0], DS_ER_EXPORT);
    assert_int_equal(spec.ret_type, DS_ET_VOID);
}

static void test_other_valid_forms(void **state)
{
    (void)state;
    assert_true(parse("  take ( T @ import , str, f64, bool, size )  "));
    assert_string_equal(spec.module, "");
    assert_int_equal(spec.nargs, 5);
    assert_int_equal(spec.arg_role[0], DS_ER_IMPORT);
    assert_int_equal(spec.ret_type, DS_ET_VOID); /* no arrow: returns void */
    assert_true(parse("noargs()"));
    assert_int_equal(spec.nargs, 0);
    assert_true(parse("/opt/x/libz.so.1:_ZN2at8toDLPackERKNS_6TensorE(ptr)->T@export"));
    assert_string_equal(spec.module, "/opt/x/libz.so.1");
}

static void expect_error(const char *text, const char *column_and_reason)
{
    assert_false(parse(text));
    if (!strstr(why, column_and_reason))
        fail_msg("%s: got \"%s\", expected \"%s\"", text, why, column_and_reason);
}

static void test_errors_say_where_and_why(void **state)
{
    (void)state;
    expect_error("prod_make", "column 10: expected '(' after the function name");
    expect_error("lib.so:(i64)", "column 8: expected a function name");
    expect_error(":f(i64)", "column 1: empty module name");
    expect_error("pro-d(i64)", "column 4: a function name is letters, digits and '_'");
    expect_error("f(i65)", "column 3: unknown type");
    expect_error("f(i65)", "found 'i65'");
    expect_error("f(void)", "column 3: void is only a return type");
    expect_error("f(i64@export)", "column 3: a role goes with T or V");
    expect_error("f(T@lend)", "column 5: unknown role (expected export or import), found 'lend'");
    expect_error("f(T@)", "column 5: unknown role");
    expect_error("f()->T@import", "column 8: a returned tensor can only be @export");
    expect_error("f(i64 i64)", "column 7: expected ',' or ')' after an argument, found 'i'");
    expect_error("f(i64,", "column 7: expected a type");
    expect_error("f(i64", "column 6: expected ',' or ')'");
    expect_error("f(i64) junk", "column 8: unexpected text after the spec, found 'j'");
    expect_error("f()->", "column 6: expected a return type after '->'");
    expect_error("f(i8,i8,i8,i8,i8,i8,i8,i8,i8,i8,i8,i8,i8,i8,i8,i8,i8)", "more than 16 arguments");
}

static int found;
static void count(const ds_entry_spec *s, void *arg)
{
    (void)s;
    (void)arg;
    found++;
}

static void run_list(void *arg)
{
    const char *text = arg;
    ds_entry_parse_list(text, strlen(text), strchr(text, '\n') != NULL, "test", count, NULL);
}

static void test_lists(void **state)
{
    (void)state;
    found = 0;
    char *err = harness_stderr_of(run_list, "a(i64) ; b(T@import) ;; c(i64 ; d()");
    assert_int_equal(found, 3);
    assert_non_null(strstr(err, "test spec 4 (\"c(i64\"): column 6"));
    free(err);
    found = 0;
    err = harness_stderr_of(run_list, "# specs\na(i64)   # trailing comment\n\n  b(bogus)\nc()\n");
    assert_int_equal(found, 2);
    assert_non_null(strstr(err, "test line 4 (\"b(bogus)\"): column 5: unknown type"));
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_three_examples),
        cmocka_unit_test(test_other_valid_forms),
        cmocka_unit_test(test_errors_say_where_and_why),
        cmocka_unit_test(test_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
