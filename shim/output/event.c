/*
 * event.c — the one event writer.  Every event is built field by field into
 * a stack buffer, in the rendering the log asks for: a JSON object
 * (DLSHIM_FORMAT=jsonl, and whenever DLSHIM_TRACE is on, since the trace
 * reads JSON) or directly as the text line (DLSHIM_FORMAT=text).  A text log
 * beside a trace is rendered from the JSON by text.c; a unit test and the
 * fuzzer build every kind of field both ways and require the same line, so
 * the two renderings cannot drift apart.
 *
 * Speed (issue 28): a field costs one room check, its separator and key in
 * one copy, numbers two digits per step, and strings a table scan that copies
 * runs of plain bytes whole; only a string holding a quote, a backslash, a
 * control byte or non-ASCII bytes takes the byte-by-byte path.  Nothing
 * allocates; an event that does not fit DS_LINE_MAX is dropped and counted,
 * never written cut, so every jsonl line parses.
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

/* Reserves n bytes and returns where they go, or NULL (the event overflows
 * and will be dropped whole). */
static char *reserve(ds_ev *e, size_t n)
{
    if (e->overflow || e->len + n + DS_EV_RESERVE > e->cap) {
        e->overflow = true;
        return NULL;
    }
    char *p = e->buf + e->len;
    e->len += n;
    return p;
}

/* n bytes from s: the keys, names and numbers of an event are 1 to 32
 * bytes, which overlapping word moves copy without the call and the size
 * dispatch of memcpy (a fifth of an event's instructions were memcpy's). */
static inline void copy_short(char *d, const char *s, size_t n)
{
    uint64_t a, b, c, x;
    uint32_t h, l;
    if (n >= 8 && n <= 16) {
        memcpy(&a, s, 8), memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8), memcpy(d + n - 8, &b, 8);
    } else if (n > 16 && n <= 32) {
        memcpy(&a, s, 8), memcpy(&b, s + 8, 8), memcpy(&c, s + n - 16, 8), memcpy(&x, s + n - 8, 8);
        memcpy(d, &a, 8), memcpy(d + 8, &b, 8), memcpy(d + n - 16, &c, 8), memcpy(d + n - 8, &x, 8);
    } else if (n >= 4 && n < 8) {
        memcpy(&h, s, 4), memcpy(&l, s + n - 4, 4);
        memcpy(d, &h, 4), memcpy(d + n - 4, &l, 4);
    } else if (n > 0 && n < 4) {
        char first = s[0], middle = s[n / 2], last = s[n - 1];
        d[0] = first, d[n / 2] = middle, d[n - 1] = last;
    } else if (n > 32) {
        memcpy(d, s, n);
    }
}

static void append(ds_ev *e, const char *s, size_t n)
{
    char *p = reserve(e, n);
    if (p)
        copy_short(p, s, n);
}

/* ---- numbers ------------------------------------------------------------ */
static const char two_digits[201] = "00010203040506070809101112131415161718192021222324"
                                    "25262728293031323334353637383940414243444546474849"
                                    "50515253545556575859606162636465666768697071727374"
                                    "75767778798081828384858687888990919293949596979899";

/* The decimal digits of v < 10^8, exactly eight (leading zeros kept), at p:
 * in 32 bits, by constant divisions the compiler makes multiplications. */
static inline void eight_digits(char *p, uint32_t v)
{
    uint32_t high = v / 10000, low = v % 10000;
    memcpy(p, two_digits + 2 * (size_t)(high / 100), 2);
    memcpy(p + 2, two_digits + 2 * (size_t)(high % 100), 2);
    memcpy(p + 4, two_digits + 2 * (size_t)(low / 100), 2);
    memcpy(p + 6, two_digits + 2 * (size_t)(low % 100), 2);
}

/* v in decimal, written backwards so that it ends at `end`; returns its
 * first byte.  Eight digits at a time while v has more than eight (one
 * 64-bit division each), then two at a time in 32 bits. */
static char *udec_backwards(char *end, unsigned long long v)
{
    char *p = end;
    while (v >= 100000000ull) {
        unsigned long long q = v / 100000000ull;
        p -= 8;
        eight_digits(p, (uint32_t)(v - q * 100000000ull));
        v = q;
    }
    uint32_t w = (uint32_t)v;
    while (w >= 100) {
        uint32_t q = w / 100;
        p -= 2;
        memcpy(p, two_digits + 2 * (size_t)(w - q * 100), 2);
        w = q;
    }
    if (w >= 10) {
        p -= 2;
        memcpy(p, two_digits + 2 * (size_t)w, 2);
    } else {
        *--p = (char)('0' + w);
    }
    return p;
}

/* Decimal digits of v: from its highest bit, and one comparison. */
static size_t decimal_digits(unsigned long long v)
{
    static const unsigned long long powers[20] = {
        1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
        100000000ull, 1000000000ull, 10000000000ull, 100000000000ull, 1000000000000ull,
        10000000000000ull, 100000000000000ull, 1000000000000000ull, 10000000000000000ull,
        100000000000000000ull, 1000000000000000000ull, 10000000000000000000ull};
    /* v lies in [2^(bits-1), 2^bits), so it has g or g + 1 digits, where
     * g = floor(bits · log10 2) (1233/4096 is close enough below 2^64):
     * g + 1 unless v is below 10^g. */
    unsigned bits = 64 - (unsigned)__builtin_clzll(v | 1);
    size_t guess = (bits * 1233u) >> 12;
    return guess + 1 - (v < powers[guess]) + (v == 0);
}

/* Written in place, without a copy. */
static void append_udec(ds_ev *e, unsigned long long v)
{
    size_t n = decimal_digits(v);
    char *p = reserve(e, n);
    if (p)
        udec_backwards(p + n, v);
}

/* "." and six digits of v (< 1,000,000): written with a leading "1" that
 * keeps the zeros, which the "." then replaces. */
static void append_six_decimals(ds_ev *e, unsigned v)
{
    char digits[8];
    udec_backwards(digits + 8, 1000000u + v);
    digits[1] = '.';
    append(e, digits + 1, 7);
}

static void append_sdec(ds_ev *e, long long v)
{
    unsigned long long magnitude = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    size_t n = decimal_digits(magnitude) + (v < 0);
    char *p = reserve(e, n);
    if (!p)
        return;
    udec_backwards(p + n, magnitude);
    if (v < 0)
        p[0] = '-';
}

/* Two hexadecimal digits per byte value. */
static const char hex_pairs[513] =
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
    "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
    "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
    "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
    "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
    "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
    "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
    "e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

/* "0x..." in lower case, as %p-like addresses appear everywhere: quoted in
 * JSON, bare in text.  The digit count comes from the highest set bit; the
 * digits are written a byte (two of them) per step from the right. */
static void append_hex(ds_ev *e, uintptr_t v)
{
    int digits = v ? (67 - __builtin_clzll((unsigned long long)v)) / 4 : 1;
    bool quoted = !e->text;
    char *p = reserve(e, (size_t)digits + 2 + 2 * (size_t)quoted);
    if (!p)
        return;
    if (quoted)
        *p++ = '"';
    *p++ = '0';
    *p++ = 'x';
    int i = digits;
    for (; i >= 2; i -= 2, v >>= 8)
        memcpy(p + i - 2, hex_pairs + 2 * (v & 0xff), 2);
    if (i)
        p[0] = "0123456789abcdef"[v & 15];
    if (quoted)
        p[digits] = '"';
}

/* ---- strings ------------------------------------------------------------ */
/* Bytes that go into either rendering as they are: printable ASCII other
 * than the quote and the backslash, and the space. */
#define PLAIN_ROW(b) (b) >= 0x20 && (b) != '"' && (b) != '\\' && (b) < 0x80
static const bool plain[256] = {
#define P4(b) PLAIN_ROW(b), PLAIN_ROW((b) + 1), PLAIN_ROW((b) + 2), PLAIN_ROW((b) + 3)
#define P16(b) P4(b), P4((b) + 4), P4((b) + 8), P4((b) + 12)
#define P64(b) P16(b), P16((b) + 16), P16((b) + 32), P16((b) + 48)
    P64(0), P64(64), P64(128), P64(192)
#undef P64
#undef P16
#undef P4
};
#undef PLAIN_ROW

/* Length of the well-formed UTF-8 sequence starting at s[i] (1 to 4), or 0
 * (stray continuation, overlong, surrogate, > U+10FFFF, truncated). */
static size_t utf8_length(const char *s, size_t i, size_t n)
{
    unsigned char c = (unsigned char)s[i];
    size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (len == 0 || c > 0xf4 || i + len > n)
        return 0;
    unsigned cp = len == 4 ? c & 0x07u : len == 3 ? c & 0x0fu : c & 0x1fu;
    for (size_t k = 1; k < len; k++) {
        unsigned char cc = (unsigned char)s[i + k];
        if ((cc & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (cc & 0x3fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* The body of a string value: JSON escapes, or the text rendering's
 * replacements (a quote or a control byte becomes '?', a backslash stays);
 * invalid UTF-8 becomes U+FFFD in both.  Returns the bytes written, or
 * (size_t)-1 if they do not fit in cap. */
static size_t escape_into(char *out, size_t cap, const char *s, size_t n, bool text)
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
        size_t run = i;
        while (run < n && plain[(unsigned char)s[run]])
            run++;
        EMIT(s + i, run - i);
        if ((i = run) == n)
            break;
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            if (text)
                EMIT(c == '"' ? "?" : "\\", 1);
            else
                EMIT(esc, 2);
            i++;
        } else if (c < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]};
            if (text)
                EMIT("?", 1);
            else
                EMIT(esc, 6);
            i++;
        } else {
            size_t len = utf8_length(s, i, n);
            if (len) {
                EMIT(&s[i], len);
                i += len;
            } else {
                if (text)
                    EMIT("\xef\xbf\xbd", 3);
                else
                    EMIT("\\ufffd", 6);
                i++;
            }
        }
    }
#undef EMIT
    return o;
}

size_t ds_json_escape(char *out, size_t cap, const char *s, size_t n)
{
    return escape_into(out, cap, s, n, false);
}

/* ---- keys and containers ------------------------------------------------ */
/* The separator and the key before a value where ds_ev_key's inline path
 * does not write them: inside brackets, `,"key":` in JSON and `,key=` in
 * text, nothing before the first value; an array's elements have no key.
 * At the top level (reached here only when the line is full) the same as
 * ds_ev_key. */
void ds_ev_key_nested(ds_ev *e, const char *k, size_t klen)
{
    bool first = e->first[e->depth];
    e->first[e->depth] = false;
    char *p = reserve(e, !first + (k ? klen + (e->text ? 1 : 3) : 0));
    if (!p)
        return;
    if (!first)
        *p++ = e->text && e->depth == 0 ? ' ' : ',';
    if (!k)
        return;
    if (e->text) {
        memcpy(p, k, klen);
        p[klen] = '=';
    } else {
        *p++ = '"';
        memcpy(p, k, klen);
        p[klen] = '"';
        p[klen + 1] = ':';
    }
}

static void append_null(ds_ev *e)
{
    if (e->text)
        append(e, "-", 1);
    else
        append(e, "null", 4);
}

/* ---- the event ---------------------------------------------------------- */
void ds_ev_begin(ds_ev *e, int id)
{
    ds_ev_begin_buf(e, id, e->line, sizeof(e->line));
}

/* What starts each event's line, from events.def: in JSON the name and
 * the pid's key; in text the name padded to 9 columns, which the first
 * field's separator makes 10 (no event's name is longer). */
#define JSON_HEAD(name) "{\"event\":\"" name "\",\"pid\":"
static const struct {
    const char *json, *text;
    uint8_t json_len, text_len;
} heads[] = {
#define DS_EVENT(ID, name, frequent) \
    {JSON_HEAD(name), name "         ", sizeof(JSON_HEAD(name)) - 1, \
     9},
#include "events.def"
#undef DS_EVENT
};
#undef JSON_HEAD
#define DS_EVENT(ID, name, frequent) _Static_assert(sizeof(name) - 1 <= 9, name " is over 9 columns");
#include "events.def"
#undef DS_EVENT

/* This thread's pid and tid, formatted once: `7,"tid":8,"t_ns":` and
 * ` 7/8 `; redone when either changes (a fork). */
static DS_TLS struct {
    int pid;
    long tid;
    uint8_t json_len, text_len;
    char json[64], text[48];
} ids;

static void format_ids(int pid, long tid)
{
    char t[24];
    char *s = udec_backwards(t + sizeof(t), (unsigned long long)pid);
    size_t n = (size_t)(t + sizeof(t) - s), j = n, x = 1;
    memcpy(ids.json, s, n);
    memcpy(ids.json + j, ",\"tid\":", 7), j += 7;
    ids.text[0] = ' ';
    memcpy(ids.text + x, s, n), x += n;
    ids.text[x++] = '/';
    s = udec_backwards(t + sizeof(t), (unsigned long long)tid);
    n = (size_t)(t + sizeof(t) - s);
    memcpy(ids.json + j, s, n), j += n;
    memcpy(ids.json + j, ",\"t_ns\":", 8), j += 8;
    memcpy(ids.text + x, s, n), x += n;
    ids.text[x++] = ' ';
    ids.json_len = (uint8_t)j;
    ids.text_len = (uint8_t)x;
    ids.pid = pid;
    ids.tid = tid;
}

void ds_ev_begin_buf(ds_ev *e, int id, char *buf, size_t cap)
{
    e->buf = buf;
    e->cap = cap;
    e->len = 0;
    e->overflow = false;
    e->id = id;
    e->depth = 0;
    e->text = ds_cfg.format == DS_FORMAT_TEXT && !ds_trace_enabled();
    e->first[0] = false; /* the head holds the first fields (the padded name in text) */
    if (id < 0 || id >= DS_EV_COUNT) {
        e->overflow = true; /* not an event: dropped and counted */
        return;
    }
    int pid = ds_pid();
    long tid = ds_tid();
    if (ids.pid != pid || ids.tid != tid)
        format_ids(pid, tid);
    uint64_t ns = ds_now_ns();
    if (!e->text) {
        append(e, heads[id].json, heads[id].json_len);
        append(e, ids.json, ids.json_len);
        append_udec(e, ns);
        ds_context_fields(e);
        return;
    }
    /* "dlshim: " seconds (4 wide) "." microseconds " pid/tid " name: what
     * text.c makes of the four common fields. */
    append(e, "dlshim: ", 8);
    char t[20];
    char *s = udec_backwards(t + sizeof(t), ns / 1000000000u);
    for (ptrdiff_t w = t + sizeof(t) - s; w < 4; w++)
        *--s = ' ';
    append(e, s, (size_t)(t + sizeof(t) - s));
    append_six_decimals(e, (unsigned)(ns % 1000000000u / 1000u));
    append(e, ids.text, ids.text_len);
    append(e, heads[id].text, heads[id].text_len);
    e->head_len = e->len;
    ds_context_fields(e);
}

/* A word of n bytes: quoted in JSON, bare in text, copied as it is. */
static inline void append_word(ds_ev *e, const char *word, size_t n)
{
    bool quoted = !e->text;
    char *p = reserve(e, n + 2 * (size_t)quoted);
    if (!p)
        return;
    if (quoted)
        *p++ = '"';
    copy_short(p, word, n);
    if (quoted)
        p[n] = '"';
}

void ds_ev_str_value(ds_ev *e, const char *val)
{
    if (!val) {
        append_null(e);
        return;
    }
    size_t n = strlen(val), run = 0;
    while (run < n && plain[(unsigned char)val[run]] && val[run] != ' ')
        run++;
    if (run == n && n) { /* the common case: a word, copied as it is */
        append_word(e, val, n);
        return;
    }
    /* Text quotes a string only when it is empty or holds a space. */
    bool quote = !e->text || n == 0 || memchr(val, ' ', n);
    if (quote)
        append(e, "\"", 1);
    size_t room = e->overflow ? 0 : e->cap - e->len - DS_EV_RESERVE;
    size_t w = escape_into(e->buf + e->len, room, val, n, e->text);
    if (w == (size_t)-1)
        e->overflow = true;
    else
        e->len += w;
    if (quote)
        append(e, "\"", 1);
}

void ds_ev_word_value(ds_ev *e, const char *word)
{
    if (word)
        append_word(e, word, strlen(word));
    else
        append_null(e);
}

void ds_ev_name_value(ds_ev *e, uint16_t id)
{
    size_t n;
    const char *name = ds_name_word(id, &n);
    if (n)
        append_word(e, name, n);
    else
        ds_ev_str_value(e, name);
}

void ds_ev_int_value(ds_ev *e, int64_t v)
{
    append_sdec(e, v);
}

void ds_ev_uint_value(ds_ev *e, uint64_t v)
{
    append_udec(e, v);
}

void ds_ev_double_value(ds_ev *e, double v)
{
    if (v != v || v > 1e300 || v < -1e300) { /* NaN and infinities are not JSON */
        append_null(e);
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
    append_six_decimals(e, (unsigned)frac);
    if (exponent) {
        append(e, "e", 1);
        append_sdec(e, exponent);
    }
}

void ds_ev_hex_value(ds_ev *e, uintptr_t v)
{
    append_hex(e, v);
}

void ds_ev_bool_value(ds_ev *e, bool v)
{
    if (v)
        append(e, "true", 4);
    else
        append(e, "false", 5);
}


static void open_bracket(ds_ev *e, char bracket)
{
    if (e->depth >= DS_EV_DEPTH) {
        e->overflow = true;
        return;
    }
    append(e, &bracket, 1);
    e->closers[++e->depth] = bracket == '{' ? '}' : ']';
    e->first[e->depth] = true;
}

void ds_ev_open_k(ds_ev *e, const char *k, size_t klen, char bracket)
{
    ds_ev_key(e, k, klen);
    open_bracket(e, bracket);
}

void ds_ev_int_array_k(ds_ev *e, const char *k, size_t klen, const int64_t *v, int n)
{
    ds_ev_key(e, k, klen);
    if (!v) {
        append_null(e);
        return;
    }
    /* "[" and "]", and for each element a separator, a sign and 19 digits;
     * where the room for that many is not there, element by element (an
     * event that does not fit is dropped whole either way). */
    size_t most = 2 + (size_t)(n > 0 ? n : 0) * 21;
    if (e->overflow || e->len + most + DS_EV_RESERVE > e->cap) {
        open_bracket(e, '[');
        for (int i = 0; i < n; i++) {
            ds_ev_key_nested(e, NULL, 0);
            append_sdec(e, v[i]);
        }
        ds_ev_close(e);
        return;
    }
    e->buf[e->len++] = '[';
    for (int i = 0; i < n; i++) {
        if (i)
            e->buf[e->len++] = ',';
        append_sdec(e, v[i]);
    }
    e->buf[e->len++] = ']';
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

bool ds_ev_finish(ds_ev *e)
{
    while (e->depth > 0)
        ds_ev_close(e);
    if (e->overflow)
        return false;
    /* The reserve has room for these. */
    if (!e->text)
        e->buf[e->len++] = '}';
    else if (e->len == e->head_len)
        e->buf[e->len++] = ' '; /* no field: the name's tenth column */
    return true;
}

void ds_ev_end(ds_ev *e)
{
    if (!ds_ev_finish(e)) {
        ds_log_count_drop();
        return;
    }
    if (!e->text && ds_trace_enabled())
        ds_trace_event(e->id, e->buf, e->len);
    if (!ds_log_enabled())
        return;
    size_t len = e->len;
    if (e->text || ds_cfg.format != DS_FORMAT_TEXT)
        e->buf[len++] = '\n';
    else if ((len = ds_text_from_json(e->buf, len)) == 0) {
        ds_log_count_drop(); /* cannot happen with the writer above; never cut */
        return;
    }
    bool ok = ds_log_write(e->buf, len);
    if (e->id == DS_EV_SUMMARY || e->id == DS_EV_VIOLATION)
        ok = ds_log_flush() && ok; /* what explains a crash must not wait in a buffer */
    if (!ok && e->id == DS_EV_SUMMARY)
        ds_log_write_stderr(e->buf, len); /* the log failed: the count of what it lost */
}
