/*
 * sites.c — places in the program's source ("file.py:LINE in function"),
 * interned to small ids, so a tensor's record can keep where it was
 * exported and released and a later violation can name both lines.
 *
 * The table is bounded (DS_SITES_MAX): a program has as many sites as lines
 * that share tensors, a few hundred at most; past the bound a site has no id
 * (0) and is named only where it happens.  Mapped on first use (a program
 * without an interpreter never has a site).  Interning takes its own lock;
 * reading a site's text needs none: it is written before the count that
 * publishes it, and never changes.
 */
#include <stdatomic.h>
#include <string.h>

#include "base/base.h"

#define DS_SITES_MAX 4096
#define DS_SITES_INDEX ((size_t)2 * DS_SITES_MAX) /* open addressing, a power of two */

typedef struct {
    uint32_t hash;
    char text[DS_SITE_MAX];
} site;

static site *sites;       /* [0] is "no site" */
static uint16_t *index_;  /* site ids by hash; 0: empty */
static atomic_uint count = 1;

static uint32_t hash_of(const char *text, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)text[i]) * 16777619u;
    return h | 1u; /* never 0: the empty text has none */
}

/* Lock held, or the table complete up to `n`: the id of `text`, or the
 * index slot where it would go (*slot), 0. */
static uint16_t find(const char *text, size_t len, uint32_t hash, size_t *slot)
{
    for (size_t i = hash & (DS_SITES_INDEX - 1);; i = (i + 1) & (DS_SITES_INDEX - 1)) {
        uint16_t id = __atomic_load_n(&index_[i], __ATOMIC_ACQUIRE);
        if (!id) {
            *slot = i;
            return 0;
        }
        const site *s = &sites[id];
        if (s->hash == hash && strncmp(s->text, text, len) == 0 && s->text[len] == '\0')
            return id;
    }
}

uint16_t ds_site_intern(const char *text, size_t len)
{
    if (!text || len == 0)
        return 0;
    if (len >= DS_SITE_MAX)
        len = DS_SITE_MAX - 1;
    uint32_t hash = hash_of(text, len);
    size_t slot;
    /* Published with release stores after its text: a reader that finds
     * the id finds the text. */
    if (__atomic_load_n(&sites, __ATOMIC_ACQUIRE)) {
        uint16_t id = find(text, len, hash, &slot);
        if (id)
            return id;
    }
    ds_lock_take(DS_LOCK_SITES);
    uint16_t id = 0;
    if (!sites) {
        site *table = ds_map(sizeof(site) * DS_SITES_MAX, false);
        uint16_t *idx = ds_map(sizeof(uint16_t) * DS_SITES_INDEX, true);
        if (table && idx) {
            index_ = idx;
            __atomic_store_n(&sites, table, __ATOMIC_RELEASE);
        } else {
            ds_unmap(table, sizeof(site) * DS_SITES_MAX);
            ds_unmap(idx, sizeof(uint16_t) * DS_SITES_INDEX);
        }
    }
    unsigned n = atomic_load_explicit(&count, memory_order_relaxed);
    if (sites && !(id = find(text, len, hash, &slot)) && n < DS_SITES_MAX) {
        site *s = &sites[n];
        memcpy(s->text, text, len);
        s->text[len] = '\0';
        s->hash = hash;
        id = (uint16_t)n;
        atomic_store_explicit(&count, n + 1, memory_order_release);
        __atomic_store_n(&index_[slot], id, __ATOMIC_RELEASE);
    }
    ds_lock_give(DS_LOCK_SITES);
    return id;
}

const char *ds_site_text(uint16_t id)
{
    if (!id || id >= atomic_load_explicit(&count, memory_order_acquire))
        return "";
    return __atomic_load_n(&sites, __ATOMIC_ACQUIRE)[id].text;
}

/* A forked child keeps its parent's sites: the texts stay true. */
