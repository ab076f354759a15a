/*
 * stats.c — the counters behind the exit summary (summary.c writes it).
 *
 * Share counters and the producer→consumer pair table change under the
 * registry lock (they move with the records); violation counts are atomics
 * because violations are reported outside the lock.
 */
#include <stdatomic.h>
#include <string.h>

#include "ledger/ledger.h"

/* A share is counted once, in its pair: the totals are the sums, taken at
 * exit, and zero-copy shares are the shares that were not copies. */
typedef ds_pair pair;

static struct {
    pair pairs[DS_PAIRS_MAX];
    int npairs;
    pair overflow; /* the shares whose pair did not fit the table */
} st;

static atomic_uint_fast64_t violations[DS_VIO_COUNT];
static atomic_uint_fast64_t untracked;

/* Lock held.  The pair's counters, created on first use; NULL when full. */
static inline __attribute__((always_inline)) pair *pair_of(uint16_t producer, uint16_t consumer)
{
    for (int i = 0; i < st.npairs; i++)
        if (st.pairs[i].producer == producer && st.pairs[i].consumer == consumer)
            return &st.pairs[i];
    if (st.npairs == DS_PAIRS_MAX)
        return NULL;
    pair *p = &st.pairs[st.npairs++];
    p->producer = producer;
    p->consumer = consumer;
    return p;
}

void ds_stats_roundtrip(uint16_t from_owner, uint16_t to_owner)
{
    ds_reg_lock();
    pair *p = pair_of(from_owner, to_owner);
    if (p)
        p->roundtrips++;
    ds_reg_unlock();
}

/* Inline into the import (link-time optimisation): one call fewer a handoff. */
inline __attribute__((always_inline)) void ds_stats_share(uint16_t producer, uint16_t consumer,
                                                          uint64_t bytes, bool zero_copy)
{
    pair *p = pair_of(producer, consumer);
    if (!p)
        p = &st.overflow;
    p->shares++;
    p->bytes += bytes;
    if (!zero_copy) {
        p->copies++;
        p->bytes_copied += bytes;
    }
}

void ds_stats_copied(uint16_t producer, uint16_t consumer, uint64_t bytes)
{
    pair *p = pair_of(producer, consumer);
    if (!p)
        p = &st.overflow;
    p->copies++;
    p->bytes_copied += bytes;
}

atomic_bool ds_worked;

void ds_stats_violation(int kind)
{
    ds_note_work();
    if (kind >= 0 && kind < DS_VIO_COUNT)
        atomic_fetch_add(&violations[kind], 1);
}

/* The latest violation's kind and source line, for dlshim_status. */
static atomic_int last_kind = -1;
static ds_seq_text last_where;

void ds_stats_last_violation(int kind)
{
    char where[DS_WHERE_MAX];
    if (ds_context_where(where, sizeof(where)) == 0)
        where[0] = '\0';
    atomic_store_explicit(&last_kind, kind, memory_order_relaxed);
    ds_seq_text_set(&last_where, where, sizeof(where));
}

bool ds_stats_latest_violation(int *kind, char *where)
{
    *kind = atomic_load_explicit(&last_kind, memory_order_relaxed);
    if (*kind < 0)
        return false;
    if (!ds_seq_text_get(&last_where, where, DS_WHERE_MAX))
        where[0] = '\0';
    return true;
}

uint64_t ds_stats_violations(void)
{
    uint64_t n = 0;
    for (int i = 0; i < DS_VIO_COUNT; i++)
        n += atomic_load(&violations[i]);
    return n;
}

void ds_stats_untracked(void)
{
    ds_note_work();
    atomic_fetch_add(&untracked, 1);
}

/* A consistent copy of the counters, for the summary (registry lock held:
 * the pair table moves with the records). */
void ds_stats_snapshot(ds_stats_snap *out)
{
    memcpy(out->pairs, st.pairs, sizeof(st.pairs[0]) * (size_t)st.npairs);
    out->npairs = st.npairs;
    out->overflow = st.overflow;
}

void ds_stats_violation_counts(uint64_t counts[DS_VIO_COUNT])
{
    for (int k = 0; k < DS_VIO_COUNT; k++)
        counts[k] = atomic_load(&violations[k]);
}

uint64_t ds_stats_untracked_count(void)
{
    return atomic_load(&untracked);
}

static atomic_bool summary_written;

bool ds_stats_claim_summary(void)
{
    return !atomic_exchange(&summary_written, true);
}

/* A forked child starts its own account: its summary covers its own work and
 * never repeats the parent's. */
void ds_stats_after_fork(void)
{
    memset(&st, 0, sizeof(st));
    for (int k = 0; k < DS_VIO_COUNT; k++)
        atomic_store(&violations[k], 0);
    atomic_store(&untracked, 0);
    atomic_store(&summary_written, false);
    atomic_store(&ds_worked, false);
}
