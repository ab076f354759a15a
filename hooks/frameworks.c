/*
 * frameworks.c — which framework a module belongs to: the one place
 * framework names appear.  Producer, consumer and (later) allocation owner
 * names come from here, by the path of the module that made the call.
 */
#include <errno.h>
#include <string.h>

#include "hooks.h"

/* Directories that name a framework. */
static const struct {
    const char *fragment, *name;
} dirs[] = {
    {"/torch/", "torch"},   {"/numpy/", "numpy"},           {"/cupy/", "cupy"},
    {"/cupy_backends/", "cupy"}, {"/jaxlib/", "jax"},       {"/jax/", "jax"},
    {"/tensorflow/", "tensorflow"}, {"/mlx/", "mlx"},       {"/paddle/", "paddle"},
    {"/tvm_ffi/", "tvm_ffi"}, {"/tvm/", "tvm"},      {"/pyarrow/", "pyarrow"},
    {"/warp/", "warp"},     {"/wgpu/", "wgpu"},
};

/* Library file names that do, wherever they live: the prefix followed by
 * '.' or '_' (libtorch.so, libtorch_cuda.so; not libtorchvision.so). */
static const struct {
    const char *prefix, *name;
} libs[] = {
    {"libtorch", "torch"}, {"libc10", "torch"}, {"libtensorflow", "tensorflow"},
    {"libjax", "jax"},     {"libcupy", "cupy"},   {"libwgpu_native", "wgpu"},
};

/* Modules that only pass a call on (ctypes and the libffi under it): a
 * handoff made through them is named after the Python code that called. */
static const char *const call_bridges[] = {"libffi", "_ctypes"};
_Static_assert(DS_ARRAY_LEN(call_bridges) <= DS_BRIDGES_MAX, "room for the bridges' ids");
uint16_t ds_bridges[DS_BRIDGES_MAX];
uint64_t ds_bridge_bits;

/* Where installed Python packages live. */
static const char *const roots[] = {"/site-packages/", "/dist-packages/"};

/* The framework a path lies in: only below the last package root, when it
 * has one (the place a virtual environment was made, /opt/torch/.venv say,
 * names nothing), and the outermost directory there ("jax/numpy/" is jax). */
static const char *framework_dir(const char *path)
{
    const char *from = path;
    for (size_t r = 0; r < DS_ARRAY_LEN(roots); r++)
        for (const char *at = strstr(path, roots[r]); at; at = strstr(at + 1, roots[r]))
            if (at > from)
                from = at + strlen(roots[r]) - 1; /* the '/' before the package */
    const char *name = NULL, *first = NULL;
    for (size_t i = 0; i < DS_ARRAY_LEN(dirs); i++) {
        const char *at = strstr(from, dirs[i].fragment);
        if (at && (!first || at < first)) {
            first = at;
            name = dirs[i].name;
        }
    }
    return name;
}

/* Anything else: the file's base name up to the first dot
 * ("myext.cpython-311-x86_64-linux-gnu.so" → "myext"); the program's own
 * name for the executable. */
void ds_framework_name(const char *path, char *out, size_t cap)
{
    const char *framework = framework_dir(path);
    if (framework) {
        ds_fmt(out, cap, "%s", framework);
        return;
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; i < DS_ARRAY_LEN(libs); i++) {
        size_t n = strlen(libs[i].prefix);
        if (!strncmp(base, libs[i].prefix, n) && (base[n] == '.' || base[n] == '_')) {
            ds_fmt(out, cap, "%s", libs[i].name);
            return;
        }
    }
    if (!*base)
        base = program_invocation_short_name;
    size_t len = strcspn(base, ".");
    ds_printable(out, len + 1 < cap ? len + 1 : cap, base, len);
}

/* A Python source file's package: a framework directory above, else the
 * first directory under site-packages / dist-packages, else the file's stem
 * (a script: "train.py" → "train"). */
void ds_python_package_name(const char *file, char *out, size_t cap)
{
    const char *framework = framework_dir(file);
    if (framework) {
        ds_fmt(out, cap, "%s", framework);
        return;
    }
    for (size_t i = 0; i < DS_ARRAY_LEN(roots); i++) {
        const char *at = strstr(file, roots[i]);
        if (at) {
            const char *pkg = at + strlen(roots[i]);
            size_t len = strcspn(pkg, "/.");
            ds_printable(out, len + 1 < cap ? len + 1 : cap, pkg, len);
            return;
        }
    }
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    size_t len = strcspn(base, ".");
    ds_printable(out, len + 1 < cap ? len + 1 : cap, base, len);
}

/* Whether a Python source file belongs to a framework's own package (or to
 * dlshim's): installed (under site-packages or dist-packages) in one of the
 * directories above.  A user's file is what a source location should name. */
bool ds_python_framework_file(const char *file)
{
    for (size_t r = 0; r < DS_ARRAY_LEN(roots); r++) {
        const char *at = strstr(file, roots[r]);
        if (!at)
            continue;
        at += strlen(roots[r]) - 1; /* from the '/' before the package */
        if (!strncmp(at, "/dlshim/", 8))
            return true;
        for (size_t i = 0; i < DS_ARRAY_LEN(dirs); i++)
            if (!strncmp(at, dirs[i].fragment, strlen(dirs[i].fragment)))
                return true;
    }
    return false;
}

/* Out of line: its name buffer would make every ds_caller_id save
 * registers and open a frame. */
__attribute__((noinline)) uint16_t ds_package_behind(uint16_t bridge)
{
    char package[DS_NAME_MAX];
    return ds_py_package_here(package, sizeof(package)) ? ds_name_intern(package) : bridge;
}

/* The ledger's way to ds_caller_id's answer (it cannot call up here). */
static uint16_t caller_behind(uint16_t module)
{
    return ds_call_bridge(module) ? ds_package_behind(module) : module;
}

/* Before any family: producers, consumers and owners are named from here. */
static void install(void)
{
    for (size_t i = 0; i < DS_ARRAY_LEN(call_bridges); i++) {
        ds_bridges[i] = ds_name_intern(call_bridges[i]);
        if (ds_bridges[i] < 64)
            ds_bridge_bits |= 1ull << ds_bridges[i];
    }
    ds_modules_set_namer(ds_framework_name);
    ds_modules_set_caller_namer(caller_behind);
}

DS_FAMILY(names, .order = DS_ORDER_NAMES, .install = install);
