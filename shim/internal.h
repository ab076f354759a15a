/*
 * internal.h — every prototype shared between dlshim's source files, grouped
 * by the file that defines it.  Internal names start with ds_; the library is
 * built with -fvisibility=hidden, so only DS_PUBLIC names leave it.
 */
#ifndef DS_INTERNAL_H
#define DS_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "types.h"

#define DS_PUBLIC __attribute__((visibility("default")))
#define DS_TLS __thread __attribute__((tls_model("initial-exec")))
#define DS_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define DS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
/* A pointer resolved on first use from any thread: racing threads compute
 * the same value, and the atomics make that race a defined one. */
#define DS_LAZY(var, init)                                                     \
    __extension__({                                                            \
        __typeof__(var) lazy_ = __atomic_load_n(&(var), __ATOMIC_ACQUIRE);     \
        if (!lazy_) {                                                          \
            lazy_ = (__typeof__(var))(init);                                   \
            __atomic_store_n(&(var), lazy_, __ATOMIC_RELEASE);                 \
        }                                                                      \
        lazy_;                                                                 \
    })

/* ---- init.c: start-up, shutdown, global state --------------------------- */
extern ds_config ds_cfg;
/* True when the shim is initialised and tracking, false when disabled, still
 * initialising on this thread, or a shim lock is held by this thread (a
 * signal handler or deleter re-entering the shim): callers then forward
 * untouched.  Initialises on first use, from any thread.  Every hooked call
 * asks, so the settled answer is inline and the rest in ds_active_slow. */
extern atomic_bool ds_tracking; /* state is ACTIVE (init.c keeps the two together) */
bool ds_active_slow(void);
/* lock.c, below: the locks this thread holds. */
extern DS_TLS uint32_t ds_locks_held;
static inline bool ds_active(void)
{
    if (atomic_load_explicit(&ds_tracking, memory_order_acquire))
        return ds_locks_held == 0;
    return ds_active_slow();
}
/* ds_active() where it is settled and true, without a call: false means ask
 * ds_active(). */
static inline bool ds_active_now(void)
{
    return atomic_load_explicit(&ds_tracking, memory_order_acquire) && ds_locks_held == 0;
}
/* Writes the leak report and the summary, once: at exit (`now` false: then
 * DLSHIM_EXITCODE applies too) or as the process leaves without exit
 * handlers (`now`: _exit; async-signal-safe, every lock only tried, so what
 * a lock held elsewhere guards is left out and the summary says `partial`).
 * A forked child, or a process leaving through _exit, that did nothing the
 * shim tracks writes nothing. */
void ds_finish(bool now);
/* Tests: (re)initialise from an explicit environment. */
void ds_init_with_env(char *const *envp);

/* ---- thread.c: clock, thread ids, per-thread state ---------------------- */
uint64_t ds_now_ns(void);             /* monotonic ns since the shim loaded */
uint64_t ds_now_coarse_ns(void);      /* the same at tick resolution: a few ns to read */
uint64_t ds_clock_origin_ns(void);    /* CLOCK_MONOTONIC when the shim loaded */
void ds_clock_start(void);
long ds_tid(void);
int ds_pid(void);                     /* cached; re-read after fork */
void ds_thread_after_fork(void);
bool ds_forked_child(void); /* this process began as a fork of one the shim ran in */
/* Nesting of device API calls on this thread: a runtime call that reaches
 * the driver through wrapped pointers is recorded once, by the outermost.
 * ds_api_enter returns true for the outermost call.  Inline: asked by every
 * device call, the inner ones of which do nothing else. */
extern DS_TLS unsigned ds_api_depth;
static inline bool ds_api_nested(void)
{
    return ds_api_depth != 0;
}
static inline bool ds_api_enter(void)
{
    return ds_api_depth++ == 0;
}
static inline void ds_api_leave(void)
{
    if (ds_api_depth)
        ds_api_depth--;
}

/* ---- lock.c: every shim lock, declared in locks.def ---------------------- */
enum ds_lock_id {
#define DS_LOCK(ID, kind, what) DS_LOCK_##ID,
#include "locks.def"
#undef DS_LOCK
    DS_LOCK_COUNT
};
enum { DS_KIND_SPIN, DS_KIND_MUTEX, DS_KIND_RW };
static const unsigned char ds_lock_kind[DS_LOCK_COUNT] = {
#define DS_LOCK(ID, kind, what) [DS_LOCK_##ID] = DS_KIND_##kind,
#include "locks.def"
#undef DS_LOCK
};
typedef union {
    atomic_bool spin; /* one atomic exchange to take, a release store to give back */
    pthread_mutex_t mutex;
    pthread_rwlock_t rw;
} ds_lock_cell;
extern ds_lock_cell ds_lock_cells[DS_LOCK_COUNT];
/* The locks this thread holds or waits for, a bit each: set before a lock is
 * taken and cleared after it is given back, so that a signal handler (or a
 * deleter run from inside the shim) entering a hook on this thread sees it
 * and forwards untouched (ds_active) instead of waiting for itself. (Declared
 * above ds_active.) */
static inline bool ds_holds_lock(void)
{
    return ds_locks_held != 0;
}
static inline bool ds_holds(int id)
{
    return (ds_locks_held >> id) & 1u;
}
void ds_lock_order_check(int id); /* aborts when a lock is taken out of order */
void ds_spin_wait(atomic_bool *held);
void ds_lock_slow_take(int id, bool read);
void ds_lock_slow_give(int id);
/* Takes lock `id` (a reader's share of an RW lock with ds_lock_read).
 * Always inline, as ds_lock_give: `id` is a constant at the hot calls, and
 * each folds to one exchange or store, where GCC had made an out-of-line
 * copy of ds_lock_give (~18 instructions a call, twice a round trip). */
__attribute__((always_inline)) static inline void ds_lock_take(int id)
{
#ifdef DS_DEBUG_LOCKS
    ds_lock_order_check(id);
#endif
    ds_locks_held |= 1u << id;
    if (ds_lock_kind[id] == DS_KIND_SPIN) {
        if (atomic_exchange_explicit(&ds_lock_cells[id].spin, true, memory_order_acquire))
            ds_spin_wait(&ds_lock_cells[id].spin);
    } else {
        ds_lock_slow_take(id, false);
    }
}
static inline void ds_lock_read(int id)
{
#ifdef DS_DEBUG_LOCKS
    ds_lock_order_check(id);
#endif
    ds_locks_held |= 1u << id;
    ds_lock_slow_take(id, true);
}
__attribute__((always_inline)) static inline void ds_lock_give(int id)
{
    if (ds_lock_kind[id] == DS_KIND_SPIN)
        atomic_store_explicit(&ds_lock_cells[id].spin, false, memory_order_release);
    else
        ds_lock_slow_give(id);
    ds_locks_held &= ~(1u << id);
}
/* Spin lock `id` taken if it is free now (as ds_lock_take would): false,
 * not taken, while another thread holds it.  For a fast way that hands over
 * to a slower one which waits, rather than waiting itself: then it calls
 * nothing, and costs no frame. */
static inline bool ds_spin_take_now(int id)
{
#ifdef DS_DEBUG_LOCKS
    ds_lock_order_check(id);
#endif
    ds_locks_held |= 1u << id;
    if (!atomic_exchange_explicit(&ds_lock_cells[id].spin, true, memory_order_acquire))
        return true;
    ds_locks_held &= ~(1u << id);
    return false;
}
/* Takes it if it comes within about a millisecond (never when this thread
 * holds it already): for the summary at _exit, which must not wait for a
 * thread that is about to vanish. */
bool ds_lock_try(int id, bool read);
/* One attempt, in any order (no wait, so no deadlock): false when not taken. */
bool ds_lock_try_now(int id, bool read);
/* The process is leaving without exit handlers (ds_finish(true)): from then
 * on the summary's locks are only tried (ds_lock_take_bounded). */
extern atomic_bool ds_leaving;
/* ds_lock_take, or while leaving ds_lock_try: false when not taken. */
static inline bool ds_lock_take_bounded(int id)
{
    if (atomic_load_explicit(&ds_leaving, memory_order_relaxed))
        return ds_lock_try(id, false);
    ds_lock_take(id);
    return true;
}
/* fork(): every lock taken in order before, given back in the parent, made
 * fresh in the child.  False from PREPARE when none could be taken (this
 * thread holds one: fork from a handler that interrupted the shim). */
typedef enum { DS_FORK_PREPARE, DS_FORK_PARENT, DS_FORK_CHILD } ds_fork_phase;
bool ds_locks_fork(ds_fork_phase phase);

/* ---- fmt.c: the one formatter (never allocates) and diagnostics --------- */
/* printf subset: %s %c %d %i %u %x %p %%, flags '-' '0', width, l/ll/z.
 * Always NUL-terminates; returns the length written (truncated to cap-1). */
size_t ds_fmt(char *buf, size_t cap, const char *fmt, ...) DS_PRINTF(3, 4);
size_t ds_vfmt(char *buf, size_t cap, const char *fmt, va_list ap);
/* "dlshim: <message>\n" on stderr; at most DS_DIAG_MAX per process. */
void ds_diag(const char *fmt, ...) DS_PRINTF(1, 2);
/* Copies at most cap-1 bytes of s, replacing control bytes by '?'. */
void ds_printable(char *out, size_t cap, const char *s, size_t n);

/* ---- config.c: the option table at run time ----------------------------- */
void ds_config_defaults(ds_config *c);
/* Parses every DLSHIM_* entry of envp; bad values warn and keep defaults. */
void ds_config_load(ds_config *c, char *const *envp);
void ds_config_dump(const ds_config *c);
const char *ds_event_name(int id);
const char *ds_violation_name(int kind);

/* ---- log.c: the event sink ---------------------------------------------- */
/* Opens DLSHIM_LOG (stderr/off/path with %p); falls back to stderr. */
void ds_log_open(const char *spec);
void ds_log_after_fork(void);
bool ds_log_enabled(void);
/* Writes one complete line, or buffers it (see log.c); a failed or short
 * write drops what it carried and counts it.  false: this line or lines
 * flushed with it were lost. */
bool ds_log_write(const char *line, size_t len);
/* The same for a line of an event at `now` (ds_now_ns), which ages the
 * buffer without reading the clock again. */
bool ds_log_write_at(const char *line, size_t len, uint64_t now);
/* A line written in the buffer itself: where it goes, with DS_LINE_MAX +
 * DS_EV_SLACK bytes of room, the buffer's lock taken (what it held was
 * written first if it had not that room or had waited too long); NULL,
 * nothing taken, where the log has no such buffer or this thread may not
 * take its lock now.  Then ds_log_commit with the line's end (its newline
 * included), or ds_log_cancel to write nothing. */
char *ds_log_reserve(uint64_t now);
void ds_log_commit(const char *end, uint64_t now);
void ds_log_cancel(void);
/* Writes what the buffer holds (violations, exit, _exit). */
bool ds_log_flush(void);
void ds_log_before_fork(void); /* every lock held */
void ds_log_write_stderr(const char *line, size_t len);
void ds_log_count_drop(void);
uint64_t ds_log_dropped(void);
/* Opens an output file (`%p` expanded; 0600, O_NOFOLLOW, O_APPEND, refused
 * if another user's; emptied first when `truncate`).  -1 after one
 * diagnostic naming `option`. */
int ds_output_open(const char *spec, const char *option, bool truncate);
/* Whether the path names one file per process (%p, or %r without a rank):
 * a forked child then opens its own. */
bool ds_output_per_pid(const char *spec);

/* ---- text.c: an event's JSON as its text line (a text log beside a trace) - */
/* Rewrites an event's JSON (len bytes, no newline, room for one more byte)
 * in place as its text line, newline included.  Returns the new length, or
 * 0 if the line is not the writer's JSON. */
size_t ds_text_from_json(char *line, size_t len);

/* ---- trace.c: DLSHIM_TRACE, the Chrome trace ---------------------------- */
void ds_trace_open(const char *spec); /* "" leaves tracing off */
bool ds_trace_enabled(void);
/* One event's JSON object (no newline) as trace records. */
void ds_trace_event(int id, const char *json, size_t len);
void ds_trace_after_fork(void);
void ds_trace_close(void); /* writes the closing "]" */

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
/* ---- a text many threads read while one thread now and then rewrites it --
 * (the running test's name, the latest violation's line): a sequence counter,
 * odd while the text is written, and the text copied as atomic words
 * (release stores, acquire loads), so that neither side waits and a reader
 * that raced a writer sees the counter moved and leaves the text out.
 * Words rather than fences: ThreadSanitizer does not model fences.  The
 * sizes passed are multiples of 8 bytes, at most sizeof words. */
typedef struct {
    atomic_uint seq;
    uint64_t words[DS_WHERE_MAX / 8 > DS_TEST_MAX / 8 ? DS_WHERE_MAX / 8 : DS_TEST_MAX / 8];
} ds_seq_text;
/* Copies `text` in (cut to `cap` - 1 bytes, cap ≤ sizeof words); false when
 * another writer is at it (the text stays theirs). */
bool ds_seq_text_set(ds_seq_text *t, const char *text, size_t cap);
/* Copies it out into `out` (cap bytes, a multiple of 8); false when it was
 * never set, is empty, or changed meanwhile.  Never set, the common case
 * (no test runner: every event asks), is told here without a call. */
bool ds_seq_text_copy(ds_seq_text *t, char *out, size_t cap);
static inline bool ds_seq_text_get(ds_seq_text *t, char *out, size_t cap)
{
    return atomic_load_explicit(&t->seq, memory_order_relaxed) != 0 &&
           ds_seq_text_copy(t, out, cap);
}

/* ---- context (context.c): rank, test, source line ------------------------ */
void ds_context_init(char *const *envp); /* reads the rank */
int ds_rank(void);          /* -1: none known */
void ds_context_set_locator(const ds_locator *l);
void ds_context_set_test(const char *name); /* NULL or "": no test runs */
/* The source location of the calling thread (ds_locator.here); 0: none. */
size_t ds_context_where(char *out, size_t cap);
/* `py_stack`: up to max frames, when there are any. */
void ds_context_stack_field(ds_ev *e, int max);
/* `py`, `rank`, `test`: the first fields of every event, gathered before
 * its line is written (the line may be written under the log's lock). */
typedef struct {
    bool any; /* any of these */
    bool has_where, has_test;
    int rank; /* -1: none */
    ds_where where;
    char scratch[DS_WHERE_MAX]; /* the location's text, where its family keeps none */
    char test[DS_TEST_MAX];
} ds_context;
/* Most programs have none of them (no interpreter, no rank, no test
 * runner): their events skip the gathering on one flag, set when any could
 * be there. */
extern atomic_bool ds_context_any;
static inline bool ds_context_wanted(void)
{
    return atomic_load_explicit(&ds_context_any, memory_order_relaxed);
}
void ds_context_capture(ds_context *c, int event_id);
/* c's fields at p, each with its separator; NULL if they do not end
 * before `limit`. */
char *ds_put_context(char *p, const char *limit, const ds_context *c, bool text);

/* ---- names.c: interned producer/consumer names -------------------------- */
#define DS_NAME_UNKNOWN 0
#define DS_NAME_OTHER 1 /* every name past the table's size */
uint16_t ds_name_intern(const char *name);
const char *ds_name(uint16_t id);
/* A name as events write it, quotes and escapes included, in JSON or in
 * text: rendered once, when the name is interned.  NULL when a rendering is
 * longer than DS_RENDERED_MAX (the event escapes the name itself). */
#define DS_RENDERED_MAX 63
typedef struct {
    char bytes[DS_RENDERED_MAX];
    uint8_t len; /* 0: longer than the slot */
} ds_rendered;   /* 64 bytes: a slot is found by a shift */
const ds_rendered *ds_name_rendered(uint16_t id, bool text);
/* A constant name (an API's, for the events) interned on first use. */
#define DS_NAME_ONCE(text)                                                       \
    __extension__({                                                              \
        static _Atomic uint16_t once_;                                           \
        uint16_t id_ = atomic_load_explicit(&once_, memory_order_relaxed);       \
        if (!id_) {                                                              \
            id_ = ds_name_intern(text);                                          \
            atomic_store_explicit(&once_, id_, memory_order_relaxed);            \
        }                                                                        \
        id_;                                                                     \
    })

/* ---- the event writer (event.c, flat.c; values: output/put.h, put.c) ----
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
#include "output/put.h"

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
char *ds_put_double(char *p, double v, bool text); /* put.c; NaN and infinities: null */
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

/* A string, n bytes: JSON-escaped and quoted; in text quoted only when
 * empty or holding a space, with quotes and control bytes as '?'.  Invalid
 * UTF-8 becomes U+FFFD in both.  At most DS_MOST_STR(n) bytes (put.c). */
char *ds_put_str(char *p, const char *s, size_t n, bool text);
/* The same into cap bytes; NULL when it does not fit. */
char *ds_put_str_bounded(char *p, size_t cap, const char *s, size_t n, bool text);
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
/* JSON string body escaping; invalid UTF-8 becomes U+FFFD.  Returns the
 * bytes written, or (size_t)-1 if it did not fit.  Exposed for tests. */
size_t ds_json_escape(char *out, size_t cap, const char *s, size_t n);

/* ---- flat.c: the generated writers of fields.def ---------------------------
 * Each flat event's fields as a struct, ds_<event>_fields, and its writer
 * ds_ev_<event>(e, fields), from the event's row list in fields.def; and
 * ds_emit_<event>(fields, ns), the whole event at `ns` (ds_now_ns: a caller
 * that read the clock for its record passes that time, as a clock read is
 * a tenth of an event): head, context and fields written in the log's
 * buffer itself where that is open, else built and written as any event.  A
 * field's kind gives its member's C type: */
typedef struct { /* a name, or the text the program gave where the table is full */
    uint16_t id;
    const char *text; /* NULL: the name; else at most DS_NAME_MAX - 1 bytes */
} ds_label;
typedef struct { /* a word in its slot; len 0: null */
    char slot[DS_WORD_SLOT];
    uint8_t len;
} ds_word;
typedef struct { /* NULL: null */
    const int64_t *v;
    int n;
} ds_ints;
typedef struct {
    const char *const *v;
    int n;
} ds_words;
#define DS_FLAT_TYPE_HEX uintptr_t
#define DS_FLAT_TYPE_UINT uint64_t
#define DS_FLAT_TYPE_BOOL bool
#define DS_FLAT_TYPE_NAME uint16_t
#define DS_FLAT_TYPE_NAME_OR_NULL int32_t /* -1: null */
#define DS_FLAT_TYPE_LABEL ds_label
#define DS_FLAT_TYPE_WORD ds_word
#define DS_FLAT_TYPE_INTS ds_ints
#define DS_FLAT_TYPE_WORDS ds_words
#include "fields.def"
#define DS_FLAT_MEMBER(kind, name, present) DS_FLAT_TYPE_##kind name;
#define DS_FLAT_DECLARE(event, ID)                                             \
    typedef struct {                                                           \
        DS_FIELDS_##ID(DS_FLAT_MEMBER)                                         \
    } ds_##event##_fields;                                                     \
    void ds_ev_##event(ds_ev *e, const ds_##event##_fields *f);             \
    void ds_emit_##event(const ds_##event##_fields *f, uint64_t ns);
DS_FLAT_EVENTS(DS_FLAT_DECLARE)
#undef DS_FLAT_DECLARE
#undef DS_FLAT_MEMBER

/* ---- safe_mem.c: reading and writing memory the program handed us ------- */
/* Pages a syscall proved readable or writable, by page number in a small
 * direct-mapped cache (safe_mem.c says why and what it trades).  Declared
 * here so that the common case, a range within one proven page, is decided
 * in the caller: a handoff makes about ten such accesses. */
#define DS_PAGE 4096u
#define DS_PAGE_CACHE 1024u /* entries per cache, a power of two */
extern atomic_uintptr_t ds_readable_pages[DS_PAGE_CACHE], ds_writable_pages[DS_PAGE_CACHE];

static inline atomic_uintptr_t *ds_page_slot(atomic_uintptr_t *cache, uintptr_t page)
{
    return &cache[(page ^ (page >> 10)) & (DS_PAGE_CACHE - 1)];
}

static inline bool ds_page_proven(atomic_uintptr_t *cache, uintptr_t page)
{
    return atomic_load_explicit(ds_page_slot(cache, page), memory_order_relaxed) == page;
}

/* n > 0 bytes at `p` lie within one proven page.  Page 0 never counts: its
 * slot starts out holding 0. */
static inline bool ds_within_proven_page(atomic_uintptr_t *cache, const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p, page = a / DS_PAGE;
    return n - 1 < DS_PAGE - (a & (DS_PAGE - 1)) && page != 0 && ds_page_proven(cache, page);
}

/* A copy of bytes already proven accessible (never instrumented, see
 * safe_mem.c), and the general paths through the kernel. */
void ds_plain_copy(void *dst, const void *src, size_t n);
size_t ds_safe_read_any(void *dst, const void *src, size_t n);
bool ds_safe_write_any(void *dst, const void *src, size_t n);

/* Copies up to n bytes; stops at the first unreadable byte.  Returns the
 * count copied.  Never faults. */
static inline size_t ds_safe_read(void *dst, const void *src, size_t n)
{
    if (!ds_within_proven_page(ds_readable_pages, src, n))
        return ds_safe_read_any(dst, src, n);
    ds_plain_copy(dst, src, n);
    return n;
}

static inline bool ds_safe_write(void *dst, const void *src, size_t n)
{
    if (!ds_within_proven_page(ds_writable_pages, dst, n))
        return ds_safe_write_any(dst, src, n);
    ds_plain_copy(dst, src, n);
    return true;
}
/* Reads a NUL-terminated string of at most cap-1 bytes; NULL or unreadable
 * gives `fallback`. */
void ds_safe_string(char *out, size_t cap, const char *s, const char *fallback);

/* ---- dlpack.c: reading, checking and naming DLPack structures ----------- */
/* Reading the managed tensor at `p` takes two steps, so that a caller may
 * stop after the first: the struct itself (v->readable, the deleter and the
 * DLTensor's fields as they are), then the DLTensor checked and its shape
 * copied, and its strides too when `keep_strides` (else they may only be
 * proven readable: v->has_strides says which).  Each returns true when all
 * is well; otherwise `why` holds one sentence naming the first problem. */
bool ds_dlpack_read_struct(const void *p, bool versioned, ds_tensor_view *v, char *why,
                           size_t why_cap);
bool ds_dlpack_check(ds_tensor_view *v, bool keep_strides, char *why, size_t why_cap);
void ds_dtype_name(char *out, size_t cap, DLDataType d);
void ds_device_name(char *out, size_t cap, DLDevice d);
/* Flag names, e.g. {"read_only","is_copied"}; returns how many. */
int ds_flag_names(uint64_t flags, const char **out, int max);

/* ---- registry.c: tensor records keyed by address ------------------------ */
void ds_reg_init(size_t max_records);
static inline void ds_reg_lock(void)
{
    ds_lock_take(DS_LOCK_REGISTRY);
}
static inline void ds_reg_unlock(void)
{
    ds_lock_give(DS_LOCK_REGISTRY);
}
void ds_reg_after_fork(void);
/* Lock held.  Pointers stay valid until the next ds_reg_insert. */
ds_record *ds_reg_find(uintptr_t key);
/* Lock held.  A cleared record with `key` (replacing any record with that
 * key), or NULL when the table is full of live records. */
ds_record *ds_reg_insert(uintptr_t key);
/* Lock held: `r`, found by ds_reg_find, cleared for a new record with its
 * key (what ds_reg_insert would return, without probing again). */
ds_record *ds_reg_renew(ds_record *r);
/* Lock held: a number above every earlier answer (release order where no
 * clock is read, tensor.c). */
uint64_t ds_reg_next_stamp(void);
/* Lock held. */
void ds_reg_foreach(void (*fn)(const ds_record *r, void *arg), void *arg);
uint64_t ds_reg_evicted(void);

/* ---- stats.c: counters and the exit summary ----------------------------- */
void ds_stats_share(uint16_t producer, uint16_t consumer, uint64_t bytes, bool zero_copy); /* lock held */
/* Lock held: a share counted as zero-copy turned out a copy (the consumer
 * copied its bytes on import, ds_release_context.copy_on_import). */
void ds_stats_copied(uint16_t producer, uint16_t consumer, uint64_t bytes);
void ds_stats_violation(int kind);
uint64_t ds_stats_violations(void);
/* The latest violation (its kind and source line, DS_WHERE_MAX bytes), kept
 * for dlshim_status; false when there was none. */
void ds_stats_last_violation(int kind);
bool ds_stats_latest_violation(int *kind, char *where);
/* Shares exported and never released, now (walks the records). */
uint64_t ds_stats_outstanding(void);
void ds_stats_untracked(void);
void ds_stats_after_fork(void);
void ds_stats_roundtrip(uint16_t from_owner, uint16_t to_owner);
void ds_summary_write(void);
/* Something a summary counts happened in this process (since fork, in a
 * child): an export, import, release, allocation, free, copy, violation.
 * Cheap enough for every handoff: a load, and a store the first time. */
extern atomic_bool ds_worked;
static inline void ds_note_work(void)
{
    if (!atomic_load_explicit(&ds_worked, memory_order_relaxed))
        atomic_store_explicit(&ds_worked, true, memory_order_relaxed);
}

/* ---- violation.c: reporting a violation --------------------------------- */
int ds_backtrace_capture(void **frames, int max);
/* A "backtrace" array field: the frames outside the shim, at most
 * DLSHIM_BACKTRACE of them, rendered as "symbol+0xoff (module)". */
void ds_backtrace_field(ds_ev *e, void *const *frames, int n);
/* Counts and logs a violation about the object at `addr` (`subject` is the
 * field name: "tensor" or "data"), then applies DLSHIM_ON_ERROR: returns true
 * when the caller must prevent the harmful action (protect); aborts the
 * process with `abort`. */
bool ds_violation(int kind, const char *subject, uintptr_t addr, const char *detail);
/* The same, with more fields written by fields(e, arg) after `detail`. */
bool ds_violation_with(int kind, const char *subject, uintptr_t addr, const char *detail,
                       void (*fields)(ds_ev *e, void *arg), void *arg);

/* ---- devices.c: the device APIs hook families describe ------------------ */
/* Registers a device runtime's descriptor (kept, not copied); its index,
 * which the calls below take as `api`, or -1 when the table is full. */
int ds_device_api_add(const ds_device_api *api);
/* The descriptor of an index (one named "?" for an unknown index). */
const ds_device_api *ds_device_api_at(int index);
/* The API whose stream and event handles this one's are: the first
 * registered that drives the same devices (itself if none). */
int ds_device_api_family(int api);
/* The API whose tensors of this DLPack device type carry its handles, or -1. */
int ds_device_api_for_tensors(int32_t device_type);
/* An allocation's DLPack device name: "cuda:0", "cuda_managed:1", … */
void ds_alloc_device_name(char *out, size_t cap, const ds_alloc_info *a);

/* ---- allocs.c: device allocations and the policy for frees -------------- */
/* After a successful allocation; `owner`: the calling module's name id. */
void ds_alloc_record(const ds_alloc_info *a, uint16_t owner);
/* The allocation holding address p. */
bool ds_alloc_lookup(uintptr_t p, ds_alloc_info *out);
/* A count bumped whenever what ds_alloc_lookup answers may change (an
 * allocation recorded or forgotten): an answer holds while the count read
 * before it was asked for is still the count. */
uint64_t ds_alloc_changes(void);
/* The allocation of `api` holding p (an address, or one of its handles). */
bool ds_alloc_lookup_in(int api, uintptr_t p, ds_alloc_info *out);
/* The allocation a tensor's data lies in: at `address` (data + byte_offset),
 * or, where `api` (ds_device_api_for_tensors of the tensor's device type,
 * -1: none) says the tensor carries one of its handles in `data`, the
 * allocation of that handle. */
bool ds_alloc_lookup_tensor(int api, uintptr_t data, uintptr_t address, ds_alloc_info *out);
/* Before forwarding a free of p: DS_FREE_FORWARD, or (protect) DS_FREE_DEFER
 * (report success, freed at the last release) / DS_FREE_REFUSE (report the
 * runtime's invalid-value error).  Reports the violations. */
int ds_alloc_free_check(uintptr_t p, int api, int kind, const char *caller);
/* After a successful free of `api`'s allocation at base. */
void ds_alloc_forget(uintptr_t base, int api, const char *caller);
void ds_alloc_share(uintptr_t base, uint32_t generation, int delta);
/* False (zeros) when leaving and the allocations' lock is held elsewhere. */
bool ds_alloc_totals(uint64_t *live, uint64_t *bytes, uint64_t *untracked_frees);
void ds_alloc_report_leaks(void);
void ds_alloc_after_fork(void);
const char *ds_alloc_kind_name(int kind);

/* ---- external.c: memory exported by one API, imported by another -------- */
/* What a descriptor refers to, read before an importer takes it over. */
bool ds_extmem_identify(int fd, ds_file_id *out);
/* `api` exported its allocation `memory` (a handle or base) as `fd`. */
void ds_extmem_exported(int api, uintptr_t memory, int fd);
/* `api` imported the descriptor `id` as its object `handle`. */
void ds_extmem_imported(int api, uintptr_t handle, const ds_file_id *id);
/* The exported allocation an import object stands for; false: unknown. */
bool ds_extmem_source(int api, uintptr_t handle, uintptr_t *base, uint32_t *generation);
void ds_extmem_destroyed(int api, uintptr_t handle);
void ds_extmem_after_fork(void);

/* ---- sync.c: the happens-before model over streams ---------------------- */
bool ds_sync_enabled(void);
/* `api`: the device API's index; its descriptor names the default streams'
 * handles and makes the barriers DLSHIM_SYNC=enforce inserts. */
void ds_sync_stream_created(int api, uintptr_t stream, bool non_blocking);
void ds_sync_stream_destroyed(int api, uintptr_t stream);
/* `ptsz`: the call is a per-thread-default-stream variant (stream 0 means
 * this thread's default stream). */
void ds_sync_event_recorded(int api, uintptr_t event, uintptr_t stream, bool ptsz);
void ds_sync_event_destroyed(int api, uintptr_t event);
void ds_sync_stream_waits(int api, uintptr_t stream, uintptr_t event, bool ptsz);
void ds_sync_host_waits_stream(int api, uintptr_t stream, bool ptsz);
void ds_sync_host_waits_event(int api, uintptr_t event);
void ds_sync_host_waits_all(int api);
/* An operation about to be queued on `stream` touching ranges r[0..n);
 * n < 0: a launch whose buffers are unknown.  Checks (or, enforced, fixes)
 * the handoffs it is the first use of, then ticks the stream's clock. */
void ds_sync_op(int api, uintptr_t stream, bool ptsz, const ds_range *r, int n,
                const void *caller);
/* The two above, where they can be done without a call (the stream
 * settled, no handoff waiting, the spin lock free, the event in its home
 * slot): true when done; false when nothing was done and the call above must
 * be made.  Inlined into the hooks: a hot wrapper's way that calls nothing
 * but the real function (device.h, DS_HOT). */
bool ds_sync_op_now(int api, uintptr_t stream, bool ptsz, const ds_range *r, int n);
bool ds_sync_event_recorded_now(int api, uintptr_t event, uintptr_t stream, bool ptsz);
/* A device tensor was imported: the last write to its bytes must be covered
 * by the consumer's first use. */
void ds_sync_import(uintptr_t tensor, uintptr_t data, uint64_t bytes, uint16_t producer,
                    uint16_t consumer);
uint64_t ds_sync_barriers(void);

/* ---- copies.c: copy accounting ------------------------------------------ */
void ds_copies_share_added(uintptr_t tensor, uintptr_t data, uint64_t bytes);
void ds_copies_share_removed(uintptr_t tensor);
/* A transfer of `bytes` (direction: enum ds_copy_dir).  Logged when it
 * touches a tracked allocation or a share (only a share when needs_share:
 * host memcpy).  `caller` is a return address in the copying module. */
void ds_copy_record(uintptr_t dst, uintptr_t src, uint64_t bytes, int direction,
                    bool needs_share, const void *caller);
/* Whether ds_copy_record of this device copy (needs_share false) would only
 * count it again, as ds_copy_repeat does: the same copy as this thread's
 * last, with nothing changed since.  Inlined into the hooks, as
 * ds_sync_op_now. */
bool ds_copy_is_repeat(uintptr_t dst, uintptr_t src, uint64_t bytes, int direction);
void ds_copy_repeat(uint64_t bytes);
/* True when the newest copy into these bytes came from another tracked
 * buffer, was no host-to-device copy and covers them; *source: where the
 * bytes came from. */
bool ds_copies_filled_by_copy(uintptr_t data, uint64_t bytes, uintptr_t *source);
void ds_copies_totals(uint64_t *count, uint64_t *bytes, uint64_t *roundtrips);
void ds_copies_after_fork(void);

/* ---- entry_spec.c: DLSHIM_ENTRY specs ------------------------------------ */
/* One spec; false with why = "column N: ..." when it does not parse. */
bool ds_entry_parse(const char *text, size_t len, ds_entry_spec *out, char *why, size_t cap);
/* A list: ';'-separated, or one per line with '#' comments (by_lines).
 * Calls fn for each good spec; a bad one is one diagnostic naming `origin`,
 * the spec or line number, the column and why. */
void ds_entry_parse_list(const char *text, size_t len, bool by_lines, const char *origin,
                         void (*fn)(const ds_entry_spec *spec, void *arg), void *arg);

/* ---- tensor.c: the DLPack ownership ledger ------------------------------ */
/* `api`: the interned name of the route the handoff took ("capsule",
 * "exchange_api", ...), which its event shows; DS_NAME_UNKNOWN shows none. */
void ds_tensor_export(void *managed, bool versioned, const char *producer, uint16_t api);
void ds_tensor_import(void *managed, bool versioned, const char *consumer, uint16_t api);
/* The same for a producer/consumer already interned (ds_module_id_at). */
void ds_tensor_export_by(void *managed, bool versioned, uint16_t producer, uint16_t api);
/* The same, unless the struct is not well formed: then nothing is recorded
 * or reported, and false returned (a producer may fill it in after making
 * its capsule; the caller exports it when it is handed over). */
bool ds_tensor_export_when_filled(void *managed, bool versioned, uint16_t producer, uint16_t api);
void ds_tensor_import_by(void *managed, bool versioned, uint16_t consumer, uint16_t api);
/* The producer's holder of an unconsumed tensor died and freed it without
 * calling its deleter (JAX's capsules do): its release, unless one was seen. */
void ds_tensor_dropped_unseen(void *managed);
/* A hook family that knows more about a release than the deleter call shows
 * registers an observer, asked (outside every lock) before each release. */
typedef struct ds_release_context {
    /* A consumer that took the tensor but whose import can only be seen
     * after this release (it lets the tensor go before it marks it taken):
     * recorded as its import of a copy, unless it is the producer. */
    uint16_t taker, taker_api;
    /* The tensor's consumer lets it go inside the very call that imported
     * it: it kept a copy (counted as one). */
    bool copy_on_import;
} ds_release_context;
typedef void (*ds_release_observer)(uintptr_t tensor, ds_release_context *ctx);
void ds_tensor_set_release_observer(ds_release_observer fn);

/* ---- elf.c: a loaded module's dynamic section and GOT -------------------- */
/* NULL on success, else why the module cannot be patched. */
const char *ds_elf_open(ds_elf_module *m, uintptr_t base, const void *phdrs, int phnum);
/* Calls fn for every JUMP_SLOT and GLOB_DAT relocation with its symbol. */
void ds_elf_each_import(const ds_elf_module *m, void (*fn)(void **slot, const char *name, void *arg),
                        void *arg);
/* A NUL-terminated string of the string table, or NULL if out of bounds. */
const char *ds_elf_string(const ds_elf_module *m, size_t offset);
bool ds_elf_write_slot(const ds_elf_module *m, void **slot, void *value);

/* ---- modules.c: loaded modules, their names, and GOT patching ----------- */
/* Hook families register before the first ds_modules_refresh. */
void ds_got_hooks_add(const ds_got_hook *hooks, size_t n);
/* The same, but modules whose file name starts with `file_prefix` keep
 * their own slots: another family already sees the handoffs their calls
 * make, and wrapping them too would only record each one twice. */
void ds_got_hooks_add_except(const ds_got_hook *hooks, size_t n, const char *file_prefix);
/* Names a module from its path (hooks/frameworks.c provides it). */
void ds_modules_set_namer(void (*namer)(const char *path, char *out, size_t cap));
/* The definition a wrapper forwards to when called from `caller`: the one
 * the caller's own GOT slot held, else the global one (*global_real, found
 * by name on first use).  Asked on every hooked call: the usual answer
 * (every module holds the one global definition) is inline. */
extern atomic_bool ds_any_diverged;
void *ds_got_original_slow(const void *wrapper, void **global_real, const char *name,
                           const void *caller);
/* The one global definition, where no module diverged and it is known; else
 * NULL (ds_got_original_slow knows). */
static inline void *ds_got_global(void **global_real)
{
    if (atomic_load_explicit(&ds_any_diverged, memory_order_relaxed))
        return NULL;
    return __atomic_load_n(global_real, __ATOMIC_ACQUIRE);
}
static inline void *ds_got_original(const void *wrapper, void **global_real, const char *name,
                                    const void *caller)
{
    void *global = ds_got_global(global_real);
    return global ? global : ds_got_original_slow(wrapper, global_real, name, caller);
}
/* In a wrapper: its real function for this call, e.g.
 * DS_REAL(wrap_New, real_New, "PyCapsule_New")(args...). */
#define DS_REAL(wrapper, real, name)                                                       \
    ((__typeof__(real))ds_got_original((void *)(wrapper), (void **)&(real), (name),       \
                                       __builtin_return_address(0)))
/* For a function pointer a lookup API hands out (dlsym, cuGetProcAddress):
 * the wrapper of the hook `name`, with `real` kept as the definition for
 * `caller`'s module (and as the global one if none is known yet); `real`
 * itself when `name` is not hooked. */
void *ds_hook_for_lookup(const char *name, void *real, const void *caller);
/* Whether `name` is a hook's. */
bool ds_hook_named(const char *name);
/* Patches modules loaded since the last call; forgets unloaded ones. */
void ds_modules_refresh(void);
/* The module holding `addr` (a return address): its name, or its interned
 * name id (memoized per thread: the cheap one on hot paths). */
void ds_module_name_at(const void *addr, char *out, size_t cap);
uint16_t ds_module_id_at(const void *addr);

/* ---- resolve.c: finding the real function behind a hook ----------------- */
/* The next definition of `name` after the shim, else the first that is not
 * `ours` (the executable's, where libpython is linked in). */
void *ds_resolve_real(const char *name, const void *ours);
/* `name` as defined by the library that defines `fn` (its local scope), so a
 * helper call (cudaGetDevice beside cudaMalloc) reaches the same runtime. */
void *ds_resolve_beside(const void *fn, const char *name);
/* Whether the function at `fn` is its library's definition of `name`. */
bool ds_defines(const void *fn, const char *name);
/* glibc's own dlsym (hooks/dlsym.c interposes the symbol). */
void *ds_real_dlsym(void *handle, const char *name);

/* ---- families.c: the hook families hooks/ declares ---------------------- */
/* The families in the ds_families section (declared with DS_FAMILY), in
 * install order. */
int ds_families_count(void);
const ds_family *ds_family_at(int i);
/* The distinct DLSHIM_HOOKS names, and which are on unless asked (config.c
 * parses the option with them). */
int ds_hook_options(const char **names, int max);
uint32_t ds_hook_options_default(void);
/* Whether DLSHIM_HOOKS turns on the family named `option`. */
bool ds_hook_option_on(const char *option);
/* Installs the families DLSHIM_HOOKS turns on, then patches every module. */
void ds_families_install(void);
/* After start-up (the families' `started`). */
void ds_families_started(void);

#endif /* DS_INTERNAL_H */
