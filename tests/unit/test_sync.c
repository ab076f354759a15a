/* Unit tests of the stream model (shim/ledger/sync*.c) on the core alone,
 * with a fake device API: vector clocks across event records, stream waits,
 * host synchronizes and the legacy default stream's implicit ordering; the
 * handoff check; the barrier DLSHIM_SYNC=enforce asks the API for, never
 * for another thread's per-thread default stream; and a semaphore one API
 * exports and another imports (shim/ledger/external.c), one event for both. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ledger/ledger.h"
#include "harness.h"

enum { A = 0x1000, B = 0x2000, NB = 0x3000, EV = 0x4000 }; /* stream and event handles */
enum { LEGACY = 1, PER_THREAD = 2 };                       /* the fake API's own handles */
#define DATA 0x10000000u
#define BYTES 4096u

static int barriers;
static uintptr_t barrier_from, barrier_to;

static bool fake_barrier(uintptr_t producer, uintptr_t consumer)
{
    barriers++;
    barrier_from = producer;
    barrier_to = consumer;
    return true;
}

static const ds_device_api fake = {
    .name = "fake",
    .device_type = {"fakedev", "fakedev_host", "fakedev_managed", "fakedev"},
    .legacy_stream = LEGACY,
    .per_thread_stream = PER_THREAD,
    .barrier = fake_barrier,
};
static int api = -1;

static void start(const char *sync)
{
    static char var[32];
    snprintf(var, sizeof(var), "DLSHIM_SYNC=%s", sync);
    const char *env[] = {var, "DLSHIM_EVENTS=all", NULL};
    harness_init(env);
    if (api < 0)
        api = ds_device_api_add(&fake);
    barriers = 0;
}

/* start, with the blocking streams A and B created. */
static void start_with_a_and_b(const char *sync)
{
    start(sync);
    ds_sync_stream_created(api, A, false);
    ds_sync_stream_created(api, B, false);
}

static const ds_range data_write = {.start = DATA, .len = BYTES, .write = true},
                      data_read = {.start = DATA, .len = BYTES};

/* The producer writes the data on `producer`, exports; the consumer
 * imports (the core's import calls ds_sync_import) and reads on `consumer`
 * after `between` ran. */
static void handoff(uintptr_t producer, uintptr_t consumer, void (*between)(void))
{
    static uintptr_t tensor = 0x9000;
    tensor += 0x100; /* a new tensor each time */
    ds_sync_op(api, producer, false, &data_write, 1, NULL);
    ds_sync_import(tensor, DATA, BYTES, NULL,
                   ds_name_intern("producer"), ds_name_intern("consumer"));
    if (between)
        between();
    ds_sync_op(api, consumer, false, &data_read, 1, NULL);
}

static int races(void)
{
    char *log = harness_read_log();
    int n = harness_count(log, "\"kind\":\"unsynchronized_handoff\"");
    free(log);
    return n;
}

static void test_unsynchronized_handoff_is_reported(void **state)
{
    (void)state;
    start_with_a_and_b("check");
    handoff(A, B, NULL);
    assert_int_equal(races(), 1);
    char *log = harness_read_log();
    assert_non_null(strstr(log, "\"producer_stream\":\"stream 0x1000\""));
    assert_non_null(strstr(log, "\"consumer_stream\":\"stream 0x2000\""));
    free(log);
}

/* A tensor that carries a handle (kDLVulkan): its bytes are offsets in its
 * memory (space 7), where the producer's write is found and the consumer's
 * uses are, and nowhere else. */
static void test_a_handoff_in_a_memory_is_used_only_there(void **state)
{
    (void)state;
    start_with_a_and_b("check");
    const ds_range in_memory = {.start = 0x100, .len = BYTES, .write = true, .space = 7};
    ds_sync_op(api, A, false, &in_memory, 1, NULL);
    ds_sync_import(0x9a00, 0, BYTES, &in_memory, ds_name_intern("producer"),
                   ds_name_intern("consumer"));
    /* The same offsets in another memory, or as addresses: not a use. */
    const ds_range other = {.start = 0x100, .len = BYTES, .space = 8},
                   addresses = {.start = 0x100, .len = BYTES};
    ds_sync_op(api, B, false, &other, 1, NULL);
    ds_sync_op(api, B, false, &addresses, 1, NULL);
    assert_int_equal(races(), 0);
    const ds_range last_byte = {.start = 0x100 + BYTES - 1, .len = 1, .space = 7};
    ds_sync_op(api, B, false, &last_byte, 1, NULL);
    assert_int_equal(races(), 1);
    char *log = harness_read_log();
    assert_non_null(strstr(log, "\"memory_offset\":256"));
    free(log);
}

static void record_on_a_and_wait_on_b(void)
{
    ds_sync_event_recorded(api, EV, A, false);
    ds_sync_stream_waits(api, B, EV, false);
}

static void host_waits_for_a(void)
{
    ds_sync_host_waits_stream(api, A, false);
}

static void test_synchronized_handoffs_are_silent(void **state)
{
    (void)state;
    start_with_a_and_b("check");
    handoff(A, B, record_on_a_and_wait_on_b); /* event record + stream wait */
    handoff(A, B, host_waits_for_a);          /* a host synchronize in between */
    handoff(A, A, NULL);                      /* the same stream */
    handoff(A, 0, NULL);      /* the legacy stream waits for blocking streams */
    handoff(A, LEGACY, NULL); /* the API's own name for it */
    assert_int_equal(races(), 0);
}

static void test_a_non_blocking_stream_escapes_the_legacy_ordering(void **state)
{
    (void)state;
    start("check");
    ds_sync_stream_created(api, NB, true);
    handoff(NB, 0, NULL);
    assert_int_equal(races(), 1);
}

static void test_an_event_recorded_before_the_write_covers_nothing(void **state)
{
    (void)state;
    start_with_a_and_b("check");
    ds_sync_event_recorded(api, EV, A, false);
    ds_sync_stream_waits(api, B, EV, false);
    handoff(A, B, NULL);
    assert_int_equal(races(), 1);
}

static void test_enforce_asks_the_api_for_a_barrier(void **state)
{
    (void)state;
    start_with_a_and_b("enforce");
    handoff(A, B, NULL);
    assert_int_equal(barriers, 1);
    assert_true(barrier_from == A && barrier_to == B);
    assert_int_equal(races(), 0);
    assert_int_equal(ds_sync_barriers(), 1);
    char *log = harness_read_log();
    assert_int_equal(harness_count(log, "\"event\":\"sync\""), 1);
    free(log);
}

/* A per-thread default stream is one per thread: the producer's, written on
 * another thread, cannot be named here, so no barrier is asked for (the
 * API's would record on this thread's own) and the race is reported. */
static void *produce_on_per_thread_stream(void *arg)
{
    (void)arg;
    ds_sync_op(api, PER_THREAD, false, &data_write, 1, NULL);
    return NULL;
}

static void test_enforce_never_names_another_threads_default_stream(void **state)
{
    (void)state;
    start("enforce");
    ds_sync_stream_created(api, B, false);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, produce_on_per_thread_stream, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    ds_sync_import(0x7000, DATA, BYTES, NULL,
                   ds_name_intern("producer"), ds_name_intern("consumer"));
    ds_sync_op(api, B, false, &data_read, 1, NULL);
    assert_int_equal(barriers, 0);
    assert_int_equal(races(), 1);
    char *log = harness_read_log();
    assert_non_null(strstr(log, "\"producer_stream\":\"per-thread default stream of thread"));
    free(log);
    /* This thread's own per-thread stream it can name. */
    start("enforce");
    ds_sync_stream_created(api, B, false);
    handoff(PER_THREAD, B, NULL);
    assert_int_equal(barriers, 1);
    assert_true(barrier_from == PER_THREAD && barrier_to == B);
}

/* A stream's slot, freed by its destroy, serves the next stream created:
 * a thread that remembers where the old handle led must not follow it. */
static void test_a_freed_slot_serves_another_stream(void **state)
{
    (void)state;
    enum { GONE = 0x5000, NEXT = 0x6000 };
    start("check");
    ds_sync_stream_created(api, GONE, false);
    ds_sync_op(api, GONE, false, &data_read, 1, NULL);
    ds_sync_stream_destroyed(api, GONE);
    ds_sync_stream_created(api, NEXT, false);
    /* NEXT settled in GONE's old slot: the way without SYNC, which this
     * thread's memo of GONE leads to, must see the slot holds another. */
    ds_sync_op(api, NEXT, false, &data_read, 1, NULL);
    handoff(GONE, NEXT, NULL); /* the handle again: a stream of its own, unordered with NEXT */
    assert_int_equal(races(), 1);
}

/* An empty write (a zero-byte fill) overlaps nothing: queued after the
 * data's last write, inside its bytes, on a stream the consumer never
 * waits for, it is not what the consumer must wait for. */
static void test_an_empty_write_is_no_last_write(void **state)
{
    (void)state;
    start_with_a_and_b("check");
    ds_sync_stream_created(api, NB, true);
    ds_sync_op(api, A, false, &data_write, 1, NULL);
    ds_range empty = {.start = DATA + 64, .len = 0, .write = true};
    ds_sync_op(api, NB, false, &empty, 1, NULL);
    ds_sync_import(0x7800, DATA, BYTES, NULL,
                   ds_name_intern("producer"), ds_name_intern("consumer"));
    record_on_a_and_wait_on_b();
    ds_sync_op(api, B, false, &data_read, 1, NULL);
    assert_int_equal(races(), 0);
}

/* Clocks are merged only when they changed since the last merge: rounds of
 * blocking streams ordered through the legacy default stream stay ordered,
 * and so do chains of event waits across several streams. */
static void legacy_op(void)
{
    ds_sync_op(api, 0, false, NULL, 0, NULL);
}

static void chain_a_b_c(void)
{
    enum { C = 0x5800, EV2 = 0x4800 };
    ds_sync_stream_created(api, C, false);
    ds_sync_event_recorded(api, EV, A, false);
    ds_sync_stream_waits(api, B, EV, false);
    ds_sync_event_recorded(api, EV2, B, false);
    ds_sync_stream_waits(api, C, EV2, false);
}

static void test_orderings_hold_round_after_round(void **state)
{
    (void)state;
    enum { C = 0x5800 };
    start_with_a_and_b("check");
    for (int round = 0; round < 3; round++) {
        handoff(A, B, legacy_op);
        handoff(B, A, legacy_op);
        handoff(A, C, chain_a_b_c);
    }
    assert_int_equal(races(), 0);
    handoff(A, B, NULL);
    assert_int_equal(races(), 1);
}

/* A handoff whose write the host has waited for can race with nothing: it
 * does not wait for its first use (the table of waiting ones stays free for
 * those that can). */
static void test_handoffs_the_host_waited_for_do_not_wait(void **state)
{
    (void)state;
    start_with_a_and_b("check");
    for (uintptr_t i = 0; i < 300; i++) {
        ds_range w = {.start = 0x20000000u + i * BYTES, .len = BYTES, .write = true};
        ds_sync_op(api, A, false, &w, 1, NULL);
        if (i % 2) /* imported before or after the host waits: never used */
            ds_sync_host_waits_stream(api, A, false);
        ds_sync_import(0x30000000u + i, w.start, BYTES, NULL, ds_name_intern("producer"),
                       ds_name_intern("consumer"));
        ds_sync_host_waits_stream(api, A, false);
    }
    handoff(A, B, NULL);
    assert_int_equal(races(), 1);
}

/* A tensor imported again (its address reused, for other bytes) waits for
 * its new last write only: when the host has waited for that one, for
 * nothing, and the old bytes' wait is over too. */
static void test_a_tensor_imported_again_waits_for_its_last_write_only(void **state)
{
    (void)state;
    enum { C = 0x5c00 };
    static const ds_range other_write = {.start = DATA + 2 * BYTES, .len = BYTES, .write = true};
    start_with_a_and_b("check");
    ds_sync_stream_created(api, C, false);
    uint16_t producer = ds_name_intern("producer"), consumer = ds_name_intern("consumer");
    ds_sync_op(api, A, false, &data_write, 1, NULL);
    ds_sync_import(0x7300, DATA, BYTES, NULL, producer, consumer);
    ds_sync_op(api, B, false, &other_write, 1, NULL);
    ds_sync_host_waits_stream(api, B, false);
    ds_sync_import(0x7300, other_write.start, BYTES, NULL, producer, consumer);
    ds_sync_op(api, C, false, &data_read, 1, NULL);
    assert_int_equal(races(), 0);
}

/* A launch names no buffers: it counts as the calling module's use of what
 * that module imported, and of nothing another module imported. */
static void test_a_launch_is_its_modules_first_use(void **state)
{
    (void)state;
    const void *here = (const void *)test_a_launch_is_its_modules_first_use;
    uint16_t self = ds_module_caller_at(here);
    start_with_a_and_b("check");
    ds_sync_op(api, A, false, &data_write, 1, NULL);
    ds_sync_import(0x7100, DATA, BYTES, NULL,
                   ds_name_intern("producer"), ds_name_intern("elsewhere"));
    ds_sync_op(api, B, false, NULL, -1, here);
    assert_int_equal(races(), 0);
    ds_sync_op(api, A, false, &data_write, 1, NULL); /* used (and written) on its own stream */
    ds_sync_import(0x7200, DATA, BYTES, NULL, ds_name_intern("producer"), self);
    ds_sync_op(api, B, false, NULL, -1, here);
    assert_int_equal(races(), 1);
    ds_sync_op(api, B, false, NULL, -1, here); /* only the first use is checked */
    assert_int_equal(races(), 1);
}

static void test_off_models_nothing(void **state)
{
    (void)state;
    start("off");
    handoff(A, B, NULL);
    assert_int_equal(races(), 0);
    assert_int_equal(barriers, 0);
}

/* Threads on different streams share no lock: while another thread holds
 * the model's SYNC lock (its general way), an operation, an event record
 * and a stream wait on a settled stream are done all the same, under the
 * stream's own shard (and the event's), and ordered as before. */
static pthread_barrier_t sync_held, sync_done;

static void *hold_sync(void *arg)
{
    (void)arg;
    ds_lock_take(DS_LOCK_SYNC);
    pthread_barrier_wait(&sync_held);
    pthread_barrier_wait(&sync_done);
    ds_lock_give(DS_LOCK_SYNC);
    return NULL;
}

static void test_settled_streams_need_no_sync_lock(void **state)
{
    (void)state;
    /* Two streams whose handles a thread's memo of recent handles keeps
     * apart (A's and B's share a memo: one of them would be looked up). */
    enum { P = 0x5100, Q = 0x5200, EV_Q = 0x4400 };
    start("check");
    ds_sync_stream_created(api, P, false);
    ds_sync_stream_created(api, Q, false);
    /* Settled (the general way once), and the events known. */
    ds_sync_op(api, P, false, &data_write, 1, NULL);
    ds_sync_op(api, Q, false, &data_read, 1, NULL);
    ds_sync_event_recorded(api, EV, P, false);
    ds_sync_event_recorded(api, EV_Q, Q, false);
    pthread_barrier_init(&sync_held, NULL, 2);
    pthread_barrier_init(&sync_done, NULL, 2);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_sync, NULL), 0);
    pthread_barrier_wait(&sync_held);
    /* The write handed over, the event recorded after it and the wait for
     * it, all while SYNC is held elsewhere. */
    assert_true(ds_sync_op_now(api, P, false, &data_write, 1));
    assert_true(ds_sync_event_recorded_now(api, EV, P, false));
    assert_true(ds_sync_stream_waits_now(api, Q, EV, false));
    assert_true(ds_sync_event_recorded_now(api, EV_Q, Q, false));
    pthread_barrier_wait(&sync_done);
    assert_int_equal(pthread_join(t, NULL), 0);
    pthread_barrier_destroy(&sync_held);
    pthread_barrier_destroy(&sync_done);
    ds_sync_import(0x7400, DATA, BYTES, NULL,
                   ds_name_intern("producer"), ds_name_intern("consumer"));
    ds_sync_op(api, Q, false, &data_read, 1, NULL);
    assert_int_equal(races(), 0); /* Q waited for the write */
    handoff(P, Q, NULL);
    assert_int_equal(races(), 1);
}

/* An import of bytes no stream wrote (any tensor's in a process with
 * streams, where nothing on a stream wrote it since the host last waited)
 * reads the streams' writes under their own shards and takes no SYNC:
 * threads handing over such tensors at once share no lock.  With the
 * import under SYNC it waited for the holder: the holder notes it and lets
 * go after a while, so this fails instead of hanging. */
#define UNWRITTEN 0x50000000u /* bytes no test before these writes */

static void take_sync(void *arg)
{
    (void)arg;
    ds_lock_take(DS_LOCK_SYNC);
}

static void give_sync(void *arg)
{
    (void)arg;
    ds_lock_give(DS_LOCK_SYNC);
}

static harness_holder sync_holder = {.take = take_sync, .give = give_sync};

static void test_an_import_of_unwritten_bytes_needs_no_sync_lock(void **state)
{
    (void)state;
    start_with_a_and_b("check");
    ds_sync_op(api, A, false, &data_write, 1, NULL);
    harness_hold(&sync_holder);
    ds_sync_import(0x7900, UNWRITTEN, BYTES, NULL, ds_name_intern("producer"),
                   ds_name_intern("consumer"));
    assert_false(harness_let_go(&sync_holder));
    /* Nothing pends for those bytes; the written ones still wait for
     * their consumer's first use. */
    ds_sync_op(api, B, false, &(ds_range){.start = UNWRITTEN, .len = BYTES}, 1, NULL);
    assert_int_equal(races(), 0);
    ds_sync_import(0x7a00, DATA, BYTES, NULL, ds_name_intern("producer"),
                   ds_name_intern("consumer"));
    ds_sync_op(api, B, false, &data_read, 1, NULL);
    assert_int_equal(races(), 1);
}

/* A host read (a CPU tensor in a device API's memory, imported) checks the
 * streams' writes the same way: of bytes no stream wrote, without SYNC;
 * of bytes a stream wrote and the host never waited for, a race. */
static void test_a_host_read_of_unwritten_bytes_needs_no_sync_lock(void **state)
{
    (void)state;
    start_with_a_and_b("check");
    ds_sync_op(api, A, false, &data_write, 1, NULL);
    harness_hold(&sync_holder);
    enum { NEVER_WRITTEN = 0x58000000 }; /* UNWRITTEN is written by the test above */
    ds_sync_host_reads(0x7c00, NEVER_WRITTEN, BYTES, ds_name_intern("producer"),
                       ds_name_intern("consumer"));
    assert_false(harness_let_go(&sync_holder));
    assert_int_equal(races(), 0);
    ds_sync_host_reads(0x7d00, DATA, BYTES, ds_name_intern("producer"),
                       ds_name_intern("consumer"));
    assert_int_equal(races(), 1);
}

/* While a handoff waits for its consumer, an operation on a settled stream
 * that is the first use of no waiting handoff (bytes apart from it, a
 * launch by a module that is not its consumer) reads the waiting handoffs
 * without SYNC and takes its stream's shard alone, as when none waits:
 * threads on their own streams do not all meet at SYNC while one handoff
 * waits.  The consumer's first use is still found. */
static void test_operations_apart_from_a_waiting_handoff_need_no_sync_lock(void **state)
{
    (void)state;
    enum { P = 0x5100, Q = 0x5200 }; /* apart in a thread's memos, as above */
    start("check");
    ds_sync_stream_created(api, P, false);
    ds_sync_stream_created(api, Q, false);
    const ds_range apart = {.start = UNWRITTEN, .len = BYTES, .write = true};
    ds_sync_op(api, Q, false, &apart, 1, NULL); /* Q settled */
    ds_sync_op(api, P, false, &data_write, 1, NULL);
    ds_sync_import(0x7b00, DATA, BYTES, NULL, ds_name_intern("producer"),
                   ds_name_intern("consumer"));
    harness_hold(&sync_holder);
    ds_sync_op(api, Q, false, &apart, 1, NULL);
    ds_sync_op(api, Q, false, NULL, -1, (const void *)start); /* this module's launch */
    assert_false(harness_let_go(&sync_holder));
    assert_int_equal(races(), 0);
    /* the bytes handed over: the general way, the first use found */
    ds_sync_op(api, Q, false, &data_read, 1, NULL);
    assert_int_equal(races(), 1);
}

/* A thread's default stream (stream 0 in a per-thread call, or the API's
 * handle for it) settles as any other stream: once a form of its handle
 * has taken the general way, its operations and records take its shard
 * alone, not SYNC.  A forked child's thread forgets where they led (its
 * default stream is not its parent thread's).  The two forms have memos
 * of their own: both stay settled side by side. */
static void test_a_threads_default_stream_needs_no_sync_lock(void **state)
{
    (void)state;
    start_with_a_and_b("check");
    ds_sync_op(api, 0, true, &data_write, 1, NULL);
    ds_sync_event_recorded(api, EV, 0, true);
    pthread_barrier_init(&sync_held, NULL, 2);
    pthread_barrier_init(&sync_done, NULL, 2);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, hold_sync, NULL), 0);
    pthread_barrier_wait(&sync_held);
    bool op = ds_sync_op_now(api, 0, true, &data_write, 1);
    bool record = ds_sync_event_recorded_now(api, EV, 0, true);
    pthread_barrier_wait(&sync_done);
    assert_int_equal(pthread_join(t, NULL), 0);
    pthread_barrier_destroy(&sync_held);
    pthread_barrier_destroy(&sync_done);
    assert_true(op);
    assert_true(record);
    ds_sync_op(api, PER_THREAD, false, &data_write, 1, NULL);
    assert_true(ds_sync_op_now(api, PER_THREAD, false, &data_write, 1));
    assert_true(ds_sync_op_now(api, 0, true, &data_write, 1));
    /* One stream under both forms: its own reads are ordered; B, which
     * waited for nothing, races; after a wait for an event recorded under
     * the other form, it does not. */
    ds_sync_import(0x7600, DATA, BYTES, NULL,
                   ds_name_intern("producer"), ds_name_intern("consumer"));
    ds_sync_op(api, 0, true, &data_read, 1, NULL);
    assert_int_equal(races(), 0);
    handoff(PER_THREAD, B, NULL);
    assert_int_equal(races(), 1);
    ds_sync_op(api, 0, true, &data_write, 1, NULL);
    ds_sync_import(0x7700, DATA, BYTES, NULL,
                   ds_name_intern("producer"), ds_name_intern("consumer"));
    ds_sync_event_recorded(api, EV, PER_THREAD, false);
    ds_sync_stream_waits(api, B, EV, false);
    ds_sync_op(api, B, false, &data_read, 1, NULL);
    assert_int_equal(races(), 1);
    assert_true(ds_sync_op_now(api, PER_THREAD, false, &data_write, 1));
    ds_sync_after_fork();
    assert_false(ds_sync_op_now(api, PER_THREAD, false, &data_write, 1));
}

/* ---- a semaphore exported by another API (as Vulkan's vkGetSemaphoreFdKHR)
 * and imported by the fake one (as cudaImportExternalSemaphore) ---- */
enum { QUEUE = 0x5000, SEM = 0x6000, SEM2 = 0x7000, IMPORT = 0x8000 };
static const ds_device_api exporter = {.name = "fakevk", .device_type = {"fakevk"}};
static int exporter_api = -1;

/* start, with the exporting API; its semaphore `sem` exported as a new
 * file, whose identity (as the importer reads it) is *id; the descriptor. */
static int export_semaphore(uintptr_t sem, ds_file_id *id)
{
    if (exporter_api < 0)
        exporter_api = ds_device_api_add(&exporter);
    int fd = memfd_create("semaphore", MFD_CLOEXEC);
    assert_true(fd >= 0);
    ds_extsem_exported(exporter_api, sem, fd);
    assert_true(ds_extmem_identify(fd, id));
    return fd;
}

/* What the importer's signals and waits of its object `handle` are made on. */
static uintptr_t linked_to(uintptr_t handle)
{
    int from = -1;
    uintptr_t sem = 0;
    return ds_extsem_source(api, handle, &from, &sem) && from == exporter_api ? sem : 0;
}

/* The exporter's queue writes and signals; the importer's stream waits. */
static void exporter_writes_then_stream_a_waits(void)
{
    ds_sync_op(exporter_api, QUEUE, false, &data_write, 1, NULL);
    ds_sync_event_recorded(exporter_api, SEM, QUEUE, false);
    int from = api;
    uintptr_t sem = IMPORT;
    ds_extsem_source(api, IMPORT, &from, &sem);
    ds_sync_shared_waits(api, A, false, from, sem);
}

static void test_a_shared_semaphore_orders_the_two_apis(void **state)
{
    (void)state;
    start_with_a_and_b("check");
    ds_file_id id;
    int fd = export_semaphore(SEM, &id);
    ds_extsem_imported(api, IMPORT, &id);
    assert_int_equal(linked_to(IMPORT), SEM);
    /* The exporter's write, ordered before stream A by the semaphore. */
    exporter_writes_then_stream_a_waits();
    ds_sync_import(0x9f00, DATA, BYTES, NULL, ds_name_intern("vkproducer"),
                   ds_name_intern("consumer"));
    ds_sync_op(api, A, false, &data_read, 1, NULL);
    assert_int_equal(races(), 0);
    /* And the reverse: A writes and signals, the exporter's queue waits. */
    ds_sync_op(api, A, false, &data_write, 1, NULL);
    ds_sync_shared_recorded(exporter_api, SEM, api, A, false);
    ds_sync_stream_waits(exporter_api, QUEUE, SEM, false);
    ds_sync_import(0x9f10, DATA, BYTES, NULL,
                   ds_name_intern("producer"), ds_name_intern("vkconsumer"));
    ds_sync_op(exporter_api, QUEUE, false, &data_read, 1, NULL);
    assert_int_equal(races(), 0);
    ds_extsem_destroyed(api, IMPORT);
    assert_int_equal(linked_to(IMPORT), 0);
    close(fd);
}

static void test_an_unlinked_import_orders_nothing(void **state)
{
    (void)state;
    start_with_a_and_b("check");
    exporter_api = exporter_api < 0 ? ds_device_api_add(&exporter) : exporter_api;
    exporter_writes_then_stream_a_waits(); /* IMPORT never imported: its own event */
    ds_sync_import(0x9f20, DATA, BYTES, NULL, ds_name_intern("vkproducer"),
                   ds_name_intern("consumer"));
    ds_sync_op(api, A, false, &data_read, 1, NULL);
    assert_int_equal(races(), 1);
}

static void test_a_descriptor_links_one_import_only(void **state)
{
    (void)state;
    start("check");
    ds_file_id id;
    int fd = export_semaphore(SEM, &id);
    ds_extsem_imported(api, IMPORT, &id);
    /* The importer owns the descriptor: the same number and file, imported
     * again (it was closed and its number reused), is not the semaphore. */
    ds_extsem_imported(api, IMPORT + 8, &id);
    assert_int_equal(linked_to(IMPORT + 8), 0);
    /* Another semaphore exported under the same number replaces it. */
    close(fd);
    ds_file_id id2;
    int fd2 = export_semaphore(SEM2, &id2);
    assert_int_equal(fd2, fd);
    ds_extsem_imported(api, IMPORT + 16, &id2);
    assert_int_equal(linked_to(IMPORT + 16), SEM2);
    /* The exporter's semaphore destroyed: its imports unlinked (its handle
     * may name another semaphore next). */
    ds_extsem_semaphore_gone(exporter_api, SEM2);
    assert_int_equal(linked_to(IMPORT + 16), 0);
    assert_int_equal(linked_to(IMPORT), SEM);
    ds_extsem_destroyed(api, IMPORT);
    close(fd2);
}

/* A timeline semaphore of the exporter's (as Vulkan's), signalled and
 * waited for by values from both APIs' streams. */
enum { TIMELINE = 0x6100 };

static void consumer_reads_on(int consumer_api, uintptr_t stream, uintptr_t tensor)
{
    ds_sync_import(tensor, DATA, BYTES, NULL, ds_name_intern("producer"),
                   ds_name_intern("consumer"));
    ds_sync_op(consumer_api, stream, false, &data_read, 1, NULL);
}

static void test_a_timeline_orders_the_two_apis_by_value(void **state)
{
    (void)state;
    start_with_a_and_b("check");
    exporter_api = exporter_api < 0 ? ds_device_api_add(&exporter) : exporter_api;
    ds_timeline_created(exporter_api, TIMELINE, 0);
    assert_true(ds_timeline_is(exporter_api, TIMELINE));
    assert_false(ds_timeline_is(api, TIMELINE)); /* known by its owner's API */
    /* The queue signals 1, writes, signals 2. */
    ds_timeline_signalled(exporter_api, TIMELINE, 1, exporter_api, QUEUE, false);
    ds_sync_op(exporter_api, QUEUE, false, &data_write, 1, NULL);
    ds_timeline_signalled(exporter_api, TIMELINE, 2, exporter_api, QUEUE, false);
    /* A waits for 1 only: the write is unordered before it. */
    ds_timeline_waited(exporter_api, TIMELINE, 1, api, A, false);
    consumer_reads_on(api, A, 0x9f30);
    assert_int_equal(races(), 1);
    /* B waits for 3, which nothing signalled yet: every signal up to it. */
    ds_timeline_waited(exporter_api, TIMELINE, 3, api, B, false);
    consumer_reads_on(api, B, 0x9f40);
    assert_int_equal(races(), 1);
    /* The reverse: A writes and signals 5, the queue waits for 2 (its own
     * signal, nothing of A's), then for 5. */
    ds_sync_op(api, A, false, &data_write, 1, NULL);
    ds_timeline_signalled(exporter_api, TIMELINE, 5, api, A, false);
    ds_timeline_waited(exporter_api, TIMELINE, 2, exporter_api, QUEUE, false);
    consumer_reads_on(exporter_api, QUEUE, 0x9f50);
    assert_int_equal(races(), 2);
    ds_sync_op(api, A, false, &data_write, 1, NULL);
    ds_timeline_signalled(exporter_api, TIMELINE, 6, api, A, false);
    ds_timeline_waited(exporter_api, TIMELINE, 6, exporter_api, QUEUE, false);
    consumer_reads_on(exporter_api, QUEUE, 0x9f60);
    assert_int_equal(races(), 2);
    /* A value no signal names (A signals 8 after its write): the counter
     * got past 7 by that signal, so a wait for 7 is ordered after it. */
    ds_sync_op(api, A, false, &data_write, 1, NULL);
    ds_timeline_signalled(exporter_api, TIMELINE, 8, api, A, false);
    ds_timeline_waited(exporter_api, TIMELINE, 7, exporter_api, QUEUE, false);
    consumer_reads_on(exporter_api, QUEUE, 0x9f68);
    assert_int_equal(races(), 2);
    /* The host's wait for 9 covers A's writes; destroyed, it is no more. */
    ds_sync_op(api, A, false, &data_write, 1, NULL);
    ds_timeline_signalled(exporter_api, TIMELINE, 9, api, A, false);
    ds_timeline_host_waited(exporter_api, TIMELINE, 9);
    consumer_reads_on(api, B, 0x9f70);
    assert_int_equal(races(), 2);
    ds_timeline_destroyed(exporter_api, TIMELINE);
    assert_false(ds_timeline_is(exporter_api, TIMELINE));
}

/* Wait-before-signal: a stream waits for a value that a submission made
 * later signals (another queue's, another API's).  The wait is pending until
 * then; from the signal on, the stream is ordered after the writes before it.
 * A wait for a value the semaphore started at, or that a signal reached
 * before, is met and never pending. */
static void test_a_wait_submitted_before_its_signal_orders_from_the_signal_on(void **state)
{
    (void)state;
    start_with_a_and_b("check");
    exporter_api = exporter_api < 0 ? ds_device_api_add(&exporter) : exporter_api;
    ds_timeline_created(exporter_api, TIMELINE, 10);
    /* A waits for 12, which nothing has signalled; B for 10, the initial value. */
    ds_timeline_waited(exporter_api, TIMELINE, 12, api, A, false);
    ds_timeline_waited(exporter_api, TIMELINE, 10, api, B, false);
    /* The queue writes and signals 11: not A's value yet. */
    ds_sync_op(exporter_api, QUEUE, false, &data_write, 1, NULL);
    ds_timeline_signalled(exporter_api, TIMELINE, 11, exporter_api, QUEUE, false);
    consumer_reads_on(api, A, 0x9f80);
    assert_int_equal(races(), 1);
    /* It writes again and signals 13: A's wait is met, with 11's writes too. */
    ds_sync_op(exporter_api, QUEUE, false, &data_write, 1, NULL);
    ds_timeline_signalled(exporter_api, TIMELINE, 13, exporter_api, QUEUE, false);
    consumer_reads_on(api, A, 0x9f90);
    assert_int_equal(races(), 1);
    /* B's wait was met at once (no later signal orders B): B is not ordered. */
    consumer_reads_on(api, B, 0x9fa0);
    assert_int_equal(races(), 2);
    ds_timeline_destroyed(exporter_api, TIMELINE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* First: no handoff left waiting by another (they make every
         * operation take the general way). */
        cmocka_unit_test(test_settled_streams_need_no_sync_lock),
        cmocka_unit_test(test_a_threads_default_stream_needs_no_sync_lock),
        cmocka_unit_test(test_unsynchronized_handoff_is_reported),
        cmocka_unit_test(test_a_handoff_in_a_memory_is_used_only_there),
        cmocka_unit_test(test_synchronized_handoffs_are_silent),
        cmocka_unit_test(test_a_non_blocking_stream_escapes_the_legacy_ordering),
        cmocka_unit_test(test_an_event_recorded_before_the_write_covers_nothing),
        cmocka_unit_test(test_enforce_asks_the_api_for_a_barrier),
        cmocka_unit_test(test_enforce_never_names_another_threads_default_stream),
        cmocka_unit_test(test_a_freed_slot_serves_another_stream),
        cmocka_unit_test(test_an_empty_write_is_no_last_write),
        cmocka_unit_test(test_orderings_hold_round_after_round),
        cmocka_unit_test(test_handoffs_the_host_waited_for_do_not_wait),
        cmocka_unit_test(test_a_tensor_imported_again_waits_for_its_last_write_only),
        cmocka_unit_test(test_a_launch_is_its_modules_first_use),
        cmocka_unit_test(test_off_models_nothing),
        cmocka_unit_test(test_a_shared_semaphore_orders_the_two_apis),
        cmocka_unit_test(test_an_unlinked_import_orders_nothing),
        cmocka_unit_test(test_a_descriptor_links_one_import_only),
        cmocka_unit_test(test_a_timeline_orders_the_two_apis_by_value),
        cmocka_unit_test(test_a_wait_submitted_before_its_signal_orders_from_the_signal_on),
        cmocka_unit_test(test_an_import_of_unwritten_bytes_needs_no_sync_lock),
        cmocka_unit_test(test_operations_apart_from_a_waiting_handoff_need_no_sync_lock),
        cmocka_unit_test(test_a_host_read_of_unwritten_bytes_needs_no_sync_lock),
    };
    return cmocka_run_group_tests(tests, NULL, harness_teardown);
}
