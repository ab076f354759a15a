/*
 * output.h — the output layer: where events go and what every event says
 * of where it happened.  The event builder itself is output/ev.h (hook
 * families use it too, through shim.h); here are the generated writers of
 * the handoff events (flat.c, fields.def), the context every event starts
 * with (context.c), the log (log.c, and the files log.h lists), its text
 * rendering (text.c) and the Chrome trace (trace.c).
 *
 * Below it lies only base: the source line and the test name reach the
 * writer as data, through the locator a hook family registers at start-up
 * (ds_context_set_locator), never as a call up.
 */
#ifndef DS_OUTPUT_H
#define DS_OUTPUT_H

#include "shim.h"

/* ---- context.c: rank, test, source line --------------------------------- */
#define DS_TEST_MAX 256   /* a test's id, NUL included */
#define DS_PYSTACK_MAX 16 /* most frames of DLSHIM_PYSTACK (they fit one event line) */
_Static_assert(DS_TEST_MAX <= DS_SEQ_TEXT_MAX && DS_WHERE_MAX <= DS_SEQ_TEXT_MAX,
               "the test and a source line fit a ds_seq_text");
void ds_context_init(char *const *envp); /* reads the rank */
int ds_rank(void);          /* -1: none known */
/* The source location of the calling thread (ds_locator.here); 0: none. */
size_t ds_context_where(char *out, size_t cap);
/* Its site (ds_site_intern); 0: none, or not interned. */
uint16_t ds_context_site(void);
/* The calling thread's source locations (ds_locator.stack), up to max
 * (at most DS_PYSTACK_MAX), innermost first; how many (0: none). */
int ds_context_stack(char (*frames)[DS_WHERE_MAX], int max);
/* `py_stack`: up to max frames of ds_context_stack, when there are any. */
void ds_ev_py_stack(ds_ev *e, int max);
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
/* An event begun (as ds_ev_begin_buf) with a context already gathered
 * (NULL: gathered now): a caller that keeps something of it (the ledger
 * keeps a handoff's source site) gathers it once. */
void ds_ev_begin_with(ds_ev *e, int id, char *buf, size_t cap, uint64_t ns,
                      const ds_context *context);
/* c's fields at p, each with its separator; NULL if they do not end
 * before `limit`. */
char *ds_put_context(char *p, const char *limit, const ds_context *c, bool text);

/* ---- log.c: the event sink (log_file.c: opening files, the descriptor,
 * zstd; log_cap.c: the size cap; log_slots.c: the slots) ----------------- */
/* The run this process belongs to: when it began (ds_file_clock_ns), whether this process began it, and whether old
 * lines are kept (DLSHIM_LOG_APPEND).  Set before ds_log_open; unset, every
 * file is appended to. */
void ds_log_set_run(uint64_t start_ns, bool first, bool append);
/* Opens DLSHIM_LOG (stderr/off/path with %p); falls back to stderr. */
void ds_log_open(const char *spec);
void ds_log_after_fork(void);
bool ds_log_enabled(void);
/* Writes one complete line, or buffers it (see log.c); a failed or short
 * write drops what it carried and counts it.  false: this line or lines
 * flushed with it were lost. */
bool ds_log_write(const char *line, size_t len);
/* A line of the summary: it may use the room kept under DLSHIM_LOG_MAX_SIZE
 * after ordinary lines stop (ds_log_write is one too). */
bool ds_log_write_tail(const char *line, size_t len, uint64_t now);
/* The same for a line of an event at `now` (ds_now_ns), which ages the
 * buffer without reading the clock again. */
bool ds_log_write_at(const char *line, size_t len, uint64_t now);
/* The log's slots of lines (log_slots.c), one a thread, a shard of LOG_LINES
 * each; slot 0 is shared by threads beyond the others.  Here so that the
 * direct path below is inline: it is half of a handoff event's cost. */
#define DS_LOG_SLOTS DS_SHARDS_SPIN16
#define DS_LOG_RESERVE (DS_LINE_MAX + DS_EV_SLACK)
/* Every line put in a slot is an event's, which is longer than this (its
 * head alone: `{"event":"mark","pid":1,"tid":1,"t_ns":1}`, or the text
 * log's `dlshim:    0.000001 1/1 mark      `), so a block of N bytes holds
 * at most N / DS_LOG_LINE_MIN lines and needs no count checked per line. */
#define DS_LOG_LINE_MIN 32
typedef struct {
    uint64_t ns;  /* the event's time: a flush merges the slots by it */
    uint32_t end; /* where the line ends in its block */
} ds_line_mark;
typedef struct { /* a block taken from a slot, and its lines' marks */
    char *buf;
    ds_line_mark *marks;
    size_t len;
    uint32_t lines;
} ds_log_block;
typedef struct {
    /* under the slot's shard: its threads add lines to buf */
    _Alignas(64) char *buf; /* NULL: not laid out yet */
    ds_line_mark *marks;
    /* cap: what lines may fill, the block's size or, under a file's cap,
     * the room claimed from it for this block */
    size_t len, cap;
    uint32_t lines;
    bool taken; /* a thread's own (never slot 0), under LOG */
    /* the block a flush took from it, written under LOG (or handed to the
     * writer thread and not taken by it yet) */
    ds_log_block held;
    /* with the writer thread, a third block: the one it is writing */
    ds_log_block out;
    char *mem; /* the blocks and their marks, kept across re-opens */
    size_t mem_size;
} ds_log_slot;
extern ds_log_slot ds_log_slots[DS_LOG_SLOTS];
/* This thread's slot plus one (0: none yet). */
extern DS_TLS unsigned char ds_log_own_slot;
/* When an event's time reaches this a flush is due: lines wait at most
 * 100 ms after the last one.  Alone on its line, read by every line. */
extern struct ds_log_due {
    _Alignas(64) _Atomic uint64_t at;
} ds_log_flush_due;
char *ds_log_reserve_slow(uint64_t now);
/* A line written in its thread's slot itself: where it goes, with
 * DS_LOG_RESERVE bytes of room, the slot's lock taken (what the slots held
 * written first if it had not that room or a flush was due); NULL, nothing
 * taken, where the log has no slots or this thread may not take one now.
 * Then ds_log_commit with the line's end (its newline included), or
 * ds_log_cancel to write nothing. */
static inline char *ds_log_reserve(uint64_t now)
{
    unsigned mine = ds_log_own_slot;
    if (__builtin_expect(mine == 0 || ds_holds_lock() ||
                             atomic_load_explicit(&ds_leaving, memory_order_relaxed),
                         0))
        return ds_log_reserve_slow(now);
    ds_log_slot *s = &ds_log_slots[mine - 1];
    if (!ds_spin_take_shard_now(DS_LOCK_LOG_LINES, mine - 1))
        return ds_log_reserve_slow(now);
    if (__builtin_expect(now < atomic_load_explicit(&ds_log_flush_due.at, memory_order_relaxed) &&
                             s->cap - s->len >= DS_LOG_RESERVE,
                         1))
        return s->buf + s->len;
    ds_lock_give_shard(DS_LOCK_LOG_LINES, mine - 1);
    return ds_log_reserve_slow(now);
}
static inline void ds_log_commit(const char *end, uint64_t now)
{
    unsigned i = ds_log_own_slot - 1u;
    ds_log_slot *s = &ds_log_slots[i];
    s->len = (size_t)(end - s->buf);
    s->marks[s->lines++] = (ds_line_mark){now, (uint32_t)s->len};
    ds_lock_give_shard(DS_LOCK_LOG_LINES, i);
}
static inline void ds_log_cancel(void)
{
    ds_lock_give_shard(DS_LOCK_LOG_LINES, ds_log_own_slot - 1u);
}
/* Writes what the buffer holds (violations, exit, _exit). */
bool ds_log_flush(void);
void ds_log_before_fork(void); /* every lock held */
/* The writer thread (DLSHIM_LOG_WRITER=thread) stopped and joined, what it
 * was handed written: from the library's destructor, outside every lock. */
void ds_log_stop_writer(void);
void ds_log_write_stderr(const char *line, size_t len);
void ds_log_count_drop(void);
uint64_t ds_log_dropped(void);
uint64_t ds_log_capped(void); /* lines not written: the file reached DLSHIM_LOG_MAX_SIZE */
/* True once, when the file reached its cap: the caller writes the
 * `log_full` line (ds_log_write_tail), with the cap in *max_size. */
bool ds_log_full_owed(uint64_t *max_size);
/* libzstd's few functions (zstd.h, 1.4 and later), found at run time by
 * start/zstd.c: a log file named *.zst is written compressed, one frame per
 * block.  Set before ds_log_open. */
typedef struct {
    size_t (*estimate_cctx_size)(int level);
    void *(*init_static_cctx)(void *workspace, size_t size);
    size_t (*compress_cctx)(void *cctx, void *dst, size_t cap, const void *src, size_t n,
                            int level);
    size_t (*compress_bound)(size_t n);
    unsigned (*is_error)(size_t code);
} ds_zstd_api;
void ds_log_set_zstd(const ds_zstd_api *api);
bool ds_log_wants_zstd(const char *spec); /* the path ends in .zst */
/* Opens an output file (`%p` expanded; 0600, O_NOFOLLOW, O_APPEND, refused
 * if another user's; emptied first when last written before
 * fresh_before_ns, on the clock of ds_log_set_run: UINT64_MAX always, 0
 * never).  -1 after one diagnostic naming `option`. */
int ds_output_open(const char *spec, const char *option, uint64_t fresh_before_ns);
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

/* ---- flat.c: the generated writers of fields.def ---------------------------
 * Each flat event's fields as a struct, ds_<event>_fields, and its writer
 * ds_ev_<event>(e, fields), from the event's row list in fields.def; and
 * ds_emit_<event>(fields, ns), the whole event at `ns` (ds_now_ns: a caller
 * that read the clock for its record passes that time, as a clock read is
 * a tenth of an event): head, context and fields written in the log's
 * buffer itself where that is open, else built and written as any event;
 * ds_emit_<event>_with(fields, ns, context), the same with the context
 * already gathered (NULL: gathered now).  A field's kind gives its
 * member's C type: */
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
    void ds_emit_##event(const ds_##event##_fields *f, uint64_t ns);          \
    void ds_emit_##event##_with(const ds_##event##_fields *f, uint64_t ns,    \
                                const ds_context *context);
DS_FLAT_EVENTS(DS_FLAT_DECLARE)
#undef DS_FLAT_DECLARE
#undef DS_FLAT_MEMBER

#endif /* DS_OUTPUT_H */
