/* Unit tests of shim/image/elf.c and shim/image/modules.c: GOT patching of modules
 * linked every way (lazy, partial RELRO, full RELRO, -fno-plt), re-patching
 * after dlclose, RELRO protection restored, malformed images refused. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include "image/image.h"
#include "harness.h"

static int (*real_target)(int), (*real_target2)(int);
static int wrapped_calls;

static int wrapper(int x)
{
    wrapped_calls++;
    return DS_REAL(wrapper, real_target, "target_fn")(x) + 1000;
}

static int wrapper2(int x)
{
    return DS_REAL(wrapper2, real_target2, "target_fn2")(x) + 2000;
}

static const ds_got_hook hooks[] = {
    {"target_fn", (void *)wrapper, (void **)&real_target, NULL},
    {"target_fn2", (void *)wrapper2, (void **)&real_target2, NULL},
};

static int (*real_target3)(int);

static int wrapper3(int x)
{
    return DS_REAL(wrapper3, real_target3, "target_fn3")(x) + 3000;
}

/* Hooked in every module but those whose file name starts with
 * "libtarget_relro". */
static const ds_got_hook hook_with_exception[] = {
    {"target_fn3", (void *)wrapper3, (void **)&real_target3, NULL},
};

static const char *variants[] = {"lazy", "relro", "now", "noplt"};

static void *open_variant(const char *v)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/libtarget_%s.so", ELF_TEST_DIR, v);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        fail_msg("%s", dlerror());
    ds_modules_refresh(); /* what the dlopen hook does in the library */
    return h;
}

static void close_variant(void *h)
{
    dlclose(h);
    ds_modules_refresh(); /* what the dlclose hook does */
}

/* Two modules bound to two definitions of one hooked name (two bundled
 * copies of a library, RTLD_LOCAL): each call reaches its caller's own, the
 * first time and from the per-thread memo after.  Runs first: an unloaded
 * definition (the tests below) marks the hook diverged for good. */
static void test_each_module_reaches_its_own_definition(void **state)
{
    (void)state;
    static atomic_uint gate; /* raised when a hook's definitions part */
    ds_got_hooks_add_gated(hooks, 2, NULL, &gate);
    void *mine = open_variant("now");
    assert_int_equal(atomic_load(&gate), 0); /* one definition: the fast path holds */
    void *other = open_variant("other");
    assert_true(atomic_load(&gate) > 0);
    int (*call_mine)(int) = (int (*)(int))dlsym(mine, "call_target");
    int (*call_other)(int) = (int (*)(int))dlsym(other, "call_target");
    assert_non_null(call_mine);
    assert_non_null(call_other);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(call_mine(1), 1002);  /* libimpl.so: 2x */
        assert_int_equal(call_other(1), 1005); /* libimpl_other.so: 5x */
    }
    close_variant(other);
    close_variant(mine);
}

static void test_every_link_variant_is_patched(void **state)
{
    (void)state;
    ds_got_hooks_add(hooks, 2);
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        void *h = open_variant(variants[i]);
        int (*call)(int) = (int (*)(int))dlsym(h, "call_target");
        int (*(*address)(void))(int) = (int (*(*)(void))(int))dlsym(h, "target_address");
        assert_non_null(call);
        wrapped_calls = 0;
        assert_int_equal(call(21), 1042);        /* wrapped, and forwarded */
        assert_int_equal(wrapped_calls, 1);
        assert_int_equal(address()(1), 2003); /* the address taken is the wrapper's */
        close_variant(h);
    }
}

static void test_reloaded_module_is_patched_again(void **state)
{
    (void)state;
    ds_got_hooks_add(hooks, 2);
    for (int round = 0; round < 3; round++) {
        void *h = open_variant("now");
        int (*call)(int) = (int (*)(int))dlsym(h, "call_target");
        assert_int_equal(call(1), 1002);
        close_variant(h);
    }
}

/* A module named in a hook's exceptions keeps its own slot (another family
 * sees its calls); every other module is patched. */
static void test_excepted_module_keeps_its_slot(void **state)
{
    (void)state;
    static const char *const excepted[] = {"libnone", "libtarget_relro", NULL};
    ds_got_hooks_add_except(hook_with_exception, 1, excepted);
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
        void *h = open_variant(variants[i]);
        int (*call)(int) = (int (*)(int))dlsym(h, "call_target3");
        assert_non_null(call);
        assert_int_equal(call(1), !strcmp(variants[i], "relro") ? 4 : 3004);
        close_variant(h);
    }
}

typedef struct {
    void **slot;
} find_ctx;

static void find_slot(void **slot, const char *name, void *arg)
{
    if (!strcmp(name, "target_fn"))
        ((find_ctx *)arg)->slot = slot;
}

static int find_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    if (!strstr(info->dlpi_name, "libtarget_now.so"))
        return 0;
    return ds_elf_open(arg, info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum) == NULL;
}

/* "rw" or "r-" for the page holding addr, from /proc/self/maps. */
static void page_perms(const void *addr, char out[3])
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    out[0] = '\0';
    while (fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && (uintptr_t)addr >= lo &&
            (uintptr_t)addr < hi) {
            out[0] = perms[0], out[1] = perms[1], out[2] = '\0';
            break;
        }
    }
    fclose(f);
}

static void test_relro_stays_read_only(void **state)
{
    (void)state;
    ds_got_hooks_add(hooks, 2);
    void *h = open_variant("now");
    ds_elf_module m;
    assert_int_equal(dl_iterate_phdr(find_module, &m), 1);
    find_ctx c = {NULL};
    ds_elf_each_import(&m, find_slot, &c);
    assert_non_null(c.slot);
    assert_true((uintptr_t)c.slot >= m.relro_lo && (uintptr_t)c.slot < m.relro_hi);
    assert_ptr_equal(*c.slot, (void *)wrapper);
    char perms[3];
    page_perms(c.slot, perms);
    assert_string_equal(perms, "r-");
    close_variant(h);
}

/* ---- malformed images are refused, never followed ----------------------- */
static union {
    uint64_t align;
    unsigned char bytes[4096];
} image;

static Elf64_Phdr phdrs[2];

static const char *open_fake(Elf64_Dyn *dyn, size_t ndyn)
{
    memset(&image, 0, sizeof(image));
    memcpy(image.bytes + 512, dyn, ndyn * sizeof(*dyn));
    phdrs[0] = (Elf64_Phdr){.p_type = PT_LOAD, .p_vaddr = 0, .p_memsz = sizeof(image)};
    phdrs[1] = (Elf64_Phdr){.p_type = PT_DYNAMIC, .p_vaddr = 512, .p_memsz = ndyn * sizeof(*dyn)};
    ds_elf_module m;
    return ds_elf_open(&m, (uintptr_t)image.bytes, phdrs, 2);
}

static void test_malformed_images(void **state)
{
    (void)state;
    uintptr_t base = (uintptr_t)image.bytes;
    Elf64_Dyn outside_strtab[] = {{DT_SYMTAB, {64}}, {DT_STRTAB, {1 << 20}}, {DT_STRSZ, {10}},
                                  {DT_NULL, {0}}};
    assert_non_null(open_fake(outside_strtab, 4));
    Elf64_Dyn huge_strsz[] = {{DT_SYMTAB, {64}}, {DT_STRTAB, {1024}}, {DT_STRSZ, {UINT64_MAX}},
                              {DT_NULL, {0}}};
    assert_non_null(open_fake(huge_strsz, 4));
    Elf64_Dyn outside_rela[] = {{DT_SYMTAB, {64}}, {DT_STRTAB, {1024}}, {DT_STRSZ, {10}},
                                {DT_JMPREL, {4000}}, {DT_PLTRELSZ, {4096}}, {DT_NULL, {0}}};
    assert_non_null(open_fake(outside_rela, 6));
    Elf64_Dyn no_symtab[] = {{DT_STRTAB, {1024}}, {DT_STRSZ, {10}}, {DT_NULL, {0}}};
    assert_non_null(open_fake(no_symtab, 3));
    Elf64_Dyn rel_not_rela[] = {{DT_SYMTAB, {64}}, {DT_STRTAB, {1024}}, {DT_STRSZ, {10}},
                                {DT_PLTREL, {DT_REL}}, {DT_NULL, {0}}};
    assert_non_null(open_fake(rel_not_rela, 5));
    /* Well formed, with relocations whose symbols and slots are out of range:
     * opened, and the bad entries skipped. */
    Elf64_Dyn good[] = {{DT_SYMTAB, {64}}, {DT_STRTAB, {1024}}, {DT_STRSZ, {32}},
                        {DT_JMPREL, {2048}}, {DT_PLTRELSZ, {3 * sizeof(Elf64_Rela)}},
                        {DT_NULL, {0}}};
    assert_null(open_fake(good, 6));
    Elf64_Rela *rel = (Elf64_Rela *)(image.bytes + 2048);
    rel[0] = (Elf64_Rela){.r_offset = 3000, .r_info = ELF64_R_INFO(1, R_X86_64_JUMP_SLOT)};
    rel[1] = (Elf64_Rela){.r_offset = 1u << 30, .r_info = ELF64_R_INFO(1, R_X86_64_JUMP_SLOT)};
    rel[2] = (Elf64_Rela){.r_offset = 3008, .r_info = ELF64_R_INFO(100000, R_X86_64_GLOB_DAT)};
    Elf64_Sym *sym = (Elf64_Sym *)(image.bytes + 64);
    sym[1].st_name = 1;
    memcpy(image.bytes + 1024, "\0target_fn", 11);
    memset(image.bytes + 1024 + 11, 'x', 32 - 11); /* an unterminated tail */
    ds_elf_module m;
    assert_null(ds_elf_open(&m, base, phdrs, 2));
    find_ctx c = {NULL};
    ds_elf_each_import(&m, find_slot, &c);
    assert_ptr_equal(c.slot, (void *)(image.bytes + 3000)); /* only the in-range one */
    assert_null(ds_elf_string(&m, 12));  /* no NUL before the table's end */
    assert_null(ds_elf_string(&m, 1000));
}

/* Each address is named by the module holding it, however the addresses
 * asked about share the per-thread memo of exact addresses: 128 addresses
 * in two modules, asked in turn, three times over, share its few slots. */
static char in_this_program[64 * 64];

static void test_module_of_each_address(void **state)
{
    (void)state;
    ds_modules_refresh();
    Dl_info libc;
    assert_true(dladdr((void *)&strlen, &libc) && libc.dli_fbase);
    const char *in_libc = (const char *)libc.dli_fbase + 4096; /* its first segment */
    uint16_t program = ds_module_id_at(in_this_program);
    uint16_t c = ds_module_id_at(in_libc);
    assert_int_not_equal(program, c);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 64; i++) {
            assert_int_equal(ds_module_id_at(&in_this_program[i * 64]), program);
            assert_int_equal(ds_module_id_at(in_libc + i * 64), c);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_module_reaches_its_own_definition),
        cmocka_unit_test(test_every_link_variant_is_patched),
        cmocka_unit_test(test_reloaded_module_is_patched_again),
        cmocka_unit_test(test_excepted_module_keeps_its_slot),
        cmocka_unit_test(test_relro_stays_read_only),
        cmocka_unit_test(test_malformed_images),
        cmocka_unit_test(test_module_of_each_address),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
