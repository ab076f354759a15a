/*
 * put.h — the values of event fields, written at a pointer: numbers,
 * addresses, names, in either rendering (JSON or text).  Inline, because
 * every field of every event calls one: a call, its prologue and the test
 * of the rendering cost as much as the digits.  put.c holds the
 * rare ones: strings to escape and doubles.
 *
 * A writer is told nothing of room: its caller has checked that the most
 * the value can take (DS_MOST_*) lies ahead.  Within that bound a writer
 * may store whole words past the value's end, which the next field
 * overwrites: eight digits go out in one store, not one byte at a time.
 *
 * Digits come eight at a time from SWAR arithmetic (one 64-bit word holds
 * eight digit lanes; a multiply and a shift divide every lane at once),
 * hexadecimal sixteen at a time in a vector register.  Written by hand: no
 * Debian C library formats into a caller's buffer without a length check
 * per call or a locale.
 */
#ifndef DS_PUT_H
#define DS_PUT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "put.h stores digit words in little-endian order"
#endif

/* The most bytes a value takes, quotes included (JSON's, the longer). */
#define DS_MOST_UINT 20
#define DS_MOST_INT 20
#define DS_MOST_HEX 20
#define DS_MOST_BOOL 5
#define DS_MOST_NULL 4
#define DS_MOST_DOUBLE 40
#define DS_MOST_STR(n) (2 + 6 * (size_t)(n))
#define DS_MOST_INTS(n) (2 + 21 * (size_t)(n))

/* n bytes at p, without their NUL where they are a literal's. */
static inline char *ds_put_bytes(char *p, const void *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

/* ---- decimal ------------------------------------------------------------ */
/* The eight decimal digits of v < 10^8, leading zeros kept, as the bytes of
 * a word in memory order (the first digit in the lowest byte).  v splits
 * into two lanes of four digits, each into two of two, each into two of
 * one: 10486 / 2^20 is 1/100 and 103 / 2^10 is 1/10 for lanes that small. */
static inline uint64_t ds_digits8(uint32_t v)
{
    uint64_t x = v / 10000u;
    x |= (uint64_t)(v - (uint32_t)x * 10000u) << 32;
    uint64_t q = ((x * 10486u) >> 20) & 0x0000007f0000007full;
    x = q | ((x - q * 100u) << 16);
    q = ((x * 103u) >> 10) & 0x000f000f000f000full;
    x = q | ((x - q * 10u) << 8);
    return x + 0x3030303030303030ull;
}

/* The same for v < 10^4 in 32 bits (5243 / 2^19 is 1/100 below 43,699). */
static inline uint32_t ds_digits4(uint32_t v)
{
    uint32_t q = (v * 5243u) >> 19;
    uint32_t x = q | ((v - q * 100u) << 16);
    q = ((x * 103u) >> 10) & 0x000f000fu;
    x = q | ((x - q * 10u) << 8);
    return x + 0x30303030u;
}

/* Digits of v < 10^8: from its highest bit, then one comparison (1233 /
 * 4096 is just under log10 2).  v | 1 has as many digits as v, and 0 then
 * counts as the one digit it is written with. */
static inline unsigned ds_digit_count(uint32_t v)
{
    static const uint32_t powers_of_ten[10] = {1u,      10u,      100u,      1000u,      10000u,
                                               100000u, 1000000u, 10000000u, 100000000u, 1000000000u};
    v |= 1u;
    unsigned bits = 32u - (unsigned)__builtin_clz(v);
    unsigned guess = (bits * 1233u) >> 12;
    return guess + (v >= powers_of_ten[guess]);
}

/* v < 10^8 without leading zeros: the word shifted past them; 8 bytes
 * stored (4 below 10^4: sizes, extents, small counts). */
static inline char *ds_put_small(char *p, uint32_t v)
{
    unsigned n = ds_digit_count(v);
    if (v < 10000u) {
        uint32_t w = ds_digits4(v) >> (8u * (4u - n));
        memcpy(p, &w, 4);
    } else {
        uint64_t w = ds_digits8(v) >> (8u * (8u - n));
        memcpy(p, &w, 8);
    }
    return p + n;
}

static inline char *ds_put_eight(char *p, uint32_t v)
{
    uint64_t w = ds_digits8(v);
    memcpy(p, &w, 8);
    return p + 8;
}

/* At most 20 digits; the stores reach 20 bytes past p at most (4 + 8 + 8
 * for the longest). */
static inline char *ds_put_uint(char *p, uint64_t v)
{
    if (v < 10u) { /* 0 and 1 above all: offsets, flags, counts */
        *p = (char)('0' + v);
        return p + 1;
    }
    if (v < 100000000u)
        return ds_put_small(p, (uint32_t)v);
    uint64_t high = v / 100000000u;
    uint32_t low = (uint32_t)(v - high * 100000000u);
    if (high < 100000000u) {
        p = ds_put_small(p, (uint32_t)high);
    } else {
        uint64_t top = high / 100000000u; /* at most 1844 */
        p = ds_put_small(p, (uint32_t)top);
        p = ds_put_eight(p, (uint32_t)(high - top * 100000000u));
    }
    return ds_put_eight(p, low);
}

static inline char *ds_put_int(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return ds_put_uint(p, 0ull - (uint64_t)v);
    }
    return ds_put_uint(p, (uint64_t)v);
}

/* "." and the six digits of v < 10^6: the word of "00dddddd" moved down a
 * byte, its first byte made the point.  8 bytes stored. */
static inline char *ds_put_six_decimals(char *p, uint32_t v)
{
    uint64_t w = ((ds_digits8(v) >> 8) & ~0xffull) | '.';
    memcpy(p, &w, 8);
    return p + 7;
}

static inline char *ds_put_bool(char *p, bool v)
{
    ds_put_bytes(p, v ? "true " : "false", 5);
    return p + (v ? 4 : 5);
}

static inline char *ds_put_null(char *p, bool text)
{
    if (text) {
        *p = '-';
        return p + 1;
    }
    return ds_put_bytes(p, "null", 4);
}

/* ---- hexadecimal -------------------------------------------------------- */
/* Sixteen hex digits of x, the first from its top nibble, at out: in one
 * 16-byte vector (GCC's vector extensions: SSE2 on x86-64, NEON on arm64),
 * each byte of x twice, the high nibble kept in even lanes and the low one
 * in odd lanes, then '0' added and, to lanes of 10 and more, the gap up to
 * 'a'.  About fifteen instructions where a byte loop takes sixty. */
typedef uint8_t ds_v16u8 __attribute__((vector_size(16)));

static inline void ds_sixteen_hex(char *out, uint64_t x)
{
    uint64_t big_endian = __builtin_bswap64(x);
    ds_v16u8 bytes = {0};
    memcpy(&bytes, &big_endian, 8);
#if defined(__clang__)
    ds_v16u8 twice = __builtin_shufflevector(bytes, bytes, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
#else
    ds_v16u8 twice = __builtin_shuffle(bytes, (ds_v16u8){0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7});
#endif
    const ds_v16u8 even = {0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0};
    ds_v16u8 nibbles = ((twice >> 4) & even) | (twice & 15 & ~even);
    ds_v16u8 letters = (ds_v16u8)(nibbles > 9) & (uint8_t)('a' - '0' - 10);
    ds_v16u8 digits = nibbles + (uint8_t)'0' + letters;
    memcpy(out, &digits, 16);
}

/* "0x…" in lower case, as %p-like addresses appear everywhere: quoted in
 * JSON, bare in text.  The value is shifted so its first digit is the top
 * nibble; sixteen digits are stored and the pointer moves past the real
 * ones. */
static inline char *ds_put_hex(char *p, uintptr_t v, bool text)
{
    uint64_t x = (uint64_t)v;
    unsigned digits = (67u - (unsigned)__builtin_clzll(x | 1u)) / 4u;
    *p = '"';
    p += !text;
    p[0] = '0';
    p[1] = 'x';
    ds_sixteen_hex(p + 2, x << (4u * (16u - digits)));
    p += 2 + digits;
    *p = '"';
    return p + !text;
}

/* ---- arrays ------------------------------------------------------------- */
/* Whole numbers, `[1,-2]` in both renderings: at most DS_MOST_INTS(n). */
static inline char *ds_put_ints(char *p, const int64_t *v, int n)
{
    *p++ = '[';
    for (int i = 0; i < n; i++) {
        p = ds_put_int(p, v[i]);
        *p++ = ','; /* the last becomes the "]" */
    }
    p -= n > 0;
    *p++ = ']';
    return p;
}

/* ---- words -------------------------------------------------------------- */
/* Words (device, dtype names: no escaping, no quoting in text) live in
 * slots of DS_WORD_SLOT readable bytes, n of them the word's: the whole
 * slot is copied, a few moves where n bytes are a call.  JSON's quotes are
 * stored either way and passed over in text, where the word overwrites the
 * first and the next field the second.  At most DS_WORD_SLOT + 2 bytes. */
#define DS_WORD_SLOT 32
static inline char *ds_put_slot(char *p, const char *slot, size_t n, bool text)
{
    size_t quoted = !text;
    *p = '"';
    memcpy(p + quoted, slot, DS_WORD_SLOT);
    p += quoted + n;
    *p = '"';
    return p + quoted;
}

/* ---- put.c: the rare ones ---------------------------------------------- */
char *ds_put_double(char *p, double v, bool text); /* NaN and infinities: null */
/* A string, n bytes: JSON-escaped and quoted; in text quoted only when
 * empty or holding a space, with quotes and control bytes as '?'.  Invalid
 * UTF-8 becomes U+FFFD in both.  At most DS_MOST_STR(n) bytes. */
char *ds_put_str(char *p, const char *s, size_t n, bool text);
/* The same into cap bytes; NULL when it does not fit. */
char *ds_put_str_bounded(char *p, size_t cap, const char *s, size_t n, bool text);
/* JSON string body escaping; invalid UTF-8 becomes U+FFFD.  Returns the
 * bytes written, or (size_t)-1 if it did not fit.  Exposed for tests. */
size_t ds_json_escape(char *out, size_t cap, const char *s, size_t n);

#endif
