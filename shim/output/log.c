/*
 * log.c — the event sink.
 *
 * Lines to a regular file are gathered in one process buffer
 * (DLSHIM_LOG_BUFFER bytes, mmap'd) and written by one write(2) when it
 * fills, when its oldest line is DS_LOG_AGE_NS old, after a violation, at
 * exit and _exit, and before fork: a system call per event cost more than
 * all the bookkeeping of a handoff.  What a killed process loses is the
 * buffer, so DLSHIM_LOG_BUFFER=0 writes each line at once.  A character
 * device that is not a terminal (/dev/null) is buffered as a file is:
 * nobody reads it line by line, and a write per event there cost more than
 * the whole file log.  Terminals and pipes are never buffered: someone reads
 * them as lines come (`| jq`, `| grep`), and the 100 ms age is only looked
 * at when the next event comes, so a program gone quiet would hold its last
 * lines back from them.  stderr is buffered only when it is such a device
 * (the program's own messages to it cannot be put out of order).  Lines of concurrent
 * threads never interleave: whole lines go into the buffer under its lock,
 * and files are opened O_APPEND.  A write that fails or comes up short drops
 * what it carried and counts the lines; the program never sees an error, and
 * writing to a closed pipe never raises SIGPIPE in it.
 *
 * A log file cannot fill the disk: DLSHIM_LOG_MAX_SIZE caps what the file
 * holds (its size at open included, and at each write of the buffer the
 * size on disk, which other processes of the run may have grown).
 * Ordinary lines stop DS_LOG_TAIL_ROOM short of the cap; then one
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
#include <sys/stat.h>
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

#define DS_LOG_AGE_NS 100000000ull /* 100 ms: the longest a line waits while events flow */
static char *buffer;         /* NULL: unbuffered */
/* buffer_cap: what lines may fill, DLSHIM_LOG_BUFFER (buffer_size) or less
 * where the file's cap is nearer (room_now). */
static size_t buffer_cap, buffer_size, buffer_len, buffer_lines;
static char *buffer_mem;     /* kept across re-opens (tests re-initialise) */
static size_t buffer_mem_cap;
/* When the oldest line held came: the tick clock is plenty for a 100 ms age. */
static uint64_t buffer_since;

/* The room kept under the cap for the log_full line and the summary (at
 * most 64 KiB, ledger/summary.c), or half the cap where that is smaller. */
#define DS_LOG_TAIL_ROOM (72 * 1024ull)
static uint64_t file_max;               /* 0: no cap (not a file we opened) */
static _Atomic uint64_t file_size;      /* bytes the file holds, claimed before written */
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

/* What the buffer may take before the file reaches its soft cap. */
static size_t room_now(void)
{
    if (!file_max)
        return buffer_size;
    if (atomic_load_explicit(&file_full, memory_order_relaxed) != FULL_NO)
        return 0; /* after the log_full line, only the summary's (the slow path) */
    uint64_t have = atomic_load_explicit(&file_size, memory_order_relaxed), soft = soft_max();
    if (have >= soft)
        return 0;
    return soft - have < buffer_size ? (size_t)(soft - have) : buffer_size;
}

/* Claims len bytes of the file under limit; false when they do not fit. */
static bool claim(size_t len, uint64_t limit)
{
    if (!file_max)
        return true;
    uint64_t have = atomic_load_explicit(&file_size, memory_order_relaxed);
    do {
        if (have + len > limit)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&file_size, &have, have + len,
                                                     memory_order_relaxed, memory_order_relaxed));
    return true;
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
        atomic_store(&file_size, (uint64_t)st.st_size);
    }
}

/* Buffer lines for fd if it is a regular file, or a device nobody reads
 * line by line (not a terminal), and a buffer is asked for. */
static void set_buffer(int fd)
{
    struct stat st;
    size_t want = (size_t)ds_cfg.log_buffer;
    buffer = NULL;
    buffer_cap = buffer_size = buffer_len = buffer_lines = 0;
    if (want == 0 || fd < STDERR_FILENO || ds_fstat(fd, &st) != 0)
        return;
    bool quiet_device = S_ISCHR(st.st_mode) && !isatty(fd);
    if (!quiet_device && (fd == STDERR_FILENO || !S_ISREG(st.st_mode)))
        return;
    if (want > buffer_mem_cap) {
        void *p = ds_map(want, true);
        if (!p)
            return;
        ds_unmap(buffer_mem, buffer_mem_cap);
        buffer_mem = p;
        buffer_mem_cap = want;
    }
    buffer = buffer_mem;
    buffer_size = want;
    buffer_cap = room_now();
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
     * pending. */
    buffer_len = buffer_lines = 0;
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
            buffer = NULL, log_zstd = false; /* the parent's stderr: as its own lines are */
        else if (buffer)
            buffer_cap = room_now();
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

/* Buffer lock held.  What the buffer holds fits the soft cap (buffer_cap)
 * unless other processes of the run grew the file meanwhile: its size on
 * disk is looked at first, a fstat per block. */
static bool flush_locked(int fd)
{
    bool ok = true;
    if (buffer_len && file_max) {
        struct stat st;
        uint64_t have = atomic_load_explicit(&file_size, memory_order_relaxed);
        if (ds_fstat(fd, &st) == 0 && (uint64_t)st.st_size > have)
            atomic_store_explicit(&file_size, (uint64_t)st.st_size, memory_order_relaxed);
        if (!claim(buffer_len, file_max)) {
            atomic_fetch_add_explicit(&capped, buffer_lines, memory_order_relaxed);
            buffer_len = buffer_lines = 0;
            owe_log_full();
            buffer_cap = room_now();
            return false;
        }
    }
    if (buffer_len && !write_out(fd, buffer, buffer_len)) {
        /* a short write leaves a partial line: rare, counted */
        atomic_fetch_add_explicit(&dropped, buffer_lines, memory_order_relaxed);
        ok = false;
    }
    buffer_len = buffer_lines = 0;
    if (buffer)
        buffer_cap = room_now();
    return ok;
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

/* Everything but a line going into a buffer with room: a descriptor
 * still to open, no buffer, a re-entry, a full or old buffer.  Out of line,
 * so that the common case below needs no registers saved. */
static __attribute__((noinline)) bool write_slow(const char *line, size_t len, uint64_t now,
                                                  bool tail)
{
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    if (fd < 0 && (fd = writable_fd()) < 0) {
        /* a child's file not open yet, in a handler inside the shim */
        ds_log_count_drop();
        return false;
    }
    /* Unbuffered, or re-entered from a signal handler that interrupted this
     * thread inside the shim (which may hold the buffer's lock): written at
     * once.  So is a line while leaving through _exit as another thread
     * holds the buffer: ahead of what the buffer holds. */
    uint64_t limit = tail ? file_max : soft_max();
    if (file_max && !tail && atomic_load_explicit(&file_full, memory_order_relaxed) != FULL_NO) {
        atomic_fetch_add_explicit(&capped, 1, memory_order_relaxed);
        return false;
    }
    /* The lock for the buffer or the compressor; a plain unbuffered line
     * (stderr, a pipe) is one write(2), whole without it. */
    bool locked = (buffer || log_zstd) && !ds_holds_lock() && ds_lock_take_bounded(DS_LOCK_LOG);
    if (!buffer || !locked) {
        bool ok;
        if (!claim(len, limit))
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
    if (buffer_len + len > buffer_cap)
        ok = flush_locked(fd);
    if (len > buffer_cap) {
        /* a buffer smaller than a line, or the cap near: after what it held */
        if (claim(len, limit))
            ok = write_now(fd, line, len) && ok;
        else if (tail)
            ok = (atomic_fetch_add_explicit(&capped, 1, memory_order_relaxed), false);
        else {
            ok = refuse_capped();
            buffer_cap = 0; /* no shorter line after the log_full line */
        }
    } else {
        if (buffer_len == 0)
            buffer_since = now;
        memcpy(buffer + buffer_len, line, len);
        buffer_len += len;
        buffer_lines++;
        if (now - buffer_since >= DS_LOG_AGE_NS)
            ok = flush_locked(fd) && ok;
    }
    ds_lock_give(DS_LOCK_LOG);
    return ok;
}

bool ds_log_write_at(const char *line, size_t len, uint64_t now)
{
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    if (fd == -1)
        return true; /* DLSHIM_LOG=off is not a loss */
    /* The common case: a file's buffer with room for the line, which has
     * not waited too long, taken by a thread inside no other shim lock. */
    if (fd >= 0 && buffer && !ds_holds_lock() && !atomic_load_explicit(&ds_leaving, memory_order_relaxed)) {
        ds_lock_take(DS_LOCK_LOG);
        if (buffer_len + len <= buffer_cap && (buffer_len == 0 || now - buffer_since < DS_LOG_AGE_NS)) {
            if (buffer_len == 0)
                buffer_since = now;
            memcpy(buffer + buffer_len, line, len);
            buffer_len += len;
            buffer_lines++;
            ds_lock_give(DS_LOCK_LOG);
            return true;
        }
        ds_lock_give(DS_LOCK_LOG);
    }
    return write_slow(line, len, now, false);
}

bool ds_log_write_tail(const char *line, size_t len, uint64_t now)
{
    if (atomic_load_explicit(&log_fd, memory_order_relaxed) == -1)
        return true;
    return write_slow(line, len, now, true);
}

char *ds_log_reserve(uint64_t now)
{
    if (atomic_load_explicit(&log_fd, memory_order_relaxed) < 0 || !buffer ||
        buffer_size < DS_LINE_MAX + DS_EV_SLACK || ds_holds_lock() ||
        atomic_load_explicit(&ds_leaving, memory_order_relaxed))
        return NULL;
    ds_lock_take(DS_LOCK_LOG);
    if (buffer_len && (buffer_cap - buffer_len < DS_LINE_MAX + DS_EV_SLACK ||
                       now - buffer_since >= DS_LOG_AGE_NS))
        flush_locked(atomic_load_explicit(&log_fd, memory_order_relaxed));
    if (buffer_cap - buffer_len < DS_LINE_MAX + DS_EV_SLACK) {
        /* the file's cap is near: the line is built aside and weighed */
        ds_lock_give(DS_LOCK_LOG);
        return NULL;
    }
    return buffer + buffer_len;
}

void ds_log_commit(const char *end, uint64_t now)
{
    if (buffer_len == 0)
        buffer_since = now;
    buffer_len = (size_t)(end - buffer);
    buffer_lines++;
    ds_lock_give(DS_LOCK_LOG);
}

void ds_log_cancel(void)
{
    ds_lock_give(DS_LOCK_LOG);
}

bool ds_log_write(const char *line, size_t len)
{
    return ds_log_write_tail(line, len, ds_now_coarse_ns());
}

bool ds_log_flush(void)
{
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    if (fd < 0 || !buffer || ds_holds_lock())
        return true;
    if (!ds_lock_take_bounded(DS_LOCK_LOG))
        return false;
    bool ok = flush_locked(fd);
    ds_lock_give(DS_LOCK_LOG);
    return ok;
}

/* Before fork, with every shim lock taken (the log's too), the buffer is
 * written, so that neither side writes it twice; the child starts empty
 * (ds_log_after_fork). */
void ds_log_before_fork(void)
{
    int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
    if (buffer && fd >= 0)
        flush_locked(fd);
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
