/*
 * log.c — the event sink.
 *
 * Lines to a regular file are gathered in memory and written in blocks,
 * one write(2) per block, when a block fills, when DS_LOG_AGE_NS has passed
 * since the last flush, after a violation, at exit and _exit, on a fatal
 * signal and before fork: a system call per event cost more than all the
 * bookkeeping of a handoff.  What a killed process loses is what waits, so
 * DLSHIM_LOG_BUFFER=0 writes each line at once.  A character device that
 * is not a terminal (/dev/null) is buffered as a file is: nobody reads it
 * line by line, and a write per event there cost more than the whole file
 * log.  Terminals and pipes are never buffered: someone reads them as
 * lines come (`| jq`, `| grep`), and the 100 ms age is only looked at when
 * the next event comes, so a program gone quiet would hold its last lines
 * back from them.  stderr is buffered only when it is such a device (the
 * program's own messages to it cannot be put out of order).
 *
 * Slots, one a thread: a thread adds its lines to a slot of its
 * own (DS_LOG_SLOTS, a shard each of LOG_LINES, a cache line of its own),
 * so that threads logging at once share no lock and write no common line:
 * the one lock they share (LOG) is taken only to write.  A flush takes every
 * slot's lines at one instant (LOG_LINES whole: each slot's block becomes
 * its held block, a pointer swap; the threads go on in their other block)
 * and then, under LOG alone, merges the held blocks by each line's time
 * (kept beside it: t_ns, a mark per line), the runs of each slot's lines
 * handed to writev(2) where they lie.
 * So the file is in time order across threads, as with one buffer, and
 * each thread's lines keep their order; a line is never written ahead of
 * one that was in a slot before it came (an export, then its import on
 * another thread).  The one exception to time order: a line whose event
 * came just before a flush but was added just after it goes with the next
 * flush, after later lines of other threads.  One thread alone writes its
 * block where it is, no merge.  A summary's lines (ds_log_write_tail) are
 * written at once, after a flush of every slot.  Memory: 2 blocks of
 * DLSHIM_LOG_BUFFER bytes and their marks a slot, mapped at its first line
 * and kept; at most DS_LOG_SLOTS - 1 threads have slots of their own at a
 * time (a thread that ends gives its slot back, its lines staying there
 * for the next flush); the others share slot 0.  Lines of concurrent
 * threads never interleave: whole lines go into the slots, blocks are
 * written whole, and files are opened O_APPEND.  A write that fails or
 * comes up short drops what it carried and counts the lines; the program
 * never sees an error, and writing to a closed pipe never raises SIGPIPE
 * in it.
 *
 * With DLSHIM_LOG_WRITER=thread a full block is handed to a thread of the
 * shim's that writes it (see hand_over_locked); every flush that must be
 * done before something else is still done in place.
 *
 * A log file cannot fill the disk: DLSHIM_LOG_MAX_SIZE caps what the file
 * holds (its size at open included, and at each flush the size on disk,
 * which other processes of the run may have grown).
 * A block claims the file's room as it starts filling (as much of a block
 * as there is room for: one CAS a block, not a line), and a flush gives
 * back what its blocks did not fill, so the cap stays exact with many
 * slots.  Ordinary lines stop DS_LOG_TAIL_ROOM short of the cap; then one
 * `log_full` line says so, and the summary (and a text summary's tables)
 * may use the room left; every later line is counted, never written
 * (ds_log_capped, `capped_events` in the summary).  A stop rather than
 * rotation: a rotated log drops its oldest lines, and those are the exports
 * a later violation names; the start of a run explains its end, and what
 * was lost is a number in the summary.
 *
 * Files are created 0600 with O_NOFOLLOW and refused if they belong to
 * another user (falling back to stderr).  One run, one log: the run's first
 * process starts its file afresh, and the processes it starts append to a
 * file written since the run began but start afresh one written before (a
 * previous run's, under a name with `%p` or `%r`), unless DLSHIM_LOG_APPEND
 * keeps every old line.  `%p` in the path becomes the pid; a forked child
 * opens its own file with its first line, so a child that logs nothing (a
 * fork+exec helper) leaves no file.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "output/output.h"

atomic_uint ds_outputs;

void ds_outputs_set(unsigned which, bool open)
{
    if (open)
        atomic_fetch_or_explicit(&ds_outputs, which, memory_order_relaxed);
    else
        atomic_fetch_and_explicit(&ds_outputs, ~which, memory_order_relaxed);
}

static atomic_int log_fd = -1;
#define LOG_LATER (-2) /* a forked child's own %p file: opened by its first line */
static bool log_is_pipe;   /* SIGPIPE must be kept away from the program */
static bool log_per_pid;   /* the path has %p: a forked child reopens */
static char log_spec[DS_PATH_MAX];
/* A log file last written before this is started afresh (see the top). */
static uint64_t run_start_ns;
static bool run_first;
static atomic_uint_fast64_t dropped;
/* The writer thread's (see hand_over_locked). */
enum { WRITER_NONE, WRITER_STARTING, WRITER_RUNNING, WRITER_OFF };
static atomic_int writer_state;
static _Atomic uint32_t writer_work;  /* futex word: hand-overs made */
static atomic_bool writer_stop;
static atomic_bool writer_start_owed; /* a hand-over found no writer yet */
static atomic_bool writer_wake_owed;  /* set under LOG, acted on after it */
static pthread_t writer_thread;

#define DS_LOG_AGE_NS 100000000ull /* 100 ms: the longest a line waits while events flow */

/* The lines waiting to be written, a slot per thread (see the top, and
 * output.h): slot 0 is shared by threads that found no slot of their own
 * free; slot i is guarded by shard i of LOG_LINES, the whole lock taken by
 * a flush.  Each slot holds two blocks of buffer_size bytes and the marks
 * of their lines (a line's time and end): the one its threads add to, and
 * the one a flush took from it, written under LOG while the threads go on. */
ds_log_slot ds_log_slots[DS_LOG_SLOTS];
#define slots ds_log_slots
DS_TLS unsigned char ds_log_own_slot;
struct ds_log_due ds_log_flush_due;
#define flush_due ds_log_flush_due
static bool buffered;        /* lines to this log go into the slots */
static size_t buffer_size;   /* DLSHIM_LOG_BUFFER: a block's bytes */
static uint32_t mark_cap;    /* a block's lines at most */
/* A flush that merges two slots or more copies their lines here in time
 * order (2 blocks' bytes, mapped at the first such flush). */
static char *merged;
static size_t merged_size;
static pthread_key_t slot_key; /* its destructor frees a thread's slot */
static atomic_uint slot_users; /* threads with slots of their own, and slot 0 once used */
static bool slot0_counted;     /* under LOG */
static atomic_bool slot_key_made;

/* The room kept under the cap for the log_full line and the summary (at
 * most 64 KiB, ledger/summary.c), or half the cap where that is smaller. */
#define DS_LOG_TAIL_ROOM (72 * 1024ull)
static uint64_t file_max;               /* 0: no cap (not a file we opened) */
/* Bytes the file holds, claimed before they are written: a block's room
 * when a thread starts filling it (a few CAS per block, not per line). */
static struct {
    _Alignas(64) _Atomic uint64_t bytes;
} file_size;
enum { FULL_NO, FULL_OWED, FULL_WRITTEN };
static atomic_int file_full;            /* the log_full line: FULL_* */
static atomic_uint_fast64_t capped;     /* lines not written since */

/* A log file named *.zst: each block the buffer writes is one zstd frame
 * (level -3, the fast mode: 11.5 bytes an event on the exchange loop
 * against 7.7 at level 1, for 5 % less wall time), compressed under the
 * log's lock in a context that never allocates (a static one in mapped
 * memory), so that the fatal-signal and _exit paths may compress too.  Independent frames rather than one stream:
 * a killed process leaves every frame before the last whole, processes of a
 * run append theirs to one file (O_APPEND, a frame per write), and a
 * forked child needs no stream state.  A line that would be written outside
 * the lock (a signal handler inside the shim) is dropped and counted. */
#define DS_ZSTD_LEVEL (-3)
#define DS_ZSTD_CHUNK ((size_t)128 * 1024) /* the most one frame carries */
static ds_zstd_api zstd;
static void *zstd_cctx;    /* NULL: no libzstd */
static char *zstd_out;
static size_t zstd_out_cap;
static bool log_zstd;      /* this log is compressed */

bool ds_log_wants_zstd(const char *spec)
{
    size_t n = strlen(spec);
    return n > 4 && strcmp(spec + n - 4, ".zst") == 0;
}

void ds_log_set_zstd(const ds_zstd_api *api)
{
    size_t work = api->estimate_cctx_size(DS_ZSTD_LEVEL);
    size_t out = api->compress_bound(DS_ZSTD_CHUNK);
    void *w = ds_map(work, true), *o = ds_map(out, true);
    void *cctx = w ? api->init_static_cctx(w, work) : NULL;
    if (!cctx || !o) {
        ds_unmap(w, work);
        ds_unmap(o, out);
        return;
    }
    zstd = *api;
    zstd_cctx = cctx;
    zstd_out = o;
    zstd_out_cap = out;
}

/* Expands %p (pid), %r (rank, else pid) and %% in spec; false when the
 * result does not fit. */
static bool expand_path(char *out, size_t cap, const char *spec)
{
    size_t len = 0;
    for (const char *s = spec; *s; s++) {
        char piece[24];
        size_t n;
        if (s[0] == '%' && (s[1] == 'p' || s[1] == 'r')) {
            n = ds_fmt(piece, sizeof(piece), "%d", s[1] == 'r' && ds_rank() >= 0 ? ds_rank() : ds_pid());
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            piece[0] = '%', n = 1;
            s++;
        } else {
            piece[0] = *s, n = 1;
        }
        if (len + n >= cap)
            return false;
        memcpy(out + len, piece, n);
        len += n;
    }
    out[len] = '\0';
    return true;
}

bool ds_output_per_pid(const char *spec)
{
    return strstr(spec, "%p") || (strstr(spec, "%r") && ds_rank() < 0);
}

static bool fd_is_pipe(int fd)
{
    struct stat st;
    return ds_fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

int ds_output_open(const char *spec, const char *option, uint64_t fresh_before_ns)
{
    char path[DS_PATH_MAX];
    const char *unknown = spec;
    while ((unknown = strchr(unknown, '%')) && (unknown[1] == 'p' || unknown[1] == 'r' ||
                                                  unknown[1] == '%'))
        unknown += 2;
    if (unknown) {
        char shown[8];
        ds_printable(shown, sizeof(shown), unknown, 2);
        ds_diag("%s: %s in the path is not known (%%p: the process id, %%r: the rank, "
                "%%%%: a %%)", option, shown);
        return -1;
    }
    if (!expand_path(path, sizeof(path), spec)) {
        ds_diag("%s: the path is longer than %d bytes once %%p is expanded", option,
                DS_PATH_MAX - 1);
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
    if (fd < 0) {
        const char *why = ds_errno_name(errno);
        ds_diag("%s: cannot open %s (%s)", option, path, why ? why : "error");
        return -1;
    }
    /* Ownership is checked before anything is truncated. */
    struct stat st;
    if (ds_fstat(fd, &st) != 0 || (S_ISREG(st.st_mode) && st.st_uid != geteuid())) {
        ds_diag("%s: %s belongs to another user", option, path);
        close(fd);
        return -1;
    }
    if (S_ISREG(st.st_mode) && st.st_size > 0 && ds_ns_of(st.st_mtim) < fresh_before_ns &&
        ftruncate(fd, 0) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Buffer lines for fd if it is a regular file and a buffer is asked for. */
/* Where ordinary lines stop: the cap less the tail's room. */
static uint64_t soft_max(void)
{
    uint64_t tail = file_max / 2 < DS_LOG_TAIL_ROOM ? file_max / 2 : DS_LOG_TAIL_ROOM;
    return file_max - tail;
}

/* Claims between need and want bytes of the file under its soft cap for a
 * block (as many as there are); 0 when need does not fit, or the log_full
 * line is owed (then only the summary's lines are written: the slow path). */
static size_t claim_room(size_t need, size_t want)
{
    if (atomic_load_explicit(&file_full, memory_order_relaxed) != FULL_NO)
        return 0;
    uint64_t have = atomic_load_explicit(&file_size.bytes, memory_order_relaxed), soft = soft_max();
    size_t got;
    do {
        if (have >= soft || soft - have < need)
            return 0;
        got = soft - have < want ? (size_t)(soft - have) : want;
    } while (!atomic_compare_exchange_weak_explicit(&file_size.bytes, &have, have + got,
                                                     memory_order_relaxed, memory_order_relaxed));
    return got;
}

/* Claims len bytes of the file under limit; false when they do not fit. */
static bool claim(size_t len, uint64_t limit)
{
    if (!file_max)
        return true;
    uint64_t have = atomic_load_explicit(&file_size.bytes, memory_order_relaxed);
    do {
        if (have + len > limit)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&file_size.bytes, &have, have + len,
                                                     memory_order_relaxed, memory_order_relaxed));
    return true;
}

/* Claims the file's room for one line written at once: an ordinary line
 * under the soft cap, and none once the log_full line is owed (a shorter
 * line than the one refused may still fit, but must not follow log_full);
 * a summary's line (`tail`) under the cap itself. */
static bool claim_line(size_t len, bool tail)
{
    if (!tail && file_max && atomic_load_explicit(&file_full, memory_order_relaxed) != FULL_NO)
        return false;
    return claim(len, tail ? file_max : soft_max());
}

/* The cap for fd: a regular file this log opened (not stderr). */
static void set_cap(int fd)
{
    struct stat st;
    file_max = 0;
    atomic_store(&file_full, FULL_NO);
    if (fd > STDERR_FILENO && ds_cfg.log_max_size > 0 && ds_fstat(fd, &st) == 0 &&
        S_ISREG(st.st_mode)) {
        file_max = (uint64_t)ds_cfg.log_max_size;
        atomic_store(&file_size.bytes, (uint64_t)st.st_size);
    }
}

/* Bytes of a block's lines, rounded so that its marks are aligned. */
static size_t block_bytes(void)
{
    return (buffer_size + 15) & ~(size_t)15;
}

/* A thread that ends gives its slot back; what its lines wait for there
 * is written by the next flush, as any slot's. */
static void slot_given_back(void *value)
{
    unsigned i = (unsigned)(uintptr_t)value - 1;
    if (ds_log_own_slot != i + 1)
        return; /* a slot of the parent's, in a forked child */
    ds_log_own_slot = 0;
    atomic_fetch_sub_explicit(&slot_users, 1, memory_order_relaxed);
    if (ds_holds_lock() || !ds_lock_take_bounded(DS_LOCK_LOG))
        return; /* leaving: the slot stays taken, its lines are flushed */
    slots[i].taken = false;
    ds_lock_give(DS_LOCK_LOG);
}

static bool write_held(int fd);

/* Buffer lines for fd if it is a regular file, or a device nobody reads
 * line by line (not a terminal), and a buffer is asked for.  Every slot is
 * laid out afresh at its next line (slot_ready), in its memory if that is
 * large enough. */
static void set_buffer(int fd)
{
    struct stat st;
    size_t want = (size_t)ds_cfg.log_buffer;
    bool buffer = false;
    if (want > 0 && fd >= STDERR_FILENO && ds_fstat(fd, &st) == 0) {
        bool quiet_device = S_ISCHR(st.st_mode) && !isatty(fd);
        buffer = quiet_device || (fd != STDERR_FILENO && S_ISREG(st.st_mode));
    }
    if (buffer && !atomic_exchange(&slot_key_made, true) &&
        pthread_key_create(&slot_key, slot_given_back) != 0)
        atomic_store(&slot_key_made, false);
    bool locks = !ds_holds_lock();
    if (locks) {
        ds_lock_take(DS_LOCK_LOG);
        ds_lock_take(DS_LOCK_LOG_LINES);
    }
    /* what was handed to the writer since the flush before this open goes
     * to the log it was made for, before the slots are laid out afresh */
    int old = atomic_load_explicit(&log_fd, memory_order_relaxed);
    if (locks && buffered && old >= 0)
        write_held(old);
    buffered = buffer;
    buffer_size = buffer ? want : 0;
    /* lines are DS_LOG_LINE_MIN bytes at least: the marks never run out */
    mark_cap = (uint32_t)(buffer_size / DS_LOG_LINE_MIN + 2);
    for (int i = 0; i < DS_LOG_SLOTS; i++) {
        slots[i].buf = NULL;
        slots[i].len = slots[i].cap = 0;
        slots[i].lines = 0;
    }
    atomic_store(&flush_due.at, 0);
    if (locks) {
        ds_lock_give(DS_LOCK_LOG_LINES);
        ds_lock_give(DS_LOCK_LOG);
    }
}

void ds_log_set_run(uint64_t start_ns, bool first, bool append)
{
    run_start_ns = append ? 0 : start_ns;
    run_first = first && !append;
}

void ds_log_open(const char *spec)
{
    ds_log_flush(); /* lines held for a previous log go there */
    int fd;
    if (strcmp(spec, "off") == 0)
        fd = -1;
    else if (strcmp(spec, "stderr") == 0)
        fd = STDERR_FILENO;
    else if ((fd = ds_output_open(spec, "DLSHIM_LOG",
                                  run_first ? UINT64_MAX : run_start_ns)) < 0) {
        ds_diag("DLSHIM_LOG: events go to stderr instead");
        fd = STDERR_FILENO;
    }
    memcpy(log_spec, spec, strlen(spec) + 1);
    log_per_pid = ds_output_per_pid(spec);
    log_is_pipe = fd >= 0 && fd_is_pipe(fd);
    struct stat st;
    log_zstd = fd > STDERR_FILENO && ds_log_wants_zstd(spec) && ds_fstat(fd, &st) == 0 &&
               S_ISREG(st.st_mode);
    if (log_zstd && !zstd_cctx) {
        ds_diag("DLSHIM_LOG: %s: libzstd.so.1 cannot be loaded: written uncompressed", spec);
        log_zstd = false;
    }
    set_cap(fd);
    set_buffer(fd);
    atomic_store(&log_fd, fd);
    ds_outputs_set(DS_OUT_LOG, fd >= 0);
}

void ds_log_after_fork(void)
{
    /* The parent flushed before forking (ds_log_before_fork): nothing is
     * pending.  The child's one thread takes a slot at its next line. */
    for (int i = 0; i < DS_LOG_SLOTS; i++) {
        slots[i].len = slots[i].cap = slots[i].held_len = 0;
        slots[i].lines = slots[i].held_lines = 0;
        slots[i].taken = false;
    }
    ds_log_own_slot = 0;
    /* The parent's writer is not here, and none is started: a child of a
     * process with threads may only call what is async-signal-safe until
     * it execs (pthread_create is not; ThreadSanitizer kills such a child).
     * Its blocks are written in place. */
    atomic_store(&writer_state, WRITER_OFF);
    atomic_store(&writer_work, 0);
    atomic_store(&writer_stop, false);
    atomic_store(&writer_start_owed, false);
    atomic_store(&writer_wake_owed, false);
    atomic_store(&slot_users, 0);
    slot0_counted = false;
    atomic_store(&flush_due.at, 0);
    if (!log_per_pid)
        return;
    int old = atomic_load(&log_fd);
    if (old > STDERR_FILENO)
        close(old);
    atomic_store(&log_fd, LOG_LATER);
}

/* The descriptor to write to, opening a forked child's own file first.
 * Under the log's lock, so that two threads open it once; a thread that
 * holds a shim lock (a handler that interrupted the shim) cannot take it,
 * and its line is dropped. */
static int writable_fd(void)
{
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    if (fd != LOG_LATER || ds_holds_lock() || !ds_lock_take_bounded(DS_LOCK_LOG))
        return fd;
    fd = atomic_load(&log_fd);
    if (fd == LOG_LATER) {
        int saved = errno;
        if ((fd = ds_output_open(log_spec, "DLSHIM_LOG", run_start_ns)) < 0) {
            ds_diag("DLSHIM_LOG: events go to stderr instead");
            fd = STDERR_FILENO;
        }
        log_is_pipe = fd_is_pipe(fd);
        set_cap(fd);
        if (fd <= STDERR_FILENO)
            buffered = false, log_zstd = false; /* the parent's stderr: as its own lines are */
        atomic_store(&log_fd, fd);
        errno = saved;
    }
    ds_lock_give(DS_LOCK_LOG);
    return fd;
}

bool ds_log_enabled(void)
{
    return atomic_load_explicit(&log_fd, memory_order_relaxed) != -1;
}

void ds_log_count_drop(void)
{
    atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
}

uint64_t ds_log_dropped(void)
{
    return atomic_load(&dropped);
}

uint64_t ds_log_capped(void)
{
    return atomic_load(&capped);
}

/* write(2) with SIGPIPE held back: a reader that went away must not kill the
 * program.  A SIGPIPE our write raised is consumed; one already pending for
 * the program is left alone. */
static ssize_t write_no_sigpipe(int fd, const char *p, size_t n)
{
    sigset_t pipe_only, old, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    sigpending(&pending);
    bool was_pending = sigismember(&pending, SIGPIPE);
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EPIPE && !was_pending) {
        int saved = errno;
        const struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_only, NULL, &zero) < 0 && errno == EINTR) {
        }
        errno = saved;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return w;
}

static bool write_raw(int fd, const char *p, size_t len);

/* The log's lock held: len bytes as zstd frames of at most DS_ZSTD_CHUNK. */
static bool write_zstd(int fd, const char *p, size_t len)
{
    bool ok = true;
    for (size_t at = 0; at < len; at += DS_ZSTD_CHUNK) {
        size_t n = len - at < DS_ZSTD_CHUNK ? len - at : DS_ZSTD_CHUNK;
        size_t z = zstd.compress_cctx(zstd_cctx, zstd_out, zstd_out_cap, p + at, n, DS_ZSTD_LEVEL);
        ok = !zstd.is_error(z) && write_raw(fd, zstd_out, z) && ok;
    }
    return ok;
}

static bool write_out(int fd, const char *p, size_t len)
{
    return log_zstd ? write_zstd(fd, p, len) : write_raw(fd, p, len);
}

static bool write_raw(int fd, const char *p, size_t len)
{
    int saved = errno;
    ssize_t w;
    do {
        w = log_is_pipe ? write_no_sigpipe(fd, p, len) : write(fd, p, len);
    } while (w < 0 && errno == EINTR);
    errno = saved;
    return w == (ssize_t)len;
}

static void owe_log_full(void);

/* LOG and LOG_LINES held: each slot's lines become its held block, and the
 * room claimed for what they did not fill goes back to the file.  All
 * slots at one instant, so that no line is written ahead of one that was
 * in a slot before it came (an export before its import on another
 * thread).  Under a cap, the file's size on disk is looked at first (a
 * fstat per flush): other processes of the run may have grown it past what
 * the blocks were promised, and then the blocks are not written but
 * counted.  False then. */
static bool take_blocks(int fd)
{
    uint64_t unused = 0, held = 0, lines = 0;
    for (int i = 0; i < DS_LOG_SLOTS; i++) {
        ds_log_slot *s = &slots[i];
        if (!s->buf)
            continue;
        if (file_max)
            unused += s->cap - s->len;
        char *b = s->buf;
        ds_line_mark *m = s->marks;
        s->buf = s->held, s->marks = s->held_marks;
        s->held = b, s->held_marks = m;
        s->held_len = s->len, s->held_lines = s->lines;
        s->len = 0, s->lines = 0;
        s->cap = 0;
        held += s->held_len, lines += s->held_lines;
    }
    if (!file_max)
        return true;
    uint64_t have = atomic_fetch_sub_explicit(&file_size.bytes, unused, memory_order_relaxed) - unused;
    struct stat st;
    if (!held || ds_fstat(fd, &st) != 0)
        return true;
    uint64_t seen = (uint64_t)st.st_size + held; /* what we wrote is on disk: LOG is held */
    while (seen > have && !atomic_compare_exchange_weak_explicit(&file_size.bytes, &have, seen,
                                                                  memory_order_relaxed,
                                                                  memory_order_relaxed)) {
    }
    if ((seen > have ? seen : have) <= file_max)
        return true;
    atomic_fetch_sub_explicit(&file_size.bytes, held, memory_order_relaxed);
    atomic_fetch_add_explicit(&capped, lines, memory_order_relaxed);
    owe_log_full();
    for (int i = 0; i < DS_LOG_SLOTS; i++)
        slots[i].held_len = slots[i].held_lines = 0;
    return false;
}

/* LOG held: bytes of lines written, or dropped and counted (a short write
 * leaves a partial line: rare). */
static bool write_block(int fd, const char *p, size_t len, uint64_t lines)
{
    if (!len || write_out(fd, p, len))
        return true;
    atomic_fetch_add_explicit(&dropped, lines, memory_order_relaxed);
    return false;
}

/* LOG held: lines gathered for one writev(2), at most IOV_BATCH runs. */
#define IOV_BATCH 512
typedef struct {
    struct iovec iov[IOV_BATCH];
    int n;
    size_t bytes;
    uint64_t lines;
} gathered;

static bool write_gathered(int fd, gathered *g)
{
    bool ok = true;
    if (g->n) {
        int saved = errno;
        ssize_t w;
        do {
            w = writev(fd, g->iov, g->n);
        } while (w < 0 && errno == EINTR);
        errno = saved;
        if (w != (ssize_t)g->bytes) {
            atomic_fetch_add_explicit(&dropped, g->lines, memory_order_relaxed);
            ok = false;
        }
    }
    g->n = 0, g->bytes = 0, g->lines = 0;
    return ok;
}

/* LOG held: a run of lines of one slot, from `from` to `end` in its held
 * block, added to what goes out: into `merged` (compressed), or as a
 * piece of the next writev (the lines written where they are). */
static bool put_run(int fd, gathered *g, size_t *out, uint64_t *out_lines, const char *p,
                    size_t len, uint64_t lines)
{
    bool ok = true;
    if (!log_zstd) {
        if (g->n == IOV_BATCH)
            ok = write_gathered(fd, g);
        g->iov[g->n++] = (struct iovec){(void *)(uintptr_t)p, len};
        g->bytes += len, g->lines += lines;
        return ok;
    }
    for (size_t at = 0; at < len;) {
        /* whole lines only: a run is cut at a line's end where merged fills */
        size_t n = len - at;
        if (*out + n > merged_size) {
            ok = write_block(fd, merged, *out, *out_lines) && ok;
            *out = 0, *out_lines = 0;
        }
        memcpy(merged + *out, p + at, n);
        *out += n, at += n;
    }
    *out_lines += lines;
    return ok;
}

/* LOG held: the held blocks written.  One alone (one thread) is written
 * where it is; two or more are merged by their lines' times, each slot's
 * lines kept in their order: runs of a slot's lines that no other slot's
 * line comes between go out as the pieces of one writev(2) each, where
 * they are (no copy: the kernel gathers them, and /dev/null not even
 * that), or into `merged` for a compressed log, written a block a time. */
static bool write_held(int fd)
{
    int with[DS_LOG_SLOTS], n = 0;
    for (int i = 0; i < DS_LOG_SLOTS; i++)
        if (slots[i].held_len)
            with[n++] = i;
    if (n == 0)
        return true;
    size_t room = 2 * block_bytes();
    if (n > 1 && log_zstd && merged_size < room) {
        void *p = ds_map(room, true);
        if (p) {
            ds_unmap(merged, merged_size);
            merged = p;
            merged_size = room;
        }
    }
    bool ok = true;
    if (n == 1 || (log_zstd && merged_size < room)) { /* one block, or no memory to merge in */
        for (int k = 0; k < n; k++) {
            ds_log_slot *s = &slots[with[k]];
            ok = write_block(fd, s->held, s->held_len, s->held_lines) && ok;
            s->held_len = s->held_lines = 0;
        }
        return ok;
    }
    static gathered g; /* under LOG */
    uint32_t at[DS_LOG_SLOTS] = {0};
    size_t out = 0;
    uint64_t out_lines = 0;
    while (n > 0) {
        /* the slot whose next line is the oldest, and the time of the next
         * line of any other: its lines up to that time go on together */
        int best = 0;
        uint64_t second = UINT64_MAX;
        for (int k = 1; k < n; k++) {
            uint64_t t = slots[with[k]].held_marks[at[with[k]]].ns;
            uint64_t b = slots[with[best]].held_marks[at[with[best]]].ns;
            if (t < b) {
                second = b;
                best = k;
            } else if (t < second) {
                second = t;
            }
        }
        int i = with[best];
        ds_log_slot *s = &slots[i];
        uint32_t first = at[i];
        size_t from = first ? s->held_marks[first - 1].end : 0;
        while (++at[i] < s->held_lines && s->held_marks[at[i]].ns <= second) {
        }
        size_t end = s->held_marks[at[i] - 1].end;
        ok = put_run(fd, &g, &out, &out_lines, s->held + from, end - from, at[i] - first) && ok;
        if (at[i] == s->held_lines) {
            s->held_len = s->held_lines = 0;
            with[best] = with[--n];
        }
    }
    ok = write_gathered(fd, &g) && ok;
    return write_block(fd, merged, out, out_lines) && ok;
}

/* LOG held: every slot's lines written, what the writer thread was handed
 * and has not written yet first (the held blocks are older than the
 * blocks being filled, and take_blocks reuses them). */
static bool flush_locked(int fd)
{
    bool ok = write_held(fd);
    if (!ds_lock_take_bounded(DS_LOCK_LOG_LINES))
        return false; /* leaving, and a thread holds its slot */
    bool fits = take_blocks(fd);
    ds_lock_give(DS_LOCK_LOG_LINES);
    return write_held(fd) && fits && ok;
}

/* The writer thread (DLSHIM_LOG_WRITER=thread): a thread whose block
 * filled (or aged) takes every slot's lines as a flush does, a pointer swap
 * under LOG, and hands the held blocks to the writer, which merges and
 * writes them under LOG while the threads go on in their other blocks: the
 * write(2), the merge and the compression leave the thread that made the
 * events.  Nothing waits on a queue: a block handed over stays the slot's
 * held block until written, so a flush that finds one still there (the
 * writer behind) writes it in place first, and flushes that must be done
 * before something (a violation, the summary, exit, _exit, a fatal signal,
 * fork) are written in place as before.  The writer sleeps on a futex, the
 * count of hand-overs; it is started at the first hand-over of a process
 * (never in a forked child, which writes in place), from outside every
 * shim lock, with every signal blocked (the program's handlers never run
 * on it), and stopped and joined by the library's destructor. */

static bool writer_wanted(void)
{
    return ds_cfg.log_writer == DS_LOG_WRITER_THREAD;
}

static void futex_wait(_Atomic uint32_t *word, uint32_t seen)
{
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *writer_main(void *unused)
{
    (void)unused;
    prctl(PR_SET_NAME, (unsigned long)"dlshim-log", 0, 0, 0);
    uint32_t done = 0;
    for (;;) {
        uint32_t work = atomic_load(&writer_work);
        if (atomic_load(&writer_stop))
            break;
        if (work == done) {
            futex_wait(&writer_work, work);
            continue;
        }
        /* leaving: the thread that leaves writes everything itself */
        if (!ds_lock_take_bounded(DS_LOCK_LOG))
            break;
        done = work;
        int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
        if (fd >= 0 && buffered)
            write_held(fd);
        ds_lock_give(DS_LOCK_LOG);
    }
    return NULL;
}

/* The writer told to end, and joined where that cannot wait forever: a
 * thread inside the shim, or leaving, might hold the LOG it waits for
 * (then the process is ending, and the writer with it). */
static void writer_halt(void)
{
    atomic_store(&writer_stop, true);
    atomic_fetch_add(&writer_work, 1);
    futex_wake(&writer_work);
    if (!ds_holds_lock() && !atomic_load(&ds_leaving))
        pthread_join(writer_thread, NULL);
}

/* Outside every shim lock (pthread_create allocates): the writer started
 * when a hand-over asked for it.  Its signal mask is inherited: all
 * blocked, so that no signal meant for the program is delivered to it. */
static void writer_start_if_owed(void)
{
    if (!atomic_load_explicit(&writer_start_owed, memory_order_relaxed) || ds_holds_lock())
        return;
    int none = WRITER_NONE;
    if (!atomic_compare_exchange_strong(&writer_state, &none, WRITER_STARTING))
        return;
    atomic_store(&writer_start_owed, false);
    int saved = errno;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    atomic_store(&writer_stop, false);
    int err = pthread_create(&writer_thread, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    int starting = WRITER_STARTING;
    if (err != 0)
        atomic_store(&writer_state, WRITER_OFF);
    else if (!atomic_compare_exchange_strong(&writer_state, &starting, WRITER_RUNNING))
        writer_halt(); /* stopped as it started (the library's destructor) */
    errno = saved;
}

/* After LOG is given back: the writer woken if a hand-over was made. */
static void writer_wake_if_owed(void)
{
    if (atomic_load_explicit(&writer_wake_owed, memory_order_relaxed) &&
        atomic_exchange(&writer_wake_owed, false))
        futex_wake(&writer_work);
}

/* LOG held, a block full or a flush due: every slot's lines handed to the
 * writer, or written here where there is none (yet). */
static bool hand_over_locked(int fd)
{
    if (!writer_wanted())
        return flush_locked(fd);
    if (atomic_load(&writer_state) != WRITER_RUNNING) {
        if (atomic_load_explicit(&writer_state, memory_order_relaxed) == WRITER_NONE)
            atomic_store_explicit(&writer_start_owed, true, memory_order_relaxed);
        return flush_locked(fd);
    }
    bool ok = write_held(fd); /* the writer is behind: its last blocks written here */
    if (!ds_lock_take_bounded(DS_LOCK_LOG_LINES))
        return false;
    bool fits = take_blocks(fd);
    ds_lock_give(DS_LOCK_LOG_LINES);
    atomic_fetch_add(&writer_work, 1);
    atomic_store_explicit(&writer_wake_owed, true, memory_order_relaxed);
    return fits && ok;
}

void ds_log_stop_writer(void)
{
    /* STARTING: the thread starting it halts it (writer_start_if_owed) */
    if (atomic_exchange(&writer_state, WRITER_OFF) != WRITER_RUNNING)
        return;
    writer_halt();
    ds_log_flush(); /* what was handed over as it stopped */
}

/* A line that does not go into the buffer: written at once. */
static bool write_now(int fd, const char *line, size_t len)
{
    if (write_out(fd, line, len))
        return true;
    ds_log_count_drop();
    return false;
}

/* The first ordinary line with no room left under the soft cap: the
 * log_full line is owed, and written by the event builder, which this file
 * does not call (ds_log_full_owed). */
static void owe_log_full(void)
{
    int none = FULL_NO;
    atomic_compare_exchange_strong(&file_full, &none, FULL_OWED);
}

/* An ordinary line with no room left under the soft cap: counted. */
static bool refuse_capped(void)
{
    atomic_fetch_add_explicit(&capped, 1, memory_order_relaxed);
    owe_log_full();
    return false;
}

bool ds_log_full_owed(uint64_t *max_size)
{
    int owed = FULL_OWED;
    if (atomic_load_explicit(&file_full, memory_order_relaxed) != FULL_OWED ||
        !atomic_compare_exchange_strong(&file_full, &owed, FULL_WRITTEN))
        return false;
    *max_size = file_max;
    return true;
}

/* s's shard held: room for len more bytes in its block, and under a cap
 * the file's room for them, claimed as the block fills (as much of it as
 * the file has room for, a CAS at a time).  A block asks for a flush when
 * half full when other threads log too, and fills on past the half only
 * while another thread's flush is being written (LOG held): so a thread
 * seldom waits for another's flush while its block has room.  `whole`: a flush was just done, and
 * the line goes in if the block can take it. */
static __attribute__((noinline)) bool room_for(ds_log_slot *s, size_t len, bool whole)
{
    if (!s->buf || len < DS_LOG_LINE_MIN || s->len + len > buffer_size || s->lines >= mark_cap)
        return false;
    if (s->len + len <= s->cap)
        return true;
    size_t upto = buffer_size;
    if (s->len + len <= buffer_size / 2 &&
        atomic_load_explicit(&slot_users, memory_order_relaxed) > 1)
        upto = buffer_size / 2;
    else if (!whole && (ds_holds(DS_LOCK_LOG) ||
                        !atomic_load_explicit(ds_spin_of(DS_LOCK_LOG, 0), memory_order_relaxed)))
        return false; /* time to flush */
    if (!file_max) {
        s->cap = upto;
        return true;
    }
    size_t got = claim_room(s->len + len - s->cap, upto - s->cap);
    s->cap += got;
    return got != 0;
}

/* LOG and s's shard held: s laid out in its memory (mapped, or mapped
 * afresh when too small for the buffer asked for, at its first line). */
static bool slot_ready(ds_log_slot *s)
{
    if (s->buf)
        return true;
    size_t block = block_bytes(), need = 2 * (block + (size_t)mark_cap * sizeof(ds_line_mark));
    if (s->mem_size < need) {
        void *p = ds_map(need, true);
        if (!p)
            return false;
        ds_unmap(s->mem, s->mem_size);
        s->mem = p;
        s->mem_size = need;
    }
    s->held = s->mem + block;
    s->marks = (ds_line_mark *)(void *)(s->mem + 2 * block);
    s->held_marks = s->marks + mark_cap;
    s->len = s->held_len = s->cap = 0;
    s->lines = s->held_lines = 0;
    s->buf = s->mem;
    return true;
}

/* LOG held: this thread's slot, a free one taken at its first line (given
 * back when the thread ends: slot_given_back), or the shared slot 0 when
 * none is free. */
static unsigned own_slot(void)
{
    if (ds_log_own_slot)
        return ds_log_own_slot - 1u;
    unsigned i = 1;
    while (i < DS_LOG_SLOTS && slots[i].taken)
        i++;
    if (i == DS_LOG_SLOTS || !atomic_load_explicit(&slot_key_made, memory_order_relaxed) ||
        pthread_setspecific(slot_key, (void *)(uintptr_t)(i + 1)) != 0)
        i = 0;
    else
        slots[i].taken = true;
    ds_log_own_slot = (unsigned char)(i + 1);
    /* slot 0's threads are counted once: they share its room */
    bool counted = i == 0 && slot0_counted;
    slot0_counted = slot0_counted || i == 0;
    if (!counted)
        atomic_fetch_add_explicit(&slot_users, 1, memory_order_relaxed);
    return i;
}

static inline void add_line(ds_log_slot *s, const char *line, size_t len, uint64_t now)
{
    memcpy(s->buf + s->len, line, len);
    s->len += len;
    s->marks[s->lines++] = (ds_line_mark){now, (uint32_t)s->len};
}

/* LOG held: the line added to this thread's slot, unless a flush is due
 * first (`flushed`: one was just done). */
static bool add_own(const char *line, size_t len, uint64_t now, bool flushed)
{
    unsigned i = own_slot();
    ds_log_slot *s = &slots[i];
    ds_lock_take_shard(DS_LOCK_LOG_LINES, i);
    bool in = (flushed || now < atomic_load_explicit(&flush_due.at, memory_order_relaxed)) &&
              slot_ready(s) && room_for(s, len, flushed);
    if (in)
        add_line(s, line, len, now);
    ds_lock_give_shard(DS_LOCK_LOG_LINES, i);
    return in;
}

/* Everything but a line going into its slot's block with room: a
 * descriptor still to open, no buffer, a re-entry, a full block, a flush
 * due, a summary's line.  Out of line, so that the common case below needs
 * no registers saved. */
static __attribute__((noinline)) bool write_slow(const char *line, size_t len, uint64_t now,
                                                  bool tail)
{
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    writer_start_if_owed();
    if (fd < 0 && (fd = writable_fd()) < 0) {
        /* a child's file not open yet, in a handler inside the shim */
        ds_log_count_drop();
        return false;
    }
    /* Unbuffered, or re-entered from a signal handler that interrupted this
     * thread inside the shim (which may hold a slot's lock): written at
     * once.  So is a line while leaving through _exit as another thread
     * holds the log: ahead of what the slots hold. */
    if (file_max && !tail && atomic_load_explicit(&file_full, memory_order_relaxed) != FULL_NO) {
        atomic_fetch_add_explicit(&capped, 1, memory_order_relaxed);
        return false;
    }
    /* The lock for the slots or the compressor; a plain unbuffered line
     * (stderr, a pipe) is one write(2), whole without it. */
    bool locked = (buffered || log_zstd) && !ds_holds_lock() && ds_lock_take_bounded(DS_LOCK_LOG);
    if (!buffered || !locked) {
        bool ok;
        if (!claim_line(len, tail))
            ok = tail ? (atomic_fetch_add_explicit(&capped, 1, memory_order_relaxed), false)
                      : refuse_capped();
        else if (log_zstd && !locked) /* the compressor is the lock holder's */
            ok = (ds_log_count_drop(), false);
        else
            ok = write_now(fd, line, len);
        if (locked)
            ds_lock_give(DS_LOCK_LOG);
        return ok;
    }
    bool ok = true;
    if (!tail && !atomic_load_explicit(&ds_leaving, memory_order_relaxed)) {
        if (add_own(line, len, now, false)) {
            ds_lock_give(DS_LOCK_LOG);
            return true;
        }
        ok = hand_over_locked(fd);
        atomic_store_explicit(&flush_due.at, now + DS_LOG_AGE_NS, memory_order_relaxed);
        if (add_own(line, len, now, true)) {
            ds_lock_give(DS_LOCK_LOG);
            writer_wake_if_owed();
            return ok;
        }
    } else {
        ok = flush_locked(fd);
    }
    /* A summary's line, a line longer than a block, or the cap near:
     * written at once, after every line the slots held (what was just
     * handed to the writer too). */
    ok = write_held(fd) && ok;
    if (claim_line(len, tail)) {
        ok = write_now(fd, line, len) && ok;
    } else if (tail) {
        atomic_fetch_add_explicit(&capped, 1, memory_order_relaxed);
        ok = false;
    } else {
        ok = refuse_capped();
        /* the room other threads' blocks claimed goes back, and what they
         * hold is written before the log_full line: no later line is */
        flush_locked(fd);
    }
    ds_lock_give(DS_LOCK_LOG);
    writer_wake_if_owed();
    return ok;
}

/* ds_log_write_at's way when its slot is held or has no room. */
static __attribute__((noinline)) bool write_own(unsigned mine, const char *line, size_t len,
                                                 uint64_t now)
{
    ds_log_slot *s = &slots[mine - 1];
    ds_lock_take_shard(DS_LOCK_LOG_LINES, mine - 1);
    bool in = now < atomic_load_explicit(&flush_due.at, memory_order_relaxed) &&
              room_for(s, len, false);
    if (in)
        add_line(s, line, len, now);
    ds_lock_give_shard(DS_LOCK_LOG_LINES, mine - 1);
    return in || write_slow(line, len, now, false);
}

bool ds_log_write_at(const char *line, size_t len, uint64_t now)
{
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    if (fd == -1)
        return true; /* DLSHIM_LOG=off is not a loss */
    /* The common case: this thread's block with room for the line, no
     * flush due, taken by a thread inside no other shim lock. */
    unsigned mine = ds_log_own_slot;
    if (!mine || fd < 0 || !buffered || ds_holds_lock() ||
        atomic_load_explicit(&ds_leaving, memory_order_relaxed))
        return write_slow(line, len, now, false);
    ds_log_slot *s = &slots[mine - 1];
    if (!ds_spin_take_shard_now(DS_LOCK_LOG_LINES, mine - 1))
        return write_own(mine, line, len, now);
    if (now < atomic_load_explicit(&flush_due.at, memory_order_relaxed) &&
        s->len + len <= s->cap && len >= DS_LOG_LINE_MIN) {
        add_line(s, line, len, now);
        ds_lock_give_shard(DS_LOCK_LOG_LINES, mine - 1);
        return true;
    }
    ds_lock_give_shard(DS_LOCK_LOG_LINES, mine - 1);
    return write_own(mine, line, len, now);
}

bool ds_log_write_tail(const char *line, size_t len, uint64_t now)
{
    if (atomic_load_explicit(&log_fd, memory_order_relaxed) == -1)
        return true;
    return write_slow(line, len, now, true);
}

/* ds_log_reserve's way (output.h) when this thread has no slot yet, may
 * not take one, its slot is held elsewhere or has no room, or a flush is
 * due. */
char *ds_log_reserve_slow(uint64_t now)
{
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    if (fd < 0 || !buffered || buffer_size < DS_LOG_RESERVE || ds_holds_lock() ||
        atomic_load_explicit(&ds_leaving, memory_order_relaxed))
        return NULL;
    if (file_max && atomic_load_explicit(&file_full, memory_order_relaxed) != FULL_NO)
        return NULL; /* built aside, and counted */
    writer_start_if_owed();
    unsigned mine = ds_log_own_slot;
    if (mine) { /* its slot was held by a thread sharing it, or is full */
        ds_log_slot *s = &slots[mine - 1];
        ds_lock_take_shard(DS_LOCK_LOG_LINES, mine - 1);
        if (now < atomic_load_explicit(&flush_due.at, memory_order_relaxed) &&
            room_for(s, DS_LOG_RESERVE, false))
            return s->buf + s->len;
        ds_lock_give_shard(DS_LOCK_LOG_LINES, mine - 1);
    }
    ds_lock_take(DS_LOCK_LOG);
    unsigned i = own_slot();
    ds_log_slot *s = &slots[i];
    for (int round = 0; round < 2; round++) {
        ds_lock_take_shard(DS_LOCK_LOG_LINES, i);
        if ((round || now < atomic_load_explicit(&flush_due.at, memory_order_relaxed)) &&
            slot_ready(s) && room_for(s, DS_LOG_RESERVE, round == 1)) {
            ds_lock_give(DS_LOCK_LOG); /* the slot's stays taken until the commit */
            writer_wake_if_owed();
            return s->buf + s->len;
        }
        ds_lock_give_shard(DS_LOCK_LOG_LINES, i);
        if (round == 0) {
            hand_over_locked(fd);
            atomic_store_explicit(&flush_due.at, now + DS_LOG_AGE_NS, memory_order_relaxed);
        }
    }
    /* the file's cap is near: the line is built aside and weighed */
    ds_lock_give(DS_LOCK_LOG);
    writer_wake_if_owed();
    return NULL;
}

bool ds_log_write(const char *line, size_t len)
{
    return ds_log_write_tail(line, len, ds_now_coarse_ns());
}

bool ds_log_flush(void)
{
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    if (fd < 0 || !buffered || ds_holds_lock())
        return true;
    if (!ds_lock_take_bounded(DS_LOCK_LOG))
        return false;
    bool ok = flush_locked(fd);
    ds_lock_give(DS_LOCK_LOG);
    return ok;
}

/* Before fork, with every shim lock taken (the log's and every slot's),
 * the slots are written, so that neither side writes them twice; the
 * child starts empty (ds_log_after_fork). */
void ds_log_before_fork(void)
{
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    if (buffered && fd >= 0) {
        write_held(fd); /* handed to the writer, not written yet */
        take_blocks(fd);
        write_held(fd);
    }
}

/* The summary of a log that failed (a full disk, a reader gone) goes to
 * stderr, so that the count of lost events is not lost with them. */
void ds_log_write_stderr(const char *line, size_t len)
{
    if (atomic_load_explicit(&log_fd, memory_order_relaxed) == STDERR_FILENO)
        return;
    int saved = errno;
    ssize_t w = write_no_sigpipe(STDERR_FILENO, line, len);
    (void)w;
    errno = saved;
}
