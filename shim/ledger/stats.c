/*
 * stats.c — the counters behind the exit summary (summary.c writes it).
 *
 * Share counters and the producer→consumer pair tables change under the
 * registry's shards (they move with the records): a table per shard, so
 * threads handing over tensors of different shards write no counter in
 * common, summed when the summary reads them (every shard held).
 * Violation counts are atomics because violations are reported outside the
 * lock.
 */
#include <stdatomic.h>
#include <string.h>

#include "ledger/ledger.h"

/* A share is counted once, in its pair: the totals are the sums, taken at
 * exit, and zero-copy shares are the shares that were not copies. */
typedef ds_pair pair;

/* A shard's table: mostly one or two pairs in use (a program has few
 * producer/consumer pairs), so only their lines are touched. */
typedef struct {
    _Alignas(64) int npairs;
    pair overflow; /* the shares whose pair did not fit the table */
    pair pairs[DS_PAIRS_MAX];
} pair_table;
static pair_table st[DS_REG_SHARDS];

static atomic_uint_fast64_t violations[DS_VIO_COUNT];
static atomic_uint_fast64_t untracked;

/* Shard held.  The pair's counters, created on first use; the overflow
 * when full. */
static inline __attribute__((always_inline)) pair *pair_of(pair_table *t, uint16_t producer,
                                                           uint16_t consumer)
{
    for (int i = 0; i < t->npairs; i++)
        if (t->pairs[i].producer == producer && t->pairs[i].consumer == consumer)
            return &t->pairs[i];
    if (t->npairs == DS_PAIRS_MAX)
        return &t->overflow;
    pair *p = &t->pairs[t->npairs++];
    p->producer = producer;
    p->consumer = consumer;
    return p;
}

/* Counted in the shard of the pair itself (any shard would do: the sums
 * are what the summary shows). */
void ds_stats_roundtrip(uint16_t from_owner, uint16_t to_owner)
{
    uint64_t hash = ds_reg_lock((uintptr_t)from_owner << 19 | (uintptr_t)to_owner << 3);
    pair_of(&st[ds_reg_shard(hash)], from_owner, to_owner)->roundtrips++;
    ds_reg_unlock(hash);
}

/* Inline into the import (link-time optimisation): one call fewer a handoff. */
inline __attribute__((always_inline)) void ds_stats_share(unsigned s, uint16_t producer,
                                                          uint16_t consumer, uint64_t bytes,
                                                          bool zero_copy)
{
    pair *p = pair_of(&st[s], producer, consumer);
    p->shares++;
    p->bytes += bytes;
    if (!zero_copy) {
        p->copies++;
        p->bytes_copied += bytes;
    }
}

void ds_stats_copied(unsigned s, uint16_t producer, uint16_t consumer, uint64_t bytes)
{
    pair *p = pair_of(&st[s], producer, consumer);
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

static void add_counts(pair *to, const pair *from)
{
    to->shares += from->shares;
    to->copies += from->copies;
    to->bytes += from->bytes;
    to->bytes_copied += from->bytes_copied;
    to->roundtrips += from->roundtrips;
}

/* A consistent copy of the counters, the shards' tables summed, for the
 * summary (every registry shard held: the pairs move with the records). */
void ds_stats_snapshot(ds_stats_snap *out)
{
    out->npairs = 0;
    out->overflow = (pair){0};
    for (unsigned s = 0; s < DS_REG_SHARDS; s++) {
        add_counts(&out->overflow, &st[s].overflow);
        for (int i = 0; i < st[s].npairs; i++) {
            const pair *from = &st[s].pairs[i];
            int j = 0;
            while (j < out->npairs && (out->pairs[j].producer != from->producer ||
                                       out->pairs[j].consumer != from->consumer))
                j++;
            if (j == out->npairs && j == DS_PAIRS_MAX) {
                add_counts(&out->overflow, from);
                continue;
            }
            if (j == out->npairs)
                out->pairs[out->npairs++] = (pair){.producer = from->producer,
                                                   .consumer = from->consumer};
            add_counts(&out->pairs[j], from);
        }
    }
}

void ds_stats_totals(ds_pair *total)
{
    *total = (ds_pair){0};
    for (unsigned s = 0; s < DS_REG_SHARDS; s++) {
        add_counts(total, &st[s].overflow);
        for (int i = 0; i < st[s].npairs; i++)
            add_counts(total, &st[s].pairs[i]);
    }
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
    memset(st, 0, sizeof(st));
    for (int k = 0; k < DS_VIO_COUNT; k++)
        atomic_store(&violations[k], 0);
    atomic_store(&untracked, 0);
    atomic_store(&summary_written, false);
    atomic_store(&ds_worked, false);
}
