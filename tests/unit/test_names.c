/* Unit tests of the names given to modules and Python files
 * (hooks/frameworks.c, compiled in): a framework is named by the package it
 * lies in below site-packages, never by the directory the environment was
 * made in (/opt/torch/.venv on the GPU machines: every module there was
 * "torch"), and by its outermost framework directory (jax/numpy is jax). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "hooks.h"

#define VENV "/opt/torch/.venv/lib/python3.12/site-packages"

/* frameworks.c names a ctypes caller by the running Python line's package,
 * which lives in python_locations.c: with no interpreter here, there is none. */
bool ds_py_package_here(char *out, size_t cap)
{
    (void)out;
    (void)cap;
    return false;
}

static const char *module(const char *path)
{
    static char out[DS_NAME_MAX];
    ds_framework_name(path, out, sizeof(out));
    return out;
}

static const char *package(const char *file)
{
    static char out[DS_NAME_MAX];
    ds_python_package_name(file, out, sizeof(out));
    return out;
}

static void modules_are_named_by_their_package(void **state)
{
    (void)state;
    assert_string_equal(module(VENV "/cupy/_core/dlpack.cpython-312-x86_64-linux-gnu.so"), "cupy");
    assert_string_equal(module(VENV "/jaxlib/_jax.so"), "jax");
    assert_string_equal(module(VENV "/torch/lib/libtorch_python.so"), "torch");
    assert_string_equal(module(VENV "/nvidia/cu13/lib/libcudart.so.13"), "libcudart");
    assert_string_equal(module("/usr/lib/python3/dist-packages/numpy/core/_multiarray_umath.so"),
                        "numpy");
    /* Outside any package root, as before: a directory or the library's name. */
    assert_string_equal(module("/home/me/build/torch/lib/libc10.so"), "torch");
    assert_string_equal(module("/usr/lib/x86_64-linux-gnu/libtorch_cuda.so"), "torch");
}

static void python_files_are_named_by_their_package(void **state)
{
    (void)state;
    assert_string_equal(package(VENV "/jax/numpy/__init__.py"), "jax");
    assert_string_equal(package(VENV "/cupy/_creation/from_data.py"), "cupy");
    assert_string_equal(package(VENV "/einops/einops.py"), "einops");
    assert_string_equal(package("/opt/work/train.py"), "train");
    /* Outside a package root a framework directory still counts: a source
     * checkout (pytorch/torch/utils/dlpack.py). */
    assert_string_equal(package("/home/me/pytorch/torch/utils/dlpack.py"), "torch");
    assert_true(ds_python_framework_file(VENV "/cupy/__init__.py"));
    assert_false(ds_python_framework_file("/opt/torch/train.py"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(modules_are_named_by_their_package),
        cmocka_unit_test(python_files_are_named_by_their_package),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
