/*
 * event.c — the one event writer.  Every event is built field by field into
 * a stack buffer as a JSON object, handed whole to the trace (trace.c) and
 * then to the log, as it is (DLSHIM_FORMAT=jsonl) or rendered as one text
 * line (text.c).  Nothing allocates; an event that does not fit DS_LINE_MAX
 * is dropped and counted, never written cut, so every jsonl line parses.
 */
#include <string.h>
#include <unistd.h>

#include "internal.h"

atomic_uint ds_outputs;

void ds_outputs_set(unsigned which, bool open)
{
    if (open)
        atomic_fetch_or_explicit(&ds_outputs, which, memory_order_relaxed);
    else
        atomic_fetch_and_explicit(&ds_outputs, ~which, memory_order_relaxed);
}

/* Room kept for the closing brackets, "}" and "\n". */
#define DS_EV_RESERVE (DS_EV_DEPTH + 2)

static void append(ds_ev *e, const char *s, size_t n)
{
    if (e->overflow || e->len + n + DS_EV_RESERVE > e->cap) {
        e->overflow = true;
        return;
    }
    memcpy(e->buf + e->len, s, n);
    e->len += n;
}

static void appends(ds_ev *e, const char *s)
{
    append(e, s, strlen(s));
}

/* Numbers are converted here rather than through ds_fmt: events are the
 * hot path of a traced program, and the formatter's generality cost more
 * than the rest of an event together (perf, issue 9). */
static void append_udec(ds_ev *e, unsigned long long v)
{
    char t[20];
    int i = (int)sizeof(t);
    do {
        t[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    append(e, t + i, sizeof(t) - (size_t)i);
}

static void append_sdec(ds_ev *e, long long v)
{
    if (v < 0) {
        append(e, "-", 1);
        append_udec(e, 0ull - (unsigned long long)v);
    } else {
        append_udec(e, (unsigned long long)v);
    }
}

/* "0x..." in lower case, quoted, as %p-like addresses appear everywhere. */
static void append_hex_string(ds_ev *e, uintptr_t v)
{
    char t[2 + 2 * sizeof(v) + 2];
    int i = (int)sizeof(t);
    t[--i] = '"';
    do {
        t[--i] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    t[--i] = 'x';
    t[--i] = '0';
    t[--i] = '"';
    append(e, t + i, sizeof(t) - (size_t)i);
}

/* Separator and key before a value. */
static void key(ds_ev *e, const char *k)
{
    if (!e->first[e->depth])
        appends(e, ",");
    e->first[e->depth] = false;
    if (!k)
        return;
    appends(e, "\"");
    appends(e, k);
    appends(e, "\":");
}

void ds_ev_begin(ds_ev *e, int id)
{
    ds_ev_begin_buf(e, id, e->line, sizeof(e->line));
}

void ds_ev_begin_buf(ds_ev *e, int id, char *buf, size_t cap)
{
    e->buf = buf;
    e->cap = cap;
    e->len = 0;
    e->overflow = false;
    e->id = id;
    e->depth = 0;
    for (int i = 0; i <= DS_EV_DEPTH; i++)
        e->first[i] = true;
    appends(e, "{\"event\":\"");
    appends(e, ds_event_name(id));
    appends(e, "\",\"pid\":");
    append_sdec(e, ds_pid());
    appends(e, ",\"tid\":");
    append_sdec(e, ds_tid());
    appends(e, ",\"t_ns\":");
    append_udec(e, ds_now_ns());
    e->first[0] = false;
}

size_t ds_json_escape(char *out, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
#define EMIT(str, len)                      \
    do {                                    \
        if (o + (len) > cap)                \
            return (size_t)-1;              \
        memcpy(out + o, (str), (len));      \
        o += (len);                         \
    } while (0)
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            EMIT(esc, 2);
            i++;
        } else if (c < 0x20) {
            char esc[8];
            size_t len = ds_fmt(esc, sizeof(esc), "\\u%04x", c);
            EMIT(esc, len);
            i++;
        } else if (c < 0x80) {
            EMIT(&s[i], 1);
            i++;
        } else {
            /* A well-formed UTF-8 sequence passes through; anything else
             * (stray continuation, overlong, surrogate, > U+10FFFF,
             * truncated) becomes U+FFFD for this one byte. */
            size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
            unsigned cp = len == 4 ? c & 0x07u : len == 3 ? c & 0x0fu : c & 0x1fu;
            bool ok = len != 0 && len <= 4 && c <= 0xf4 && i + len <= n;
            for (size_t k = 1; ok && k < len; k++) {
                unsigned char cc = (unsigned char)s[i + k];
                ok = (cc & 0xc0) == 0x80;
                cp = (cp << 6) | (cc & 0x3fu);
            }
            if (ok)
                ok = !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10ffff)) &&
                     !(cp >= 0xd800 && cp <= 0xdfff);
            if (ok) {
                EMIT(&s[i], len);
                i += len;
            } else {
                EMIT("\\ufffd", 6);
                i++;
            }
        }
    }
#undef EMIT
    return o;
}

void ds_ev_str(ds_ev *e, const char *k, const char *val)
{
    key(e, k);
    if (!val) {
        appends(e, "null");
        return;
    }
    appends(e, "\"");
    size_t room = e->overflow ? 0 : e->cap - e->len - DS_EV_RESERVE;
    size_t w = ds_json_escape(e->buf + e->len, room, val, strlen(val));
    if (w == (size_t)-1)
        e->overflow = true;
    else
        e->len += w;
    appends(e, "\"");
}

void ds_ev_int(ds_ev *e, const char *k, int64_t v)
{
    key(e, k);
    append_sdec(e, v);
}

void ds_ev_uint(ds_ev *e, const char *k, uint64_t v)
{
    key(e, k);
    append_udec(e, v);
}

void ds_ev_double(ds_ev *e, const char *k, double v)
{
    key(e, k);
    if (v != v || v > 1e300 || v < -1e300) { /* NaN and infinities are not JSON */
        appends(e, "null");
        return;
    }
    /* Six decimals; beyond 2^63 an exponent (no libm, no printf). */
    bool negative = v < 0;
    double a = negative ? -v : v;
    int exponent = 0;
    while (a >= 9.2e18) {
        a /= 10;
        exponent++;
    }
    unsigned long long whole = (unsigned long long)a;
    unsigned long long frac = (unsigned long long)((a - (double)whole) * 1e6 + 0.5);
    if (frac >= 1000000) {
        whole++;
        frac -= 1000000;
    }
    if (negative)
        append(e, "-", 1);
    append_udec(e, whole);
    char digits[7] = {'.'};
    for (int i = 6; i >= 1; i--, frac /= 10)
        digits[i] = (char)('0' + frac % 10);
    append(e, digits, sizeof(digits));
    if (exponent) {
        append(e, "e", 1);
        append_sdec(e, exponent);
    }
}

void ds_ev_hex(ds_ev *e, const char *k, uintptr_t v)
{
    key(e, k);
    append_hex_string(e, v);
}

void ds_ev_bool(ds_ev *e, const char *k, bool v)
{
    key(e, k);
    appends(e, v ? "true" : "false");
}

void ds_ev_int_array(ds_ev *e, const char *k, const int64_t *v, int n)
{
    if (!v) {
        key(e, k);
        appends(e, "null");
        return;
    }
    ds_ev_open(e, k, '[');
    for (int i = 0; i < n; i++)
        ds_ev_int(e, NULL, v[i]);
    ds_ev_close(e);
}

void ds_ev_open(ds_ev *e, const char *k, char bracket)
{
    key(e, k);
    if (e->depth >= DS_EV_DEPTH) {
        e->overflow = true;
        return;
    }
    append(e, &bracket, 1);
    e->closers[++e->depth] = bracket == '{' ? '}' : ']';
    e->first[e->depth] = true;
}

void ds_ev_close(ds_ev *e)
{
    if (e->depth == 0)
        return;
    /* The reserve guarantees room for the closers even after an overflow. */
    if (!e->overflow)
        e->buf[e->len++] = e->closers[e->depth];
    e->depth--;
}

void ds_ev_end(ds_ev *e)
{
    while (e->depth > 0)
        ds_ev_close(e);
    if (e->overflow) {
        ds_log_count_drop();
        return;
    }
    e->buf[e->len++] = '}';
    if (ds_trace_enabled())
        ds_trace_event(e->id, e->buf, e->len);
    if (!ds_log_enabled())
        return;
    size_t len = e->len;
    if (ds_cfg.format == DS_FORMAT_TEXT && (len = ds_text_from_json(e->buf, len)) == 0) {
        ds_log_count_drop(); /* cannot happen with the writer above; never cut */
        return;
    }
    if (ds_cfg.format != DS_FORMAT_TEXT)
        e->buf[len++] = '\n';
    bool ok = ds_log_write(e->buf, len);
    if (e->id == DS_EV_SUMMARY || e->id == DS_EV_VIOLATION)
        ok = ds_log_flush() && ok; /* what explains a crash must not wait in a buffer */
    if (!ok && e->id == DS_EV_SUMMARY)
        ds_log_write_stderr(e->buf, len); /* the log failed: the count of what it lost */
}
