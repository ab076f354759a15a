/* Unit tests of the ownership ledger (shim/ledger/tensor.c over registry.c): the
 * export → import → release state machine and every violation it detects. */
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "ledger/ledger.h"
#include "harness.h"

static int deleted;
static void count_delete(DLManagedTensor *t) { (void)t; deleted++; }
static void count_delete_v(DLManagedTensorVersioned *t) { (void)t; deleted++; }
static void other_delete(DLManagedTensor *t) { (void)t; deleted += 100; }

static int64_t shape[2] = {2, 3};
static float data[6];

static void make(DLManagedTensor *t)
{
    memset(t, 0, sizeof(*t));
    t->dl_tensor.data = data;
    t->dl_tensor.device.device_type = kDLCPU;
    t->dl_tensor.ndim = 2;
    t->dl_tensor.dtype.code = kDLFloat;
    t->dl_tensor.dtype.bits = 32;
    t->dl_tensor.dtype.lanes = 1;
    t->dl_tensor.shape = shape;
    t->deleter = count_delete;
}

static int events(const char *log, const char *name)
{
    char needle[64];
    snprintf(needle, sizeof(needle), "\"event\":\"%s\"", name);
    return harness_count(log, needle);
}

static int violations(const char *log, const char *kind)
{
    char needle[64];
    snprintf(needle, sizeof(needle), "\"kind\":\"%s\"", kind);
    return harness_count(log, needle);
}

static int setup(void **state)
{
    (void)state;
    deleted = 0;
    harness_init(NULL);
    return 0;
}

static void test_full_cycle(void **state)
{
    (void)state;
    DLManagedTensor t;
    make(&t);
    ds_tensor_export(&t, false, "p", 0);
    assert_ptr_not_equal(t.deleter, count_delete); /* the trampoline */
    ds_tensor_import(&t, false, "c", 0);
    t.deleter(&t);
    assert_int_equal(deleted, 1);
    char *log = harness_read_log();
    const char *e = strstr(log, "\"event\":\"export\"");
    const char *i = strstr(log, "\"event\":\"import\"");
    const char *r = strstr(log, "\"event\":\"release\"");
    assert_true(e && i && r && e < i && i < r);
    assert_non_null(strstr(log, "\"consumed\":true"));
    assert_non_null(strstr(log, "\"zero_copy\":true,\"bytes\":24"));
    assert_int_equal(events(log, "violation"), 0);
    free(log);
}

static void test_versioned_cycle(void **state)
{
    (void)state;
    DLManagedTensorVersioned t;
    memset(&t, 0, sizeof(t));
    t.version.major = 1;
    t.dl_tensor.data = data;
    t.dl_tensor.device.device_type = kDLCUDA;
    t.dl_tensor.device.device_id = 1;
    t.dl_tensor.ndim = 2;
    t.dl_tensor.dtype.code = 4; /* bfloat */
    t.dl_tensor.dtype.bits = 16;
    t.dl_tensor.dtype.lanes = 1;
    t.dl_tensor.shape = shape;
    t.flags = DLPACK_FLAG_BITMASK_IS_COPIED;
    t.deleter = count_delete_v;
    ds_tensor_export(&t, true, "p", 0);
    ds_tensor_import(&t, true, "c", 0);
    t.deleter(&t);
    assert_int_equal(deleted, 1);
    char *log = harness_read_log();
    assert_non_null(strstr(log, "\"device\":\"cuda:1\",\"dtype\":\"bfloat16\""));
    assert_non_null(strstr(log, "\"flags\":[\"is_copied\"]"));
    assert_non_null(strstr(log, "\"zero_copy\":false"));
    free(log);
}

static void test_release_without_import(void **state)
{
    (void)state;
    DLManagedTensor t;
    make(&t);
    ds_tensor_export(&t, false, "p", 0);
    t.deleter(&t);
    char *log = harness_read_log();
    assert_non_null(strstr(log, "\"consumed\":false"));
    assert_int_equal(events(log, "import"), 0);
    assert_int_equal(events(log, "violation"), 0);
    free(log);
}

static void test_double_release_warn_forwards(void **state)
{
    (void)state;
    DLManagedTensor t;
    make(&t);
    ds_tensor_export(&t, false, "p", 0);
    ds_tensor_import(&t, false, "c", 0);
    t.deleter(&t);
    t.deleter(&t);
    assert_int_equal(deleted, 2);
    char *log = harness_read_log();
    assert_int_equal(violations(log, "double_release"), 1);
    assert_int_equal(events(log, "release"), 1);
    free(log);
}

static void test_double_release_protect_swallows(void **state)
{
    (void)state;
    const char *env[] = {"DLSHIM_ON_ERROR=protect", NULL};
    harness_init(env);
    DLManagedTensor t;
    make(&t);
    ds_tensor_export(&t, false, "p", 0);
    t.deleter(&t);
    t.deleter(&t);
    t.deleter(&t);
    assert_int_equal(deleted, 1);
    char *log = harness_read_log();
    assert_int_equal(violations(log, "double_release"), 2);
    free(log);
}

static void test_import_after_release(void **state)
{
    (void)state;
    DLManagedTensor t;
    make(&t);
    ds_tensor_export(&t, false, "p", 0);
    t.deleter(&t);
    ds_tensor_import(&t, false, "late", 0);
    char *log = harness_read_log();
    assert_int_equal(violations(log, "import_after_release"), 1);
    assert_int_equal(events(log, "import"), 0);
    free(log);
}

static void test_new_tensor_at_reused_address(void **state)
{
    (void)state;
    DLManagedTensor t;
    make(&t);
    ds_tensor_export(&t, false, "p", 0);
    t.deleter(&t);
    make(&t); /* a new tensor in the same memory, never announced */
    ds_tensor_import(&t, false, "c", 0);
    t.deleter(&t);
    assert_int_equal(deleted, 2);
    char *log = harness_read_log();
    assert_int_equal(events(log, "violation"), 0);
    assert_int_equal(events(log, "export"), 2);
    assert_non_null(strstr(log, "\"producer\":\"unknown\""));
    assert_int_equal(events(log, "release"), 2);
    free(log);
}

/* A second layer's view of an import yields nothing; a release in between
 * makes the next import a late one. */
static void test_import_again_after_release(void **state)
{
    (void)state;
    DLManagedTensor t;
    make(&t);
    ds_tensor_export(&t, false, "p", 0);
    ds_tensor_import(&t, false, "c", 0);
    ds_tensor_import(&t, false, "c", 0); /* a second layer: no event */
    t.deleter(&t);
    ds_tensor_import(&t, false, "c", 0);
    char *log = harness_read_log();
    assert_int_equal(events(log, "import"), 1);
    assert_int_equal(violations(log, "import_after_release"), 1);
    free(log);
}

static DLManagedTensor *shared_tensor;

static void *import_and_release(void *arg)
{
    (void)arg;
    ds_tensor_import(shared_tensor, false, "c", 0);
    shared_tensor->deleter(shared_tensor);
    return NULL;
}

/* The same struct exported again after another thread released it is a new
 * export, not a second layer's view of the first. */
static void test_export_again_after_another_thread_released(void **state)
{
    (void)state;
    DLManagedTensor t;
    make(&t);
    shared_tensor = &t;
    ds_tensor_export(&t, false, "p", 0);
    pthread_t other;
    assert_int_equal(pthread_create(&other, NULL, import_and_release, NULL), 0);
    assert_int_equal(pthread_join(other, NULL), 0);
    ds_tensor_export(&t, false, "p", 0); /* the deleter field still holds our trampoline */
    char *log = harness_read_log();
    assert_int_equal(events(log, "export"), 2);
    assert_int_equal(events(log, "release"), 1);
    free(log);
}

/* Two layers of one export (a traced library function wrapping another's
 * export): a struct broken after the inner, valid view is reported at the
 * outer one, and it is still one export. */
static void test_broken_between_two_layers_is_reported(void **state)
{
    (void)state;
    DLManagedTensor t;
    make(&t);
    ds_tensor_export(&t, false, "p", 0);
    t.dl_tensor.ndim = -1;
    ds_tensor_export(&t, false, "p", 0);
    t.deleter(&t);
    char *log = harness_read_log();
    assert_int_equal(violations(log, "malformed_tensor"), 1);
    assert_int_equal(events(log, "export"), 1);
    assert_int_equal(events(log, "release"), 1);
    free(log);
}

/* The same broken struct seen by two layers is one violation. */
static void test_broken_struct_seen_twice_is_reported_once(void **state)
{
    (void)state;
    DLManagedTensor t;
    make(&t);
    t.dl_tensor.ndim = -1;
    ds_tensor_export(&t, false, "p", 0);
    ds_tensor_export(&t, false, "p", 0);
    t.deleter(&t);
    assert_int_equal(deleted, 1);
    char *log = harness_read_log();
    assert_int_equal(violations(log, "malformed_tensor"), 1);
    assert_int_equal(events(log, "export"), 1);
    free(log);
}

static void test_double_import(void **state)
{
    (void)state;
    DLManagedTensor t;
    make(&t);
    ds_tensor_export(&t, false, "p", 0);
    ds_tensor_import(&t, false, "c1", 0);
    ds_tensor_import(&t, false, "c2", 0);
    t.deleter(&t);
    char *log = harness_read_log();
    assert_int_equal(violations(log, "double_import"), 1);
    assert_int_equal(events(log, "import"), 1);
    free(log);
}

static void test_reexport_does_not_wrap_twice(void **state)
{
    (void)state;
    DLManagedTensor t;
    make(&t);
    ds_tensor_export(&t, false, "p", 0);
    void (*first)(DLManagedTensor *) = t.deleter;
    ds_tensor_export(&t, false, "p2", 0);
    assert_ptr_equal(t.deleter, first);
    ds_tensor_import(&t, false, "c", 0);
    t.deleter(&t);
    assert_int_equal(deleted, 1);
    char *log = harness_read_log();
    assert_int_equal(events(log, "violation"), 0);
    assert_non_null(strstr(log, "\"producer\":\"p2\""));
    free(log);
}

static void test_replaced_deleter_is_the_new_producers(void **state)
{
    (void)state;
    DLManagedTensor t;
    make(&t);
    ds_tensor_export(&t, false, "p", 0);
    t.deleter = other_delete; /* not a decorator: the old deleter is dropped */
    ds_tensor_export(&t, false, "p", 0);
    t.deleter(&t);
    assert_int_equal(deleted, 100);
}

static void test_null_deleter(void **state)
{
    (void)state;
    DLManagedTensor t;
    make(&t);
    t.deleter = NULL;
    ds_tensor_export(&t, false, "p", 0);
    assert_null(t.deleter);
    ds_tensor_import(&t, false, "c", 0);
    char *log = harness_read_log();
    assert_int_equal(events(log, "export") + events(log, "import"), 2);
    free(log);
}

static void test_eviction_keeps_live_records(void **state)
{
    (void)state;
    const char *env[] = {"DLSHIM_MAX_RECORDS=1024", NULL};
    harness_init(env);
    DLManagedTensor live;
    make(&live);
    ds_tensor_export(&live, false, "p", 0);
    enum { N = 5000 };
    static DLManagedTensor many[N];
    uint64_t before = ds_reg_evicted();
    for (int i = 0; i < N; i++) {
        make(&many[i]);
        ds_tensor_export(&many[i], false, "p", 0);
        ds_tensor_import(&many[i], false, "c", 0);
        many[i].deleter(&many[i]);
    }
    assert_true(ds_reg_evicted() - before >= N - 1024);
    live.deleter(&live); /* still forwarded: live records are never evicted */
    assert_int_equal(deleted, N + 1);
    /* A late second release of an evicted record is still reported. */
    many[0].deleter(&many[0]);
    assert_int_equal(deleted, N + 1);
    char *log = harness_read_log();
    assert_int_equal(violations(log, "double_release"), 1);
    free(log);
}

/* With no output open, releases are stamped with the registry's version
 * instead of a clock (issue 9): an eviction still drops the older half of
 * the released records and keeps the newer.  (A tick clock stamped a burst
 * of releases alike, and the whole burst was evicted.)  Each registry shard
 * evicts on its own, at its part of the cap (1024 / 64 = 16 records): the
 * tensors here all hash to one shard.  Runs first, so that the registry
 * holds only this test's records. */
static void test_eviction_order_without_output(void **state)
{
    (void)state;
    const char *env[] = {"DLSHIM_MAX_RECORDS=1024", NULL};
    harness_init(env);
    ds_log_open("off");
    enum { N = 3000, SAME = 30 };
    static DLManagedTensor pool[N];
    DLManagedTensor *many[SAME];
    int same = 0;
    unsigned shard = ds_reg_shard(ds_reg_hash((uintptr_t)&pool[0]));
    for (int k = 0; k < N && same < SAME; k++)
        if (ds_reg_shard(ds_reg_hash((uintptr_t)&pool[k])) == shard)
            many[same++] = &pool[k];
    assert_int_equal(same, SAME);
    uint64_t evicted = ds_reg_evicted();
    int i = 0;
    for (; i < SAME && ds_reg_evicted() == evicted; i++) {
        make(many[i]);
        ds_tensor_export(many[i], false, "p", 0); /* the shard's 17th evicts */
        ds_tensor_import(many[i], false, "c", 0);
        many[i]->deleter(many[i]);
    }
    assert_int_equal(i, 1024 / DS_REG_SHARDS + 1);
    uint64_t before = ds_stats_violations();
    many[i - 2]->deleter(many[i - 2]); /* released last before: kept, forwarded (warn) */
    assert_int_equal(deleted, i + 1);
    many[0]->deleter(many[0]); /* released first: evicted, not forwarded */
    assert_int_equal(deleted, i + 1);
    assert_int_equal(ds_stats_violations() - before, 2);
}

/* A share is counted only in its producer -> consumer pair; the summary's
 * totals are the sums.  Shares whose pair does not fit the table (256
 * pairs) must still be in the totals.  Each pair is counted in two
 * registry shards, as records of one pair are: the summary adds the
 * shards' tables up, and its table fills as one would. */
static void test_summary_totals_include_shares_past_the_pair_table(void **state)
{
    (void)state;
    ds_stats_after_fork(); /* a fresh account, and a summary not yet written */
    ds_note_work();
    for (int i = 0; i < 300; i++) { /* 300 pairs: 44 past the table */
        for (unsigned half = 0; half < 2; half++) {
            unsigned s = ((unsigned)i + half * 7) % DS_REG_SHARDS;
            ds_lock_take_shard(DS_LOCK_REGISTRY, s);
            ds_stats_share(s, 1, (uint16_t)(i + 1), 5, i % 3 != 0);
            ds_lock_give_shard(DS_LOCK_REGISTRY, s);
        }
    }
    ds_summary_write();
    char *log = harness_read_log();
    const char *summary = strstr(log, "\"event\":\"summary\"");
    assert_non_null(summary);
    assert_non_null(strstr(summary, "\"shares\":600,"));
    assert_non_null(strstr(summary, "\"zero_copy\":400,"));
    assert_non_null(strstr(summary, "\"copies\":200,"));
    assert_non_null(strstr(summary, "\"bytes_shared\":3000,"));
    assert_non_null(strstr(summary, "\"bytes_copied\":1000,"));
    free(log);
}

/* A release observer that says who took the tensor, or that it was let go
 * inside its import (hooks/python_capsule.c is the real one). */
static ds_release_context observed;
static void observe(uintptr_t tensor, ds_release_context *ctx)
{
    (void)tensor;
    *ctx = observed;
}

/* A consumer that lets go of the tensor before its import can be seen (JAX
 * copying).  Inside the call that took it: the import of a copy shown at
 * the release, then the release, counted once the consumer marks the
 * capsule taken.  In a later call: the taker's release, no import, until it
 * marks the capsule taken (then the import of a copy).  The producer itself
 * letting go is no import. */
static void test_taken_at_release(void **state)
{
    (void)state;
    DLManagedTensor t, later, own;
    make(&t);
    make(&later);
    make(&own);
    ds_stats_after_fork(); /* a fresh account */
    ds_tensor_export(&t, false, "p", 0);
    ds_tensor_export(&later, false, "p", 0);
    ds_tensor_export(&own, false, "p", 0);
    ds_tensor_set_release_observer(observe);
    uint16_t c = ds_name_intern("c"), x = ds_name_intern("x");
    observed = (ds_release_context){.taker = c, .taker_api = x, .taken_in_call = true};
    t.deleter(&t);
    observed.taken_in_call = false;
    later.deleter(&later);
    observed.taker = ds_name_intern("p");
    own.deleter(&own);
    ds_tensor_set_release_observer(NULL);
    assert_int_equal(deleted, 3);
    char *log = harness_read_log();
    const char *i = strstr(log, "\"event\":\"import\"");
    assert_non_null(i);
    assert_non_null(strstr(i, "\"consumer\":\"c\",\"producer\":\"p\",\"api\":\"x\",\"zero_copy\":false"));
    const char *r = strstr(i, "\"event\":\"release\"");
    assert_non_null(r);
    assert_non_null(strstr(r, "\"consumed\":true"));
    assert_non_null(strstr(r, "\"copy_on_import\":true,\"bytes_copied\":24"));
    assert_int_equal(events(log, "import"), 1);
    assert_int_equal(harness_count(log, "\"consumed\":false"), 2); /* the later taker's, the producer's */
    free(log);
    ds_tensor_taken_after_release(&t, c, x);     /* counted now */
    ds_tensor_taken_after_release(&later, c, x); /* shown and counted now */
    ds_tensor_taken_after_release(&own, c, x);   /* not its taker: nothing */
    ds_summary_write();
    log = harness_read_log();
    assert_int_equal(events(log, "import"), 2);
    const char *summary = strstr(log, "\"event\":\"summary\"");
    assert_non_null(summary);
    assert_non_null(strstr(summary, "\"shares\":2,\"zero_copy\":0,\"copies\":2,"));
    free(log);
}

/* Unless asked for, a process that did nothing writes no summary (a shell,
 * a helper the program starts); asked for, it always does. */
static void test_summary_only_where_something_happened(void **state)
{
    (void)state;
    signed char asked = ds_cfg.summary;
    ds_cfg.summary = -1;
    ds_stats_after_fork(); /* nothing done yet */
    ds_summary_write();
    char *log = harness_read_log();
    assert_null(strstr(log, "\"event\":\"summary\""));
    free(log);
    ds_cfg.summary = 1;
    ds_stats_after_fork();
    ds_summary_write();
    log = harness_read_log();
    assert_non_null(strstr(log, "\"event\":\"summary\""));
    free(log);
    ds_cfg.summary = -1;
    ds_stats_after_fork();
    ds_note_work();
    ds_summary_write();
    log = harness_read_log();
    assert_int_equal(harness_count(log, "\"event\":\"summary\""), 2);
    free(log);
    ds_cfg.summary = asked;
}

/* Let go inside the call that imported it (MLX): a copy, counted as one. */
static void test_copy_on_import(void **state)
{
    (void)state;
    DLManagedTensor t;
    make(&t);
    ds_stats_after_fork(); /* a fresh account */
    ds_tensor_export(&t, false, "p", 0);
    ds_tensor_import(&t, false, "c", 0);
    ds_tensor_set_release_observer(observe);
    observed = (ds_release_context){.copy_on_import = true};
    t.deleter(&t);
    ds_tensor_set_release_observer(NULL);
    ds_summary_write();
    char *log = harness_read_log();
    assert_non_null(strstr(log, "\"zero_copy\":true,\"bytes\":24")); /* as the import saw it */
    assert_non_null(strstr(log, "\"copy_on_import\":true,\"bytes_copied\":24"));
    const char *summary = strstr(log, "\"event\":\"summary\"");
    assert_non_null(summary);
    assert_non_null(strstr(summary, "\"shares\":1,\"zero_copy\":0,\"copies\":1,"));
    free(log);
}

/* A producer's holder (a capsule) that dies with its tensor unconsumed.
 * Freeing the tensor its own way, without the deleter (JAX's destructor),
 * is its release, once; a deleter call after it is a double release.  Where
 * the host frees are watched and nothing freed it, it leaks: a `leak`
 * violation, and the tensor stays outstanding.  Where they are not, nothing
 * is said, and nothing either as the program ends (an interpreter
 * finalizing).  A consumed tensor is its consumer's to release. */
static void test_dropped_unconsumed(void **state)
{
    (void)state;
    static DLManagedTensor freed, leaked, unknown, imported;
    ds_status_counts now;
    ds_stats_now(&now);
    uint64_t outstanding = now.outstanding;
    make(&freed);
    make(&leaked);
    make(&unknown);
    make(&imported);
    ds_tensor_export(&unknown, false, "p", 0);
    ds_drop_watch w;
    ds_tensor_drop_watch(&unknown, &w);
    ds_tensor_dropped(&unknown, &w, false); /* host frees not watched: nothing known */
    ds_host_frees_arm();
    ds_tensor_export(&freed, false, "p", 0);
    ds_tensor_drop_watch(&freed, &w);
    /* the holder frees the struct (JAX: the object the tensor is part of) */
    assert_int_equal(ds_host_free_check((uintptr_t)&freed, sizeof(freed), DS_HOST_FREE, NULL),
                     DS_FREE_FORWARD);
    ds_tensor_dropped(&freed, &w, false);
    ds_tensor_drop_watch(&freed, &w);
    ds_tensor_dropped(&freed, &w, false); /* seen already: nothing more */
    ds_tensor_export(&leaked, false, "p", 0);
    ds_tensor_drop_watch(&leaked, &w);
    ds_tensor_dropped(&leaked, &w, true); /* as the program ends: outstanding at exit */
    ds_tensor_drop_watch(&leaked, &w);
    ds_tensor_dropped(&leaked, &w, false); /* freed by nobody: a leak */
    ds_tensor_export(&imported, false, "p", 0);
    ds_tensor_import(&imported, false, "c", 0);
    ds_tensor_drop_watch(&imported, &w);
    ds_tensor_dropped(&imported, &w, false); /* consumed: the consumer releases it */
    char *log = harness_read_log();
    assert_int_equal(events(log, "release"), 1);
    assert_non_null(strstr(log, "\"consumed\":false"));
    assert_int_equal(violations(log, "leak"), 1);
    assert_non_null(strstr(log, "died unconsumed and the tensor's deleter never ran"));
    ds_stats_now(&now);
    assert_int_equal(now.outstanding, outstanding + 3); /* unknown, leaked, imported */
    free(log);
    freed.deleter(&freed);
    assert_int_equal(deleted, 1); /* warn: forwarded */
    log = harness_read_log();
    assert_int_equal(violations(log, "double_release"), 1);
    assert_non_null(strstr(log, "\"first_released_by\":\"producer\""));
    free(log);
    imported.deleter(&imported);
    leaked.deleter(&leaked);
    unknown.deleter(&unknown);
}

/* The summary names shares never released, with producer and consumer. */
static void test_summary_names_outstanding_shares(void **state)
{
    (void)state;
    static DLManagedTensor kept, dropped;
    make(&kept);
    make(&dropped);
    ds_stats_after_fork();
    ds_tensor_export(&kept, false, "p", 0);
    ds_tensor_import(&kept, false, "c", 0);
    ds_tensor_export(&dropped, false, "q", 0);
    ds_summary_write();
    char *log = harness_read_log();
    const char *summary = strstr(log, "\"event\":\"summary\"");
    assert_non_null(summary);
    assert_non_null(strstr(summary, "\"outstanding\":2,"));
    char expect[160];
    snprintf(expect, sizeof(expect), "{\"tensor\":\"%p\",\"producer\":\"p\",\"consumer\":\"c\","
             "\"bytes\":24}", (void *)&kept);
    assert_non_null(strstr(summary, expect));
    snprintf(expect, sizeof(expect), "{\"tensor\":\"%p\",\"producer\":\"q\",\"consumer\":null,"
             "\"bytes\":24}", (void *)&dropped);
    assert_non_null(strstr(summary, expect));
    free(log);
    kept.deleter(&kept);
    dropped.deleter(&dropped);
}

/* A thread that holds one tensor's registry and shares shards (as its
 * handoff does, or a thread stopped there) does not stop another thread
 * handing over a tensor of other shards.  With one REGISTRY or one SHARES
 * lock this thread waited for the holder: this fails instead of hanging
 * (the holder lets go after 5 s). */
static DLManagedTensor pool_of_two[64];
static uint64_t held_hash;

static void take_shards(void *arg)
{
    held_hash = ds_reg_lock((uintptr_t)arg);
    ds_lock_take_shard(DS_LOCK_SHARES, ds_shares_shard(held_hash));
}

static void give_shards(void *arg)
{
    (void)arg;
    ds_lock_give_shard(DS_LOCK_SHARES, ds_shares_shard(held_hash));
    ds_reg_unlock(held_hash);
}

static void test_handoffs_on_other_shards_do_not_wait(void **state)
{
    (void)state;
    ds_shares_index(); /* the shares index kept: every handoff updates it */
    DLManagedTensor *x = &pool_of_two[0], *y = NULL;
    uint64_t hx = ds_reg_hash((uintptr_t)x);
    for (int i = 1; i < 64 && !y; i++) {
        uint64_t h = ds_reg_hash((uintptr_t)&pool_of_two[i]);
        if (ds_reg_shard(h) != ds_reg_shard(hx) && ds_shares_shard(h) != ds_shares_shard(hx))
            y = &pool_of_two[i];
    }
    assert_non_null(y);
    harness_holder holder = {.take = take_shards, .give = give_shards, .arg = x};
    harness_hold(&holder);
    make(y);
    ds_tensor_export(y, false, "p", 0);
    ds_tensor_import(y, false, "c", 0);
    y->deleter(y);
    assert_false(harness_let_go(&holder));
    assert_int_equal(deleted, 1);
}

/* A tensor whose extent runs past the top of the address space (a
 * producer's garbage pointer) is indexed up to the top, not wrapped into
 * an empty range: a free inside it is still found to be freeing a share. */
static void test_share_at_the_top_of_memory_is_found(void **state)
{
    (void)state;
    ds_shares_index();
    DLManagedTensor t;
    make(&t);
    t.dl_tensor.data = (void *)(UINTPTR_MAX - 15); /* 24 bytes: 8 past the top */
    ds_tensor_export(&t, false, "p", 0);
    assert_int_equal(ds_shares_host_at(UINTPTR_MAX - 7, 1), (uintptr_t)&t);
    assert_int_equal(ds_shares_host_at(UINTPTR_MAX - 40, 8), 0);
    t.deleter(&t);
    assert_int_equal(ds_shares_host_at(UINTPTR_MAX - 7, 1), 0);
}

/* Tensors a common stride apart (on two threads' stacks, 8 MiB and a guard
 * page apart; same-size blocks of one arena) are in different shards of
 * the shares index as of the registry: threads handing them over share no
 * lock.  Deterministic: 4,096 addresses and their neighbours at each
 * stride (a shard chosen by the hash's top bits put a third of the stack
 * pairs in one shard). */
static void test_tensors_a_stride_apart_share_no_shard(void **state)
{
    (void)state;
    static const uintptr_t strides[] = {0x40, 0x80, 0x1000, 0x801000, 0x4000000};
    for (size_t i = 0; i < sizeof(strides) / sizeof(strides[0]); i++) {
        int same = 0;
        for (uintptr_t k = 0x7f0000000000u; k < 0x7f0000000000u + 4096 * 4104; k += 4104) {
            uint64_t a = ds_reg_hash(k), b = ds_reg_hash(k + strides[i]);
            same += ds_shares_shard(a) == ds_shares_shard(b) || ds_reg_shard(a) == ds_reg_shard(b);
        }
        if (same)
            fail_msg("stride %#lx: %d of 4096 pairs in one shard", (unsigned long)strides[i], same);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_eviction_order_without_output, setup), /* first */
        cmocka_unit_test_setup(test_full_cycle, setup),
        cmocka_unit_test_setup(test_tensors_a_stride_apart_share_no_shard, setup),
        cmocka_unit_test_setup(test_share_at_the_top_of_memory_is_found, setup),
        cmocka_unit_test_setup(test_versioned_cycle, setup),
        cmocka_unit_test_setup(test_release_without_import, setup),
        cmocka_unit_test_setup(test_double_release_warn_forwards, setup),
        cmocka_unit_test_setup(test_double_release_protect_swallows, setup),
        cmocka_unit_test_setup(test_import_after_release, setup),
        cmocka_unit_test_setup(test_new_tensor_at_reused_address, setup),
        cmocka_unit_test_setup(test_import_again_after_release, setup),
        cmocka_unit_test_setup(test_export_again_after_another_thread_released, setup),
        cmocka_unit_test_setup(test_broken_between_two_layers_is_reported, setup),
        cmocka_unit_test_setup(test_broken_struct_seen_twice_is_reported_once, setup),
        cmocka_unit_test_setup(test_double_import, setup),
        cmocka_unit_test_setup(test_reexport_does_not_wrap_twice, setup),
        cmocka_unit_test_setup(test_replaced_deleter_is_the_new_producers, setup),
        cmocka_unit_test_setup(test_null_deleter, setup),
        cmocka_unit_test_setup(test_eviction_keeps_live_records, setup),
        cmocka_unit_test_setup(test_summary_totals_include_shares_past_the_pair_table, setup),
        cmocka_unit_test_setup(test_summary_only_where_something_happened, setup),
        cmocka_unit_test_setup(test_taken_at_release, setup),
        cmocka_unit_test_setup(test_copy_on_import, setup),
        cmocka_unit_test_setup(test_dropped_unconsumed, setup),
        cmocka_unit_test_setup(test_summary_names_outstanding_shares, setup),
        cmocka_unit_test_setup(test_handoffs_on_other_shards_do_not_wait, setup),
    };
    return cmocka_run_group_tests(tests, NULL, harness_teardown);
}
