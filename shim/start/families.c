/*
 * families.c — the hook families, as hooks/ declares them.
 *
 * Each family in hooks/ declares itself with DS_FAMILY (hooks/hooks.h): a
 * descriptor placed in the `ds_families` section, whose bounds the linker
 * names __start_ds_families and __stop_ds_families.  The core finds them
 * there, sorts them by `order` and installs those DLSHIM_HOOKS turns on,
 * without naming any: the core depends on no file of hooks/, and a
 * build of the core alone (its unit tests) simply has none, or fakes.
 */
#include <string.h>

#include "start/start.h"

/* Weak: a program made of the core alone has no such section. */
extern const ds_family __start_ds_families[] __attribute__((weak, visibility("hidden")));
extern const ds_family __stop_ds_families[] __attribute__((weak, visibility("hidden")));

#define DS_FAMILIES_MAX 32
static const ds_family *sorted[DS_FAMILIES_MAX];
static int nsorted = -1;

/* Read once, at start-up (one thread); static data after that. */
static void collect(void)
{
    if (nsorted >= 0)
        return;
    /* The section's size in bytes: two symbols of one section, as integers. */
    size_t bytes = (uintptr_t)__stop_ds_families - (uintptr_t)__start_ds_families;
    int n = 0;
    for (size_t i = 0; i < bytes / sizeof(ds_family) && n < DS_FAMILIES_MAX; i++)
        sorted[n++] = &__start_ds_families[i];
    for (int i = 1; i < n; i++) { /* insertion sort: a handful of families */
        const ds_family *x = sorted[i];
        int j = i;
        for (; j > 0 && sorted[j - 1]->order > x->order; j--)
            sorted[j] = sorted[j - 1];
        sorted[j] = x;
    }
    nsorted = n;
}

int ds_families_count(void)
{
    collect();
    return nsorted;
}

const ds_family *ds_family_at(int i)
{
    collect();
    return i >= 0 && i < nsorted ? sorted[i] : NULL;
}

int ds_hook_options(const char **names, int max)
{
    int n = 0;
    for (int i = 0; i < ds_families_count(); i++) {
        const char *option = sorted[i]->option;
        bool seen = !option;
        for (int k = 0; k < n && !seen; k++)
            seen = !strcmp(names[k], option);
        if (!seen && n < max)
            names[n++] = option;
    }
    return n;
}

/* The bit of `option` in DLSHIM_HOOKS' mask; -1 if none. */
static int option_bit(const char *option)
{
    const char *names[32];
    int n = ds_hook_options(names, 32);
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], option))
            return i;
    return -1;
}

uint32_t ds_hook_options_default(void)
{
    const char *names[32];
    int n = ds_hook_options(names, 32);
    uint32_t mask = 0;
    for (int i = 0; i < n; i++) {
        bool optional = false;
        for (int f = 0; f < ds_families_count(); f++)
            if (sorted[f]->option && !strcmp(sorted[f]->option, names[i]))
                optional |= sorted[f]->optional;
        if (!optional)
            mask |= 1u << i;
    }
    return mask;
}

void ds_families_announce(void)
{
    const char *names[32];
    int n = ds_hook_options(names, 32);
    ds_config_hook_names(names, n, ds_hook_options_default());
}

bool ds_hook_option_on(const char *option)
{
    int bit = option_bit(option);
    return bit >= 0 && (ds_cfg.hooks & (1u << bit));
}

void ds_families_install(void)
{
    for (int i = 0; i < ds_families_count(); i++)
        if (sorted[i]->install && (!sorted[i]->option || ds_hook_option_on(sorted[i]->option)))
            sorted[i]->install();
    ds_modules_refresh();
}

void ds_families_started(void)
{
    for (int i = 0; i < ds_families_count(); i++)
        if (sorted[i]->started && (!sorted[i]->option || ds_hook_option_on(sorted[i]->option)))
            sorted[i]->started();
}
