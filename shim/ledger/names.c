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

#include "internal.h"

#define DS_NAMES_MAX 256

static char names[DS_NAMES_MAX][DS_NAME_MAX] = {"unknown", "other"};
static uint32_t hashes[DS_NAMES_MAX]; /* compared before the names: interning is per event */
/* The length of a name that events write as it is (see word_length), else 0:
 * found once here rather than in every event that names it. */
static uint8_t word_lengths[DS_NAMES_MAX] = {sizeof("unknown") - 1, sizeof("other") - 1};
static atomic_uint count = 2;

/* FNV-1a of the first DS_NAME_MAX - 1 bytes, as the names are kept. */
static uint32_t hash_of(const char *name)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < DS_NAME_MAX - 1 && name[i]; i++)
        h = (h ^ (unsigned char)name[i]) * 16777619u;
    return h;
}

/* n if the name is a word of the events (ds_ev_word): non-empty, printable
 * ASCII without space, quote or backslash; else 0. */
static uint8_t word_length(const char *name, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (name[i] <= ' ' || name[i] > '~' || name[i] == '"' || name[i] == '\\')
            return 0;
    return (uint8_t)n;
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
        word_lengths[n] = word_length(name, len);
        atomic_store_explicit(&count, n + 1, memory_order_release);
        id = (uint16_t)n;
    }
    ds_lock_give(DS_LOCK_NAMES);
    return id;
}

const char *ds_name_word(uint16_t id, size_t *word_len)
{
    if (id >= atomic_load_explicit(&count, memory_order_acquire))
        id = DS_NAME_UNKNOWN;
    *word_len = word_lengths[id];
    return names[id];
}

const char *ds_name(uint16_t id)
{
    return id < atomic_load_explicit(&count, memory_order_acquire) ? names[id]
                                                                    : names[DS_NAME_UNKNOWN];
}
