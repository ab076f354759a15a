/*
 * stats.c — the counters behind the exit summary, and the summary itself.
 *
 * Share counters and the producer→consumer pair table change under the
 * registry lock (they move with the records); violation counts are atomics
 * because violations are reported outside the lock.
 */
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

#define DS_PAIRS_MAX 256

/* A share is counted once, in its pair: the totals are the sums, taken at
 * exit, and zero-copy shares are the shares that were not copies. */
typedef struct {
    uint16_t producer, consumer;
    uint64_t shares, copies, bytes, bytes_copied, roundtrips;
} pair;

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

/* ---- the summary -------------------------------------------------------- */

/* The summary line may hold many pairs, so it is built in its own buffer
 * (written once, at exit or before abort). */
#define DS_SUMMARY_MAX (64 * 1024)
static char summary_buf[DS_SUMMARY_MAX + DS_EV_SLACK]; /* the slack: ds_ev_begin_buf */
static atomic_bool summary_written;

/* Room one pair needs: two names escaped at worst six bytes per byte, and
 * the numbers. */
#define DS_PAIR_ROOM (2 * 6 * DS_NAME_MAX + 160)

static void sort_by_shares(pair *p, int n)
{
    for (int i = 1; i < n; i++) {
        pair x = p[i];
        int j = i;
        for (; j > 0 && p[j - 1].shares < x.shares; j--)
            p[j] = p[j - 1];
        p[j] = x;
    }
}

/* Shares never released at exit: counted, and the first few named. */
#define DS_OUTSTANDING_SHOWN 32
typedef struct {
    uint64_t count;
    int shown;
    struct {
        uintptr_t tensor;
        uint16_t producer, consumer;
        bool imported;
        uint64_t bytes;
    } share[DS_OUTSTANDING_SHOWN];
} outstanding;

static void count_outstanding(const ds_record *r, void *arg)
{
    outstanding *o = arg;
    /* A tensor without a deleter can never be released: not a leak. */
    if (r->state == DS_RELEASED || !r->orig_deleter || r->inherited)
        return;
    o->count++;
    if (o->shown < DS_OUTSTANDING_SHOWN) {
        __typeof__(o->share[0]) *s = &o->share[o->shown++];
        s->tensor = r->key;
        s->producer = r->producer;
        s->consumer = r->consumer;
        s->imported = r->state == DS_IMPORTED;
        s->bytes = r->bytes;
    }
}

uint64_t ds_stats_outstanding(void)
{
    outstanding o = {0};
    ds_reg_lock();
    ds_reg_foreach(count_outstanding, &o);
    ds_reg_unlock();
    return o.count;
}

/* The named ones, as a JSON array (jsonl) or a table after the summary. */
static void outstanding_field(ds_ev *e, const outstanding *o)
{
    ds_ev_open(e, "outstanding_shares", '[');
    for (int i = 0; i < o->shown; i++) {
        ds_ev_open(e, NULL, '{');
        ds_ev_hex(e, "tensor", o->share[i].tensor);
        ds_ev_name(e, "producer", o->share[i].producer);
        ds_ev_str(e, "consumer", o->share[i].imported ? ds_name(o->share[i].consumer) : NULL);
        ds_ev_uint(e, "bytes", o->share[i].bytes);
        ds_ev_close(e);
    }
    ds_ev_close(e);
}

static void write_text_outstanding(const outstanding *o)
{
    char line[DS_LINE_MAX];
    if (o->shown == 0)
        return;
    size_t len = ds_fmt(line, sizeof(line), "dlshim:   %-18s %-20s %-20s %14s   (never released)\n",
                        "outstanding", "producer", "consumer", "bytes");
    ds_log_write(line, len);
    for (int i = 0; i < o->shown; i++) {
        char tensor[24];
        ds_fmt(tensor, sizeof(tensor), "%p", (void *)o->share[i].tensor);
        len = ds_fmt(line, sizeof(line), "dlshim:   %-18s %-20s %-20s %14llu\n", tensor,
                     ds_name(o->share[i].producer),
                     o->share[i].imported ? ds_name(o->share[i].consumer) : "-",
                     (unsigned long long)o->share[i].bytes);
        ds_log_write(line, len);
    }
    if (o->count > (uint64_t)o->shown) {
        len = ds_fmt(line, sizeof(line), "dlshim:   ... and %llu more\n",
                     (unsigned long long)(o->count - (uint64_t)o->shown));
        ds_log_write(line, len);
    }
}

static void write_text_pairs(const pair *pairs, int n)
{
    char line[DS_LINE_MAX];
    if (n == 0)
        return;
    ds_fmt(line, sizeof(line), "dlshim:   %-20s %-20s %8s %9s %7s %14s %14s %10s\n", "producer",
           "consumer", "shares", "zero_copy", "copies", "bytes", "bytes_copied", "roundtrips");
    ds_log_write(line, __builtin_strlen(line));
    for (int i = 0; i < n; i++) {
        size_t len = ds_fmt(line, sizeof(line),
                            "dlshim:   %-20s %-20s %8llu %9llu %7llu %14llu %14llu %10llu\n",
                            ds_name(pairs[i].producer), ds_name(pairs[i].consumer),
                            (unsigned long long)pairs[i].shares,
                            (unsigned long long)(pairs[i].shares - pairs[i].copies),
                            (unsigned long long)pairs[i].copies,
                            (unsigned long long)pairs[i].bytes,
                            (unsigned long long)pairs[i].bytes_copied,
                            (unsigned long long)pairs[i].roundtrips);
        ds_log_write(line, len);
    }
}

void ds_summary_write(void)
{
    if (!ds_cfg.summary || !ds_event_wanted(DS_EV_SUMMARY) ||
        atomic_exchange(&summary_written, true))
        return;
    ds_log_flush(); /* so that dropped_events counts every loss before it */
    outstanding out = {0};
    __typeof__(st) snap = {0};
    uint64_t evicted = 0;
    /* Leaving through _exit with the registry held elsewhere: the shares and
     * pairs are left out, and the summary says so. */
    bool partial = !ds_lock_take_bounded(DS_LOCK_REGISTRY);
    if (!partial) {
        ds_reg_foreach(count_outstanding, &out);
        /* A consistent copy; names are append-only, so ids stay valid. */
        snap = st;
        evicted = ds_reg_evicted();
        ds_reg_unlock();
    }

    ds_ev e;
    ds_ev_begin_buf(&e, DS_EV_SUMMARY, summary_buf, sizeof(summary_buf), ds_now_ns());
    pair total = snap.overflow;
    for (int i = 0; i < snap.npairs; i++) {
        total.shares += snap.pairs[i].shares;
        total.copies += snap.pairs[i].copies;
        total.bytes += snap.pairs[i].bytes;
        total.bytes_copied += snap.pairs[i].bytes_copied;
    }
    ds_ev_uint(&e, "shares", total.shares);
    ds_ev_uint(&e, "zero_copy", total.shares - total.copies);
    ds_ev_uint(&e, "copies", total.copies);
    ds_ev_uint(&e, "bytes_shared", total.bytes);
    ds_ev_uint(&e, "bytes_copied", total.bytes_copied);
    ds_ev_uint(&e, "outstanding", out.count);
    ds_ev_open(&e, "violations", '{');
    for (int k = 0; k < DS_VIO_COUNT; k++) {
        uint64_t n = atomic_load(&violations[k]);
        if (n)
            ds_ev_uint(&e, ds_violation_name(k), n);
    }
    ds_ev_close(&e);
    uint64_t allocs, alloc_bytes, untracked_frees;
    partial |= !ds_alloc_totals(&allocs, &alloc_bytes, &untracked_frees);
    ds_ev_uint(&e, "allocations_live", allocs);
    ds_ev_uint(&e, "allocation_bytes_live", alloc_bytes);
    ds_ev_uint(&e, "untracked_frees", untracked_frees);
    ds_ev_uint(&e, "barriers_inserted", ds_sync_barriers());
    uint64_t transfers, transferred, roundtrips;
    ds_copies_totals(&transfers, &transferred, &roundtrips);
    ds_ev_uint(&e, "transfers", transfers);
    ds_ev_uint(&e, "bytes_transferred", transferred);
    ds_ev_uint(&e, "roundtrips", roundtrips);
    ds_ev_uint(&e, "untracked", atomic_load(&untracked));
    ds_ev_uint(&e, "evicted_records", evicted);
    ds_ev_uint(&e, "dropped_events", ds_log_dropped());
    ds_ev_uint(&e, "clock_origin_ns", ds_clock_origin_ns());
    if (partial)
        ds_ev_bool(&e, "partial", true);
    sort_by_shares(snap.pairs, snap.npairs);
    if (ds_cfg.format == DS_FORMAT_JSONL) {
        outstanding_field(&e, &out);
        /* The busiest pairs, as many as fit one line. */
        int shown = 0;
        ds_ev_open(&e, "pairs", '[');
        for (; shown < snap.npairs && ds_ev_room(&e) > DS_PAIR_ROOM; shown++) {
            const pair *p = &snap.pairs[shown];
            ds_ev_open(&e, NULL, '{');
            ds_ev_name(&e, "producer", p->producer);
            ds_ev_name(&e, "consumer", p->consumer);
            ds_ev_uint(&e, "shares", p->shares);
            ds_ev_uint(&e, "zero_copy", p->shares - p->copies);
            ds_ev_uint(&e, "copies", p->copies);
            ds_ev_uint(&e, "bytes", p->bytes);
            ds_ev_uint(&e, "bytes_copied", p->bytes_copied);
            ds_ev_uint(&e, "roundtrips", p->roundtrips);
            ds_ev_close(&e);
        }
        ds_ev_close(&e);
        ds_ev_uint(&e, "pairs_omitted", (uint64_t)(snap.npairs - shown) + snap.overflow.shares);
        ds_ev_end(&e);
        return;
    }
    ds_ev_end(&e);
    write_text_pairs(snap.pairs, snap.npairs);
    write_text_outstanding(&out);
    ds_log_flush();
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
