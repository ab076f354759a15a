/*
 * trace.c — DLSHIM_TRACE: the events as a Chrome trace (the JSON array
 * format that Perfetto UI and chrome://tracing open).
 *
 * Each event (its finished JSON line from event.c) becomes one to three
 * trace records, written with one writev(2), never buffered:
 *
 *   export    async begin  "b" (cat share, id tensor) + slice "X" + flow start "s"
 *   import    slice "X" + flow end "f": the arrow from producer to consumer
 *   release   async end    "e" (cat share, id tensor): export→release is a span
 *   alloc     async begin  "b" (cat alloc, id base); free: its "e"
 *   entry     slice "X" covering the call (duration_ns)
 *   copy, roundtrip, sync: instants "i" named with their bytes
 *   violation instant "i", process-wide, cname "terrible" (red)
 *   sync and unsynchronized_handoff also land on a track per consumer stream
 *
 * Every record carries the whole event as `args`.  Times are CLOCK_MONOTONIC
 * microseconds, so traces of processes on one host line up.
 *
 * Crash-safe by construction: the file is "[" plus the process-name record,
 * then every record is written as ",\n{...}", and a clean exit adds "\n]".
 * A process killed at any point leaves a file that is complete JSON once
 * "]" is appended (Chrome and Perfetto accept it as is; bin/dlshim-report
 * --complete-trace adds it).  Without %p in the path a forked child stops
 * tracing rather than interleave a second array into its parent's file.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "output/output.h"

extern char *program_invocation_short_name;

static atomic_int trace_fd = -1;
static bool per_pid;
static char trace_spec[DS_PATH_MAX];

/* Room for the records around the event's own JSON. */
#define DS_TRACE_HEAD 640
#define DS_TRACE_TAIL 1024
/* Longest piece of a string field copied into a record's name. */
#define DS_TRACE_NAME 96

bool ds_trace_enabled(void)
{
    return atomic_load_explicit(&trace_fd, memory_order_relaxed) >= 0;
}

static bool write_all(int fd, struct iovec *iov, int n)
{
    size_t want = 0;
    for (int i = 0; i < n; i++)
        want += iov[i].iov_len;
    int saved = errno;
    ssize_t w;
    do {
        w = writev(fd, iov, n);
    } while (w < 0 && errno == EINTR);
    errno = saved;
    if (w == (ssize_t)want)
        return true;
    ds_log_count_drop();
    return false;
}

void ds_trace_open(const char *spec)
{
    if (!spec[0])
        return;
    memcpy(trace_spec, spec, strlen(spec) + 1);
    per_pid = ds_output_per_pid(spec);
    int fd = ds_output_open(spec, "DLSHIM_TRACE", UINT64_MAX);
    if (fd < 0) {
        ds_diag("DLSHIM_TRACE: no trace is written");
        return;
    }
    char name[64], head[512];
    ds_printable(name, sizeof(name), program_invocation_short_name, SIZE_MAX);
    size_t len = ds_fmt(head, sizeof(head),
                        "[{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                        "\"args\":{\"name\":\"",
                        ds_pid(), ds_pid());
    size_t n = ds_json_escape(head + len, sizeof(head) - len - 32, name, strlen(name));
    len += n == (size_t)-1 ? 0 : n;
    len += ds_fmt(head + len, sizeof(head) - len, " (pid %d)\"}}", ds_pid());
    struct iovec iov = {head, len};
    if (write_all(fd, &iov, 1)) {
        atomic_store(&trace_fd, fd);
        ds_outputs_set(DS_OUT_TRACE, true);
    } else
        close(fd);
}

void ds_trace_after_fork(void)
{
    int old = atomic_exchange(&trace_fd, -1);
    if (old < 0)
        return;
    ds_outputs_set(DS_OUT_TRACE, false);
    close(old); /* the parent's descriptor; the parent keeps its own */
    if (per_pid)
        ds_trace_open(trace_spec);
}

void ds_trace_close(void)
{
    int fd = atomic_exchange(&trace_fd, -1);
    if (fd < 0)
        return;
    ds_outputs_set(DS_OUT_TRACE, false);
    struct iovec iov = {(char *)"\n]\n", 3};
    write_all(fd, &iov, 1);
    /* Left open: a thread still inside ds_trace_event may hold it. */
}

/* ---- reading the event's own JSON --------------------------------------- */

/* The value of a top-level key of the event: a string's escaped body (no
 * quotes), or a number or literal as written.  The writer's JSON is trusted
 * to be well formed; the scan still never leaves [j, j+n). */
static bool field(const char *j, size_t n, const char *key, const char **val, size_t *len)
{
    size_t klen = strlen(key);
    int depth = 0;
    for (size_t i = 0; i < n; i++) {
        char c = j[i];
        if (c == '"') {
            size_t start = ++i;
            while (i < n && j[i] != '"')
                i += j[i] == '\\' ? 2 : 1;
            if (i >= n)
                return false;
            bool is_key = depth == 1 && i + 1 < n && j[i + 1] == ':';
            if (!is_key || i - start != klen || memcmp(j + start, key, klen) != 0)
                continue;
            size_t v = i + 2;
            if (v < n && j[v] == '"') {
                size_t end = ++v;
                while (end < n && j[end] != '"')
                    end += j[end] == '\\' ? 2 : 1;
                if (end >= n)
                    return false;
                *val = j + v, *len = end - v;
                return true;
            }
            size_t end = v;
            while (end < n && !strchr(",}]", j[end]))
                end++;
            *val = j + v, *len = end - v;
            return true;
        }
        depth += c == '{' || c == '[';
        depth -= c == '}' || c == ']';
    }
    return false;
}

static uint64_t field_u64(const char *j, size_t n, const char *key)
{
    const char *v;
    size_t len;
    uint64_t out = 0;
    if (field(j, n, key, &v, &len))
        for (size_t i = 0; i < len && v[i] >= '0' && v[i] <= '9'; i++)
            out = out * 10 + (uint64_t)(v[i] - '0');
    return out;
}

/* ---- building records ---------------------------------------------------- */

typedef struct {
    char *b;
    size_t len, cap;
} buf;

/* Overflow leaves len at cap-1, which the writer treats as "drop". */
static void add(buf *o, const char *s, size_t n)
{
    if (o->len + n < o->cap) {
        memcpy(o->b + o->len, s, n);
        o->len += n;
    } else {
        o->len = o->cap - 1;
    }
}

/* A string literal, its length counted by the compiler. */
#define ADDS(o, lit) add((o), (lit), sizeof(lit) - 1)

static void addf(buf *o, const char *fmt, ...) DS_PRINTF(2, 3);
static void addf(buf *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    o->len += ds_vfmt(o->b + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
}

/* An escaped string body, cut to at most `max` bytes without splitting an
 * escape sequence or a UTF-8 character. */
static void add_escaped(buf *o, const char *s, size_t n, size_t max)
{
    if (n > max) {
        n = max;
        for (size_t k = n > 6 ? n - 6 : 0; k < n; k++)
            if (s[k] == '\\') {
                size_t esc = s[k + 1] == 'u' ? 6 : 2;
                if (k + esc > n)
                    n = k;
                else
                    k += esc - 1;
            }
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    add(o, s, n);
}

/* " <value>" of a string or number field of the event, if it has one. */
static void add_field(buf *o, const char *j, size_t n, const char *key)
{
    const char *v;
    size_t len;
    if (field(j, n, key, &v, &len)) {
        ADDS(o, " ");
        add_escaped(o, v, len, DS_TRACE_NAME);
    }
}

/* `"name":"<prefix> <field>"` */
static void add_name(buf *o, const char *prefix, const char *j, size_t n, const char *key)
{
    addf(o, "\"name\":\"%s", prefix);
    add_field(o, j, n, key);
    ADDS(o, "\"");
}

typedef struct {
    uint64_t ts_ns; /* absolute CLOCK_MONOTONIC */
    long pid, tid;
} when;

static void add_common(buf *o, const char *ph, const char *cat, const when *w, uint64_t at_ns)
{
    uint64_t t = w->ts_ns + at_ns;
    addf(o, ",\"cat\":\"%s\",\"ph\":\"%s\",\"ts\":%llu.%03llu,\"pid\":%ld,\"tid\":%ld", cat, ph,
         (unsigned long long)(t / 1000u), (unsigned long long)(t % 1000u), w->pid, w->tid);
}

/* `,"id":"0x…"` from an address field (the same tensor or base on both ends
 * of a span or a flow). */
static void add_id(buf *o, const char *j, size_t n, const char *key)
{
    const char *v;
    size_t len;
    if (field(j, n, key, &v, &len) && len < 24) {
        ADDS(o, ",\"id\":\"");
        add(o, v, len);
        ADDS(o, "\"");
    }
}

/* A flow end point ("s" or "f") one nanosecond into the one-microsecond
 * slice at the event's time, which it binds to. */
static void add_flow(buf *o, const char *ph, const char *j, size_t n, const when *w)
{
    ADDS(o, ",\n{\"name\":\"handoff\"");
    add_common(o, ph, "handoff", w, 1);
    add_id(o, j, n, "tensor");
    if (ph[0] == 'f')
        ADDS(o, ",\"bp\":\"e\"");
    ADDS(o, "}");
}

/* The instant again on its consumer stream's own track. */
static void add_stream_track(buf *o, const char *name, const char *j, size_t n, const when *w)
{
    const char *v;
    size_t len;
    if (!field(j, n, "consumer_stream", &v, &len))
        return;
    uint32_t h = 2166136261u; /* FNV-1a: a stable small tid per stream name */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)v[i]) * 16777619u;
    when s = {w->ts_ns, w->pid, (long)(0x40000000u | (h & 0x3fffffffu))};
    addf(o, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%ld,\"tid\":%ld,\"args\":{\"name\":\"",
         s.pid, s.tid);
    add_escaped(o, v, len, DS_TRACE_NAME);
    ADDS(o, "\"}}");
    ADDS(o, ",\n{");
    add(o, name, strlen(name));
    add_common(o, "i", "stream", &s, 0);
    ADDS(o, ",\"s\":\"t\"}");
}

void ds_trace_event(int id, const char *j, size_t n)
{
    int fd = atomic_load_explicit(&trace_fd, memory_order_relaxed);
    if (fd < 0 || id == DS_EV_SUMMARY)
        return;
    char head_mem[DS_TRACE_HEAD], tail_mem[DS_TRACE_TAIL];
    buf head = {head_mem, 0, sizeof(head_mem)}, tail = {tail_mem, 0, sizeof(tail_mem)};
    when w = {ds_clock_origin_ns() + field_u64(j, n, "t_ns"), (long)field_u64(j, n, "pid"),
              (long)field_u64(j, n, "tid")};

    /* The record that carries the event: head, the JSON as args, tail. */
    ADDS(&head, ",\n{");
    switch (id) {
    case DS_EV_EXPORT:
        add_name(&head, "share", j, n, "producer");
        add_common(&head, "b", "share", &w, 0);
        add_id(&head, j, n, "tensor");
        break;
    case DS_EV_RELEASE:
        add_name(&head, "share", j, n, "producer");
        add_common(&head, "e", "share", &w, 0);
        add_id(&head, j, n, "tensor");
        break;
    case DS_EV_ALLOC:
    case DS_EV_FREE:
        add_name(&head, "alloc", j, n, "owner");
        add_common(&head, id == DS_EV_ALLOC ? "b" : "e", "alloc", &w, 0);
        add_id(&head, j, n, "base");
        break;
    case DS_EV_IMPORT:
        add_name(&head, "import by", j, n, "consumer");
        add_common(&head, "X", "dlpack", &w, 0);
        ADDS(&head, ",\"dur\":1");
        break;
    case DS_EV_ENTRY: {
        uint64_t dur = field_u64(j, n, "duration_ns");
        when start = w;
        start.ts_ns -= dur < w.ts_ns ? dur : 0;
        add_name(&head, "entry", j, n, "symbol");
        add_common(&head, "X", "entry", &start, 0);
        addf(&head, ",\"dur\":%llu.%03llu", (unsigned long long)(dur / 1000u),
             (unsigned long long)(dur % 1000u));
        break;
    }
    case DS_EV_VIOLATION:
        add_name(&head, "violation", j, n, "kind");
        add_common(&head, "i", "violation", &w, 0);
        ADDS(&head, ",\"s\":\"p\",\"cname\":\"terrible\"");
        break;
    case DS_EV_COPY:
        ADDS(&head, "\"name\":\"copy");
        add_field(&head, j, n, "direction");
        addf(&head, " %llu B\"", (unsigned long long)field_u64(j, n, "bytes"));
        add_common(&head, "i", "copy", &w, 0);
        ADDS(&head, ",\"s\":\"t\"");
        break;
    case DS_EV_ROUNDTRIP:
        addf(&head, "\"name\":\"roundtrip %llu B\"", (unsigned long long)field_u64(j, n, "bytes"));
        add_common(&head, "i", "copy", &w, 0);
        ADDS(&head, ",\"s\":\"p\"");
        break;
    case DS_EV_SYNC:
        ADDS(&head, "\"name\":\"barrier\"");
        add_common(&head, "i", "sync", &w, 0);
        ADDS(&head, ",\"s\":\"t\"");
        break;
    default:
        addf(&head, "\"name\":\"%s\"", ds_event_name(id));
        add_common(&head, "i", "dlshim", &w, 0);
        ADDS(&head, ",\"s\":\"t\"");
        break;
    }
    ADDS(&head, ",\"args\":");
    ADDS(&tail, "}");

    /* Companion records: the flow's slices, the stream tracks. */
    if (id == DS_EV_EXPORT) {
        ADDS(&tail, ",\n{");
        add_name(&tail, "export by", j, n, "producer");
        add_common(&tail, "X", "dlpack", &w, 0);
        ADDS(&tail, ",\"dur\":1}");
        add_flow(&tail, "s", j, n, &w);
    } else if (id == DS_EV_IMPORT) {
        add_flow(&tail, "f", j, n, &w);
    } else if (id == DS_EV_SYNC) {
        add_stream_track(&tail, "\"name\":\"barrier\"", j, n, &w);
    } else if (id == DS_EV_VIOLATION) {
        add_stream_track(&tail, "\"name\":\"unsynchronized use\",\"cname\":\"terrible\"", j, n, &w);
    }

    /* A record cut short by its buffer would break the file: drop instead. */
    if (head.len + 1 >= head.cap || tail.len + 1 >= tail.cap) {
        ds_log_count_drop();
        return;
    }
    struct iovec iov[3] = {{head.b, head.len}, {(char *)j, n}, {tail.b, tail.len}};
    write_all(fd, iov, 3);
}
