/*
 * put.c — the values of event fields that are rare or long: doubles, and
 * strings, which are escaped (put.h has the common ones, inline).
 *
 * Strings are copied in runs of plain bytes; only a string holding a
 * quote, a backslash, a control byte or non-ASCII bytes takes the
 * byte-by-byte path, where invalid UTF-8 becomes U+FFFD.
 */
#include <string.h>

#include "base/base.h"

/* Six decimals; beyond 2^63 an exponent (no libm, no printf).  At most
 * 1 + 19 + 7 + 1 + 3 bytes, and a word's tail stored past them. */
char *ds_put_double(char *p, double v, bool text)
{
    if (v != v || v > 1e300 || v < -1e300) /* NaN and infinities are not JSON */
        return ds_put_null(p, text);
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
        *p++ = '-';
    p = ds_put_six_decimals(ds_put_uint(p, whole), (uint32_t)frac);
    if (exponent) {
        *p++ = 'e';
        p = ds_put_uint(p, (uint64_t)exponent);
    }
    return p;
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

char *ds_put_str_bounded(char *p, size_t cap, const char *s, size_t n, bool text)
{
    /* Text quotes a string only when it is empty or holds a space. */
    bool quote = !text || n == 0 || memchr(s, ' ', n);
    size_t quotes = 2 * (size_t)quote;
    if (cap < quotes)
        return NULL;
    size_t body = escape_into(p + quote, cap - quotes, s, n, text);
    if (body == (size_t)-1)
        return NULL;
    if (quote) {
        p[0] = '"';
        p[1 + body] = '"';
    }
    return p + body + quotes;
}

char *ds_put_str(char *p, const char *s, size_t n, bool text)
{
    return ds_put_str_bounded(p, DS_MOST_STR(n), s, n, text);
}
