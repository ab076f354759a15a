/* Unit tests of shim/base/safe_mem.c: reads and writes of memory the program
 * handed over never fault, and stop exactly at the first bad page. */
#include <sys/mman.h>

#include "base/base.h"
#include "harness.h"

#define PAGE 4096

/* Two pages, the second unmapped: [page0 | hole]. */
static char *page_before_hole(void)
{
    char *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    munmap(p + PAGE, PAGE);
    return p;
}

static void test_partial_read_stops_at_the_hole(void **state)
{
    (void)state;
    char *p = page_before_hole();
    memset(p, 'x', PAGE);
    char out[64];
    assert_int_equal(ds_safe_read(out, p + PAGE - 10, 64), 10);
    assert_int_equal(ds_safe_read(out, p + PAGE, 8), 0);
    assert_int_equal(ds_safe_read(out, p + PAGE - 8, 8), 8); /* now a proven page */
    assert_int_equal(ds_safe_read(out, p + PAGE - 8, 9), 8);
    munmap(p, PAGE);
}

static void test_garbage_addresses(void **state)
{
    (void)state;
    char out[16];
    assert_int_equal(ds_safe_read(out, NULL, 8), 0);
    assert_int_equal(ds_safe_read(out, (void *)(uintptr_t)0x7, 8), 0);
    assert_int_equal(ds_safe_read(out, (void *)(uintptr_t)0xdead0000, 8), 0);
    assert_int_equal(ds_safe_read(out, (void *)UINTPTR_MAX - 3, 8), 0);
    assert_int_equal(ds_safe_read(out, (void *)((uintptr_t)1 << 50), 8), 0);
    assert_false(ds_safe_write((void *)(uintptr_t)0xdead0000, out, 8));
}

static void test_write_respects_protection(void **state)
{
    (void)state;
    char *p = mmap(NULL, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    uint64_t v = 42;
    assert_false(ds_safe_write(p, &v, sizeof(v)));
    assert_int_equal(p[0], 0);
    mprotect(p, PAGE, PROT_READ | PROT_WRITE);
    assert_true(ds_safe_write(p, &v, sizeof(v)));
    assert_int_equal(*(uint64_t *)p, 42);
    v = 7;
    assert_true(ds_safe_write(p, &v, sizeof(v))); /* the cached path */
    assert_int_equal(*(uint64_t *)p, 7);
    munmap(p, PAGE);
}

/* Every length and alignment of a copy within a proven page (the plain
 * copy in words, its last word overlapping) copies exactly those bytes. */
static void test_every_length_copied_exactly(void **state)
{
    (void)state;
    char *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    for (int i = 0; i < PAGE; i++)
        p[i] = (char)(i * 7 + 1);
    char out[256 + 16];
    assert_int_equal(ds_safe_read(out, p, 8), 8); /* proves the page */
    for (size_t n = 0; n <= 256; n++)
        for (size_t off = 0; off < 16; off++) {
            memset(out, '#', sizeof(out));
            assert_int_equal(ds_safe_read(out, p + off, n), n);
            assert_memory_equal(out, p + off, n);
            for (size_t i = n; i < sizeof(out); i++)
                assert_int_equal(out[i], '#');
        }
    char in[256];
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (char)(255 - i);
    assert_true(ds_safe_write(p, in, 8)); /* proves it writable */
    for (size_t n = 1; n <= 256; n++) {
        memset(p + 100, '#', n + 16);
        assert_true(ds_safe_write(p + 100, in, n));
        assert_memory_equal(p + 100, in, n);
        for (size_t i = n; i < n + 16; i++)
            assert_int_equal(p[100 + i], '#');
    }
    munmap(p, PAGE);
}

static void test_strings(void **state)
{
    (void)state;
    char out[DS_NAME_MAX];
    ds_safe_string(out, sizeof(out), "torch", "unknown");
    assert_string_equal(out, "torch");
    ds_safe_string(out, sizeof(out), NULL, "unknown");
    assert_string_equal(out, "unknown");
    ds_safe_string(out, sizeof(out), "", "unknown");
    assert_string_equal(out, "unknown");
    ds_safe_string(out, sizeof(out), (const char *)(uintptr_t)0x10, "unknown");
    assert_string_equal(out, "unknown");
    /* A long name is cut to DS_NAME_MAX - 1 bytes. */
    ds_safe_string(out, sizeof(out), "a-very-long-module-name-that-goes-on-and-on-and-on", "?");
    assert_int_equal(strlen(out), DS_NAME_MAX - 1);
    /* No NUL before the hole: the readable part is kept. */
    char *p = page_before_hole();
    memcpy(p + PAGE - 4, "abcd", 4);
    ds_safe_string(out, sizeof(out), p + PAGE - 4, "?");
    assert_string_equal(out, "abcd");
    ds_safe_string(out, sizeof(out), p + PAGE - 4, "?"); /* again, page now proven */
    assert_string_equal(out, "abcd");
    munmap(p, PAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partial_read_stops_at_the_hole),
        cmocka_unit_test(test_garbage_addresses),
        cmocka_unit_test(test_write_respects_protection),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_every_length_copied_exactly),
    };
    ds_clock_start(); /* as start-up does first: the clock, and the pid the reads use */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
