/*
 * text.c — an event's JSON rewritten as its DLSHIM_FORMAT=text line.
 *
 * The writer (event.c) builds the text line directly, except when a trace
 * is on too: then the event is built as JSON, for the trace, and the log's
 * line comes from here.  The two must agree byte for byte, which the unit
 * test and the fuzzer check by building every kind of field both ways.
 * This is also the definition of the text format.  The conversion runs in
 * place: each
 * piece of text is no longer than the JSON it comes from (`"k":` becomes
 * `k=`, an escape becomes one byte, the prefix is shorter than the four
 * common fields it replaces), so the write position never passes the read
 * position.  That is checked on every byte, not assumed: a line that would
 * break it is refused (and counted as dropped by the caller).
 *
 *   {"event":"import","pid":7,"tid":7,"t_ns":1500,"tensor":"0x1","ok":true}
 *   dlshim:    0.000001 7/7 import    tensor=0x1 ok=true
 *
 * Strings lose their quotes unless empty or holding a space; quotes and
 * control bytes inside become '?'; null becomes '-'.  Nested objects and
 * arrays keep their brackets, with `k=` keys and ',' separators.
 */
#include <string.h>

#include "output/output.h"

typedef struct {
    char *b;
    size_t r, w, n;
    bool ok;
} conv;

static void put(conv *c, char ch)
{
    if (!c->ok || c->w >= c->r || c->w >= c->n) {
        c->ok = false;
        return;
    }
    c->b[c->w++] = ch;
}

static bool at(const conv *c, char ch)
{
    return c->r < c->n && c->b[c->r] == ch;
}

static unsigned hex_digit(char ch)
{
    return ch >= '0' && ch <= '9' ? (unsigned)(ch - '0')
           : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
           : ch >= 'A' && ch <= 'F' ? (unsigned)(ch - 'A' + 10)
                                    : 16u;
}

/* A JSON string at c->r (on its opening quote), written as text. */
static void string(conv *c, bool as_text)
{
    size_t end = c->r + 1;
    bool space = false;
    while (end < c->n && c->b[end] != '"') {
        space |= c->b[end] == ' ';
        end += c->b[end] == '\\' ? 2 : 1;
    }
    if (end >= c->n) {
        c->ok = false;
        return;
    }
    bool quote = as_text && (space || end == c->r + 1);
    c->r++;
    if (quote)
        put(c, '"');
    while (c->r < end && c->ok) {
        char ch = c->b[c->r++];
        if (ch != '\\') {
            put(c, ch);
            continue;
        }
        char esc = (char)(c->r < end ? c->b[c->r++] : '?');
        if (esc == 'u' && c->r + 4 <= end) {
            unsigned cp = 0;
            for (int i = 0; i < 4; i++)
                cp = cp << 4 | hex_digit(c->b[c->r++]);
            if (cp == 0xfffd) { /* the writer's stand-in for invalid UTF-8 */
                put(c, (char)0xef), put(c, (char)0xbf), put(c, (char)0xbd);
                continue;
            }
            put(c, '?'); /* control bytes: the only other \u the writer emits */
            continue;
        }
        put(c, esc == '\\' ? '\\' : '?');
    }
    c->r = end + 1;
    if (quote)
        put(c, '"');
}

static void value(conv *c);

/* An object or array at c->r; `top` is the event itself. */
static void container(conv *c, bool top)
{
    bool object = c->b[c->r] == '{';
    char close = object ? '}' : ']';
    if (!top)
        put(c, c->b[c->r]);
    c->r++;
    bool first = true;
    while (c->ok && c->r < c->n && !at(c, close)) {
        if (!first) {
            if (!at(c, ',')) {
                c->ok = false;
                return;
            }
            c->r++;
            put(c, top ? ' ' : ',');
        }
        first = false;
        if (object) {
            if (!at(c, '"')) {
                c->ok = false;
                return;
            }
            string(c, false);
            if (!at(c, ':')) {
                c->ok = false;
                return;
            }
            c->r++;
            put(c, '=');
        }
        value(c);
    }
    if (!at(c, close)) {
        c->ok = false;
        return;
    }
    c->r++;
    if (!top)
        put(c, close);
}

static void value(conv *c)
{
    if (c->r >= c->n) {
        c->ok = false;
        return;
    }
    char ch = c->b[c->r];
    if (ch == '"') {
        string(c, true);
    } else if (ch == '{' || ch == '[') {
        container(c, false);
    } else if (ch == 'n' && c->r + 4 <= c->n) { /* null */
        c->r += 4;
        put(c, '-');
    } else {
        /* numbers, true, false: copied as they are */
        while (c->ok && c->r < c->n && !strchr(",}]", c->b[c->r]))
            put(c, c->b[c->r++]);
    }
}

/* Reads `"key":` then an unsigned number or a short string value. */
static bool common(conv *c, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    if (c->r + klen + 3 > c->n || c->b[c->r] != '"' || memcmp(c->b + c->r + 1, key, klen) != 0 ||
        c->b[c->r + klen + 1] != '"' || c->b[c->r + klen + 2] != ':')
        return false;
    c->r += klen + 3;
    bool quoted = at(c, '"');
    c->r += quoted;
    size_t len = 0;
    while (c->r < c->n && !strchr(quoted ? "\"" : ",}", c->b[c->r])) {
        if (len + 1 >= cap)
            return false;
        out[len++] = c->b[c->r++];
    }
    out[len] = '\0';
    c->r += quoted;
    if (at(c, ','))
        c->r++;
    return len > 0;
}

size_t ds_text_from_json(char *line, size_t len)
{
    conv c = {line, 0, 0, len, true};
    char name[32], pid[24], tid[24], t[24];
    if (!at(&c, '{'))
        return 0;
    c.r++;
    if (!common(&c, "event", name, sizeof(name)) || !common(&c, "pid", pid, sizeof(pid)) ||
        !common(&c, "tid", tid, sizeof(tid)) || !common(&c, "t_ns", t, sizeof(t)))
        return 0;
    unsigned long long ns = 0;
    for (const char *p = t; *p >= '0' && *p <= '9'; p++)
        ns = ns * 10 + (unsigned long long)(*p - '0');
    char prefix[128];
    size_t plen = ds_fmt(prefix, sizeof(prefix), "dlshim: %4llu.%06llu %s/%s %-10s", ns / 1000000000u,
                         ns % 1000000000u / 1000u, pid, tid, name);
    for (size_t i = 0; i < plen; i++)
        put(&c, prefix[i]);
    /* The rest of the object reads as a top-level container once the byte
     * before it (the ',' after t_ns, or its last digit) becomes a brace. */
    c.r--;
    if (c.w > c.r)
        return 0;
    c.b[c.r] = '{';
    container(&c, true);
    if (!c.ok || c.r != c.n)
        return 0;
    line[c.w++] = '\n';
    return c.w;
}
