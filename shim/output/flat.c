/*
 * flat.c — the writers of the frequent events, generated from fields.def.
 *
 * A handoff writes three events (export, import, release), and a program
 * that logs them pays for every field.  The field-by-field
 * builder (event.c) asks at each one where the line ends, which rendering
 * it is and what separates it; here each event's fields are one run of
 * code with the line's end in a register, the rendering decided once, and
 * every key with its separator a constant: `,"bytes":` in JSON, ` bytes=`
 * in text, a store or two.
 *
 * Room: the builder keeps e->p at or before e->limit, and the event's
 * buffer holds DS_EV_SLACK bytes past it (ev.h).  A field of bounded
 * size is written unchecked, since an event's bounded fields together fit
 * the slack (checked below at compile time); a field of variable size
 * (arrays) checks that it ends before e->limit.  An event whose line then
 * ends past e->limit is longer than DS_LINE_MAX and is dropped whole, as
 * the builder would have dropped it.
 */
#include <string.h>

#include "output/output.h"

/* ---- each kind of field: its most bytes (0: checked), and its writer ---- */
#define MOST_HEX DS_MOST_HEX
#define MOST_UINT DS_MOST_UINT
#define MOST_BOOL DS_MOST_BOOL
#define MOST_NAME DS_MOST_NAME
#define MOST_NAME_OR_NULL DS_MOST_NAME
#define MOST_LABEL DS_MOST_NAME
#define MOST_WORD (DS_WORD_SLOT + 2)
#define MOST_INTS DS_MOST_NULL /* and the rest checked */
#define MOST_WORDS 2           /* an empty array, and the rest checked */

/* ---- arrays, remembered ---------------------------------------------------
 * A program exports tensors of a few shapes over and over, and writing the
 * digits of a shape and its strides was a sixth of an export event: the
 * last rendering of a few short arrays is kept, and copied when an array
 * comes again.  A table per slot of the log's lines, used only while the
 * slot is held (the direct path below), which makes it this thread's alone
 * meanwhile (or one of the threads sharing slot 0): a signal handler never
 * writes there, as ds_log_reserve refuses a thread that holds a shim lock. */
#define MEMO_SLOTS 8 /* a power of two */
#define MEMO_DIMS 4
#define MEMO_BYTES 32
typedef struct {
    uint8_t len; /* 0: empty (an array takes at least "[]") */
    int n;
    int64_t v[MEMO_DIMS];
    char text[MEMO_BYTES];
} memo_slot;
static struct {
    _Alignas(64) memo_slot slot[MEMO_SLOTS]; /* a table's lines its slot's alone */
} memo[DS_LOG_SLOTS];

/* Out of line, so that the common cases below save no registers: an
 * array written afresh, and (`slot`) remembered. */
static __attribute__((noinline)) char *put_ints_afresh(char *p, const int64_t *v, int n,
                                                        memo_slot *slot)
{
    char *end = ds_put_ints(p, v, n);
    size_t len = (size_t)(end - p);
    if (slot && len <= MEMO_BYTES) {
        memcpy(slot->text, p, len);
        memcpy(slot->v, v, (size_t)n * sizeof(*v));
        slot->n = n;
        slot->len = (uint8_t)len;
    }
    return end;
}

/* The array v[n] (n <= MEMO_DIMS) from its slot, with room for
 * DS_MOST_INTS(n) and MEMO_BYTES checked. */
static inline char *put_ints_remembered(char *p, const int64_t *v, int n, memo_slot *table)
{
    uint64_t h = (uint64_t)n;
    for (int i = 0; i < n; i++)
        h = (h ^ (uint64_t)v[i]) * 0x9e3779b97f4a7c15ull;
    memo_slot *m = &table[h >> 61 & (MEMO_SLOTS - 1)];
    bool same = m->len && m->n == n;
    for (int i = 0; same && i < n; i++)
        same = m->v[i] == v[i];
    if (!same)
        return put_ints_afresh(p, v, n, m);
    memcpy(p, m->text, MEMO_BYTES); /* the whole slot, a few moves */
    return p + m->len;
}

/* Each returns the value's end, or NULL where a checked value does not
 * end before `limit`.  `locked`: written in a slot of the log under its
 * lock, where the table of arrays above may be used. */
static inline char *put_HEX(char *p, uintptr_t v, bool text, const char *limit, memo_slot *locked)
{
    (void)limit, (void)locked;
    return ds_put_hex(p, v, text);
}

static inline char *put_UINT(char *p, uint64_t v, bool text, const char *limit, memo_slot *locked)
{
    (void)text, (void)limit, (void)locked;
    return ds_put_uint(p, v);
}

static inline char *put_BOOL(char *p, bool v, bool text, const char *limit, memo_slot *locked)
{
    (void)text, (void)limit, (void)locked;
    return ds_put_bool(p, v);
}

static inline char *put_NAME(char *p, uint16_t id, bool text, const char *limit, memo_slot *locked)
{
    (void)limit, (void)locked;
    return ds_put_name(p, id, text);
}

static inline char *put_NAME_OR_NULL(char *p, int32_t id, bool text, const char *limit, memo_slot *locked)
{
    (void)limit, (void)locked;
    return id < 0 ? ds_put_null(p, text) : ds_put_name(p, (uint16_t)id, text);
}

static inline char *put_LABEL(char *p, ds_label v, bool text, const char *limit, memo_slot *locked)
{
    (void)limit, (void)locked;
    if (!v.text)
        return ds_put_name(p, v.id, text);
    return ds_put_str(p, v.text, strnlen(v.text, DS_NAME_MAX - 1), text);
}

static inline char *put_WORD(char *p, const ds_word v, bool text, const char *limit, memo_slot *locked)
{
    (void)limit, (void)locked;
    if (v.len == 0)
        return ds_put_null(p, text);
    return ds_put_slot(p, v.slot, v.len < DS_WORD_SLOT ? v.len : DS_WORD_SLOT - 1, text);
}

static inline char *put_INTS(char *p, ds_ints v, bool text, const char *limit, memo_slot *locked)
{
    if (!v.v)
        return ds_put_null(p, text);
    if (v.n < 0 || v.n > DS_MAX_NDIM || limit - p < (ptrdiff_t)DS_MOST_INTS(v.n))
        return NULL;
    if (locked && v.n <= MEMO_DIMS && limit - p >= MEMO_BYTES)
        return put_ints_remembered(p, v.v, v.n, locked);
    return put_ints_afresh(p, v.v, v.n, NULL);
}

static inline char *put_WORDS(char *p, ds_words v, bool text, const char *limit, memo_slot *locked)
{
    (void)locked;
    if (v.n == 0) /* flags, nearly always: no call */
        return ds_put_bytes(p, "[]", 2);
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
        p = put_##kind(p + sizeof(KEY(name)) - 1, f->name, text, limit, locked); \
        if (!p)                                                                \
            return NULL;                                                       \
    }
#define JSON_FIELD(kind, name, present) PUT_FIELD(KEY_JSON, false, kind, name, present)
#define TEXT_FIELD(kind, name, present) PUT_FIELD(KEY_TEXT, true, kind, name, present)
/* What an event's unchecked fields take at most, keys included. */
#define MOST(kind, name, present) +(sizeof(KEY_JSON(name)) - 1 + MOST_##kind) /* NOLINT(bugprone-macro-parentheses): a term of a sum */

/* Per event: its fields at p, in one rendering and the other (NULL where a
 * checked one does not end before `limit`); the builder's field run,
 * ds_ev_<event>; and the whole event at time `ns`, ds_emit_<event>. */
#define FLAT_WRITER(event, ID)                                                 \
    _Static_assert(0 DS_FIELDS_##ID(MOST) <= DS_EV_SLACK,                      \
                   #event "'s bounded fields are over the slack");             \
    static char *event##_json(char *p, const char *limit, const ds_##event##_fields *f, \
                              memo_slot *locked)                                     \
    {                                                                          \
        DS_FIELDS_##ID(JSON_FIELD)                                             \
        return p;                                                              \
    }                                                                          \
    static char *event##_text(char *p, const char *limit, const ds_##event##_fields *f, \
                              memo_slot *locked)                                     \
    {                                                                          \
        DS_FIELDS_##ID(TEXT_FIELD)                                             \
        return p;                                                              \
    }                                                                          \
    void ds_ev_##event(ds_ev *e, const ds_##event##_fields *f)                 \
    {                                                                          \
        if (e->overflow)                                                       \
            return;                                                            \
        char *p = e->text ? event##_text(e->p, e->limit, f, NULL)             \
                          : event##_json(e->p, e->limit, f, NULL);            \
        if (p && p <= e->limit)                                                \
            e->p = p;                                                          \
        else                                                                   \
            ds_ev_overflow(e);                                                 \
    }                                                                          \
    void ds_emit_##event(const ds_##event##_fields *f, uint64_t ns)            \
    {                                                                          \
        ds_emit_##event##_with(f, ns, NULL);                                   \
    }                                                                          \
    void ds_emit_##event##_with(const ds_##event##_fields *f, uint64_t ns,    \
                                const ds_context *given)                       \
    {                                                                          \
        ds_context c;                                                          \
        const ds_context *ctx = given;                                         \
        if (!ctx && ds_context_wanted() && capture(&c, DS_EV_##ID))            \
            ctx = &c;                                                          \
        char *line = direct(ns);                                               \
        if (!line) {                                                           \
            ds_ev e;                                                           \
            ds_ev_begin_with(&e, DS_EV_##ID, e.line, sizeof(e.line), ns, ctx); \
            ds_ev_##event(&e, f);                                              \
            ds_ev_end(&e);                                                     \
            return;                                                            \
        }                                                                      \
        bool text = ds_cfg.format == DS_FORMAT_TEXT;                           \
        const char *limit = line + DS_LINE_MAX - DS_EV_RESERVE;                \
        char *p = ds_put_head(line, DS_EV_##ID, ns, text);                     \
        if (ctx && ctx->any)                                                   \
            p = ds_put_context(p, limit, ctx, text);                           \
        if (p)                                                                 \
            p = text ? event##_text(p, limit, f, memo[ds_log_own_slot - 1u].slot) \
                     : event##_json(p, limit, f, memo[ds_log_own_slot - 1u].slot); \
        finish(p, limit, text, ns);                                            \
    }

/* Where a whole event is written in the log's own buffer, under its lock:
 * no trace beside the log (it reads the JSON), and the buffer open.  The
 * line is written there directly, rather than built on the stack and
 * copied: the copy was a tenth of an event.  Nothing done between
 * ds_log_reserve and ds_log_commit takes a lock or calls out of the shim
 * (the context is gathered before), so the lock is held for the writing
 * alone, and lines keep the order their events had. */
static inline __attribute__((always_inline)) char *direct(uint64_t ns)
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
static inline __attribute__((always_inline)) void finish(char *p, const char *limit, bool text,
                                                          uint64_t ns)
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
