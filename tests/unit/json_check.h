/* A strict JSON validator for the unit tests (RFC 8259: objects, arrays,
 * strings with valid escapes and UTF-8, numbers, literals).  Test-only: the
 * shim writes JSON but never reads it. */
#ifndef JSON_CHECK_H
#define JSON_CHECK_H

#include <stdbool.h>
#include <string.h>

typedef struct {
    const char *p, *end;
} json_cursor;

static bool json_value(json_cursor *c, int depth);

static void json_ws(json_cursor *c)
{
    while (c->p < c->end && strchr(" \t\r\n", *c->p) && *c->p)
        c->p++;
}

static bool json_lit(json_cursor *c, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
        return false;
    c->p += n;
    return true;
}

static bool json_utf8(json_cursor *c)
{
    unsigned char b = (unsigned char)*c->p;
    int len = b >= 0xf0 && b <= 0xf4 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 && b < 0xe0 ? 2 : 0;
    if (!len || c->end - c->p < len)
        return false;
    unsigned cp = b & (len == 4 ? 0x07 : len == 3 ? 0x0f : 0x1f);
    for (int i = 1; i < len; i++) {
        unsigned char cc = (unsigned char)c->p[i];
        if ((cc & 0xc0) != 0x80)
            return false;
        cp = (cp << 6) | (cc & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return false;
    c->p += len;
    return true;
}

static bool json_string(json_cursor *c)
{
    if (c->p >= c->end || *c->p != '"')
        return false;
    c->p++;
    while (c->p < c->end) {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '"') {
            c->p++;
            return true;
        }
        if (ch < 0x20)
            return false;
        if (ch == '\\') {
            c->p++;
            if (c->p >= c->end)
                return false;
            if (*c->p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (c->p + i >= c->end || !strchr("0123456789abcdefABCDEF", c->p[i]) ||
                        !c->p[i])
                        return false;
                c->p += 5;
            } else if (*c->p && strchr("\"\\/bfnrt", *c->p)) {
                c->p++;
            } else {
                return false;
            }
        } else if (ch >= 0x80) {
            if (!json_utf8(c))
                return false;
        } else {
            c->p++;
        }
    }
    return false;
}

/* One or more digits. */
static bool json_digits(json_cursor *c)
{
    const char *start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
        c->p++;
    return c->p > start;
}

static bool json_number(json_cursor *c)
{
    const char *start = c->p;
    if (c->p < c->end && *c->p == '-')
        c->p++;
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
        return false;
    if (*c->p == '0')
        c->p++;
    else
        json_digits(c);
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        if (!json_digits(c))
            return false;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
            c->p++;
        if (!json_digits(c))
            return false;
    }
    return c->p > start;
}

static bool json_container(json_cursor *c, char open, char close, bool keyed, int depth)
{
    if (*c->p != open || depth > 32)
        return false;
    c->p++;
    json_ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return true;
    }
    for (;;) {
        json_ws(c);
        if (keyed) {
            if (!json_string(c))
                return false;
            json_ws(c);
            if (c->p >= c->end || *c->p++ != ':')
                return false;
        }
        if (!json_value(c, depth + 1))
            return false;
        json_ws(c);
        if (c->p >= c->end)
            return false;
        if (*c->p == close) {
            c->p++;
            return true;
        }
        if (*c->p++ != ',')
            return false;
    }
}

static bool json_value(json_cursor *c, int depth)
{
    json_ws(c);
    if (c->p >= c->end)
        return false;
    switch (*c->p) {
    case '{': return json_container(c, '{', '}', true, depth);
    case '[': return json_container(c, '[', ']', false, depth);
    case '"': return json_string(c);
    case 't': return json_lit(c, "true");
    case 'f': return json_lit(c, "false");
    case 'n': return json_lit(c, "null");
    default: return json_number(c);
    }
}

/* True when [s, s+n) is exactly one JSON object. */
static inline bool json_is_object(const char *s, size_t n)
{
    json_cursor c = {s, s + n};
    json_ws(&c);
    if (c.p >= c.end || *c.p != '{' || !json_value(&c, 0))
        return false;
    json_ws(&c);
    return c.p == c.end;
}

#endif
