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
 * The location table and what is made of it (`py`, `py_stack`, the
 * package): python_locations.c; what the two files share: python_frames.h.
 *
 * No Python header: the few prototypes and offsets are declared here and in
 * python_frames.h, so the shim builds and loads without Python.
 */
#include <stddef.h>
#include <string.h>

#include "python_frames.h"

/* CPython's C API, bound once (ds_py_bind_first). */
ds_py_api ds_py;

/* One row per CPython version (python_frames.h says what each field is). */
static const ds_py_frame_layout layouts[] = {
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
#define PYOBJECT_TYPE_FT 24      /* the free-threaded build's (ob_tid, flags, refcounts first) */

/* Found by check_layout and published with its release store of
 * ds_py_layout_state (python_frames.h). */
struct ds_py_code_at ds_py_code_at;
struct ds_py_str_at ds_py_str_at;
const ds_py_frame_layout *ds_py_layout;
atomic_int ds_py_tstate_thread_id;
atomic_int ds_py_state = DS_PY_UNBOUND;
atomic_int ds_py_layout_state = DS_PY_UNCHECKED;

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
    int expected = DS_PY_UNBOUND;
    atomic_store_explicit(&ds_py_bind_tried, true, memory_order_relaxed);
    if (!atomic_compare_exchange_strong(&ds_py_state, &expected, DS_PY_BINDING))
        return; /* bound, absent, or another thread binds it */
#define FIND(field, name) *(void **)&ds_py.field = find(name, python_function)
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
    if (!ds_py.thread_state) /* its public name from 3.13 */
        FIND(thread_state, "PyThreadState_GetUnchecked");
    FIND(this_thread_state, "PyGILState_GetThisThreadState");
    FIND(version, "Py_Version");
    FIND(code_type, "PyCode_Type");
    FIND(addr2line, "PyCode_Addr2Line");
    FIND(get_back, "PyFrame_GetBack");
    FIND(get_lineno, "PyFrame_GetLineNumber");
#undef FIND
    bool all = ds_py.is_initialized && ds_py.this_thread_state && ds_py.err_occurred &&
               ds_py.err_clear && ds_py.get_frame && ds_py.get_lasti && ds_py.get_code &&
               ds_py.getattr && ds_py.as_utf8 && ds_py.decref && ds_py.addr2line &&
               ds_py.get_back && ds_py.get_lineno;
    atomic_store_explicit(&ds_py_state, all ? DS_PY_BOUND : DS_PY_ABSENT, memory_order_release);
    /* Events ask for a source line only from now on: a program without
     * Python never pays for the question. */
    if (all)
        ds_context_set_locator(&ds_py_locator);
}

void ds_py_bind_global(void)
{
    void *is_initialized = ds_resolve_real("Py_IsInitialized", NULL);
    if (is_initialized)
        ds_py_bind(is_initialized);
}

/* ---- this thread: attached or not -------------------------------------------- */

/* "Attached" below: the thread may call the C API.  With a GIL, it holds
 * it; in a free-threaded build (3.13t, 3.14t), its thread state is active,
 * and any number of threads are attached at once, running in parallel.
 * Nothing here takes "attached" to mean "alone": an attached thread calls
 * the API about its own frames only, and what threads share (the layout,
 * the location table, the sites) is written once and published, or kept
 * with atomics (see each). */

/* Per thread: its own thread state (python_frames.h) and whether it runs a
 * capsule hook (hooks.h). */
DS_TLS uintptr_t ds_py_own_tstate;
DS_TLS unsigned ds_py_in_capsule_call;

/* Whether this thread is attached: its own thread state (a thread-local,
 * PyGILState_GetThisThreadState) is the current one.  With a GIL that is
 * holding it (3.11's current thread state is the holder's, 3.12's a
 * thread-local set while it holds it); in a free-threaded build it is what
 * the C API asks of a caller, true of any number of threads at once.  Not
 * PyGILState_Check: once a subinterpreter has been made it answers yes to
 * every thread (CPython clears gilstate.check_enabled), GIL or none. */
static bool attached_here(void)
{
    if (ds_py_own_tstate_current())
        return true;
    uintptr_t t = (uintptr_t)ds_py.thread_state();
    return t && t == (uintptr_t)ds_py.this_thread_state();
}

/* Whether Python may be asked about this thread's frames now: bound, and
 * the thread attached. */
bool ds_py_api_readable(void)
{
    return atomic_load_explicit(&ds_py_state, memory_order_acquire) == DS_PY_BOUND &&
           ds_py.is_initialized() && attached_here();
}

/* ---- the layout's check ------------------------------------------------------ */

/* The offset in `code` (below its instructions) of the pointer to its
 * attribute `name`, or -1 (an error of ours is cleared: none was pending).
 * The last that holds it: a module's code has one string for co_name and
 * co_qualname, and co_qualname comes after co_name (3.11 to 3.14). */
static int field_holding(PyObject *code, const char *name)
{
    PyObject *value = ds_py.getattr(code, name);
    if (!value) {
        ds_py.err_clear();
        return -1;
    }
    int at = -1;
    for (int off = 16; off + 8 <= ds_py_code_at.units; off += 8)
        if (*(PyObject *const *)((uintptr_t)code + (uintptr_t)off) == value)
            at = off;
    ds_py.decref(value); /* the code object keeps it alive */
    return at;
}

/* Where a compact ASCII string keeps its length, state and characters,
 * found in `s` (a file name: ASCII on every system this runs on) from its
 * UTF-8 bytes, which are its characters; false where they are not found
 * or the state does not say compact ASCII (then only the API names files). */
static bool find_string_layout(uintptr_t s)
{
    const char *utf8 = ds_py.as_utf8((PyObject *)s);
    if (!utf8) {
        ds_py.err_clear();
        return false;
    }
    size_t n = strlen(utf8);
    uintptr_t word;
    for (int off = 16; off <= 48 && !ds_py_str_at.length; off += 8)
        if (ds_py_read_ptr(s + (uintptr_t)off, &word) && word == n)
            ds_py_str_at.length = off;
    /* After the length: the hash, then the state (a 32-bit word). */
    ds_py_str_at.state = ds_py_str_at.length + 16;
    uint32_t st = 0;
    if (!ds_py_str_at.length ||
        ds_safe_read(&st, (const void *)(s + (uintptr_t)ds_py_str_at.state), 4) != 4 ||
        (st & STATE_COMPACT_ASCII) != STATE_COMPACT_ASCII || (st & STATE_KIND) != 4u)
        return false;
    char buf[64];
    size_t cmp = n < sizeof(buf) ? n : sizeof(buf);
    for (int off = ds_py_str_at.state + 8; off <= ds_py_str_at.state + 24; off += 8)
        if (ds_safe_read(buf, (const void *)(s + (uintptr_t)off), cmp) == cmp &&
            !memcmp(buf, utf8, cmp)) {
            ds_py_str_at.data = off;
            return true;
        }
    return false;
}

/* Whether the code object's type is at the free-threaded build's place in
 * its header, and not at the default build's. */
static bool free_threaded_object(PyObject *code)
{
    uintptr_t type;
    return ds_py.code_type && ds_py_read_ptr((uintptr_t)code + PYOBJECT_TYPE_FT, &type) &&
           type == (uintptr_t)ds_py.code_type &&
           !(ds_py_read_ptr((uintptr_t)code + PYOBJECT_TYPE, &type) &&
             type == (uintptr_t)ds_py.code_type);
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
    int expected = DS_PY_UNCHECKED;
    if (!atomic_compare_exchange_strong(&ds_py_layout_state, &expected, DS_PY_CHECKING))
        return;
    const ds_py_frame_layout *found = NULL;
    unsigned long version = ds_py.version ? *ds_py.version & 0xffff0000ul : 0;
    for (size_t i = 0; ds_py.thread_state && i < DS_ARRAY_LEN(layouts); i++)
        if (layouts[i].version == version)
            found = &layouts[i];
    PyObject *f = ds_py.get_frame();
    PyObject *code = f ? ds_py.get_code(f) : NULL;
    const char *how = !found ? "no frame layout known: frames through the C API"
                      : !code ? "no frame to check the layout with: frames through the C API"
                      : NULL;
    if (code && free_threaded_object(code)) { /* before the rows: they are the default build's */
        found = NULL;
        how = "free-threaded build: frames through the C API, by attached threads";
    }
    uintptr_t frame = 0, frame_of_f = 0, back = 0, code_of_frame = 0, instr = 0, type = 0;
    bool same = found && code &&
                ds_py_read_ptr((uintptr_t)f + PYFRAMEOBJECT_F_FRAME, &frame_of_f) &&
                (frame = ds_py_frame_of((uintptr_t)ds_py.thread_state(), found, true)) != 0 &&
                frame == frame_of_f &&
                ds_py_read_ptr(frame + (uintptr_t)found->frame_obj, &back) &&
                back == (uintptr_t)f &&
                ds_py_read_ptr(frame + (uintptr_t)found->frame_code, &code_of_frame) &&
                (code_of_frame & ~found->code_tag) == (uintptr_t)code &&
                ds_py_read_ptr(frame + (uintptr_t)found->frame_instr, &instr) &&
                ds_py_read_ptr((uintptr_t)code + PYOBJECT_TYPE, &type) &&
                ds_py.code_type && type == (uintptr_t)ds_py.code_type;
    if (same) { /* the owner: the API's frame is the program's, and so is every frame of the
                 * chain the row does not skip (a code object: the row knows the kinds) */
        same = !ds_py_shim_frame(found, frame, true);
        uintptr_t fr = frame, c, at;
        for (int depth = 0; same && fr && depth < 64; depth++) {
            same = ds_py_shim_frame(found, fr, true) || ds_py_code_of(found, fr, true, &c, &at);
            fr = ds_py_previous_frame(found, fr, true);
        }
    }
    if (same) { /* the instruction: bytes (PyFrame_GetLasti counts them) after the header */
        int lasti = ds_py.get_lasti(f);
        uintptr_t start = instr - (uintptr_t)(lasti > 0 ? lasti : 0);
        same = lasti >= 0 && start > (uintptr_t)code && start - (uintptr_t)code < 1024;
        ds_py_code_at.units = (int)(start - (uintptr_t)code);
    }
    if (same) /* the names, where the code object's own attributes are */
        same = (ds_py_code_at.filename = field_holding(code, "co_filename")) > 0 &&
               (ds_py_code_at.qualname = field_holding(code, "co_qualname")) > 0;
    if (same) { /* this thread is attached: the current thread state is its own */
        uintptr_t tstate = (uintptr_t)ds_py.thread_state(), word, file;
        for (int off = 8; off < 512; off += 8)
            if (ds_py_read_ptr(tstate + (uintptr_t)off, &word) &&
                word == (uintptr_t)pthread_self()) {
                atomic_store_explicit(&ds_py_tstate_thread_id, off, memory_order_relaxed);
                break;
            }
        if (ds_py_read_ptr((uintptr_t)code + (uintptr_t)ds_py_code_at.filename, &file) &&
            !find_string_layout(file))
            ds_py_str_at.data = 0; /* names through the API only, by attached threads */
        ds_py_layout = found;
        how = ds_py_str_at.data ? "frames read through its checked layout, names in place"
                          : "frames read through its checked layout, names through the C API";
    }
    if (code)
        ds_py.decref(code);
    atomic_store_explicit(&ds_py_layout_state, DS_PY_CHECKED, memory_order_release);
    tell_layout(version, how ? how : "its frame layout did not match the C API: frames through it");
}

/* Checks the layout where it is unchecked and may be now (attached, no
 * exception pending, no shim lock held: the check makes a frame object). */
bool ds_py_ensure_checked(void)
{
    if (atomic_load_explicit(&ds_py_layout_state, memory_order_acquire) == DS_PY_UNCHECKED &&
        !ds_holds_lock() && ds_py_api_readable() && !ds_py.err_occurred())
        check_layout();
    return ds_py_layout_checked();
}

void ds_py_settle(void)
{
    if (__builtin_expect(
            atomic_load_explicit(&ds_py_layout_state, memory_order_relaxed) != DS_PY_UNCHECKED, 1))
        return;
    if (atomic_load_explicit(&ds_py_state, memory_order_acquire) == DS_PY_UNBOUND)
        ds_py_bind_global();
    if (atomic_load_explicit(&ds_py_state, memory_order_acquire) == DS_PY_BOUND)
        ds_py_ensure_checked();
}

/* ---- marks: where a thread is, to ask later whether it is still there -------- */

/* A mark through the C API, where the layout is not checked (yet, or
 * ever), after asking Python whether it may. */
__attribute__((noinline)) static bool mark_through_api(ds_py_mark *out)
{
    if (!ds_py_api_readable() || ds_py.err_occurred())
        return false;
    if (ds_py_ensure_checked())
        return ds_py_mark_here(out);
    if (atomic_load_explicit(&ds_py_layout_state, memory_order_acquire) != DS_PY_CHECKED)
        return false; /* another thread checks it: marks of one kind only */
    PyObject *frame = ds_py.get_frame(); /* clears only an error of its own making */
    if (!frame)
        return false;
    out->frame = frame;
    out->at = (uintptr_t)ds_py.get_lasti(frame);
    return true;
}

/* The mark at the innermost frame of this thread (layout checked). */
static inline __attribute__((always_inline)) bool mark_at(ds_py_thread t, ds_py_mark *out)
{
    uintptr_t frame = ds_py_frame_of(t.tstate, ds_py_layout, !t.attached), instr;
    if (!frame || !ds_py_load(frame + (uintptr_t)ds_py_layout->frame_instr, &instr, !t.attached))
        return false;
    out->frame = (const void *)frame;
    out->at = instr;
    return true;
}

/* Both inline into the capsule hooks (link-time optimisation). */
inline __attribute__((always_inline)) bool ds_py_mark_here(ds_py_mark *out)
{
    if (atomic_load_explicit(&ds_py_state, memory_order_acquire) != DS_PY_BOUND)
        return false;
    if (!ds_py_layout_checked())
        return mark_through_api(out);
    ds_py_own_tstate = (uintptr_t)ds_py.thread_state(); /* inside a C API call: attached */
    return mark_at((ds_py_thread){ds_py_own_tstate, true}, out);
}

inline __attribute__((always_inline)) bool ds_py_at_mark(const ds_py_mark *m)
{
    if (atomic_load_explicit(&ds_py_state, memory_order_acquire) != DS_PY_BOUND)
        return false;
    ds_py_mark now;
    if (ds_py_layout_checked()) {
        ds_py_thread t = ds_py_this_thread(); /* a release may come with or without the GIL */
        return t.tstate && mark_at(t, &now) && now.frame == m->frame && now.at == m->at;
    }
    return ds_py_api_readable() && mark_through_api(&now) && now.frame == m->frame &&
           now.at == m->at;
}
