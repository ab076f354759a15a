/* libFuzzer target: the DLSHIM_ENTRY grammar, one spec and lists (both the
 * ';'-separated and the one-per-line forms).  Every accepted spec must be
 * within the struct's bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const ds_entry_spec *s, void *arg)
{
    (void)arg;
    if (s->nargs < 0 || s->nargs > DS_ENTRY_ARGS_MAX || !memchr(s->symbol, 0, sizeof(s->symbol)) ||
        !memchr(s->module, 0, sizeof(s->module)) || !s->symbol[0])
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[128];
    ds_entry_spec spec;
    if (ds_entry_parse((const char *)data, size, &spec, why, sizeof(why)))
        check(&spec, NULL);
    else if (!memchr(why, 0, sizeof(why)))
        abort();
    ds_entry_parse_list((const char *)data, size, false, "fuzz", check, NULL);
    ds_entry_parse_list((const char *)data, size, true, "fuzz", check, NULL);
    return 0;
}
