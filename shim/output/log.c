/*
 * log.c — the event sink.
 *
 * Lines to a regular file are gathered in one process buffer
 * (DLSHIM_LOG_BUFFER bytes, mmap'd) and written by one write(2) when it
 * fills, when its oldest line is DS_LOG_AGE_NS old, after a violation, at
 * exit and _exit, and before fork: a system call per event cost more than
 * all the bookkeeping of a handoff.  What a killed process loses is the
 * buffer, so DLSHIM_LOG_BUFFER=0 writes each line at once.  stderr and pipes
 * are never buffered (someone is reading them live).  Lines of concurrent
 * threads never interleave: whole lines go into the buffer under its lock,
 * and files are opened O_APPEND.  A write that fails or comes up short drops
 * what it carried and counts the lines; the program never sees an error, and
 * writing to a closed pipe never raises SIGPIPE in it.
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
static size_t buffer_cap, buffer_len, buffer_lines;
static char *buffer_mem;     /* kept across re-opens (tests re-initialise) */
static size_t buffer_mem_cap;
/* When the oldest line held came: the tick clock is plenty for a 100 ms age. */
static uint64_t buffer_since;

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
static void set_buffer(int fd)
{
    struct stat st;
    size_t want = (size_t)ds_cfg.log_buffer;
    buffer = NULL;
    buffer_cap = buffer_len = buffer_lines = 0;
    if (want == 0 || fd <= STDERR_FILENO || ds_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
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
    buffer_cap = want;
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
        if (fd <= STDERR_FILENO)
            buffer = NULL; /* stderr is never buffered */
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

static bool write_out(int fd, const char *p, size_t len)
{
    int saved = errno;
    ssize_t w;
    do {
        w = log_is_pipe ? write_no_sigpipe(fd, p, len) : write(fd, p, len);
    } while (w < 0 && errno == EINTR);
    errno = saved;
    return w == (ssize_t)len;
}

/* Buffer lock held. */
static bool flush_locked(int fd)
{
    bool ok = true;
    if (buffer_len && !write_out(fd, buffer, buffer_len)) {
        /* a short write leaves a partial line: rare, counted */
        atomic_fetch_add_explicit(&dropped, buffer_lines, memory_order_relaxed);
        ok = false;
    }
    buffer_len = buffer_lines = 0;
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

/* Everything but a line going into a buffer with room: a descriptor
 * still to open, no buffer, a re-entry, a full or old buffer.  Out of line,
 * so that the common case below needs no registers saved. */
static __attribute__((noinline)) bool write_slow(const char *line, size_t len, uint64_t now)
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
    if (!buffer || ds_holds_lock() || !ds_lock_take_bounded(DS_LOCK_LOG))
        return write_now(fd, line, len);
    bool ok = true;
    if (buffer_len + len > buffer_cap)
        ok = flush_locked(fd);
    if (len > buffer_cap) { /* a buffer smaller than a line: after what it held */
        ok = write_now(fd, line, len) && ok;
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
    return write_slow(line, len, now);
}

char *ds_log_reserve(uint64_t now)
{
    if (atomic_load_explicit(&log_fd, memory_order_relaxed) < 0 || !buffer ||
        buffer_cap < DS_LINE_MAX + DS_EV_SLACK || ds_holds_lock() ||
        atomic_load_explicit(&ds_leaving, memory_order_relaxed))
        return NULL;
    ds_lock_take(DS_LOCK_LOG);
    if (buffer_len && (buffer_cap - buffer_len < DS_LINE_MAX + DS_EV_SLACK ||
                       now - buffer_since >= DS_LOG_AGE_NS))
        flush_locked(atomic_load_explicit(&log_fd, memory_order_relaxed));
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
    return ds_log_write_at(line, len, ds_now_coarse_ns());
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
