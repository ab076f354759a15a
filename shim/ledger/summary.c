/*
 * summary.c — the exit summary: the counters of stats.c, the shares never
 * released (the records), and what allocations, copies and barriers add,
 * as one event (and, in text, its tables).  Written once, at exit, at
 * _exit, or before DLSHIM_ON_ERROR=abort ends the process (start-up hands
 * violation.c this writer: the summary reads every part of the ledger, so
 * no part of it may call the summary).
 */
#include <stdatomic.h>
#include <string.h>

#include "ledger/ledger.h"

/* The summary line may hold many pairs, so it is built in its own buffer
 * (written once, at exit or before abort). */
#define DS_SUMMARY_MAX (64 * 1024)
static char summary_buf[DS_SUMMARY_MAX + DS_EV_SLACK]; /* the slack: ds_ev_begin_buf */

/* Room one pair needs: two names escaped at worst six bytes per byte, and
 * the numbers. */
#define DS_PAIR_ROOM (2 * 6 * DS_NAME_MAX + 160)

static void sort_by_shares(ds_pair *p, int n)
{
    for (int i = 1; i < n; i++) {
        ds_pair x = p[i];
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

void ds_stats_now(ds_status_counts *now)
{
    outstanding o = {0};
    ds_pair total;
    ds_reg_lock_all();
    ds_reg_foreach(count_outstanding, &o);
    ds_stats_totals(&total);
    ds_reg_unlock_all();
    now->outstanding = o.count;
    now->shares = total.shares;
    now->copies = total.copies;
    now->bytes_shared = total.bytes;
    now->bytes_copied = total.bytes_copied;
    now->barriers_inserted = ds_sync_barriers();
    ds_stats_violation_counts(now->violations);
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

static void write_text_pairs(const ds_pair *pairs, int n)
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

/* Without DLSHIM_SUMMARY set, a process writes its summary only where there
 * is something to say: it shared, allocated, freed or copied a buffer, saw
 * a violation, lost events or printed a diagnostic.  A shell, or a helper
 * the program starts, stays quiet. */
static bool worth_a_summary(void)
{
    if (ds_cfg.summary >= 0)
        return ds_cfg.summary;
    return atomic_load(&ds_worked) || ds_diag_count() > 0 || ds_log_dropped() > 0;
}

void ds_summary_write(void)
{
    if (!worth_a_summary() || !ds_event_wanted(DS_EV_SUMMARY) || !ds_stats_claim_summary())
        return;
    ds_log_flush(); /* so that dropped_events counts every loss before it */
    outstanding out = {0};
    static ds_stats_snap snap; /* one summary at a time (claimed above) */
    snap.npairs = 0;
    snap.overflow = (ds_pair){0};
    ds_pair total = {0};
    uint64_t evicted = 0;
    /* Leaving through _exit with a registry shard held elsewhere: the shares
     * and pairs are left out, and the summary says so (every shard or none:
     * a sum over some shards would be a wrong number, not a partial one). */
    bool partial = !ds_lock_take_bounded(DS_LOCK_REGISTRY);
    if (!partial) {
        ds_reg_foreach(count_outstanding, &out);
        /* A consistent copy; names are append-only, so ids stay valid. */
        ds_stats_snapshot(&snap);
        ds_stats_totals(&total);
        evicted = ds_reg_evicted();
        ds_reg_unlock_all();
    }

    ds_ev e;
    ds_ev_begin_buf(&e, DS_EV_SUMMARY, summary_buf, sizeof(summary_buf), ds_now_ns());
    ds_ev_uint(&e, "shares", total.shares);
    ds_ev_uint(&e, "zero_copy", total.shares - total.copies);
    ds_ev_uint(&e, "copies", total.copies);
    ds_ev_uint(&e, "bytes_shared", total.bytes);
    ds_ev_uint(&e, "bytes_copied", total.bytes_copied);
    ds_ev_uint(&e, "outstanding", out.count);
    ds_ev_open(&e, "violations", '{');
    uint64_t violations[DS_VIO_COUNT];
    ds_stats_violation_counts(violations);
    for (int k = 0; k < DS_VIO_COUNT; k++)
        if (violations[k])
            ds_ev_uint(&e, ds_violation_name(k), violations[k]);
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
    ds_ev_uint(&e, "untracked", ds_stats_untracked_count());
    ds_ev_uint(&e, "evicted_records", evicted);
    ds_ev_uint(&e, "dropped_events", ds_log_dropped());
    ds_ev_uint(&e, "capped_events", ds_log_capped());
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
            const ds_pair *p = &snap.pairs[shown];
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
