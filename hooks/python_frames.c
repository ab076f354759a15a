/*
 * python_frames.c — the Python code behind a call, on any thread, attached
 * to the interpreter or not, with a GIL or without one.
 *
 * Asked by the capsule hooks (inside a Python C API call, so attached) and
 * by the core for every event and violation, wherever it happens: in a
 * deleter PyTorch runs after releasing the GIL, in a CUDA call a framework
 * makes without it, in a function ctypes called (ctypes lets the GIL go
 * around a foreign call).  Never runs Python code, never allocates a Python
 * object after the first call, never leaves an exception behind.
 *
 * Two ways to find the frames:
 *   - Reading the interpreter's own frame list, as debuggers and profilers
 *     do (py-spy, austin): thread state → (C frame →) interpreter frame,
 *     whose code, instruction and caller are loads.  The layout differs
 *     between CPython versions (the table below: 3.11 to 3.14), so it is
 *     used only after it has been checked once against the C API in this
 *     very process (the frame the API returns must be the one the layout
 *     leads to, with the same code object, and its instruction inside that
 *     code).  Any mismatch, and the API stays.
 *   - CPython's C API (PyEval_GetFrame, PyFrame_GetLasti, ...): where the
 *     layout is not known or did not check out, and only by a thread that
 *     is attached (holds the GIL; in a free-threaded build, has its thread
 *     state active), about its own frames (it makes frame objects).
 *
 * Why this thread's frames may be read without the GIL (docs/design.md,
 * "Python lines without the GIL"): a thread's frame list is written only by
 * that thread, as it calls and returns.  While the thread runs the shim, it
 * is inside a C call made from its innermost frame, so no frame of its list
 * is pushed, popped or moved until the shim returns, and each frame keeps
 * its code object alive (and the code its file and function names, which
 * never change).  Other threads, with or without the GIL, may write fields
 * the walk does not read (a frame object made for the frame by
 * sys._current_frames), nothing it reads.  The thread's state comes from
 * PyGILState_GetThisThreadState, a thread-local read that needs no GIL.  A
 * signal handler may interrupt the thread halfway through a call, so reads
 * that do not hold the GIL go through the no-fault reader and each code
 * object must prove itself one (its type is PyCode_Type).  The line comes
 * from PyCode_Addr2Line, which only reads the code object's line table; the
 * names are read out of the string objects where they are compact ASCII
 * (where they are not, Python is asked only by an attached thread).
 * Nothing here depends on the GIL for its own data either, and nothing
 * takes "attached" for "alone": in a free-threaded build every attached
 * thread runs at once.  The table of locations is read and written by any
 * thread at once (a sequence count per slot, atomic words); the layout is
 * checked by one thread (a compare-and-swap claims the check) and published
 * with a release store that every reader acquires; the bound API likewise;
 * everything else is per thread.  Whether a thread may call the API is
 * whether its own thread state is the current one (attached_here), never
 * PyGILState_Check.  A free-threaded build is recognised at the check (its
 * objects' header is 32 bytes, not 16) and served by the C API alone: its
 * frames, strings and, from 3.14t, per-thread copies of the bytecode are
 * laid out otherwise, and no such interpreter was here to check a row
 * against (docs/design.md, "Free-threaded CPython").  tests/unit/
 * test_py_frames.c drives all of this from 8 threads under TSan.
 *
 * No Python header: the few prototypes and offsets are declared below, so
 * the shim builds and loads without Python.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "hooks.h"

typedef struct _object PyObject;

static struct {
    int (*is_initialized)(void);
    PyObject *(*err_occurred)(void);
    void (*err_clear)(void);
    PyObject *(*get_frame)(void);         /* PyEval_GetFrame: borrowed */
    int (*get_lasti)(PyObject *);         /* PyFrame_GetLasti */
    PyObject *(*get_code)(PyObject *);    /* PyFrame_GetCode: a new reference */
    PyObject *(*getattr)(PyObject *, const char *);
    const char *(*as_utf8)(PyObject *);
    void (*decref)(PyObject *);           /* Py_DecRef */
    void *(*thread_state)(void);          /* _PyThreadState_UncheckedGet */
    void *(*this_thread_state)(void);     /* PyGILState_GetThisThreadState */
    const unsigned long *version;         /* Py_Version */
    const void *code_type;                /* PyCode_Type */
    int (*addr2line)(PyObject *, int);    /* PyCode_Addr2Line: bytes into the code */
    PyObject *(*get_back)(PyObject *);    /* PyFrame_GetBack: a new reference */
    int (*get_lineno)(PyObject *);        /* PyFrame_GetLineNumber */
} py;

/* Where the current interpreter frame and its fields are (offsets in
 * bytes), per CPython version: Include/cpython/pystate.h (PyThreadState,
 * _PyCFrame) and Include/internal/pycore_frame.h (_PyInterpreterFrame) of
 * each release, and the same measured on each (tests/python). */
typedef struct {
    unsigned long version; /* PY_VERSION_HEX, major and minor */
    int tstate_cframe;     /* PyThreadState.cframe; 3.13+: .current_frame itself */
    int cframe_frame;      /* _PyCFrame.current_frame; -1: no C frame (3.13+) */
    int frame_code;        /* _PyInterpreterFrame.f_code / f_executable */
    int frame_obj;         /* _PyInterpreterFrame.frame_obj */
    int frame_instr;       /* .prev_instr (3.11, 3.12), .instr_ptr (3.13+) */
    int frame_previous;    /* _PyInterpreterFrame.previous */
    int frame_owner;       /* _PyInterpreterFrame.owner (a char) */
    int owner_cstack;      /* the first owner of frames with no code of the program's: that
                            * and above are skipped; -1: none (3.11) */
    uintptr_t code_tag;    /* bits of f_executable that tag the reference (3.14) */
} frame_layout;
static const frame_layout layouts[] = {
    {0x030b0000, 56, 8, 32, 40, 56, 48, 69, -1, 0}, /* 3.11 */
    {0x030c0000, 56, 0, 0, 48, 56, 8, 70, 3, 0},    /* 3.12 */
    {0x030d0000, 72, -1, 0, 48, 56, 8, 70, 3, 0},   /* 3.13 */
    {0x030e0000, 72, -1, 0, 48, 56, 8, 74, 3, 7},   /* 3.14 */
};
/* Frames with no code of the program's: 3.12's and 3.13's entry frames,
 * FRAME_OWNED_BY_CSTACK (3); 3.14's entry frames, FRAME_OWNED_BY_INTERPRETER
 * (3; their executable is None), and FRAME_OWNED_BY_CSTACK (4).  3.14's row
 * once said 4 alone: its py_stack walked into an entry frame and took None
 * for a code object (tests/py314 found it). */
#define PYFRAMEOBJECT_F_FRAME 24 /* PyFrameObject.f_frame, 3.11 to 3.14 */
#define PYOBJECT_TYPE 8          /* PyObject.ob_type (not the free-threaded build's) */
#define PYOBJECT_TYPE_FT 24      /* the free-threaded build's (ob_tid, flags, refcounts first) */
/* Where a code object keeps co_filename, co_qualname and its instructions,
 * and where a compact ASCII string keeps its length, its state bits and its
 * characters: found by check_layout in this process. */
static struct {
    int filename, qualname, units;
} code_at;
static struct {
    int length, state, data;
} str_at;
static const frame_layout *layout; /* set once checked */
/* Where a thread state keeps its thread's id (PyThreadState.thread_id:
 * PyThread_get_thread_ident(), which is pthread_self()), found by the same
 * check; 0: not found. */
static atomic_int tstate_thread_id;

enum { UNBOUND, BINDING, BOUND, ABSENT };
static atomic_int state = UNBOUND;
/* BOUND: whether the layout was checked yet (once, by the first thread that
 * reads a frame attached; another thread meanwhile finds none). */
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
#define FIND(field, name) *(void **)&py.field = find(name, python_function)
    FIND(is_initialized, "Py_IsInitialized");
    FIND(err_occurred, "PyErr_Occurred");
    FIND(err_clear, "PyErr_Clear");
    FIND(get_frame, "PyEval_GetFrame");
    FIND(get_lasti, "PyFrame_GetLasti");
    FIND(get_code, "PyFrame_GetCode");
    FIND(getattr, "PyObject_GetAttrString");
    FIND(as_utf8, "PyUnicode_AsUTF8");
    FIND(decref, "Py_DecRef");
    FIND(thread_state, "_PyThreadState_UncheckedGet");
    if (!py.thread_state) /* its public name from 3.13 */
        FIND(thread_state, "PyThreadState_GetUnchecked");
    FIND(this_thread_state, "PyGILState_GetThisThreadState");
    FIND(version, "Py_Version");
    FIND(code_type, "PyCode_Type");
    FIND(addr2line, "PyCode_Addr2Line");
    FIND(get_back, "PyFrame_GetBack");
    FIND(get_lineno, "PyFrame_GetLineNumber");
#undef FIND
    bool all = py.is_initialized && py.this_thread_state && py.err_occurred && py.err_clear &&
               py.get_frame && py.get_lasti && py.get_code && py.getattr && py.as_utf8 &&
               py.decref && py.addr2line && py.get_back && py.get_lineno;
    atomic_store_explicit(&state, all ? BOUND : ABSENT, memory_order_release);
    /* Events ask for a source line only from now on: a program without
     * Python never pays for the question. */
    if (all)
        ds_context_set_locator(&locator);
}

void ds_py_bind_global(void)
{
    void *is_initialized = ds_resolve_real("Py_IsInitialized", NULL);
    if (is_initialized)
        ds_py_bind(is_initialized);
}

static bool read_ptr(uintptr_t at, uintptr_t *out)
{
    return ds_safe_read(out, (const void *)at, sizeof(*out)) == sizeof(*out);
}

/* A word of the interpreter's: a plain load where this thread is attached
 * (its frames and their code cannot change under it), else the no-fault
 * reader (a signal may have stopped the thread halfway through a call). */
static inline __attribute__((always_inline)) bool load(uintptr_t at, uintptr_t *out, bool checked)
{
    if (!checked) {
        *out = *(const uintptr_t *)at;
        return true;
    }
    return at > 4096 && read_ptr(at, out);
}

/* ---- this thread: attached or not -------------------------------------------- */

/* "Attached" below: the thread may call the C API.  With a GIL, it holds
 * it; in a free-threaded build (3.13t, 3.14t), its thread state is active,
 * and any number of threads are attached at once, running in parallel.
 * Nothing here takes "attached" to mean "alone": an attached thread calls
 * the API about its own frames only, and what threads share (the layout,
 * the location table, the sites) is written once and published, or kept
 * with atomics (see each). */

/* This thread's thread state, as read inside a Python C API call (so
 * attached): what tells, later and without asking Python, whether this
 * thread is attached again (own_tstate_current). */
static DS_TLS uintptr_t own_tstate;

/* The current thread state (on 3.11 the GIL holder's, from 3.12 this
 * thread's while it is attached) if it is this thread's own and names
 * this thread: then this thread is attached with it.  0 otherwise, or
 * where the layout's check did not find the thread id in a thread state. */
static inline __attribute__((always_inline)) uintptr_t own_tstate_current(void)
{
    int id_at = atomic_load_explicit(&tstate_thread_id, memory_order_relaxed);
    if (id_at <= 0)
        return 0;
    uintptr_t t = (uintptr_t)py.thread_state();
    bool own = t && t == own_tstate &&
               *(const uintptr_t *)(t + (uintptr_t)id_at) == (uintptr_t)pthread_self();
    return own ? t : 0;
}

/* Whether this thread is attached: its own thread state (a thread-local,
 * PyGILState_GetThisThreadState) is the current one.  With a GIL that is
 * holding it (3.11's current thread state is the holder's, 3.12's a
 * thread-local set while it holds it); in a free-threaded build it is what
 * the C API asks of a caller, true of any number of threads at once.  Not
 * PyGILState_Check: once a subinterpreter has been made it answers yes to
 * every thread (CPython clears gilstate.check_enabled), GIL or none. */
static bool attached_here(void)
{
    if (own_tstate_current())
        return true;
    uintptr_t t = (uintptr_t)py.thread_state();
    return t && t == (uintptr_t)py.this_thread_state();
}

/* Whether Python may be asked about this thread's frames now: bound, and
 * the thread attached. */
static bool api_readable(void)
{
    return atomic_load_explicit(&state, memory_order_acquire) == BOUND && py.is_initialized() &&
           attached_here();
}

/* This thread's own thread state, attached or not (0: it has none, or
 * Python is not running); .attached: it is attached with it. */
typedef struct {
    uintptr_t tstate;
    bool attached; /* plain loads may be used */
} thread_view;

static inline __attribute__((always_inline)) thread_view this_thread(void)
{
    /* Inside a Python C API call this thread is attached with its own
     * thread state, as a rule; but Python code may run from there (a
     * capsule destructor written in Python) and detach around a call of
     * its own (ctypes does): then the current one is another's, or none,
     * and the check below tells. */
    if (ds_py_in_capsule_call) {
        uintptr_t t = (uintptr_t)py.thread_state();
        if (t && t == own_tstate)
            return (thread_view){t, true};
    }
    if (!py.is_initialized())
        return (thread_view){0, false};
    uintptr_t own = own_tstate_current();
    if (own)
        return (thread_view){own, true};
    int id_at = atomic_load_explicit(&tstate_thread_id, memory_order_relaxed);
    if (!py.this_thread_state || id_at <= 0)
        return (thread_view){0, false};
    uintptr_t t = (uintptr_t)py.this_thread_state(), id;
    /* Its own, naming this thread (a thread state of a thread gone is no
     * longer this thread's). */
    if (!t || !read_ptr(t + (uintptr_t)id_at, &id) || id != (uintptr_t)pthread_self())
        return (thread_view){0, false};
    /* Current: this thread is attached with it (plain loads will do). */
    bool attached = (uintptr_t)py.thread_state() == t;
    if (attached)
        own_tstate = t;
    return (thread_view){t, attached};
}

/* ---- frames by layout ------------------------------------------------------- */

/* The current interpreter frame of `tstate` through `l`: 0 when there is
 * none. */
static inline __attribute__((always_inline)) uintptr_t
frame_of(uintptr_t tstate, const frame_layout *l, bool checked)
{
    uintptr_t at, frame;
    if (!tstate || !load(tstate + (uintptr_t)l->tstate_cframe, &at, checked) || !at)
        return 0;
    if (l->cframe_frame < 0)
        return at;
    return load(at + (uintptr_t)l->cframe_frame, &frame, checked) ? frame : 0;
}

/* A frame the interpreter keeps for a C call of its own (3.12's shim
 * frames): no code of the program's. */
static inline __attribute__((always_inline)) bool shim_frame(const frame_layout *lay,
                                                             uintptr_t frame, bool checked)
{
    if (lay->owner_cstack < 0)
        return false;
    unsigned char owner;
    if (checked)
        return ds_safe_read(&owner, (const void *)(frame + (uintptr_t)lay->frame_owner), 1) == 1 &&
               owner >= (unsigned char)lay->owner_cstack;
    return *(const unsigned char *)(frame + (uintptr_t)lay->frame_owner) >=
           (unsigned char)lay->owner_cstack;
}

/* A frame's code object and instruction; false where they cannot be read
 * or the code is not one: its type is checked on every read, attached or
 * not, so a frame of a kind the row does not know (None where a code object
 * would be) ends the walk instead of being read as code. */
static inline __attribute__((always_inline)) bool
code_of(const frame_layout *lay, uintptr_t frame, bool checked, uintptr_t *code, uintptr_t *instr)
{
    uintptr_t type;
    if (!load(frame + (uintptr_t)lay->frame_code, code, checked) ||
        !load(frame + (uintptr_t)lay->frame_instr, instr, checked))
        return false;
    *code &= ~lay->code_tag;
    return *code > 4096 && load(*code + PYOBJECT_TYPE, &type, checked) &&
           type == (uintptr_t)py.code_type;
}

static inline __attribute__((always_inline)) uintptr_t
previous_frame(const frame_layout *lay, uintptr_t frame, bool checked)
{
    uintptr_t back;
    return load(frame + (uintptr_t)lay->frame_previous, &back, checked) ? back : 0;
}

/* The offset in `code` (below its instructions) of the pointer to its
 * attribute `name`, or -1 (an error of ours is cleared: none was pending).
 * The last that holds it: a module's code has one string for co_name and
 * co_qualname, and co_qualname comes after co_name (3.11 to 3.14). */
static int field_holding(PyObject *code, const char *name)
{
    PyObject *value = py.getattr(code, name);
    if (!value) {
        py.err_clear();
        return -1;
    }
    int at = -1;
    for (int off = 16; off + 8 <= code_at.units; off += 8)
        if (*(PyObject *const *)((uintptr_t)code + (uintptr_t)off) == value)
            at = off;
    py.decref(value); /* the code object keeps it alive */
    return at;
}

/* Where a compact ASCII string keeps its length, state and characters,
 * found in `s` (a file name: ASCII on every system this runs on) from its
 * UTF-8 bytes, which are its characters; false where they are not found
 * or the state does not say compact ASCII (then only the API names files). */
#define STATE_COMPACT_ASCII 0x60u /* PyASCIIObject.state: compact (bit 5), ascii (bit 6) */
#define STATE_KIND 0x1cu          /* and the kind, 1 for one byte a character */
static bool find_string_layout(uintptr_t s)
{
    const char *utf8 = py.as_utf8((PyObject *)s);
    if (!utf8) {
        py.err_clear();
        return false;
    }
    size_t n = strlen(utf8);
    uintptr_t word;
    for (int off = 16; off <= 48 && !str_at.length; off += 8)
        if (read_ptr(s + (uintptr_t)off, &word) && word == n)
            str_at.length = off;
    /* After the length: the hash, then the state (a 32-bit word). */
    str_at.state = str_at.length + 16;
    uint32_t st = 0;
    if (!str_at.length || ds_safe_read(&st, (const void *)(s + (uintptr_t)str_at.state), 4) != 4 ||
        (st & STATE_COMPACT_ASCII) != STATE_COMPACT_ASCII || (st & STATE_KIND) != 4u)
        return false;
    char buf[64];
    size_t cmp = n < sizeof(buf) ? n : sizeof(buf);
    for (int off = str_at.state + 8; off <= str_at.state + 24; off += 8)
        if (ds_safe_read(buf, (const void *)(s + (uintptr_t)off), cmp) == cmp &&
            !memcmp(buf, utf8, cmp)) {
            str_at.data = off;
            return true;
        }
    return false;
}

/* Whether the code object's type is at the free-threaded build's place in
 * its header, and not at the default build's. */
static bool free_threaded_object(PyObject *code)
{
    uintptr_t type;
    return py.code_type && read_ptr((uintptr_t)code + PYOBJECT_TYPE_FT, &type) &&
           type == (uintptr_t)py.code_type &&
           !(read_ptr((uintptr_t)code + PYOBJECT_TYPE, &type) && type == (uintptr_t)py.code_type);
}

/* The check's outcome, for DLSHIM_VERBOSE (and the tests, which read it to
 * know which way lines were read). */
static void tell_layout(unsigned long version, const char *how)
{
    if (ds_cfg.verbose)
        ds_diag("python frames: CPython %lu.%lu, %s", version >> 24, (version >> 16) & 0xff, how);
}

/* Checks the layout of this Python against the C API, once (attached, no
 * exception pending): the frame object PyEval_GetFrame returns must point at
 * the interpreter frame the layout leads to, which must point back at it and
 * at the same code object, with its instruction inside that code, and the
 * code must say it is one.  Other threads, attached too in a free-threaded
 * build, meanwhile find it CHECKING and read no frames; what the check
 * finds is published by the release store of CHECKED. */
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
    PyObject *f = py.get_frame();
    PyObject *code = f ? py.get_code(f) : NULL;
    const char *how = !found ? "no frame layout known: frames through the C API"
                      : !code ? "no frame to check the layout with: frames through the C API"
                      : NULL;
    if (code && free_threaded_object(code)) { /* before the rows: they are the default build's */
        found = NULL;
        how = "free-threaded build: frames through the C API, by attached threads";
    }
    uintptr_t frame = 0, frame_of_f = 0, back = 0, code_of_frame = 0, instr = 0, type = 0;
    bool same = found && code && read_ptr((uintptr_t)f + PYFRAMEOBJECT_F_FRAME, &frame_of_f) &&
                (frame = frame_of((uintptr_t)py.thread_state(), found, true)) != 0 &&
                frame == frame_of_f &&
                read_ptr(frame + (uintptr_t)found->frame_obj, &back) && back == (uintptr_t)f &&
                read_ptr(frame + (uintptr_t)found->frame_code, &code_of_frame) &&
                (code_of_frame & ~found->code_tag) == (uintptr_t)code &&
                read_ptr(frame + (uintptr_t)found->frame_instr, &instr) &&
                read_ptr((uintptr_t)code + PYOBJECT_TYPE, &type) &&
                py.code_type && type == (uintptr_t)py.code_type;
    if (same) { /* the owner: the API's frame is the program's, and so is every frame of the
                 * chain the row does not skip (a code object: the row knows the kinds) */
        same = !shim_frame(found, frame, true);
        uintptr_t fr = frame, c, at;
        for (int depth = 0; same && fr && depth < 64; depth++) {
            same = shim_frame(found, fr, true) || code_of(found, fr, true, &c, &at);
            fr = previous_frame(found, fr, true);
        }
    }
    if (same) { /* the instruction: bytes (PyFrame_GetLasti counts them) after the header */
        int lasti = py.get_lasti(f);
        uintptr_t start = instr - (uintptr_t)(lasti > 0 ? lasti : 0);
        same = lasti >= 0 && start > (uintptr_t)code && start - (uintptr_t)code < 1024;
        code_at.units = (int)(start - (uintptr_t)code);
    }
    if (same) /* the names, where the code object's own attributes are */
        same = (code_at.filename = field_holding(code, "co_filename")) > 0 &&
               (code_at.qualname = field_holding(code, "co_qualname")) > 0;
    if (same) { /* this thread is attached: the current thread state is its own */
        uintptr_t tstate = (uintptr_t)py.thread_state(), word, file;
        for (int off = 8; off < 512; off += 8)
            if (read_ptr(tstate + (uintptr_t)off, &word) && word == (uintptr_t)pthread_self()) {
                atomic_store_explicit(&tstate_thread_id, off, memory_order_relaxed);
                break;
            }
        if (read_ptr((uintptr_t)code + (uintptr_t)code_at.filename, &file) &&
            !find_string_layout(file))
            str_at.data = 0; /* names through the API only, by attached threads */
        layout = found;
        how = str_at.data ? "frames read through its checked layout, names in place"
                          : "frames read through its checked layout, names through the C API";
    }
    if (code)
        py.decref(code);
    atomic_store_explicit(&layout_state, CHECKED, memory_order_release);
    tell_layout(version, how ? how : "its frame layout did not match the C API: frames through it");
}

static bool layout_checked(void)
{
    return atomic_load_explicit(&layout_state, memory_order_acquire) == CHECKED && layout;
}

/* Checks the layout where it is unchecked and may be now (attached, no
 * exception pending, no shim lock held: the check makes a frame object). */
static bool ensure_checked(void)
{
    if (atomic_load_explicit(&layout_state, memory_order_acquire) == UNCHECKED &&
        !ds_holds_lock() && api_readable() && !py.err_occurred())
        check_layout();
    return layout_checked();
}

void ds_py_settle(void)
{
    if (__builtin_expect(atomic_load_explicit(&layout_state, memory_order_relaxed) != UNCHECKED, 1))
        return;
    if (atomic_load_explicit(&state, memory_order_acquire) == UNBOUND)
        ds_py_bind_global();
    if (atomic_load_explicit(&state, memory_order_acquire) == BOUND)
        ensure_checked();
}

/* ---- marks: where a thread is, to ask later whether it is still there -------- */

/* A mark through the C API, where the layout is not checked (yet, or
 * ever), after asking Python whether it may. */
__attribute__((noinline)) static bool mark_through_api(ds_py_mark *out)
{
    if (!api_readable() || py.err_occurred())
        return false;
    if (ensure_checked())
        return ds_py_mark_here(out);
    if (atomic_load_explicit(&layout_state, memory_order_acquire) != CHECKED)
        return false; /* another thread checks it: marks of one kind only */
    PyObject *frame = py.get_frame(); /* clears only an error of its own making */
    if (!frame)
        return false;
    out->frame = frame;
    out->at = (uintptr_t)py.get_lasti(frame);
    return true;
}

/* The mark at the innermost frame of this thread (layout checked). */
static inline __attribute__((always_inline)) bool mark_at(thread_view t, ds_py_mark *out)
{
    uintptr_t frame = frame_of(t.tstate, layout, !t.attached), instr;
    if (!frame || !load(frame + (uintptr_t)layout->frame_instr, &instr, !t.attached))
        return false;
    out->frame = (const void *)frame;
    out->at = instr;
    return true;
}

/* Both inline into the capsule hooks (link-time optimisation). */
inline __attribute__((always_inline)) bool ds_py_mark_here(ds_py_mark *out)
{
    if (atomic_load_explicit(&state, memory_order_acquire) != BOUND)
        return false;
    if (!layout_checked())
        return mark_through_api(out);
    own_tstate = (uintptr_t)py.thread_state(); /* inside a C API call: attached */
    return mark_at((thread_view){own_tstate, true}, out);
}

inline __attribute__((always_inline)) bool ds_py_at_mark(const ds_py_mark *m)
{
    if (atomic_load_explicit(&state, memory_order_acquire) != BOUND)
        return false;
    ds_py_mark now;
    if (layout_checked()) {
        thread_view t = this_thread(); /* a release may come with or without the GIL */
        return t.tstate && mark_at(t, &now) && now.frame == m->frame && now.at == m->at;
    }
    return api_readable() && mark_through_api(&now) && now.frame == m->frame && now.at == m->at;
}

/* ---- source locations ---------------------------------------------------------- */

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
    if (str_at.data && ds_safe_read(&st, (const void *)(str + (uintptr_t)str_at.state), 4) == 4 &&
        (st & STATE_COMPACT_ASCII) == STATE_COMPACT_ASCII && (st & STATE_KIND) == 4u &&
        read_ptr(str + (uintptr_t)str_at.length, &len) && len < cap &&
        ds_safe_read(out, (const void *)(str + (uintptr_t)str_at.data), len) == len) {
        out[len] = '\0';
        return out;
    }
    if (!attached || py.err_occurred())
        return NULL;
    const char *s = py.as_utf8((PyObject *)str);
    if (!s)
        py.err_clear(); /* ours: none was pending */
    return s;
}

/* A location not in the table yet, made (and then kept). */
static __attribute__((noinline)) bool make_location(location *l, bool attached)
{
    uintptr_t filename, qualname;
    if (!read_ptr(l->code + (uintptr_t)code_at.filename, &filename) ||
        !read_ptr(l->code + (uintptr_t)code_at.qualname, &qualname))
        return false;
    char file_buf[DS_WHERE_MAX], name_buf[DS_WHERE_MAX];
    const char *file = text_of(filename, file_buf, sizeof(file_buf), attached);
    const char *function = text_of(qualname, name_buf, sizeof(name_buf), attached);
    if (!file)
        return false;
    /* Bytes into the instructions: the one before the next to run.  The
     * line table is read alone, with or without the GIL. */
    long offset = (long)l->instr - (long)(l->code + (uintptr_t)code_at.units);
    int line = py.addr2line((PyObject *)l->code,
                            offset >= 0 && offset < (1L << 30) ? (int)offset : -1);
    set_text(l, file, line, function);
    l->filename = filename, l->qualname = qualname;
    write_slot(l);
    return true;
}

/* The location of one interpreter frame: from the table, or made once;
 * false when it cannot be made now. */
static inline __attribute__((always_inline)) bool locate_frame(uintptr_t frame, thread_view t,
                                                               location *out)
{
    uintptr_t code, instr;
    if (!code_of(layout, frame, !t.attached, &code, &instr))
        return false;
    location key; /* only the key's words set: the text is not cleared at every event */
    key.code = code, key.instr = instr;
    if (!load(code + (uintptr_t)code_at.filename, &key.filename, !t.attached) ||
        !load(code + (uintptr_t)code_at.qualname, &key.qualname, !t.attached))
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
static void walk_layout(thread_view t, bool (*each)(const location *, void *), void *arg)
{
    uintptr_t frame = frame_of(t.tstate, layout, !t.attached);
    for (int depth = 0; frame && depth < FRAMES_WALKED; depth++) {
        if (!shim_frame(layout, frame, !t.attached)) {
            location l;
            if (!locate_frame(frame, t, &l) || !each(&l, arg))
                return;
        }
        frame = previous_frame(layout, frame, !t.attached);
    }
}

/* The same through the C API (attached): each frame object (made if
 * needed), its code, its file, name and line. */
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

/* Walks this thread's frames where that is possible now: false if not.
 * Through the layout, any time; through the API only by an attached thread,
 * no exception pending and no shim lock held (it makes frame objects). */
static bool walk(bool (*each)(const location *, void *), void *arg)
{
    if (atomic_load_explicit(&state, memory_order_acquire) != BOUND)
        return false;
    if (layout_checked() || ensure_checked()) {
        thread_view t = this_thread();
        if (t.tstate)
            walk_layout(t, each, arg);
        return t.tstate != 0;
    }
    if (atomic_load_explicit(&layout_state, memory_order_acquire) != CHECKED || ds_holds_lock() ||
        !api_readable() || py.err_occurred())
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
static inline __attribute__((always_inline)) const location *user_location(thread_view t,
                                                                           location two[2])
{
    uintptr_t frame = frame_of(t.tstate, layout, !t.attached);
    location *at = &two[0]; /* kept if no user's frame comes */
    for (int depth = 0; frame && depth < FRAMES_WALKED; depth++) {
        if (!shim_frame(layout, frame, !t.attached)) {
            if (!locate_frame(frame, t, at))
                break;
            if (!at->framework)
                return at;
            at = &two[1];
        }
        frame = previous_frame(layout, frame, !t.attached);
    }
    return at != &two[0] ? &two[0] : NULL;
}

static bool python_here(ds_where *out, char scratch[DS_WHERE_MAX])
{
    location two[2];
    const location *l = NULL;
    if (atomic_load_explicit(&state, memory_order_acquire) == BOUND && layout_checked()) {
        thread_view t = this_thread();
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
    if (!api_readable() || py.err_occurred())
        return false;
    PyObject *frame = py.get_frame();
    PyObject *code = frame ? py.get_code(frame) : NULL;
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

bool ds_py_package_here(char *out, size_t cap)
{
    if (atomic_load_explicit(&state, memory_order_acquire) != BOUND)
        return false;
    if (!layout_checked() && !ensure_checked())
        return package_through_api(out, cap);
    thread_view t = this_thread();
    uintptr_t frame = frame_of(t.tstate, layout, !t.attached), code, instr, filename;
    while (frame && shim_frame(layout, frame, !t.attached))
        frame = previous_frame(layout, frame, !t.attached);
    char path[DS_WHERE_MAX];
    const char *file = frame && code_of(layout, frame, !t.attached, &code, &instr) &&
                               read_ptr(code + (uintptr_t)code_at.filename, &filename)
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

static const ds_locator locator = {.here = python_here, .stack = python_stack};
