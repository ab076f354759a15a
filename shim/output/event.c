/*
 * event.c — the one event writer.  Every event is built field by field into
 * a stack buffer, in the rendering the log asks for: a JSON object
 * (DLSHIM_FORMAT=jsonl, and whenever DLSHIM_TRACE is on, since the trace
 * reads JSON) or directly as the text line (DLSHIM_FORMAT=text).  A text log
 * beside a trace is rendered from the JSON by text.c; a unit test and the
 * fuzzer build every kind of field both ways and require the same line, so
 * the two renderings cannot drift apart.
 *
 * Speed: the common field is written inline by its caller
 * (ev.h: one room check, the key as constant stores, the value by
 * put.c); this file holds the head, brackets, the exact path for a field
 * that may not fit, and the end.  Each event's head is precomposed from
 * events.def and the thread's ids are formatted once.  Nothing allocates;
 * an event that does not fit DS_LINE_MAX is dropped and counted, never
 * written cut, so every jsonl line parses.
 */
#include <string.h>
#include <unistd.h>

#include "output/output.h"

/* Its own frame: 3 KB of stack only when a stack is asked for. */
static __attribute__((noinline)) void stack_field(ds_ev *e, int max)
{
    char frames[DS_PYSTACK_MAX][DS_WHERE_MAX];
    int n = ds_context_stack(frames, max);
    if (n <= 0)
        return;
    ds_ev_open(e, "py_stack", '[');
    for (int i = 0; i < n; i++)
        ds_ev_str(e, NULL, frames[i]);
    ds_ev_close(e);
}

void ds_ev_py_stack(ds_ev *e, int max)
{
    if (ds_cfg.py && max > 0)
        stack_field(e, max);
}

void ds_ev_overflow(ds_ev *e)
{
    e->overflow = true;
    e->limit = e->buf;
}

/* ---- the exact path: a field measured before it is written ---------------- */
/* Bytes of a field's separator and key. */
static size_t key_bytes(const ds_ev *e, const char *key, size_t klen)
{
    return 1 + (key ? klen + (e->text ? 1u : 3u) : 0);
}

/* Writes the separator and key at e->p (key_bytes of room checked); returns
 * where the value goes. */
static char *put_key(ds_ev *e, const char *key, size_t klen)
{
    char *p = e->p;
    *p++ = e->sep;
    if (!key)
        return p;
    if (!e->text)
        *p++ = '"';
    memcpy(p, key, klen);
    p += klen;
    if (e->text) {
        *p++ = '=';
    } else {
        *p++ = '"';
        *p++ = ':';
    }
    return p;
}

void ds_ev_append_field(ds_ev *e, const char *key, size_t klen, const char *v, size_t n)
{
    if (key_bytes(e, key, klen) + n > ds_ev_room(e)) {
        ds_ev_overflow(e);
        return;
    }
    char *p = put_key(e, key, klen);
    memcpy(p, v, n);
    e->p = p + n;
}

void ds_ev_str_k(ds_ev *e, const char *key, size_t klen, const char *s, size_t n)
{
    if (n >= DS_LINE_MAX) { /* could never fit; also keeps the sum below small */
        ds_ev_overflow(e);
        return;
    }
    char *p = ds_ev_field(e, key, klen, DS_MOST_STR(n));
    if (p) {
        e->p = ds_put_str(p, s, n, e->text);
        return;
    }
    size_t k = key_bytes(e, key, klen), room = ds_ev_room(e);
    char *end = k <= room ? ds_put_str_bounded(e->p + k, room - k, s, n, e->text) : NULL;
    if (!end) {
        ds_ev_overflow(e);
        return;
    }
    put_key(e, key, klen);
    e->p = end;
}

void ds_ev_int_array_k(ds_ev *e, const char *key, size_t klen, const int64_t *v, int n)
{
    if (!v) {
        ds_ev_str(e, key, NULL);
        return;
    }
    if (n < 0 || n > DS_MAX_NDIM) {
        ds_ev_overflow(e);
        return;
    }
    char *p = ds_ev_field(e, key, klen, DS_MOST_INTS(n));
    if (p) {
        e->p = ds_put_ints(p, v, n);
        return;
    }
    char value[DS_MOST_INTS(DS_MAX_NDIM)];
    ds_ev_append_field(e, key, klen, value, (size_t)(ds_put_ints(value, v, n) - value));
}

char *ds_put_words(char *p, const char *limit, const char *const *words, int n, bool text)
{
    size_t len[64], most = 2;
    if (n < 0 || n > 64)
        return NULL;
    for (int i = 0; i < n; i++)
        most += (len[i] = strnlen(words[i], DS_LINE_MAX)) + 3;
    if (limit - p < (ptrdiff_t)most)
        return NULL;
    *p++ = '[';
    for (int i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        if (!text)
            *p++ = '"';
        memcpy(p, words[i], len[i]);
        p += len[i];
        if (!text)
            *p++ = '"';
    }
    *p++ = ']';
    return p;
}

void ds_ev_words(ds_ev *e, const char *key, const char *const *words, int n)
{
    /* The words are the shim's own, a few dozen bytes: where the key has
     * no room, neither have they. */
    char *p = ds_ev_field(e, key, DS_KEY_LEN(key), 2);
    if (p)
        p = ds_put_words(p, e->limit, words, n, e->text);
    if (p)
        e->p = p;
    else
        ds_ev_overflow(e);
}

/* ---- brackets ----------------------------------------------------------- */
/* The opening bracket goes where the first value's separator goes: every
 * value writes its level's separator, and the close puts the bracket over
 * the first one (or writes it, when none came).  So no value asks whether
 * it is the first. */
void ds_ev_open_bracket(ds_ev *e, char bracket)
{
    if (e->depth >= DS_EV_DEPTH) {
        ds_ev_overflow(e);
        return;
    }
    e->depth++;
    e->opened[e->depth] = e->p;
    e->brackets[e->depth] = bracket;
    e->sep = ',';
}

void ds_ev_close(ds_ev *e)
{
    if (e->depth == 0)
        return;
    if (!e->overflow) { /* the reserve holds these two bytes per level */
        char bracket = e->brackets[e->depth];
        if (e->p == e->opened[e->depth])
            *e->p++ = bracket; /* empty */
        else
            *e->opened[e->depth] = bracket;
        *e->p++ = bracket == '{' ? '}' : ']';
    }
    e->depth--;
    e->sep = e->depth || !e->text ? ',' : ' ';
}

/* ---- the event ---------------------------------------------------------- */
/* What starts each event's line, from events.def: in JSON the name and
 * the pid's key; in text the name padded to 9 columns, which the first
 * field's separator makes 10 (no event's name is longer).  Fixed-size
 * slots: each is copied whole, a few moves, and the line goes on after
 * its length. */
#define JSON_HEAD(name) "{\"event\":\"" name "\",\"pid\":"
static const struct {
    char json[32], text[24];
    uint8_t json_len;
} heads[] = {
#define DS_EVENT(ID, name, frequent) {JSON_HEAD(name), name "         ", sizeof(JSON_HEAD(name)) - 1},
#include "base/events.def"
#undef DS_EVENT
};
#define DS_EVENT(ID, name, frequent) \
    _Static_assert(sizeof(name) - 1 <= 9, name " is over 9 columns"); \
    _Static_assert(sizeof(JSON_HEAD(name)) <= 32, name "'s head is over its slot");
#include "base/events.def"
#undef DS_EVENT
#undef JSON_HEAD

/* This thread's pid and tid, formatted once: `7,"tid":8,"t_ns":` and
 * ` 7/8 `; redone when either changes (a fork).  And the slow part of the
 * time, formatted when it changes: in JSON the digits of t_ns above its
 * last eight (every 0.1 s), in text the seconds' column (every second);
 * the rest of the time is one SWAR word.  Each is copied out whole: a
 * signal handler that writes an event meanwhile rewrites them to what they
 * say anyway, for its later time. */
typedef struct {
    uint64_t key; /* what chars show, plus one (0: nothing yet) */
    uint8_t len;
    char chars[23];
} cached_digits;

static DS_TLS struct {
    int pid;
    uint8_t json_len, text_len;
    char json[48], text[32];
    cached_digits t_ns_high, seconds;
} ids;

static void format_ids(int pid, long tid)
{
    char digits[2][24];
    size_t n[2] = {(size_t)(ds_put_int(digits[0], pid) - digits[0]),
                   (size_t)(ds_put_int(digits[1], tid) - digits[1])};
    char *j = ids.json, *x = ids.text;
    memcpy(j, digits[0], n[0]), j += n[0];
    j = ds_put_bytes(j, ",\"tid\":", 7);
    memcpy(j, digits[1], n[1]), j += n[1];
    j = ds_put_bytes(j, ",\"t_ns\":", 8);
    *x++ = ' ';
    memcpy(x, digits[0], n[0]), x += n[0];
    *x++ = '/';
    memcpy(x, digits[1], n[1]), x += n[1];
    *x++ = ' ';
    ids.json_len = (uint8_t)(j - ids.json);
    ids.text_len = (uint8_t)(x - ids.text);
    ids.pid = pid;
}

/* t_ns in decimal: the digits above the last eight from the cache, the
 * last eight one SWAR word.  The cache's refill and the first 0.1 s (no
 * digits above) are out of line, so that the common case saves no
 * registers (they were half its instructions). */
static inline char *put_cached_t_ns(char *p, uint64_t ns, uint64_t high)
{
    memcpy(p, ids.t_ns_high.chars, 16); /* at most 12 digits: t_ns < 2^64 */
    return ds_put_eight(p + ids.t_ns_high.len, (uint32_t)(ns - high * 100000000u));
}

static __attribute__((noinline)) char *put_t_ns_rare(char *p, uint64_t ns, uint64_t high)
{
    if (high == 0)
        return ds_put_uint(p, ns);
    ids.t_ns_high.len = (uint8_t)(ds_put_uint(ids.t_ns_high.chars, high) - ids.t_ns_high.chars);
    ids.t_ns_high.key = high + 1;
    return put_cached_t_ns(p, ns, high);
}

static inline char *put_t_ns(char *p, uint64_t ns)
{
    uint64_t high = ns / 100000000u;
    if (__builtin_expect(high == 0 || ids.t_ns_high.key != high + 1, 0))
        return put_t_ns_rare(p, ns, high);
    return put_cached_t_ns(p, ns, high);
}

/* Text's time: seconds right-aligned in four columns (more digits make it
 * wider), from the cache (refilled out of line, as above), "." and
 * microseconds. */
static __attribute__((noinline)) void cache_seconds(uint64_t s)
{
    char digits[24];
    size_t n = (size_t)(ds_put_uint(digits, s) - digits), pad = n < 4 ? 4 - n : 0;
    memset(ids.seconds.chars, ' ', pad);
    memcpy(ids.seconds.chars + pad, digits, n); /* at most 11 digits: s < 2^64 / 10^9 */
    ids.seconds.len = (uint8_t)(pad + n);
    ids.seconds.key = s + 1;
}

static inline char *put_text_time(char *p, uint64_t ns)
{
    uint64_t s = ns / 1000000000u;
    if (__builtin_expect(ids.seconds.key != s + 1, 0))
        cache_seconds(s);
    memcpy(p, ids.seconds.chars, 16);
    return ds_put_six_decimals(p + ids.seconds.len, (uint32_t)(ns % 1000000000u / 1000u));
}

_Static_assert(8 + 32 + sizeof(ids.text) + sizeof(heads[0].text) <= DS_EV_HEAD_MOST &&
                   sizeof(heads[0].json) + sizeof(ids.json) + DS_MOST_UINT <= DS_EV_HEAD_MOST,
               "a line's head is over DS_EV_HEAD_MOST");

__attribute__((always_inline)) inline char *ds_put_head(char *p, int id, uint64_t ns, bool text)
{
    /* A thread's tid changes only in a forked child, where the pid does. */
    int pid = ds_pid();
    if (ids.pid != pid)
        format_ids(pid, ds_tid());
    if (!text) {
        memcpy(p, heads[id].json, sizeof(heads[id].json));
        p += heads[id].json_len;
        memcpy(p, ids.json, sizeof(ids.json));
        return put_t_ns(p + ids.json_len, ns);
    }
    /* "dlshim: " seconds (4 wide) "." microseconds " pid/tid " name: what
     * text.c makes of the four common fields. */
    p = put_text_time(ds_put_bytes(p, "dlshim: ", 8), ns);
    memcpy(p, ids.text, sizeof(ids.text));
    p += ids.text_len;
    memcpy(p, heads[id].text, sizeof(heads[id].text));
    return p + 9;
}

void ds_ev_begin_buf(ds_ev *e, int id, char *buf, size_t cap, uint64_t ns)
{
    ds_ev_begin_with(e, id, buf, cap, ns, NULL);
}

void ds_ev_begin_with(ds_ev *e, int id, char *buf, size_t cap, uint64_t ns, const ds_context *given)
{
    e->buf = e->p = buf;
    e->overflow = false;
    e->id = id;
    e->depth = 0;
    e->text = ds_ev_text_now();
    e->sep = e->text ? ' ' : ',';
    if (id < 0 || id >= DS_EV_COUNT || cap < DS_EV_RESERVE + DS_EV_SLACK + DS_EV_HEAD_MOST) {
        e->limit = buf;
        ds_ev_overflow(e); /* not an event: dropped and counted */
        return;
    }
    /* The slack past the limit is the generated writers' (flat.c). */
    e->limit = buf + cap - DS_EV_RESERVE - DS_EV_SLACK;
    e->ns = ns;
    e->p = e->fields = ds_put_head(buf, id, e->ns, e->text);
    if (given || ds_context_wanted()) {
        ds_context c;
        if (!given)
            ds_context_capture(&c, id);
        const ds_context *ctx = given ? given : &c;
        char *p = ctx->any ? ds_put_context(e->p, e->limit, ctx, e->text) : e->p;
        if (p)
            e->p = p;
        else
            ds_ev_overflow(e);
    }
}

bool ds_ev_finish(ds_ev *e)
{
    while (e->depth > 0)
        ds_ev_close(e);
    if (e->overflow)
        return false;
    /* The reserve has room for these. */
    if (!e->text)
        *e->p++ = '}';
    else if (e->p == e->fields)
        *e->p++ = ' '; /* no field: the name's tenth column */
    return true;
}

/* The log file reached DLSHIM_LOG_MAX_SIZE (log.c): its last line but the
 * summary's, once.  No context: the event that found the log full may be
 * in a handler, and this line is about the log, not the program. */
static __attribute__((noinline)) void log_refused(void)
{
    uint64_t max_size;
    if (!ds_log_full_owed(&max_size))
        return;
    ds_ev e;
    const ds_context none = {0};
    ds_ev_begin_with(&e, DS_EV_LOG_FULL, e.line, sizeof(e.line), ds_now_ns(), &none);
    if (e.overflow)
        return;
    ds_ev_uint(&e, "max_size", max_size);
    ds_ev_str(&e, "note", "DLSHIM_LOG_MAX_SIZE reached: later events are not written; "
                          "the summary counts them (capped_events)");
    if (!ds_ev_finish(&e))
        return;
    size_t len = ds_ev_len(&e);
    if (e.text || ds_cfg.format != DS_FORMAT_TEXT)
        e.buf[len++] = '\n';
    else if ((len = ds_text_from_json(e.buf, len)) == 0)
        return;
    ds_log_write_tail(e.buf, len, e.ns);
}

/* Everything ds_ev_end's common case leaves out: open brackets, a drop, a
 * trace, a text log beside it, a summary or a violation. */
static __attribute__((noinline)) void end_slow(ds_ev *e)
{
    if (!ds_ev_finish(e)) {
        ds_log_count_drop();
        return;
    }
    unsigned outputs = atomic_load_explicit(&ds_outputs, memory_order_relaxed);
    if (!e->text && (outputs & DS_OUT_TRACE))
        ds_trace_event(e->id, e->buf, ds_ev_len(e));
    if (!(outputs & DS_OUT_LOG))
        return;
    size_t len = ds_ev_len(e);
    if (e->text || ds_cfg.format != DS_FORMAT_TEXT)
        e->buf[len++] = '\n';
    else if ((len = ds_text_from_json(e->buf, len)) == 0) {
        ds_log_count_drop(); /* cannot happen with the writer above; never cut */
        return;
    }
    /* The summary may use the room kept under the log's cap, after the
     * log_full line a flush before it may have found owed. */
    if (e->id == DS_EV_SUMMARY)
        log_refused();
    bool ok = e->id == DS_EV_SUMMARY ? ds_log_write_tail(e->buf, len, e->ns)
                                     : ds_log_write_at(e->buf, len, e->ns);
    if (!ok && e->id != DS_EV_SUMMARY)
        log_refused();
    if (e->id == DS_EV_SUMMARY || e->id == DS_EV_VIOLATION)
        ok = ds_log_flush() && ok; /* what explains a crash must not wait in a buffer */
    if (!ok && e->id == DS_EV_SUMMARY)
        ds_log_write_stderr(e->buf, len); /* the log failed: the count of what it lost */
}

void ds_ev_end(ds_ev *e)
{
    /* The common case: a whole line of fields, to the log alone. */
    if (__builtin_expect(e->depth != 0 || e->overflow || e->id == DS_EV_SUMMARY ||
                             e->id == DS_EV_VIOLATION ||
                             e->text != (ds_cfg.format == DS_FORMAT_TEXT) || /* a trace ended */
                             atomic_load_explicit(&ds_outputs, memory_order_relaxed) != DS_OUT_LOG,
                         0)) {
        end_slow(e);
        return;
    }
    char *p = e->p;
    if (!e->text)
        *p++ = '}';
    else if (p == e->fields)
        *p++ = ' '; /* no field: the name's tenth column */
    *p++ = '\n';
    if (__builtin_expect(!ds_log_write_at(e->buf, (size_t)(p - e->buf), e->ns), 0))
        log_refused();
}
