/*
 * python_frames.h — what python_frames.c and python_locations.c share, and
 * nothing else.
 *
 * python_frames.c binds CPython's C API (ds_py), checks the frame layout
 * once against it (ds_py_layout, ds_py_code_at, ds_py_str_at) and answers
 * the marks; python_locations.c turns frames into source locations (its
 * table, `py` and `py_stack`, the innermost file's package) and hands the
 * core its locator (ds_py_locator), which python_frames.c installs once
 * Python is bound.  Reading this thread's frames through the checked layout
 * is on every event's path: those readers are here, inline.
 */
#ifndef DS_PYTHON_FRAMES_H
#define DS_PYTHON_FRAMES_H

#include <pthread.h>
#include <stdatomic.h>

#include "hooks.h"

typedef struct _object PyObject;

typedef struct {
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
} ds_py_api;
extern ds_py_api ds_py;

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
} ds_py_frame_layout;
#define PYOBJECT_TYPE 8 /* PyObject.ob_type (not the free-threaded build's) */

/* Where a code object keeps co_filename, co_qualname and its instructions,
 * and where a compact ASCII string keeps its length, its state bits and its
 * characters: found by check_layout in this process. */
struct ds_py_code_at {
    int filename, qualname, units;
};
extern struct ds_py_code_at ds_py_code_at;
struct ds_py_str_at {
    int length, state, data;
};
extern struct ds_py_str_at ds_py_str_at;
/* The state bits of a compact ASCII string. */
#define STATE_COMPACT_ASCII 0x60u /* PyASCIIObject.state: compact (bit 5), ascii (bit 6) */
#define STATE_KIND 0x1cu          /* and the kind, 1 for one byte a character */
/* The layout checked against the C API: NULL until then, and where it did
 * not check out. */
extern const ds_py_frame_layout *ds_py_layout;
/* Where a thread state keeps its thread's id (PyThreadState.thread_id:
 * PyThread_get_thread_ident(), which is pthread_self()), found by the same
 * check; 0: not found. */
extern atomic_int ds_py_tstate_thread_id;

/* Whether the C API is bound (ds_py_bind_first). */
enum { DS_PY_UNBOUND, DS_PY_BINDING, DS_PY_BOUND, DS_PY_ABSENT };
extern atomic_int ds_py_state;
/* BOUND: whether the layout was checked yet (once, by the first thread that
 * reads a frame attached; another thread meanwhile finds none). */
enum { DS_PY_UNCHECKED, DS_PY_CHECKING, DS_PY_CHECKED };
extern atomic_int ds_py_layout_state;

/* Source locations for the core's events, given once Python is bound. */
extern const ds_locator ds_py_locator;

static inline bool ds_py_read_ptr(uintptr_t at, uintptr_t *out)
{
    return ds_safe_read(out, (const void *)at, sizeof(*out)) == sizeof(*out);
}

/* A word of the interpreter's: a plain load where this thread is attached
 * (its frames and their code cannot change under it), else the no-fault
 * reader (a signal may have stopped the thread halfway through a call). */
static inline __attribute__((always_inline)) bool ds_py_load(uintptr_t at, uintptr_t *out,
                                                              bool checked)
{
    if (!checked) {
        *out = *(const uintptr_t *)at;
        return true;
    }
    return at > 4096 && ds_py_read_ptr(at, out);
}

/* ---- this thread: attached or not (python_frames.c says what that means) --- */

/* This thread's thread state, as read inside a Python C API call (so
 * attached): what tells, later and without asking Python, whether this
 * thread is attached again (ds_py_own_tstate_current). */
extern DS_TLS uintptr_t ds_py_own_tstate;

/* The current thread state (on 3.11 the GIL holder's, from 3.12 this
 * thread's while it is attached) if it is this thread's own and names
 * this thread: then this thread is attached with it.  0 otherwise, or
 * where the layout's check did not find the thread id in a thread state. */
static inline __attribute__((always_inline)) uintptr_t ds_py_own_tstate_current(void)
{
    int id_at = atomic_load_explicit(&ds_py_tstate_thread_id, memory_order_relaxed);
    if (id_at <= 0)
        return 0;
    uintptr_t t = (uintptr_t)ds_py.thread_state();
    bool own = t && t == ds_py_own_tstate &&
               *(const uintptr_t *)(t + (uintptr_t)id_at) == (uintptr_t)pthread_self();
    return own ? t : 0;
}

/* Whether Python may be asked about this thread's frames now: bound, and
 * the thread attached. */
bool ds_py_api_readable(void);

/* This thread's own thread state, attached or not (0: it has none, or
 * Python is not running); .attached: it is attached with it. */
typedef struct {
    uintptr_t tstate;
    bool attached; /* plain loads may be used */
} ds_py_thread;

static inline __attribute__((always_inline)) ds_py_thread ds_py_this_thread(void)
{
    /* Inside a Python C API call this thread is attached with its own
     * thread state, as a rule; but Python code may run from there (a
     * capsule destructor written in Python) and detach around a call of
     * its own (ctypes does): then the current one is another's, or none,
     * and the check below tells. */
    if (ds_py_in_capsule_call) {
        uintptr_t t = (uintptr_t)ds_py.thread_state();
        if (t && t == ds_py_own_tstate)
            return (ds_py_thread){t, true};
    }
    if (!ds_py.is_initialized())
        return (ds_py_thread){0, false};
    uintptr_t own = ds_py_own_tstate_current();
    if (own)
        return (ds_py_thread){own, true};
    int id_at = atomic_load_explicit(&ds_py_tstate_thread_id, memory_order_relaxed);
    if (!ds_py.this_thread_state || id_at <= 0)
        return (ds_py_thread){0, false};
    uintptr_t t = (uintptr_t)ds_py.this_thread_state(), id;
    /* Its own, naming this thread (a thread state of a thread gone is no
     * longer this thread's). */
    if (!t || !ds_py_read_ptr(t + (uintptr_t)id_at, &id) || id != (uintptr_t)pthread_self())
        return (ds_py_thread){0, false};
    /* Current: this thread is attached with it (plain loads will do). */
    bool attached = (uintptr_t)ds_py.thread_state() == t;
    if (attached)
        ds_py_own_tstate = t;
    return (ds_py_thread){t, attached};
}

/* ---- frames by layout ------------------------------------------------------- */

/* The current interpreter frame of `tstate` through `l`: 0 when there is
 * none. */
static inline __attribute__((always_inline)) uintptr_t
ds_py_frame_of(uintptr_t tstate, const ds_py_frame_layout *l, bool checked)
{
    uintptr_t at, frame;
    if (!tstate || !ds_py_load(tstate + (uintptr_t)l->tstate_cframe, &at, checked) || !at)
        return 0;
    if (l->cframe_frame < 0)
        return at;
    return ds_py_load(at + (uintptr_t)l->cframe_frame, &frame, checked) ? frame : 0;
}

/* A frame the interpreter keeps for a C call of its own (3.12's shim
 * frames): no code of the program's. */
static inline __attribute__((always_inline)) bool
ds_py_shim_frame(const ds_py_frame_layout *lay, uintptr_t frame, bool checked)
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
ds_py_code_of(const ds_py_frame_layout *lay, uintptr_t frame, bool checked, uintptr_t *code,
              uintptr_t *instr)
{
    uintptr_t type;
    if (!ds_py_load(frame + (uintptr_t)lay->frame_code, code, checked) ||
        !ds_py_load(frame + (uintptr_t)lay->frame_instr, instr, checked))
        return false;
    *code &= ~lay->code_tag;
    return *code > 4096 && ds_py_load(*code + PYOBJECT_TYPE, &type, checked) &&
           type == (uintptr_t)ds_py.code_type;
}

static inline __attribute__((always_inline)) uintptr_t
ds_py_previous_frame(const ds_py_frame_layout *lay, uintptr_t frame, bool checked)
{
    uintptr_t back;
    return ds_py_load(frame + (uintptr_t)lay->frame_previous, &back, checked) ? back : 0;
}

/* Whether frames are read through the layout: checked, and it checked out. */
static inline bool ds_py_layout_checked(void)
{
    return atomic_load_explicit(&ds_py_layout_state, memory_order_acquire) == DS_PY_CHECKED &&
           ds_py_layout;
}

/* Checks the layout where it is unchecked and may be now (attached, no
 * exception pending, no shim lock held: the check makes a frame object). */
bool ds_py_ensure_checked(void);

#endif /* DS_PYTHON_FRAMES_H */
