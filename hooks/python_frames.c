/*
 * python_frames.c — the Python code behind a call.
 *
 * Used by the capsule hooks, which run inside a Python C API call and so on
 * a thread that holds the GIL; asked again (a release) only after
 * PyGILState_Check says this thread holds it.  Never runs Python code,
 * never allocates a Python object after the first call, never leaves an
 * exception behind, and does nothing while one is pending.
 *
 * Two ways to find the innermost frame:
 *   - CPython's C API (PyEval_GetFrame, PyFrame_GetLasti; 3.11 and later).
 *     PyEval_GetFrame makes a frame object for the frame when it has none
 *     (an allocation, for every new Python call that hands a tensor over).
 *   - Reading the interpreter's own frame list, as debuggers and profilers
 *     do (py-spy, austin): thread state → C frame → interpreter frame, whose
 *     code and instruction pointer are plain loads.  The layout differs
 *     between CPython versions, so it is only used for the versions below
 *     (3.11, 3.12), and only after it has been checked once against the C
 *     API in this very process (the frame the API returns must be the one
 *     the layout leads to, with the same code object, and its instruction
 *     must fall inside that code).  Any mismatch, and the API stays.
 * No Python header: the few prototypes and offsets are declared below, so
 * the shim builds and loads without Python.
 *
 * Source locations (`py` in events, `py_stack`): the frame list is walked
 * from the innermost frame out, and each (code object, instruction) pair is
 * turned into "file.py:LINE in function" once: the code object's file name
 * and qualified name are read at offsets found by the same check (the code
 * object's own attributes, looked for in its first bytes), the line by
 * PyCode_Addr2Line, which allocates nothing; the text is kept in a table
 * that only a thread holding the GIL touches (the layout path serves only
 * CPython 3.11 and 3.12, which always have one).  Without a checked layout
 * the C API gives the same answer, making frame objects on the way, so only
 * while no shim lock is held.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "hooks.h"

typedef struct _object PyObject;

static struct {
    int (*is_initialized)(void);
    int (*gil_check)(void);
    PyObject *(*err_occurred)(void);
    void (*err_clear)(void);
    PyObject *(*get_frame)(void);         /* PyEval_GetFrame: borrowed */
    int (*get_lasti)(PyObject *);         /* PyFrame_GetLasti */
    PyObject *(*get_code)(PyObject *);    /* PyFrame_GetCode: a new reference */
    PyObject *(*getattr)(PyObject *, const char *);
    const char *(*as_utf8)(PyObject *);
    void (*decref)(PyObject *);           /* Py_DecRef */
    void *(*thread_state)(void);          /* _PyThreadState_UncheckedGet */
    const unsigned long *version;         /* Py_Version */
    int (*addr2line)(PyObject *, int);    /* PyCode_Addr2Line: bytes into the code */
    PyObject *(*get_back)(PyObject *);    /* PyFrame_GetBack: a new reference */
    int (*get_lineno)(PyObject *);        /* PyFrame_GetLineNumber */
} py;

/* Where the current interpreter frame and its fields are (offsets in
 * bytes), per CPython version: Include/cpython/pystate.h (PyThreadState,
 * _PyCFrame) and Include/internal/pycore_frame.h (_PyInterpreterFrame,
 * PyFrameObject) of each release. */
typedef struct {
    unsigned long version; /* PY_VERSION_HEX, major and minor */
    int tstate_cframe;     /* PyThreadState.cframe */
    int cframe_frame;      /* _PyCFrame.current_frame */
    int frame_code;        /* _PyInterpreterFrame.f_code */
    int frame_obj;         /* _PyInterpreterFrame.frame_obj */
    int frame_instr;       /* _PyInterpreterFrame.prev_instr */
    int frame_previous;    /* _PyInterpreterFrame.previous */
    int frame_owner;       /* _PyInterpreterFrame.owner (a char) */
    int owner_cstack;      /* FRAME_OWNED_BY_CSTACK (a shim frame, no code); -1: none */
} frame_layout;
static const frame_layout layouts[] = {
    {0x030b0000, 56, 8, 32, 40, 56, 48, 69, -1}, /* 3.11 */
    {0x030c0000, 56, 0, 0, 48, 56, 8, 70, 3},    /* 3.12 */
};
/* Where a code object keeps co_filename, co_qualname and its instructions:
 * found by check_layout in this process. */
static struct {
    int filename, qualname, units;
} code_at;
#define PYFRAMEOBJECT_F_FRAME 24 /* PyFrameObject.f_frame, 3.11 and 3.12 */
static const frame_layout *layout; /* set once checked */
/* Where a thread state keeps its thread's id (PyThreadState.thread_id:
 * PyThread_get_thread_ident(), which is pthread_self()), found by the same
 * check; 0: not found. */
static int tstate_thread_id;

enum { UNBOUND, BINDING, BOUND, ABSENT };
static atomic_int state = UNBOUND;
/* BOUND: whether the layout was checked yet (once, by the first thread that
 * reads a frame; another thread reading meanwhile uses the API). */
enum { UNCHECKED, CHECKING, CHECKED };
static atomic_int layout_state = UNCHECKED;

/* Source locations for the core's events, given once Python is bound. */
static const ds_locator locator;

/* `name` from the Python that defines `beside`: the global one where
 * libpython is linked into the executable, else that library's. */
static void *find(const char *name, const void *beside)
{
    void *f = ds_resolve_real(name, NULL);
    return f ? f : ds_resolve_beside(beside, name);
}

atomic_bool ds_py_bind_tried;

void ds_py_bind_first(const void *python_function)
{
    int expected = UNBOUND;
    atomic_store_explicit(&ds_py_bind_tried, true, memory_order_relaxed);
    if (!atomic_compare_exchange_strong(&state, &expected, BINDING))
        return; /* bound, absent, or another thread binds it */
    py.is_initialized = (int (*)(void))find("Py_IsInitialized", python_function);
    py.gil_check = (int (*)(void))find("PyGILState_Check", python_function);
    py.err_occurred = (PyObject * (*)(void)) find("PyErr_Occurred", python_function);
    py.err_clear = (void (*)(void))find("PyErr_Clear", python_function);
    py.get_frame = (PyObject * (*)(void)) find("PyEval_GetFrame", python_function);
    py.get_lasti = (int (*)(PyObject *))find("PyFrame_GetLasti", python_function);
    py.get_code = (PyObject * (*)(PyObject *)) find("PyFrame_GetCode", python_function);
    py.getattr = (PyObject * (*)(PyObject *, const char *)) find("PyObject_GetAttrString",
                                                                  python_function);
    py.as_utf8 = (const char *(*)(PyObject *))find("PyUnicode_AsUTF8", python_function);
    py.decref = (void (*)(PyObject *))find("Py_DecRef", python_function);
    py.thread_state = (void *(*)(void))find("_PyThreadState_UncheckedGet", python_function);
    py.version = (const unsigned long *)find("Py_Version", python_function);
    py.addr2line = (int (*)(PyObject *, int))find("PyCode_Addr2Line", python_function);
    py.get_back = (PyObject * (*)(PyObject *)) find("PyFrame_GetBack", python_function);
    py.get_lineno = (int (*)(PyObject *))find("PyFrame_GetLineNumber", python_function);
    bool all = py.is_initialized && py.gil_check && py.err_occurred && py.err_clear &&
               py.get_frame && py.get_lasti && py.get_code && py.getattr && py.as_utf8 &&
               py.decref && py.addr2line && py.get_back && py.get_lineno;
    atomic_store_explicit(&state, all ? BOUND : ABSENT, memory_order_release);
    /* Events ask for a source line only from now on: a program without
     * Python never pays for the question. */
    if (all)
        ds_context_set_locator(&locator);
}

/* This thread's thread state, as read inside a Python C API call (with the
 * GIL held): what tells, later and without asking Python, whether this
 * thread holds the GIL again (gil_held_here). */
static DS_TLS uintptr_t own_tstate;

/* The current thread state (on 3.11 the GIL holder's, on 3.12 this
 * thread's while it holds the GIL) if it is this thread's own and names
 * this thread: then this thread holds the GIL with it.  0 otherwise, or
 * where the layout's check did not find the thread id in a thread state. */
static inline __attribute__((always_inline)) uintptr_t own_tstate_current(void)
{
    if (tstate_thread_id <= 0)
        return 0;
    uintptr_t t = (uintptr_t)py.thread_state();
    bool own = t && t == own_tstate &&
               *(const uintptr_t *)(t + (uintptr_t)tstate_thread_id) == (uintptr_t)pthread_self();
    return own ? t : 0;
}

/* Whether this thread holds the GIL: its own thread state current says so
 * without a question to Python (PyGILState_Check is a call and a lookup,
 * on every release); otherwise Python is asked. */
static bool gil_held_here(void)
{
    return own_tstate_current() || py.gil_check();
}

/* Whether Python may be asked about this thread's frames now: bound, and
 * the thread holds the GIL. */
static bool readable(void)
{
    return atomic_load_explicit(&state, memory_order_acquire) == BOUND && py.is_initialized() &&
           gil_held_here();
}

static bool read_ptr(uintptr_t at, uintptr_t *out)
{
    return ds_safe_read(out, (const void *)at, sizeof(*out)) == sizeof(*out);
}

/* The current interpreter frame through `l`, read without checks (the layout
 * was checked, and the thread holds the GIL: its frames stay put): 0 when
 * there is none. */
static uintptr_t layout_frame_of(uintptr_t tstate, const frame_layout *l)
{
    if (!tstate)
        return 0;
    uintptr_t cframe = *(const uintptr_t *)(tstate + (uintptr_t)l->tstate_cframe);
    return cframe ? *(const uintptr_t *)(cframe + (uintptr_t)l->cframe_frame) : 0;
}

/* The same through checked reads, for the check below. */
static uintptr_t layout_frame_checked(const frame_layout *l)
{
    uintptr_t tstate = (uintptr_t)py.thread_state(), cframe, frame;
    if (!tstate || !read_ptr(tstate + (uintptr_t)l->tstate_cframe, &cframe) || !cframe ||
        !read_ptr(cframe + (uintptr_t)l->cframe_frame, &frame))
        return 0;
    return frame;
}

/* The offset in `code` (below its instructions) of the pointer to its
 * attribute `name`, or -1 (an error of ours is cleared: none was pending). */
static int field_holding(PyObject *code, const char *name)
{
    PyObject *value = py.getattr(code, name);
    if (!value) {
        py.err_clear();
        return -1;
    }
    int at = -1;
    for (int off = 16; off + 8 <= code_at.units && at < 0; off += 8)
        if (*(PyObject *const *)((uintptr_t)code + (uintptr_t)off) == value)
            at = off;
    py.decref(value); /* the code object keeps it alive */
    return at;
}

/* Checks the layout of this Python against the C API, once (GIL held, no
 * exception pending): the frame object PyEval_GetFrame returns must point at
 * the interpreter frame the layout leads to, which must point back at it and
 * at the same code object, with its instruction inside that code. */
static void check_layout(void)
{
    int expected = UNCHECKED;
    if (!atomic_compare_exchange_strong(&layout_state, &expected, CHECKING))
        return;
    const frame_layout *found = NULL;
    unsigned long version = py.version ? *py.version & 0xffff0000ul : 0;
    for (size_t i = 0; py.thread_state && i < DS_ARRAY_LEN(layouts); i++)
        if (layouts[i].version == version)
            found = &layouts[i];
    PyObject *f = found ? py.get_frame() : NULL;
    PyObject *code = f ? py.get_code(f) : NULL;
    uintptr_t frame = 0, frame_of_f = 0, back = 0, code_of_frame = 0, instr = 0;
    bool same = code && read_ptr((uintptr_t)f + PYFRAMEOBJECT_F_FRAME, &frame_of_f) &&
                (frame = layout_frame_checked(found)) != 0 && frame == frame_of_f &&
                read_ptr(frame + (uintptr_t)found->frame_obj, &back) && back == (uintptr_t)f &&
                read_ptr(frame + (uintptr_t)found->frame_code, &code_of_frame) &&
                code_of_frame == (uintptr_t)code &&
                read_ptr(frame + (uintptr_t)found->frame_instr, &instr);
    if (same) { /* the instruction: bytes (PyFrame_GetLasti counts them) after the header */
        int lasti = py.get_lasti(f);
        uintptr_t start = instr - (uintptr_t)(lasti > 0 ? lasti : 0);
        same = lasti >= 0 && start > (uintptr_t)code && start - (uintptr_t)code < 1024;
        code_at.units = (int)(start - (uintptr_t)code);
    }
    if (same) /* the names, where the code object's own attributes are */
        same = (code_at.filename = field_holding(code, "co_filename")) > 0 &&
               (code_at.qualname = field_holding(code, "co_qualname")) > 0;
    if (code)
        py.decref(code);
    if (same) { /* this thread holds the GIL: the current thread state is its own */
        uintptr_t tstate = (uintptr_t)py.thread_state(), word;
        for (int off = 8; off < 512 && !tstate_thread_id; off += 8)
            if (read_ptr(tstate + (uintptr_t)off, &word) && word == (uintptr_t)pthread_self())
                tstate_thread_id = off;
        layout = found;
    }
    atomic_store_explicit(&layout_state, CHECKED, memory_order_release);
}

/* A mark through the C API, where the layout is not checked (yet, or
 * ever), after asking Python whether it may. */
__attribute__((noinline)) static bool mark_through_api(ds_py_mark *out)
{
    if (!readable() || py.err_occurred())
        return false;
    if (atomic_load_explicit(&layout_state, memory_order_acquire) == UNCHECKED) {
        check_layout();
        if (layout)
            return ds_py_mark_here(out);
    }
    if (atomic_load_explicit(&layout_state, memory_order_acquire) != CHECKED || layout)
        return false; /* another thread checks it: marks of one kind only */
    PyObject *frame = py.get_frame(); /* clears only an error of its own making */
    if (!frame)
        return false;
    out->frame = frame;
    out->at = (uintptr_t)py.get_lasti(frame);
    return true;
}

static bool layout_checked(void)
{
    return atomic_load_explicit(&layout_state, memory_order_acquire) == CHECKED && layout;
}

/* The mark at `tstate`'s innermost frame (layout checked, GIL held). */
static bool mark_at(uintptr_t tstate, ds_py_mark *out)
{
    uintptr_t frame = layout_frame_of(tstate, layout);
    if (!frame)
        return false;
    out->frame = (const void *)frame;
    out->at = *(const uintptr_t *)(frame + (uintptr_t)layout->frame_instr);
    return true;
}

/* Both inline into the capsule hooks (link-time optimisation). */
inline __attribute__((always_inline)) bool ds_py_mark_here(ds_py_mark *out)
{
    if (atomic_load_explicit(&state, memory_order_acquire) != BOUND)
        return false;
    if (!layout_checked())
        return mark_through_api(out);
    own_tstate = (uintptr_t)py.thread_state(); /* inside a C API call: GIL held */
    return mark_at(own_tstate, out);
}

inline __attribute__((always_inline)) bool ds_py_at_mark(const ds_py_mark *m)
{
    if (atomic_load_explicit(&state, memory_order_acquire) != BOUND)
        return false;
    ds_py_mark now;
    if (layout_checked() && tstate_thread_id > 0) {
        /* Where this thread's own thread state (the one the mark was read
         * through, unless the thread changed states since: then the frame
         * differs) is not current, this thread does not hold the GIL with
         * it and cannot be at the mark: no need to ask Python. */
        uintptr_t t = own_tstate_current();
        return t && mark_at(t, &now) && now.frame == m->frame && now.at == m->at;
    }
    if (!readable()) /* a release may come on any thread, with or without the GIL */
        return false;
    if (layout_checked())
        return mark_at((uintptr_t)py.thread_state(), &now) && now.frame == m->frame &&
               now.at == m->at;
    return mark_through_api(&now) && now.frame == m->frame && now.at == m->at;
}

bool ds_py_package_here(char *out, size_t cap)
{
    if (!readable() || py.err_occurred())
        return false;
    PyObject *frame = py.get_frame();
    if (!frame)
        return false;
    PyObject *code = py.get_code(frame);
    PyObject *file = code ? py.getattr(code, "co_filename") : NULL;
    const char *path = file ? py.as_utf8(file) : NULL;
    if (path)
        ds_python_package_name(path, out, cap);
    else
        py.err_clear(); /* ours: none was pending */
    if (file)
        py.decref(file);
    if (code)
        py.decref(code);
    return path != NULL;
}

/* ---- source locations --------------------------------------------------- */

/* One frame's location, as the events show it. */
typedef struct {
    uintptr_t code, instr, filename, qualname; /* the key, and what proves it */
    bool framework;                            /* in a framework's own package */
    bool plain, spaced;                        /* ds_where's, found once */
    uint8_t len;
    char text[DS_WHERE_MAX];
} location;

/* Touched only by a thread that holds the GIL (see the top).  Four ways
 * per set: an event walks two or three frames, so a loop's handful of call
 * sites keeps ten or more locations hot, and in one slot per key two of
 * them met on some address layouts (one in four, by a birthday estimate),
 * each then made again at every event (the line number computed anew from
 * the code object's table). */
#define LOCATION_WAYS 4
#define LOCATION_SETS 64 /* a power of two */
static location locations[LOCATION_SETS][LOCATION_WAYS];
static uint8_t next_victim[LOCATION_SETS];

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
}

static const char *utf8_of(uintptr_t str)
{
    const char *s = py.as_utf8((PyObject *)str); /* an ASCII name: its own bytes, no copy */
    if (!s)
        py.err_clear(); /* ours: the caller checked that none was pending */
    return s;
}

/* The location of one interpreter frame (layout path), from the table or
 * made once; NULL when it cannot be made now (an exception pending). */
/* A location not in the table yet, made into slot `l`. */
static __attribute__((noinline)) const location *
make_location(location *l, uintptr_t code, uintptr_t instr, uintptr_t filename, uintptr_t qualname)
{
    if (py.err_occurred())
        return NULL;
    const char *file = utf8_of(filename), *function = utf8_of(qualname);
    if (!file)
        return NULL;
    /* Bytes into the instructions: the one before the next to run. */
    long offset = (long)instr - (long)(code + (uintptr_t)code_at.units);
    int line = py.addr2line((PyObject *)code, offset >= 0 && offset < (1L << 30) ? (int)offset : -1);
    set_text(l, file, line, function);
    l->code = code, l->instr = instr, l->filename = filename, l->qualname = qualname;
    return l;
}

/* Inline: an event's line is a lookup or two of a slot already made. */
static inline __attribute__((always_inline)) const location *
locate_frame(const frame_layout *lay, uintptr_t frame)
{
    uintptr_t code = *(const uintptr_t *)(frame + (uintptr_t)lay->frame_code);
    uintptr_t instr = *(const uintptr_t *)(frame + (uintptr_t)lay->frame_instr);
    uintptr_t filename = *(const uintptr_t *)(code + (uintptr_t)code_at.filename);
    uintptr_t qualname = *(const uintptr_t *)(code + (uintptr_t)code_at.qualname);
    /* The set: the key's two words mixed by multiplication, its top bits. */
    uint64_t h = ((uint64_t)code ^ (uint64_t)instr * 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
    size_t set = (size_t)(h >> 58) & (LOCATION_SETS - 1);
    for (int w = 0; w < LOCATION_WAYS; w++) {
        location *l = &locations[set][w];
        if (l->code == code && l->instr == instr && l->filename == filename &&
            l->qualname == qualname)
            return l;
    }
    /* Not there: made into the set's ways in turn. */
    unsigned w = next_victim[set]++ % LOCATION_WAYS;
    return make_location(&locations[set][w], code, instr, filename, qualname);
}

#define FRAMES_WALKED 64 /* deeper than that, the user's line is lost in recursion */

/* A frame the interpreter keeps for a C call of its own (3.12's shim
 * frames): no code of the program's. */
static inline bool shim_frame(const frame_layout *lay, uintptr_t frame)
{
    return lay->owner_cstack >= 0 &&
           *(const char *)(frame + (uintptr_t)lay->frame_owner) == (char)lay->owner_cstack;
}

static inline __attribute__((always_inline)) uintptr_t previous_frame(const frame_layout *lay,
                                                                      uintptr_t frame)
{
    return *(const uintptr_t *)(frame + (uintptr_t)lay->frame_previous);
}

/* The frames of `tstate` (this thread's), innermost first, through the
 * checked layout: `each` is told each location until it returns false. */
static inline __attribute__((always_inline)) void
walk_layout(uintptr_t tstate, bool (*each)(const location *, void *), void *arg)
{
    uintptr_t frame = layout_frame_of(tstate, layout);
    for (int depth = 0; frame && depth < FRAMES_WALKED; depth++) {
        if (!shim_frame(layout, frame)) {
            const location *l = locate_frame(layout, frame);
            if (!l || !each(l, arg))
                return;
        }
        frame = previous_frame(layout, frame);
    }
}

/* The same through the C API: each frame object (made if needed), its code,
 * its file, name and line. */
static void walk_api(bool (*each)(const location *, void *), void *arg)
{
    PyObject *frame = py.get_frame(); /* borrowed */
    PyObject *held = NULL; /* the reference get_back gave us */
    for (int depth = 0; frame && depth < FRAMES_WALKED; depth++) {
        location l = {0};
        PyObject *code = py.get_code(frame);
        PyObject *file = code ? py.getattr(code, "co_filename") : NULL;
        PyObject *name = code ? py.getattr(code, "co_qualname") : NULL;
        const char *f = file ? py.as_utf8(file) : NULL, *n = name ? py.as_utf8(name) : NULL;
        bool go_on = false;
        if (f) {
            set_text(&l, f, py.get_lineno(frame), n);
            go_on = each(&l, arg);
        }
        py.err_clear(); /* ours only: none was pending */
        for (PyObject **o = (PyObject *[]){file, name, code}, **end = o + 3; o < end; o++)
            if (*o)
                py.decref(*o);
        PyObject *back = go_on ? py.get_back(frame) : NULL;
        if (held)
            py.decref(held);
        held = frame = back;
    }
    if (held)
        py.decref(held);
}

DS_TLS unsigned ds_py_in_capsule_call;

/* With the layout checked: this thread's thread state where it holds the
 * GIL, 0 where its frames may not be read now.  Inside a capsule function
 * nothing needs asking (the GIL is held); elsewhere as readable() asks, the
 * thread state found on the way kept (one call to Python fewer). */
static inline __attribute__((always_inline)) uintptr_t tstate_holding_gil(void)
{
    if (ds_py_in_capsule_call)
        return own_tstate = (uintptr_t)py.thread_state();
    if (!py.is_initialized())
        return 0;
    uintptr_t own = own_tstate_current();
    if (own)
        return own;
    return py.gil_check() ? (uintptr_t)py.thread_state() : 0;
}

/* Walks this thread's frames where that is allowed now: false if not.
 * With the layout checked, the frames are plain loads: a pending exception
 * matters only where a location is made (locate_frame asks then). */
static bool walk(bool (*each)(const location *, void *), void *arg)
{
    if (atomic_load_explicit(&state, memory_order_acquire) != BOUND)
        return false;
    if (layout_checked()) {
        uintptr_t tstate = tstate_holding_gil();
        if (tstate)
            walk_layout(tstate, each, arg);
        return tstate != 0;
    }
    if (!readable() || py.err_occurred())
        return false;
    if (atomic_load_explicit(&layout_state, memory_order_acquire) == UNCHECKED &&
        !ds_holds_lock()) /* the check asks for a frame object: no shim lock held */
        check_layout();
    if (atomic_load_explicit(&layout_state, memory_order_acquire) != CHECKED)
        return false;
    if (layout)
        walk_layout((uintptr_t)py.thread_state(), each, arg);
    else if (!ds_holds_lock()) /* frame objects may be made: no shim lock may be held */
        walk_api(each, arg);
    else
        return false;
    return true;
}

typedef struct {
    ds_where *out;
    char *scratch; /* for a location the C API path made: it lives on that walk's stack */
    bool found;
} here_search;

static bool take_user_frame(const location *l, void *arg)
{
    here_search *h = arg;
    if (!h->found || !l->framework) { /* the innermost, until a user's frame */
        *h->out = (ds_where){l->text, l->len, l->plain, l->spaced};
        if (l->code == 0) { /* the C API's */
            memcpy(h->scratch, l->text, l->len);
            h->out->text = h->scratch;
        }
        h->found = true;
    }
    return l->framework; /* a user's frame ends the search */
}

/* take_user_frame's answer through the checked layout, without walk()'s
 * callback: the location itself, from the table, so that nothing is
 * written while the frames are walked.  Every event asks for it, so it
 * makes no call to Python. */
static inline __attribute__((always_inline)) const location *user_location(uintptr_t tstate)
{
    const frame_layout *lay = layout;
    const location *innermost = NULL;
    uintptr_t frame = layout_frame_of(tstate, lay);
    for (int depth = 0; frame && depth < FRAMES_WALKED; depth++) {
        if (!shim_frame(lay, frame)) {
            const location *l = locate_frame(lay, frame);
            if (!l)
                break;
            if (!l->framework)
                return l;
            if (!innermost)
                innermost = l;
        }
        frame = previous_frame(lay, frame);
    }
    return innermost;
}

static bool python_here(ds_where *out, char scratch[DS_WHERE_MAX])
{
    if (atomic_load_explicit(&state, memory_order_acquire) == BOUND && layout_checked()) {
        uintptr_t tstate = tstate_holding_gil(); /* as walk() asks */
        const location *l = tstate ? user_location(tstate) : NULL;
        if (l)
            *out = (ds_where){l->text, l->len, l->plain, l->spaced};
        return l != NULL;
    }
    here_search h = {out, scratch, false};
    return walk(take_user_frame, &h) && h.found;
}

typedef struct {
    char (*out)[DS_WHERE_MAX];
    int max, n;
} stack_search;

static bool take_frame(const location *l, void *arg)
{
    stack_search *s = arg;
    memcpy(s->out[s->n], l->text, l->len);
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

static const ds_locator locator = {.here = python_here, .stack = python_stack};
