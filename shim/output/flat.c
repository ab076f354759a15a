/*
 * flat.c — the writers of the frequent events, generated from fields.def.
 *
 * A handoff writes three events (export, import, release), and a program
 * that logs them pays for every field (issue 28).  The field-by-field
 * builder (event.c) asks at each one where the line ends, which rendering
 * it is and what separates it; here each event's fields are one run of
 * code with the line's end in a register, the rendering decided once, and
 * every key with its separator a constant: `,"bytes":` in JSON, ` bytes=`
 * in text, a store or two.
 *
 * Room: the builder keeps e->p at or before e->limit, and the event's
 * buffer holds DS_EV_SLACK bytes past it (types.h).  A field of bounded
 * size is written unchecked, since an event's bounded fields together fit
 * the slack (checked below at compile time); a field of variable size
 * (arrays) checks that it ends before e->limit.  An event whose line then
 * ends past e->limit is longer than DS_LINE_MAX and is dropped whole, as
 * the builder would have dropped it.
 */
#include <string.h>

#include "internal.h"

/* ---- each kind of field: its most bytes (0: checked), and its writer ---- */
#define MOST_HEX DS_MOST_HEX
#define MOST_UINT DS_MOST_UINT
#define MOST_BOOL DS_MOST_BOOL
#define MOST_NAME DS_MOST_NAME
#define MOST_NAME_OR_NULL DS_MOST_NAME
#define MOST_LABEL DS_MOST_NAME
#define MOST_WORD (DS_WORD_SLOT + 2)
#define MOST_INTS DS_MOST_NULL /* and the rest checked */
#define MOST_WORDS 0           /* checked */

/* Each returns the value's end, or NULL where a checked value does not
 * end before `limit`. */
static inline char *put_HEX(char *p, uintptr_t v, bool text, const char *limit)
{
    (void)limit;
    return ds_put_hex(p, v, text);
}

static inline char *put_UINT(char *p, uint64_t v, bool text, const char *limit)
{
    (void)text, (void)limit;
    return ds_put_uint(p, v);
}

static inline char *put_BOOL(char *p, bool v, bool text, const char *limit)
{
    (void)text, (void)limit;
    return ds_put_bool(p, v);
}

static inline char *put_NAME(char *p, uint16_t id, bool text, const char *limit)
{
    (void)limit;
    return ds_put_name(p, id, text);
}

static inline char *put_NAME_OR_NULL(char *p, int32_t id, bool text, const char *limit)
{
    (void)limit;
    return id < 0 ? ds_put_null(p, text) : ds_put_name(p, (uint16_t)id, text);
}

static inline char *put_LABEL(char *p, ds_label v, bool text, const char *limit)
{
    (void)limit;
    if (!v.text)
        return ds_put_name(p, v.id, text);
    return ds_put_str(p, v.text, strnlen(v.text, DS_NAME_MAX - 1), text);
}

static inline char *put_WORD(char *p, const ds_word v, bool text, const char *limit)
{
    (void)limit;
    if (v.len == 0)
        return ds_put_null(p, text);
    return ds_put_slot(p, v.slot, v.len < DS_WORD_SLOT ? v.len : DS_WORD_SLOT - 1, text);
}

static inline char *put_INTS(char *p, ds_ints v, bool text, const char *limit)
{
    if (!v.v)
        return ds_put_null(p, text);
    if (v.n < 0 || v.n > DS_MAX_NDIM || limit - p < (ptrdiff_t)DS_MOST_INTS(v.n))
        return NULL;
    return ds_put_ints(p, v.v, v.n);
}

static inline char *put_WORDS(char *p, ds_words v, bool text, const char *limit)
{
    return ds_put_words(p, limit, v.v, v.n, text);
}

/* ---- the writers ---------------------------------------------------------- */
/* A field: its separator and key, then its value.  `text` is a constant in
 * each of the two expansions, so every test of it folds away. */
#define KEY_JSON(name) ",\"" #name "\":"
#define KEY_TEXT(name) " " #name "="
#define PUT_FIELD(KEY, text, kind, name, present)                              \
    if (present) {                                                             \
        memcpy(p, KEY(name), sizeof(KEY(name)) - 1);                           \
        p = put_##kind(p + sizeof(KEY(name)) - 1, f->name, text, limit);       \
        if (!p)                                                                \
            return NULL;                                                       \
    }
#define JSON_FIELD(kind, name, present) PUT_FIELD(KEY_JSON, false, kind, name, present)
#define TEXT_FIELD(kind, name, present) PUT_FIELD(KEY_TEXT, true, kind, name, present)
/* What an event's unchecked fields take at most, keys included. */
#define MOST(kind, name, present) +(sizeof(KEY_JSON(name)) - 1 + MOST_##kind) /* NOLINT(bugprone-macro-parentheses): a term of a sum */

/* Per event: its fields at p, in one rendering and the other (NULL where a
 * checked one does not end before `limit`); the builder's field run,
 * ds_ev_<event>; and the whole event, ds_emit_<event>. */
#define FLAT_WRITER(event, ID)                                                 \
    _Static_assert(0 DS_FIELDS_##ID(MOST) <= DS_EV_SLACK,                      \
                   #event "'s bounded fields are over the slack");             \
    static char *event##_json(char *p, const char *limit, const ds_##event##_fields *f) \
    {                                                                          \
        DS_FIELDS_##ID(JSON_FIELD)                                             \
        return p;                                                              \
    }                                                                          \
    static char *event##_text(char *p, const char *limit, const ds_##event##_fields *f) \
    {                                                                          \
        DS_FIELDS_##ID(TEXT_FIELD)                                             \
        return p;                                                              \
    }                                                                          \
    void ds_ev_##event(ds_ev *e, const ds_##event##_fields *f)                 \
    {                                                                          \
        if (e->overflow)                                                       \
            return;                                                            \
        char *p = e->text ? event##_text(e->p, e->limit, f)                   \
                          : event##_json(e->p, e->limit, f);                  \
        if (p && p <= e->limit)                                                \
            e->p = p;                                                          \
        else                                                                   \
            ds_ev_overflow(e);                                                 \
    }                                                                          \
    void ds_emit_##event(const ds_##event##_fields *f)                         \
    {                                                                          \
        uint64_t ns = ds_now_ns();                                             \
        ds_context c;                                                          \
        bool context = ds_context_wanted() && capture(&c, DS_EV_##ID);         \
        char *line = direct(ns);                                               \
        if (!line) {                                                           \
            ds_ev e;                                                           \
            ds_ev_begin(&e, DS_EV_##ID);                                       \
            ds_ev_##event(&e, f);                                              \
            ds_ev_end(&e);                                                     \
            return;                                                            \
        }                                                                      \
        bool text = ds_cfg.format == DS_FORMAT_TEXT;                           \
        const char *limit = line + DS_LINE_MAX - DS_EV_RESERVE;                \
        char *p = ds_put_head(line, DS_EV_##ID, ns, text);                     \
        if (context)                                                           \
            p = ds_put_context(p, limit, &c, text);                            \
        if (p)                                                                 \
            p = text ? event##_text(p, limit, f) : event##_json(p, limit, f);  \
        finish(p, limit, text, ns);                                            \
    }

/* Where a whole event is written in the log's own buffer, under its lock:
 * no trace beside the log (it reads the JSON), and the buffer open.  The
 * line is written there directly, rather than built on the stack and
 * copied: the copy was a tenth of an event.  Nothing done between
 * ds_log_reserve and ds_log_commit takes a lock or calls out of the shim
 * (the context is gathered before), so the lock is held for the writing
 * alone, and lines keep the order their events had. */
static char *direct(uint64_t ns)
{
    if (atomic_load_explicit(&ds_outputs, memory_order_relaxed) != DS_OUT_LOG)
        return NULL;
    return ds_log_reserve(ns);
}

/* The context, gathered before the log's lock is taken: finding the
 * Python line may ask Python.  True when it has any field. */
static bool capture(ds_context *c, int id)
{
    ds_context_capture(c, id);
    return c->any;
}

/* The line's end, and the line kept or dropped (longer than DS_LINE_MAX:
 * dropped whole and counted, as the builder drops it). */
static void finish(char *p, const char *limit, bool text, uint64_t ns)
{
    if (!p || p > limit) {
        ds_log_cancel();
        ds_log_count_drop();
        return;
    }
    if (!text)
        *p++ = '}';
    *p++ = '\n';
    ds_log_commit(p, ns);
}

DS_FLAT_EVENTS(FLAT_WRITER)
