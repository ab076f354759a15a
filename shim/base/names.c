/*
 * names.c — producer and consumer names, interned to small ids so records
 * and pair counters stay small.  Id 0 is "unknown".  The table is bounded:
 * names past DS_NAMES_MAX share the id of "other".  Interning takes its own
 * (innermost) lock, since both the registry and the allocation index intern
 * under their locks; reading a name needs none (entries are written before
 * the count that publishes them, and never change).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "base/base.h"

#define DS_NAMES_MAX 256

static char names[DS_NAMES_MAX][DS_NAME_MAX] = {"unknown", "other"};
static uint32_t hashes[DS_NAMES_MAX]; /* compared before the names: interning is per event */
/* Each name as events write it, [0] in JSON and [1] in text (put.c's
 * string rendering), made once here rather than escaped in every event;
 * len 0: longer than a slot. */
static ds_rendered rendered[2][DS_NAMES_MAX] = {
    {{"\"unknown\"", 9}, {"\"other\"", 7}},
    {{"unknown", 7}, {"other", 5}},
};
static atomic_uint count = 2;

/* FNV-1a of the first DS_NAME_MAX - 1 bytes, as the names are kept. */
static uint32_t hash_of(const char *name)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < DS_NAME_MAX - 1 && name[i]; i++)
        h = (h ^ (unsigned char)name[i]) * 16777619u;
    return h;
}

static void render(ds_rendered *r, const char *name, size_t n, bool text)
{
    char *end = ds_put_str_bounded(r->bytes, sizeof(r->bytes), name, n, text);
    r->len = end ? (uint8_t)(end - r->bytes) : 0;
}

static uint16_t find(const char *name, uint32_t hash, unsigned n)
{
    for (unsigned i = 2; i < n; i++)
        if (hashes[i] == hash && strncmp(names[i], name, DS_NAME_MAX - 1) == 0)
            return (uint16_t)i;
    for (unsigned i = 0; i < 2; i++) /* "unknown" and "other", which have no hash */
        if (strncmp(names[i], name, DS_NAME_MAX - 1) == 0)
            return (uint16_t)i;
    return UINT16_MAX;
}

uint16_t ds_name_intern(const char *name)
{
    if (!name || !*name)
        return DS_NAME_UNKNOWN;
    uint32_t hash = hash_of(name);
    uint16_t id = find(name, hash, atomic_load_explicit(&count, memory_order_acquire));
    if (id != UINT16_MAX)
        return id;
    ds_lock_take(DS_LOCK_NAMES);
    unsigned n = atomic_load_explicit(&count, memory_order_relaxed);
    id = find(name, hash, n);
    if (id == UINT16_MAX && n == DS_NAMES_MAX)
        id = DS_NAME_OTHER;
    if (id == UINT16_MAX) {
        size_t len = strnlen(name, DS_NAME_MAX - 1);
        memcpy(names[n], name, len);
        names[n][len] = '\0';
        hashes[n] = hash;
        render(&rendered[0][n], name, len, false);
        render(&rendered[1][n], name, len, true);
        atomic_store_explicit(&count, n + 1, memory_order_release);
        id = (uint16_t)n;
    }
    ds_lock_give(DS_LOCK_NAMES);
    return id;
}

const ds_rendered *ds_name_rendered(uint16_t id, bool text)
{
    if (id >= atomic_load_explicit(&count, memory_order_acquire))
        id = DS_NAME_UNKNOWN;
    const ds_rendered *r = &rendered[text][id];
    return r->len ? r : NULL;
}

const char *ds_name(uint16_t id)
{
    return id < atomic_load_explicit(&count, memory_order_acquire) ? names[id]
                                                                    : names[DS_NAME_UNKNOWN];
}
