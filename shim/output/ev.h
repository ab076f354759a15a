/*
 * ev.h — the event builder: one event line built field by field, as a JSON
 * object or as the aligned text line, then written whole (event.c).  Part
 * of the output layer; the one piece of it that hook families see too
 * (shim.h), for the events only they can describe (an entry point's
 * arguments).
 */
#ifndef DS_EV_H
#define DS_EV_H

#include "base/base.h"

/* ---- the line (event.c) ------------------------------------------------- */
/* Longest event line; also PIPE_BUF, so one line is one atomic pipe write. */
#define DS_LINE_MAX 4096
#define DS_EV_DEPTH 6
/* The most dimensions a tensor may have, so the longest shape an event
 * writes: no framework supports more (NumPy 2 and PyTorch stop at 64). */
#define DS_MAX_NDIM 64
/* Room past a line's end where a generated writer's bounded fields may run
 * before it finds the line too long (flat.c). */
#define DS_EV_SLACK 1536

typedef struct ds_ev {
    char *p;           /* where the next byte goes */
    char *limit;       /* fields end before it (the reserve beyond holds the
                          brackets, "}" and "\n"); at buf once it overflowed */
    char *buf;         /* line, or a caller's larger buffer */
    char *fields;      /* text: where the first field goes (after the head) */
    uint64_t ns;       /* when it happened (t_ns) */
    int id;            /* ds_event_id */
    bool overflow;     /* the line did not fit: it is dropped, not cut */
    bool text;         /* built as the text line, not as JSON */
    char sep;          /* what precedes each value at the level open now */
    uint8_t depth;     /* open objects/arrays below the top level */
    char *opened[DS_EV_DEPTH + 1]; /* where each open level's bracket goes */
    char brackets[DS_EV_DEPTH + 1]; /* its opening bracket */
    char line[DS_LINE_MAX + DS_EV_SLACK]; /* storage for ordinary events */
} ds_ev;

/* ---- event.c: builds one event as a JSON object or an aligned text line - */
/* The outputs open now (DS_OUT_* bits), kept by log.c and trace.c as they
 * open and close them, so that asking whether an event is wanted (several
 * times per handoff) is two loads in the caller, not a call. */
enum { DS_OUT_LOG = 1, DS_OUT_TRACE = 2 };
extern atomic_uint ds_outputs;
void ds_outputs_set(unsigned which, bool open);
static inline bool ds_output_open_now(void)
{
    return atomic_load_explicit(&ds_outputs, memory_order_relaxed) != 0;
}
/* Always inline: asked on the hot calls' ways that call nothing. */
__attribute__((always_inline)) static inline bool ds_event_wanted(int id)
{
    return ds_output_open_now() && (ds_cfg.events & (1u << id));
}
/* ---- the event writer (event.c, flat.c; values: base/put.h, put.c) ----
 * An event is built in the rendering the log asks for, then written whole:
 *     ds_ev e;
 *     ds_ev_begin(&e, DS_EV_IMPORT);
 *     ds_ev_import(&e, &(ds_import_fields){.tensor = t, ...});
 *     ds_ev_hex(&e, "stream", s);
 *     ds_ev_end(&e);
 * The frequent handoff events have a writer generated from fields.def
 * (flat.c: every key a constant, one room check for the bounded fields);
 * any event can add fields one by one after it, and the rest are built
 * that way alone.  Every key is a literal (NULL: an array's element), so
 * the inline field wrappers below write it as constant stores; a field
 * costs one room check, for its key and the most its value can take.
 * Where that room is not left, the exact path measures the value first; an
 * event that still does not fit DS_LINE_MAX is dropped whole. */

/* Building into a caller's buffer (the summary is large), of which
 * DS_EV_RESERVE + DS_EV_SLACK bytes are kept past the line's end; the
 * event at `ns` (ds_now_ns). */
void ds_ev_begin_buf(ds_ev *e, int id, char *buf, size_t cap, uint64_t ns);
/* What starts every line (event, pid, tid, t_ns in JSON; "dlshim:", the
 * time, pid/tid and the padded name in text), at most DS_EV_HEAD_MOST
 * bytes; id must be an event's. */
#define DS_EV_HEAD_MOST 160
char *ds_put_head(char *p, int id, uint64_t ns, bool text);
/* Whether events are built as text lines now (DLSHIM_FORMAT=text, and no
 * trace, which reads JSON). */
static inline bool ds_ev_text_now(void)
{
    return ds_cfg.format == DS_FORMAT_TEXT &&
           !(atomic_load_explicit(&ds_outputs, memory_order_relaxed) & DS_OUT_TRACE);
}
/* An event at `ns` (ds_now_ns), a time its caller keeps; ds_ev_begin: now. */
static inline void ds_ev_begin_at(ds_ev *e, int id, uint64_t ns)
{
    ds_ev_begin_buf(e, id, e->line, sizeof(e->line), ns);
}
static inline void ds_ev_begin(ds_ev *e, int id)
{
    ds_ev_begin_at(e, id, ds_now_ns());
}
/* Always inlined, or the key's length is a strlen call again. */
#define DS_EV_INLINE static inline __attribute__((always_inline))
#define DS_KEY_LEN(k) ((k) ? __builtin_strlen(k) : 0)
/* Room an event keeps past e->limit for its closing brackets (an empty one
 * is two bytes), "}" and "\n". */
#define DS_EV_RESERVE (2 * DS_EV_DEPTH + 2)

static inline size_t ds_ev_len(const ds_ev *e)
{
    return (size_t)(e->p - e->buf);
}
/* Bytes fields may still take. */
static inline size_t ds_ev_room(const ds_ev *e)
{
    return e->limit > e->p ? (size_t)(e->limit - e->p) : 0;
}
/* No field fits from now on: the event will be dropped, and counted. */
void ds_ev_overflow(ds_ev *e);

/* The separator and key of a field whose value takes at most `most` bytes:
 * `,"key":` in JSON, ` key=` in text at the top level (`,key=` inside
 * brackets), only the separator for an array's element.  Returns where the
 * value goes, or NULL, writing nothing, when the line has no room for that
 * much.  The separator is the level's own, even for a bracket's first
 * value: the close writes the bracket over it (event.c). */
DS_EV_INLINE char *ds_ev_field(ds_ev *e, const char *key, size_t klen, size_t most)
{
    char *p = e->p;
    if (__builtin_expect(e->limit - p < (ptrdiff_t)(klen + most + 4), 0))
        return NULL;
    *p++ = e->sep;
    if (!key)
        return p;
    if (e->text) {
        __builtin_memcpy(p, key, klen);
        p[klen] = '=';
        return p + klen + 1;
    }
    p[0] = '"';
    __builtin_memcpy(p + 1, key, klen);
    p[klen + 1] = '"';
    p[klen + 2] = ':';
    return p + klen + 3;
}
/* A field whose value, n bytes at v, is already rendered: the exact path
 * (the whole field, or the event overflows). */
void ds_ev_append_field(ds_ev *e, const char *key, size_t klen, const char *v, size_t n);

/* Values of a bounded size: X(name, C type, most bytes, the value written
 * at p by put.h) gives the field ds_ev_<name>(e, key, v). */
#define DS_EV_SCALARS(X)                                                       \
    X(int, int64_t, DS_MOST_INT, ds_put_int(p, v))                             \
    X(uint, uint64_t, DS_MOST_UINT, ds_put_uint(p, v))                         \
    X(hex, uintptr_t, DS_MOST_HEX, ds_put_hex(p, v, e->text))                  \
    X(double, double, DS_MOST_DOUBLE, ds_put_double(p, v, e->text))            \
    X(bool, bool, DS_MOST_BOOL, ds_put_bool(p, v))
#define DS_EV_SCALAR(name, type, most, put)                                    \
    DS_EV_INLINE void ds_ev_##name(ds_ev *e, const char *key, type v)          \
    {                                                                          \
        size_t klen = DS_KEY_LEN(key);                                         \
        char *p = ds_ev_field(e, key, klen, most);                             \
        if (__builtin_expect(p == NULL, 0)) {                                  \
            char value_[most];                                                 \
            p = value_;                                                        \
            ds_ev_append_field(e, key, klen, value_, (size_t)((put) - value_)); \
            return;                                                            \
        }                                                                      \
        e->p = (put);                                                          \
    }
DS_EV_SCALARS(DS_EV_SCALAR)
#undef DS_EV_SCALAR

/* A string (base/put.h: ds_put_str), n bytes. */
void ds_ev_str_k(ds_ev *e, const char *key, size_t klen, const char *s, size_t n);
DS_EV_INLINE void ds_ev_str(ds_ev *e, const char *key, const char *s) /* NULL: null */
{
    size_t klen = DS_KEY_LEN(key);
    if (!s) {
        char *p = ds_ev_field(e, key, klen, DS_MOST_NULL);
        if (p)
            e->p = ds_put_null(p, e->text);
        else
            ds_ev_append_field(e, key, klen, e->text ? "-" : "null", e->text ? 1 : 4);
        return;
    }
    ds_ev_str_k(e, key, klen, s, __builtin_strlen(s));
}
/* A string the shim made that needs no escaping and no quoting in text:
 * non-empty, printable ASCII without space, quote or backslash (a device's
 * or dtype's name, a flag's); NULL: null. */
DS_EV_INLINE void ds_ev_word(ds_ev *e, const char *key, const char *word)
{
    if (!word) {
        ds_ev_str(e, key, NULL);
        return;
    }
    size_t klen = DS_KEY_LEN(key), n = __builtin_strlen(word);
    char *p = ds_ev_field(e, key, klen, n + 2);
    if (!p) {
        ds_ev_str_k(e, key, klen, word, n);
        return;
    }
    if (!e->text)
        *p++ = '"';
    __builtin_memcpy(p, word, n);
    p += n;
    if (!e->text)
        *p++ = '"';
    e->p = p;
}
/* The same for a word in a slot of DS_WORD_SLOT readable bytes (put.h). */
DS_EV_INLINE void ds_ev_word_slot(ds_ev *e, const char *key, const char *slot, size_t n)
{
    size_t klen = DS_KEY_LEN(key);
    char *p = ds_ev_field(e, key, klen, DS_WORD_SLOT + 2);
    if (p)
        e->p = ds_put_slot(p, slot, n, e->text);
    else
        ds_ev_str_k(e, key, klen, slot, n);
}
/* An interned name (names.c), rendered both ways once, when interned; one
 * too long for its slot is escaped here (at most DS_MOST_NAME bytes). */
#define DS_MOST_NAME DS_MOST_STR(DS_NAME_MAX - 1)
static inline char *ds_put_name(char *p, uint16_t id, bool text)
{
    const ds_rendered *r = ds_name_rendered(id, text);
    if (__builtin_expect(r == NULL, 0)) {
        const char *name = ds_name(id);
        return ds_put_str(p, name, __builtin_strlen(name), text);
    }
    /* All of the slot: a constant-size copy is a few moves (the bytes past
     * the name are overwritten or lie in the line's room). */
    __builtin_memcpy(p, r->bytes, DS_RENDERED_MAX);
    return p + r->len;
}
DS_EV_INLINE void ds_ev_name(ds_ev *e, const char *key, uint16_t id)
{
    size_t klen = DS_KEY_LEN(key);
    char *p = ds_ev_field(e, key, klen, DS_MOST_NAME);
    if (p)
        e->p = ds_put_name(p, id, e->text);
    else
        ds_ev_str(e, key, ds_name(id));
}
/* Whole numbers as a JSON array, `[1,-2]` in both renderings; NULL: null. */
void ds_ev_int_array_k(ds_ev *e, const char *key, size_t klen, const int64_t *v, int n);
DS_EV_INLINE void ds_ev_int_array(ds_ev *e, const char *key, const int64_t *v, int n)
{
    ds_ev_int_array_k(e, key, DS_KEY_LEN(key), v, n);
}
/* Words (ds_ev_word) as an array: `["read_only","is_copied"]`, in text
 * `[read_only,is_copied]`; at most 64 of them. */
void ds_ev_words(ds_ev *e, const char *key, const char *const *words, int n);
/* The same written at p when the line has room up to `limit`; NULL if not. */
char *ds_put_words(char *p, const char *limit, const char *const *words, int n, bool text);
/* '{' or '[', closed by ds_ev_close (or by the event's end). */
void ds_ev_open_bracket(ds_ev *e, char bracket);
DS_EV_INLINE void ds_ev_open(ds_ev *e, const char *key, char bracket)
{
    size_t klen = DS_KEY_LEN(key);
    char *p = ds_ev_field(e, key, klen, 0);
    if (p)
        e->p = p;
    else
        ds_ev_append_field(e, key, klen, "", 0);
    ds_ev_open_bracket(e, bracket);
}
void ds_ev_close(ds_ev *e);
/* Closes what is open and terminates the line (no newline); false when
 * it overflowed. */
bool ds_ev_finish(ds_ev *e);
/* ds_ev_finish, then writes the line; an overflowed event is dropped, counted. */
void ds_ev_end(ds_ev *e);

#endif /* DS_EV_H */
