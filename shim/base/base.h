/*
 * base.h — the floor of the core: what every layer above stands on, and the
 * C library alone below it.  Locks (locks.def), the clock and thread ids,
 * memory the program handed us read without faulting, the one mmap helper,
 * formatting and diagnostics, interned names, the options (options.def) and
 * the event and violation tables (events.def, violations.def).
 *
 * Nothing here calls up: a service that needs something of a higher layer
 * is handed it as data at start-up (the DLSHIM_HOOKS names, config.c).
 * Internal names start with ds_; the library is built with
 * -fvisibility=hidden, so only DS_PUBLIC names leave it.
 */
#ifndef DS_BASE_H
#define DS_BASE_H

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "base/put.h"

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

/* ---- config.c: the options (options.def) -------------------------------- */
#define DS_PATH_MAX PATH_MAX

enum ds_format { DS_FORMAT_TEXT, DS_FORMAT_JSONL };
enum ds_on_error { DS_ON_ERROR_WARN, DS_ON_ERROR_PROTECT, DS_ON_ERROR_ABORT };
enum ds_sync_mode { DS_SYNC_OFF, DS_SYNC_CHECK, DS_SYNC_ENFORCE };
enum ds_log_writer { DS_LOG_WRITER_INLINE, DS_LOG_WRITER_THREAD };
enum ds_log_order { DS_LOG_ORDER_TIME, DS_LOG_ORDER_THREAD };

#define DS_CTYPE_BOOL bool
#define DS_CTYPE_INT int64_t
#define DS_CTYPE_ENUM int
#define DS_CTYPE_EVENTS uint32_t
typedef struct ds_config {
#define DS_OPTION(field, NAME, TYPE, def, lo, hi, choices, doc) DS_FIELD_##TYPE(field)
#define DS_FIELD_BOOL(f) signed char f; /* 1 or 0; -1: unset (an empty default) */
#define DS_FIELD_INT(f) int64_t f; /* -1: unset */
#define DS_FIELD_ENUM(f) int f;
#define DS_FIELD_EVENTS(f) uint32_t f; /* bit per ds_event_id */
#define DS_FIELD_HOOKS(f) uint32_t f;  /* bit per DLSHIM_HOOKS name (ds_config_hook_names) */
#define DS_FIELD_PATH(f) char f[DS_PATH_MAX];
#define DS_FIELD_TEXT(f) char f[DS_PATH_MAX];
#include "options.def"
#undef DS_OPTION
#undef DS_FIELD_BOOL
#undef DS_FIELD_INT
#undef DS_FIELD_ENUM
#undef DS_FIELD_EVENTS
#undef DS_FIELD_HOOKS
#undef DS_FIELD_PATH
#undef DS_FIELD_TEXT
} ds_config;

/* The options in effect, read once at start-up (start/init.c). */
extern ds_config ds_cfg;
void ds_config_defaults(ds_config *c);
/* Parses every DLSHIM_* entry of envp; bad values warn and keep defaults. */
void ds_config_load(ds_config *c, char *const *envp);
/* Whether one entry ("DLSHIM_X=value") is a known option with a valid
 * value; if not, `why` holds the warning ds_config_load would write. */
bool ds_config_check(const char *entry, char *why, size_t cap);
void ds_config_dump(const ds_config *c);
const char *ds_event_name(int id);
const char *ds_violation_name(int kind);
/* The DLSHIM_HOOKS names (the hook families' own, at most 32) and which are
 * on unless asked: handed down by start-up before ds_config_load, since the
 * families live above this layer.  None set: the option names nothing. */
void ds_config_hook_names(const char *const *names, int n, uint32_t on_by_default);

/* ---- events (events.def) and violation kinds (violations.def) ----------- */
enum ds_event_id {
#define DS_EVENT(ID, name, frequent) DS_EV_##ID,
#include "events.def"
#undef DS_EVENT
    DS_EV_COUNT
};

enum ds_violation_kind {
#define DS_VIOLATION(ID, name) DS_VIO_##ID,
#include "violations.def"
#undef DS_VIOLATION
    DS_VIO_COUNT
};

/* ---- thread.c: clock, thread ids, per-thread state ---------------------- */
uint64_t ds_now_ns(void);             /* monotonic ns since the shim loaded */
uint64_t ds_now_coarse_ns(void);      /* the same at tick resolution: a few ns to read */
uint64_t ds_clock_origin_ns(void);    /* CLOCK_MONOTONIC when the shim loaded */
/* CLOCK_REALTIME_COARSE, ns since 1970: the clock file times are stamped
 * with, so that "written before now" can be asked of a file. */
uint64_t ds_file_clock_ns(void);
static inline uint64_t ds_ns_of(struct timespec ts)
{
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
void ds_clock_start(void);
/* A futex on a word of this process: sleeps while *word holds `seen`, at
 * most timeout_ns (0: no limit), or until woken (it may wake for nothing:
 * callers look again); wakes up to n sleepers. */
void ds_futex_wait(_Atomic uint32_t *word, uint32_t seen, uint64_t timeout_ns);
void ds_futex_wake(_Atomic uint32_t *word, int n);
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
/* SPIN16 and SPIN64 are spin locks made of that many shards (one logical
 * lock: one bit in ds_locks_held, one place in the order). */
enum { DS_KIND_SPIN, DS_KIND_MUTEX, DS_KIND_RW, DS_KIND_SPIN16 = DS_KIND_SPIN,
       DS_KIND_SPIN64 = DS_KIND_SPIN };
enum { DS_SHARDS_SPIN = 1, DS_SHARDS_SPIN16 = 16, DS_SHARDS_SPIN64 = 64, DS_SHARDS_MUTEX = 0,
       DS_SHARDS_RW = 0 };
static const unsigned char ds_lock_kind[DS_LOCK_COUNT] = {
#define DS_LOCK(ID, kind, what) [DS_LOCK_##ID] = DS_KIND_##kind,
#include "locks.def"
#undef DS_LOCK
};
/* Spin cells per lock (0 for a mutex or RW lock). */
static const unsigned char ds_lock_shards[DS_LOCK_COUNT] = {
#define DS_LOCK(ID, kind, what) [DS_LOCK_##ID] = DS_SHARDS_##kind,
#include "locks.def"
#undef DS_LOCK
};
/* Every spin lock's cells, one after another, a cache line each: a lock's
 * first cell is DS_CELL_<ID> (each entry counts on from the one before by
 * the shards of its lock; a mutex adds none). */
enum {
#define DS_LOCK(ID, kind, what) DS_CELL_##ID, DS_CELL_LAST_##ID = DS_CELL_##ID + DS_SHARDS_##kind - 1,
#include "locks.def"
#undef DS_LOCK
    DS_SPIN_CELLS
};
static const unsigned short ds_lock_cell0[DS_LOCK_COUNT] = {
#define DS_LOCK(ID, kind, what) [DS_LOCK_##ID] = DS_CELL_##ID,
#include "locks.def"
#undef DS_LOCK
};
typedef struct {
    /* one atomic exchange to take, a release store to give back; alone on
     * its cache line, so that threads on different shards (or locks) never
     * write the same line */
    _Alignas(64) atomic_bool held;
} ds_spin_cell;
extern ds_spin_cell ds_spin_cells[DS_SPIN_CELLS];
typedef union {
    pthread_mutex_t mutex;
    pthread_rwlock_t rw;
} ds_lock_cell;
extern ds_lock_cell ds_lock_cells[DS_LOCK_COUNT];
static inline atomic_bool *ds_spin_of(int id, unsigned shard)
{
    return &ds_spin_cells[ds_lock_cell0[id] + shard].held;
}
/* The locks this thread holds or waits for, a bit each: set before a lock is
 * taken and cleared after it is given back, so that a signal handler (or a
 * deleter run from inside the shim) entering a hook on this thread sees it
 * and forwards untouched (ds_active) instead of waiting for itself.  A
 * sharded lock has one bit: a thread holds one of its shards at a time, or
 * all of them (ds_lock_take). */
extern DS_TLS uint32_t ds_locks_held;
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
/* Takes lock `id` (a reader's share of an RW lock with ds_lock_read); a
 * sharded lock whole, every shard in order (ds_lock_slow_take).
 * Always inline, as ds_lock_give: `id` is a constant at the hot calls, and
 * each folds to one exchange or store, where GCC would otherwise make an
 * out-of-line copy of ds_lock_give that every handoff calls twice. */
__attribute__((always_inline)) static inline void ds_lock_take(int id)
{
#ifdef DS_DEBUG_LOCKS
    ds_lock_order_check(id);
#endif
    ds_locks_held |= 1u << id;
    if (ds_lock_kind[id] == DS_KIND_SPIN && ds_lock_shards[id] == 1) {
        if (atomic_exchange_explicit(ds_spin_of(id, 0), true, memory_order_acquire))
            ds_spin_wait(ds_spin_of(id, 0));
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
    if (ds_lock_kind[id] == DS_KIND_SPIN && ds_lock_shards[id] == 1)
        atomic_store_explicit(ds_spin_of(id, 0), false, memory_order_release);
    else
        ds_lock_slow_give(id);
    ds_locks_held &= ~(1u << id);
}
/* One shard of sharded spin lock `id` (shard < ds_lock_shards[id]): what
 * the hot paths take, so that threads on different shards share nothing.
 * To the order check, re-entry and fork it is the lock itself: a thread
 * holding a shard takes no other shard of it (ds_lock_take takes them all,
 * in order). */
__attribute__((always_inline)) static inline void ds_lock_take_shard(int id, unsigned shard)
{
#ifdef DS_DEBUG_LOCKS
    ds_lock_order_check(id);
#endif
    ds_locks_held |= 1u << id;
    if (atomic_exchange_explicit(ds_spin_of(id, shard), true, memory_order_acquire))
        ds_spin_wait(ds_spin_of(id, shard));
}
__attribute__((always_inline)) static inline void ds_lock_give_shard(int id, unsigned shard)
{
    atomic_store_explicit(ds_spin_of(id, shard), false, memory_order_release);
    ds_locks_held &= ~(1u << id);
}
/* One shard of sharded spin lock `id` (0: an unsharded one) taken if it is
 * free now (as ds_lock_take would): false, not taken, while another thread
 * holds it.  For a fast way that hands over to a slower one which waits,
 * rather than waiting itself: then it calls nothing, and costs no frame. */
static inline bool ds_spin_take_shard_now(int id, unsigned shard)
{
#ifdef DS_DEBUG_LOCKS
    ds_lock_order_check(id);
#endif
    ds_locks_held |= 1u << id;
    if (!atomic_exchange_explicit(ds_spin_of(id, shard), true, memory_order_acquire))
        return true;
    ds_locks_held &= ~(1u << id);
    return false;
}
static inline bool ds_spin_take_now(int id)
{
    return ds_spin_take_shard_now(id, 0);
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

/* ---- mmap.c: memory of the shim's own, never from malloc ---------------- */
/* Hooks run inside the allocator, deleters and signal handlers, so the
 * shim's tables come straight from the kernel: zeroed, private, anonymous;
 * `reserve` false maps them MAP_NORESERVE (a large table of which little is
 * touched).  NULL when the kernel refuses. */
void *ds_map(size_t bytes, bool reserve);
void ds_unmap(void *p, size_t bytes);

/* ---- fmt.c: the one formatter (never allocates) and diagnostics --------- */
/* printf subset: %s %c %d %i %u %x %p %%, flags '-' '0', width, l/ll/z.
 * Always NUL-terminates; returns the length written (truncated to cap-1). */
size_t ds_fmt(char *buf, size_t cap, const char *fmt, ...) DS_PRINTF(3, 4);
size_t ds_vfmt(char *buf, size_t cap, const char *fmt, va_list ap);
/* "dlshim: <message>\n" on stderr; at most DS_DIAG_MAX per process. */
void ds_diag(const char *fmt, ...) DS_PRINTF(1, 2);
/* Diagnostics written so far (the summary is written where there were any). */
unsigned ds_diag_count(void);
/* Copies at most cap-1 bytes of s, replacing control bytes by '?'. */
void ds_printable(char *out, size_t cap, const char *s, size_t n);
/* The name of an errno value met opening or reading a file (ENOENT), or NULL:
 * strerrorname_np is glibc 2.32's, newer than the oldest glibc the library
 * runs on (base/glibc.h). */
const char *ds_errno_name(int e);
/* fstat(2) as the system call: glibc's fstat symbol is 2.33's. */
int ds_fstat(int fd, struct stat *st);

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

/* ---- names.c: interned producer/consumer names -------------------------- */
#define DS_NAME_MAX 48 /* a name's bytes kept, NUL included */
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

/* ---- sites.c: places in the program's source, interned ------------------- */
#define DS_SITE_MAX 192 /* a site's text, "file.py:LINE in function", NUL included */
/* The id of a site's text (len bytes, cut to DS_SITE_MAX - 1); 0 when the
 * text is empty or the table is full (the site then has no id). */
uint16_t ds_site_intern(const char *text, size_t len);
/* A site's text; "" for 0 or an id never given. */
const char *ds_site_text(uint16_t id);

/* ---- seq_text.c: a text many threads read while one thread now and then
 * rewrites it (the running test's name, the latest violation's line), no
 * side waiting.  The sizes passed are multiples of 8 bytes, at most
 * DS_SEQ_TEXT_MAX. */
#define DS_SEQ_TEXT_MAX 256
typedef struct {
    atomic_uint seq;
    uint64_t words[DS_SEQ_TEXT_MAX / 8];
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

#endif /* DS_BASE_H */
