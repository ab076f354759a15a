/*
 * python_locations.c — the source locations of this thread's Python frames,
 * as the core's events show them: `py` (the innermost line outside the
 * frameworks' packages), `py_stack`, and the innermost file's package.
 *
 * The frames are found by python_frames.c (python_frames.h: its checked
 * layout, read inline, or the C API); a frame's location, "file:LINE in
 * function", is made once per code object and instruction and kept in a
 * table that any thread reads and writes at once (below), so an event in a
 * loop finds its line with a few loads.
 */
#include <stdatomic.h>
#include <string.h>

#include "python_frames.h"

/* One frame's location, as the events show it. */
typedef struct {
    uintptr_t code, instr, filename, qualname; /* the key, and what proves it */
    bool framework;                            /* in a framework's own package */
    bool plain, spaced;                        /* ds_where's, found once */
    uint8_t len;
    uint16_t site;                             /* the text interned (base/sites.c) */
    char text[DS_WHERE_MAX];
} location;

/* The table of locations made, read and written by any thread at once:
 * each slot has a sequence count, odd while a thread writes the slot (the
 * others then pass it by), so a reader that copied a slot while its count
 * stayed even and the same has a whole one.  Words rather than fences:
 * ThreadSanitizer does not model fences.  Four ways per set: an event walks
 * two or three frames, so a loop's handful of call sites keeps ten or more
 * locations hot, and in one way per key two of them met on some address
 * layouts, each then made again at every event (the line number computed
 * anew from the code object's table). */
#define LOCATION_WAYS 4
#define LOCATION_SETS 64 /* a power of two */
#define TEXT_WORDS (DS_WHERE_MAX / 8)
typedef struct {
    atomic_uint seq;
    _Atomic uintptr_t code, instr, filename, qualname;
    _Atomic uint64_t meta; /* len, plain, spaced, framework, site */
    _Atomic uint64_t text[TEXT_WORDS];
} slot;
static slot locations[LOCATION_SETS][LOCATION_WAYS];
static atomic_uchar next_victim[LOCATION_SETS];

static uint64_t meta_of(const location *l)
{
    return l->len | (uint64_t)l->plain << 8 | (uint64_t)l->spaced << 9 |
           (uint64_t)l->framework << 10 | (uint64_t)l->site << 16;
}

static void unpack_meta(uint64_t meta, location *l)
{
    l->len = (uint8_t)meta;
    l->plain = (meta >> 8) & 1;
    l->spaced = (meta >> 9) & 1;
    l->framework = (meta >> 10) & 1;
    l->site = (uint16_t)(meta >> 16);
}

static size_t set_of(uintptr_t code, uintptr_t instr)
{
    /* The key's two words mixed by multiplication, its top bits. */
    uint64_t h = ((uint64_t)code ^ (uint64_t)instr * 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
    return (size_t)(h >> 58) & (LOCATION_SETS - 1);
}

/* The slot's location if it holds `key`, read whole; false otherwise, or
 * where a writer was at it. */
static inline __attribute__((always_inline)) bool read_slot(slot *s, const location *key,
                                                            location *out)
{
    unsigned seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    if ((seq & 1) || atomic_load_explicit(&s->code, memory_order_acquire) != key->code ||
        atomic_load_explicit(&s->instr, memory_order_acquire) != key->instr ||
        atomic_load_explicit(&s->filename, memory_order_acquire) != key->filename ||
        atomic_load_explicit(&s->qualname, memory_order_acquire) != key->qualname)
        return false;
    unpack_meta(atomic_load_explicit(&s->meta, memory_order_acquire), out);
    /* An interned text is read from the site table (location_text), not copied. */
    for (size_t w = 0; !out->site && w * 8 < (size_t)out->len + 1 && w < TEXT_WORDS; w++) {
        uint64_t word = atomic_load_explicit(&s->text[w], memory_order_acquire);
        memcpy(out->text + w * 8, &word, 8);
    }
    if (atomic_load_explicit(&s->seq, memory_order_relaxed) != seq)
        return false;
    out->code = key->code, out->instr = key->instr;
    out->filename = key->filename, out->qualname = key->qualname;
    return true;
}

/* `l` into a way of its set, unless a writer is at that way. */
static void write_slot(const location *l)
{
    size_t set = set_of(l->code, l->instr);
    unsigned way = atomic_fetch_add_explicit(&next_victim[set], 1, memory_order_relaxed) %
                   LOCATION_WAYS;
    slot *s = &locations[set][way];
    unsigned seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
    if ((seq & 1) || !atomic_compare_exchange_strong_explicit(&s->seq, &seq, seq + 1,
                                                              memory_order_acquire,
                                                              memory_order_relaxed))
        return;
    atomic_store_explicit(&s->code, l->code, memory_order_release);
    atomic_store_explicit(&s->instr, l->instr, memory_order_release);
    atomic_store_explicit(&s->filename, l->filename, memory_order_release);
    atomic_store_explicit(&s->qualname, l->qualname, memory_order_release);
    atomic_store_explicit(&s->meta, meta_of(l), memory_order_release);
    for (size_t w = 0; !l->site && w * 8 < (size_t)l->len + 1 && w < TEXT_WORDS; w++) {
        uint64_t word;
        memcpy(&word, l->text + w * 8, 8);
        atomic_store_explicit(&s->text[w], word, memory_order_release);
    }
    atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
}

/* The location's text: the site table's copy where it was interned (it
 * never changes, so every event and thread can point at it), its own
 * otherwise (the table was full). */
static inline const char *location_text(const location *l)
{
    return l->site ? ds_site_text(l->site) : l->text;
}

/* "file:LINE in function", the file's tail when it is long (its name is
 * what a reader looks for). */
static size_t format_location(char *out, size_t cap, const char *file, int line,
                              const char *function)
{
    size_t n = strlen(file);
    const char *cut = n > 120 ? "..." : "";
    return ds_fmt(out, cap, "%s%s:%d in %s", cut, n > 120 ? file + n - 117 : file, line,
                  function ? function : "?");
}

/* The location's text, and what an event needs to know of its bytes:
 * found once here, not scanned in every event that shows it. */
static void set_text(location *l, const char *file, int line, const char *function)
{
    l->len = (uint8_t)format_location(l->text, sizeof(l->text), file, line, function);
    l->framework = ds_python_framework_file(file);
    l->plain = true;
    l->spaced = false;
    for (size_t i = 0; i < l->len; i++) {
        unsigned char c = (unsigned char)l->text[i];
        l->plain &= c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
        l->spaced |= c == ' ';
    }
    l->site = ds_site_intern(l->text, l->len);
}

/* A string's text into out (cap bytes): read out of a compact ASCII string
 * object, or, by an attached thread with no exception pending, asked
 * of Python; NULL otherwise. */
static const char *text_of(uintptr_t str, char *out, size_t cap, bool attached)
{
    uint32_t st;
    uintptr_t len;
    if (ds_py_str_at.data &&
        ds_safe_read(&st, (const void *)(str + (uintptr_t)ds_py_str_at.state), 4) == 4 &&
        (st & STATE_COMPACT_ASCII) == STATE_COMPACT_ASCII && (st & STATE_KIND) == 4u &&
        ds_py_read_ptr(str + (uintptr_t)ds_py_str_at.length, &len) && len < cap &&
        ds_safe_read(out, (const void *)(str + (uintptr_t)ds_py_str_at.data), len) == len) {
        out[len] = '\0';
        return out;
    }
    if (!attached || ds_py.err_occurred())
        return NULL;
    const char *s = ds_py.as_utf8((PyObject *)str);
    if (!s)
        ds_py.err_clear(); /* ours: none was pending */
    return s;
}

/* A location not in the table yet, made (and then kept). */
static __attribute__((noinline)) bool make_location(location *l, bool attached)
{
    uintptr_t filename, qualname;
    if (!ds_py_read_ptr(l->code + (uintptr_t)ds_py_code_at.filename, &filename) ||
        !ds_py_read_ptr(l->code + (uintptr_t)ds_py_code_at.qualname, &qualname))
        return false;
    char file_buf[DS_WHERE_MAX], name_buf[DS_WHERE_MAX];
    const char *file = text_of(filename, file_buf, sizeof(file_buf), attached);
    const char *function = text_of(qualname, name_buf, sizeof(name_buf), attached);
    if (!file)
        return false;
    /* Bytes into the instructions: the one before the next to run.  The
     * line table is read alone, with or without the GIL. */
    long offset = (long)l->instr - (long)(l->code + (uintptr_t)ds_py_code_at.units);
    int line = ds_py.addr2line((PyObject *)l->code,
                            offset >= 0 && offset < (1L << 30) ? (int)offset : -1);
    set_text(l, file, line, function);
    l->filename = filename, l->qualname = qualname;
    write_slot(l);
    return true;
}

/* The location of one interpreter frame: from the table, or made once;
 * false when it cannot be made now. */
static inline __attribute__((always_inline)) bool locate_frame(uintptr_t frame, ds_py_thread t,
                                                               location *out)
{
    uintptr_t code, instr;
    if (!ds_py_code_of(ds_py_layout, frame, !t.attached, &code, &instr))
        return false;
    location key; /* only the key's words set: the text is not cleared at every event */
    key.code = code, key.instr = instr;
    if (!ds_py_load(code + (uintptr_t)ds_py_code_at.filename, &key.filename, !t.attached) ||
        !ds_py_load(code + (uintptr_t)ds_py_code_at.qualname, &key.qualname, !t.attached))
        return false;
    slot *set = locations[set_of(code, instr)];
    for (int w = 0; w < LOCATION_WAYS; w++)
        if (read_slot(&set[w], &key, out))
            return true;
    *out = (location){.code = code, .instr = instr, .filename = key.filename,
                      .qualname = key.qualname};
    return make_location(out, t.attached);
}

#define FRAMES_WALKED 64 /* deeper than that, the user's line is lost in recursion */

/* The frames of this thread, innermost first, through the checked layout:
 * `each` is told each location until it returns false. */
static void walk_layout(ds_py_thread t, bool (*each)(const location *, void *), void *arg)
{
    uintptr_t frame = ds_py_frame_of(t.tstate, ds_py_layout, !t.attached);
    for (int depth = 0; frame && depth < FRAMES_WALKED; depth++) {
        if (!ds_py_shim_frame(ds_py_layout, frame, !t.attached)) {
            location l;
            if (!locate_frame(frame, t, &l) || !each(&l, arg))
                return;
        }
        frame = ds_py_previous_frame(ds_py_layout, frame, !t.attached);
    }
}

/* The same through the C API (attached): each frame object (made if
 * needed), its code, its file, name and line. */
static void walk_api(bool (*each)(const location *, void *), void *arg)
{
    PyObject *frame = ds_py.get_frame(); /* borrowed */
    PyObject *held = NULL; /* the reference get_back gave us */
    for (int depth = 0; frame && depth < FRAMES_WALKED; depth++) {
        location l = {0};
        PyObject *code = ds_py.get_code(frame);
        PyObject *file = code ? ds_py.getattr(code, "co_filename") : NULL;
        PyObject *name = code ? ds_py.getattr(code, "co_qualname") : NULL;
        const char *f = file ? ds_py.as_utf8(file) : NULL, *n = name ? ds_py.as_utf8(name) : NULL;
        bool go_on = false;
        if (f) {
            set_text(&l, f, ds_py.get_lineno(frame), n);
            go_on = each(&l, arg);
        }
        ds_py.err_clear(); /* ours only: none was pending */
        for (PyObject **o = (PyObject *[]){file, name, code}, **end = o + 3; o < end; o++)
            if (*o)
                ds_py.decref(*o);
        PyObject *back = go_on ? ds_py.get_back(frame) : NULL;
        if (held)
            ds_py.decref(held);
        held = frame = back;
    }
    if (held)
        ds_py.decref(held);
}

/* Walks this thread's frames where that is possible now: false if not.
 * Through the layout, any time; through the API only by an attached thread,
 * no exception pending and no shim lock held (it makes frame objects). */
static bool walk(bool (*each)(const location *, void *), void *arg)
{
    if (atomic_load_explicit(&ds_py_state, memory_order_acquire) != DS_PY_BOUND)
        return false;
    if (ds_py_layout_checked() || ds_py_ensure_checked()) {
        ds_py_thread t = ds_py_this_thread();
        if (t.tstate)
            walk_layout(t, each, arg);
        return t.tstate != 0;
    }
    if (atomic_load_explicit(&ds_py_layout_state, memory_order_acquire) != DS_PY_CHECKED ||
        ds_holds_lock() || !ds_py_api_readable() || ds_py.err_occurred())
        return false;
    walk_api(each, arg);
    return true;
}

/* The innermost location outside the frameworks' packages (the innermost
 * of all when every one is theirs), its text in *out. */
typedef struct {
    location *out;
    bool found;
} here_search;

static bool take_user_frame(const location *l, void *arg)
{
    here_search *h = arg;
    if (!h->found || !l->framework) { /* the innermost, until a user's frame */
        *h->out = *l;
        h->found = true;
    }
    return l->framework; /* a user's frame ends the search */
}

/* take_user_frame's answer through the checked layout, without walk()'s
 * callback: the innermost location in two[0], a later one in two[1]; the
 * one chosen, or NULL.  Every event asks for it, so it makes no call to
 * Python where the location is known, and copies no location. */
static inline __attribute__((always_inline)) const location *user_location(ds_py_thread t,
                                                                           location two[2])
{
    uintptr_t frame = ds_py_frame_of(t.tstate, ds_py_layout, !t.attached);
    location *at = &two[0]; /* kept if no user's frame comes */
    for (int depth = 0; frame && depth < FRAMES_WALKED; depth++) {
        if (!ds_py_shim_frame(ds_py_layout, frame, !t.attached)) {
            if (!locate_frame(frame, t, at))
                break;
            if (!at->framework)
                return at;
            at = &two[1];
        }
        frame = ds_py_previous_frame(ds_py_layout, frame, !t.attached);
    }
    return at != &two[0] ? &two[0] : NULL;
}

static bool python_here(ds_where *out, char scratch[DS_WHERE_MAX])
{
    location two[2];
    const location *l = NULL;
    if (atomic_load_explicit(&ds_py_state, memory_order_acquire) == DS_PY_BOUND &&
        ds_py_layout_checked()) {
        ds_py_thread t = ds_py_this_thread();
        l = t.tstate ? user_location(t, two) : NULL;
    } else {
        here_search h = {&two[0], false};
        l = walk(take_user_frame, &h) && h.found ? &two[0] : NULL;
    }
    if (!l)
        return false;
    const char *text = l->site ? ds_site_text(l->site) : memcpy(scratch, l->text, l->len);
    *out = (ds_where){text, l->len, l->plain, l->spaced, l->site};
    return true;
}

/* The innermost frame's file, as the API gives it (attached). */
static bool package_through_api(char *out, size_t cap)
{
    if (!ds_py_api_readable() || ds_py.err_occurred())
        return false;
    PyObject *frame = ds_py.get_frame();
    PyObject *code = frame ? ds_py.get_code(frame) : NULL;
    PyObject *file = code ? ds_py.getattr(code, "co_filename") : NULL;
    const char *path = file ? ds_py.as_utf8(file) : NULL;
    if (path)
        ds_python_package_name(path, out, cap);
    else
        ds_py.err_clear(); /* ours: none was pending */
    if (file)
        ds_py.decref(file);
    if (code)
        ds_py.decref(code);
    return path != NULL;
}

bool ds_py_package_here(char *out, size_t cap)
{
    if (atomic_load_explicit(&ds_py_state, memory_order_acquire) != DS_PY_BOUND)
        return false;
    if (!ds_py_layout_checked() && !ds_py_ensure_checked())
        return package_through_api(out, cap);
    ds_py_thread t = ds_py_this_thread();
    uintptr_t frame = ds_py_frame_of(t.tstate, ds_py_layout, !t.attached), code, instr, filename;
    while (frame && ds_py_shim_frame(ds_py_layout, frame, !t.attached))
        frame = ds_py_previous_frame(ds_py_layout, frame, !t.attached);
    char path[DS_WHERE_MAX];
    const char *file = frame && ds_py_code_of(ds_py_layout, frame, !t.attached, &code, &instr) &&
                               ds_py_read_ptr(code + (uintptr_t)ds_py_code_at.filename, &filename)
                           ? text_of(filename, path, sizeof(path), t.attached)
                           : NULL;
    if (file)
        ds_python_package_name(file, out, cap);
    return file != NULL;
}

typedef struct {
    char (*out)[DS_WHERE_MAX];
    int max, n;
} stack_search;

static bool take_frame(const location *l, void *arg)
{
    stack_search *s = arg;
    memcpy(s->out[s->n], location_text(l), l->len);
    s->out[s->n][l->len] = '\0';
    return ++s->n < s->max;
}

static int python_stack(char (*out)[DS_WHERE_MAX], int max)
{
    stack_search s = {out, max, 0};
    if (max <= 0 || !walk(take_frame, &s))
        return 0;
    return s.n;
}

const ds_locator ds_py_locator = {.here = python_here, .stack = python_stack};
