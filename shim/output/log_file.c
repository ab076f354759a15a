/*
 * log_file.c — the log's descriptor: opened, reopened in a forked child,
 * written to.
 *
 * Files are created 0600 with O_NOFOLLOW and refused if they belong to
 * another user (falling back to stderr).  One run, one log: the run's first
 * process starts its file afresh, and the processes it starts append to a
 * file written since the run began but start afresh one written before (a
 * previous run's, under a name with `%p` or `%r`), unless DLSHIM_LOG_APPEND
 * keeps every old line.  `%p` in the path becomes the pid; a forked child
 * opens its own file with its first line, so a child that logs nothing (a
 * fork+exec helper) leaves no file.  Files are opened O_APPEND.  A write
 * that fails or comes up short drops what it carried and counts the lines;
 * the program never sees an error, and writing to a closed pipe never
 * raises SIGPIPE in it.
 *
 * A log file named *.zst: each block the buffer writes is one zstd frame
 * (level -3, the fast mode: 11.5 bytes an event on the exchange loop
 * against 7.7 at level 1, for 5 % less wall time), compressed under the
 * log's lock in a context that never allocates (a static one in mapped
 * memory), so that the fatal-signal and _exit paths may compress too.
 * Independent frames rather than one stream: a killed process leaves every
 * frame before the last whole, processes of a run append theirs to one
 * file (O_APPEND, a frame per write), and a forked child needs no stream
 * state.  A line that would be written outside the lock (a signal handler
 * inside the shim) is dropped and counted.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

atomic_uint ds_outputs;

void ds_outputs_set(unsigned which, bool open)
{
    if (open)
        atomic_fetch_or_explicit(&ds_outputs, which, memory_order_relaxed);
    else
        atomic_fetch_and_explicit(&ds_outputs, ~which, memory_order_relaxed);
}

atomic_int ds_log_fd = -1;
bool ds_log_buffered;
bool ds_log_zstd;
static bool log_is_pipe;   /* SIGPIPE must be kept away from the program */
static bool log_per_pid;   /* the path has %p: a forked child reopens */
static char log_spec[DS_PATH_MAX];
/* A log file last written before this is started afresh (see the top). */
static uint64_t run_start_ns;
static bool run_first;
static atomic_uint_fast64_t dropped;

#define DS_ZSTD_LEVEL (-3)
#define DS_ZSTD_CHUNK ((size_t)128 * 1024) /* the most one frame carries */
static ds_zstd_api zstd;
static void *zstd_cctx;    /* NULL: no libzstd */
static char *zstd_out;
static size_t zstd_out_cap;

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

void ds_log_set_run(uint64_t start_ns, bool first, bool append)
{
    run_start_ns = append ? 0 : start_ns;
    run_first = first && !append;
}

int ds_log_file_open(const char *spec)
{
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
    ds_log_zstd = fd > STDERR_FILENO && ds_log_wants_zstd(spec) && ds_fstat(fd, &st) == 0 &&
                  S_ISREG(st.st_mode);
    if (ds_log_zstd && !zstd_cctx) {
        ds_diag("DLSHIM_LOG: %s: libzstd.so.1 cannot be loaded: written uncompressed", spec);
        ds_log_zstd = false;
    }
    ds_log_cap_set(fd);
    return fd;
}

void ds_log_file_after_fork(void)
{
    if (!log_per_pid)
        return;
    int old = atomic_load(&ds_log_fd);
    if (old > STDERR_FILENO)
        close(old);
    atomic_store(&ds_log_fd, DS_LOG_LATER);
}

/* Under the log's lock, so that two threads open it once; a thread that
 * holds a shim lock (a handler that interrupted the shim) cannot take it,
 * and its line is dropped. */
int ds_log_writable_fd(void)
{
    int fd = atomic_load_explicit(&ds_log_fd, memory_order_relaxed);
    if (fd != DS_LOG_LATER || ds_holds_lock() || !ds_lock_take_bounded(DS_LOCK_LOG))
        return fd;
    fd = atomic_load(&ds_log_fd);
    if (fd == DS_LOG_LATER) {
        int saved = errno;
        if ((fd = ds_output_open(log_spec, "DLSHIM_LOG", run_start_ns)) < 0) {
            ds_diag("DLSHIM_LOG: events go to stderr instead");
            fd = STDERR_FILENO;
        }
        log_is_pipe = fd_is_pipe(fd);
        ds_log_cap_set(fd);
        if (fd <= STDERR_FILENO) /* the parent's stderr: as its own lines are */
            ds_log_buffered = false, ds_log_zstd = false;
        atomic_store(&ds_log_fd, fd);
        errno = saved;
    }
    ds_lock_give(DS_LOCK_LOG);
    return fd;
}

bool ds_log_enabled(void)
{
    return atomic_load_explicit(&ds_log_fd, memory_order_relaxed) != -1;
}

void ds_log_count_drop(void)
{
    atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
}

void ds_log_count_drops(uint64_t lines)
{
    atomic_fetch_add_explicit(&dropped, lines, memory_order_relaxed);
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

bool ds_log_write_out(int fd, const char *p, size_t len)
{
    return ds_log_zstd ? write_zstd(fd, p, len) : write_raw(fd, p, len);
}

bool ds_log_write_now(int fd, const char *line, size_t len)
{
    if (ds_log_write_out(fd, line, len))
        return true;
    ds_log_count_drop();
    return false;
}

/* The summary of a log that failed (a full disk, a reader gone) goes to
 * stderr, so that the count of lost events is not lost with them. */
void ds_log_write_stderr(const char *line, size_t len)
{
    if (atomic_load_explicit(&ds_log_fd, memory_order_relaxed) == STDERR_FILENO)
        return;
    int saved = errno;
    ssize_t w = write_no_sigpipe(STDERR_FILENO, line, len);
    (void)w;
    errno = saved;
}
