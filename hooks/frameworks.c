/*
 * frameworks.c — which framework a module belongs to: the one place
 * framework names appear.  Producer, consumer and (later) allocation owner
 * names come from here, by the path of the module that made the call.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

/* Path fragments, most specific first. */
static const struct {
    const char *fragment, *name;
} known[] = {
    {"/torch/", "torch"},           {"/libtorch", "torch"},     {"/numpy/", "numpy"},
    {"/cupy/", "cupy"},             {"/cupy_backends/", "cupy"}, {"/jaxlib/", "jax"},
    {"/jax/", "jax"},               {"/tensorflow/", "tensorflow"}, {"/mlx/", "mlx"},
    {"/paddle/", "paddle"},         {"/tvm_ffi/", "tvm_ffi"},   {"/tvm/", "tvm"},
};

/* Anything else: the file's base name up to the first dot
 * ("myext.cpython-311-x86_64-linux-gnu.so" → "myext"); the program's own
 * name for the executable. */
void ds_framework_name(const char *path, char *out, size_t cap)
{
    for (size_t i = 0; i < DS_ARRAY_LEN(known); i++)
        if (strstr(path, known[i].fragment)) {
            ds_fmt(out, cap, "%s", known[i].name);
            return;
        }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!*base)
        base = program_invocation_short_name;
    size_t len = strcspn(base, ".");
    ds_printable(out, len + 1 < cap ? len + 1 : cap, base, len);
}
