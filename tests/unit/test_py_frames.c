/* Unit tests of hooks/python_frames.c and python_locations.c with threads
 * truly in parallel, as a free-threaded CPython (3.13t, 3.14t) runs them,
 * against a fake interpreter defined here: CPython 3.13's frame layout,
 * thread states, code objects and compact ASCII strings, and the C API
 * functions the shim binds (found in this executable's dynamic symbols,
 * -rdynamic).  No free-threaded Python can be installed on this machine, so
 * the argument of docs/design.md ("Free-threaded CPython") is proven here,
 * under TSan by `make check-tsan`.
 *
 * Eight threads bind the API and check the layout at once (one wins), then
 * each, in every round, rewrites its own frames (another code object of a
 * shared pool and another instruction: more locations than the shared table
 * has slots, so slots are written and evicted under readers) and asks for
 * its line (`py`), its stack (`py_stack`), its package and its mark, every
 * other round attached and detached.  The fake API counts each call made by
 * a thread that is not attached: a free-threaded interpreter forbids them as
 * a GIL build does.  Its PyGILState_Check answers yes to every thread, as
 * CPython's does once a subinterpreter was made (and as any attached thread
 * of a free-threaded build is told): the shim must not lean on it.
 *
 * Each case runs in a child process (the shim binds and checks once per
 * process): the checked layout (3.13), a version with no row (the C API
 * alone), and a free-threaded object header (the C API alone, by design). */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "output/output.h"
#include "hooks.h"
#include "harness.h"

#define THREADS 8
#ifndef ROUNDS
#define ROUNDS 20000
#endif

/* ---- the fake interpreter: CPython 3.13's layout --------------------------- */
typedef struct {
    uintptr_t executable; /* 0: the code object */
    uintptr_t previous;   /* 8 */
    uintptr_t unused[4];
    uintptr_t frame_obj; /* 48 */
    uintptr_t instr;     /* 56 */
    int32_t stacktop;
    uint16_t return_offset;
    char owner; /* 70: 3, FRAME_OWNED_BY_CSTACK, for an entry frame */
    char pad;
} iframe;
_Static_assert(offsetof(iframe, frame_obj) == 48 && offsetof(iframe, instr) == 56 &&
                   offsetof(iframe, owner) == 70,
               "3.13's _PyInterpreterFrame");

typedef struct {
    uintptr_t refcnt, type, unused;
    iframe *f_frame; /* 24: PyFrameObject.f_frame */
} frame_object;

typedef struct {
    uintptr_t unused[9];
    iframe *current_frame; /* 72 */
    uintptr_t more[10];
    uintptr_t thread_id; /* 160: pthread_self() */
    uintptr_t tail[48];  /* the check looks for the thread id in the first 512 bytes */
} thread_state;
_Static_assert(offsetof(thread_state, current_frame) == 72, "3.13's PyThreadState");

/* A compact ASCII string: header, length, hash, state, then the text. */
typedef struct {
    uintptr_t refcnt, type, length, hash;
    uint32_t state, pad;
    char text[88];
} string;
#define STATE_ASCII 0x64u /* compact, ascii, kind 1 */

/* A code object: header, then (among other words) the file, name and
 * qualified name, then the instructions at UNITS bytes; WORD_LINE is the
 * fake's own: the first line, each instruction two bytes and one line. */
#define UNITS 200
#define INSTRS 48
enum { WORD_TYPE = 1, WORD_TYPE_FT = 3, WORD_LINE = 5, WORD_FILE = 12, WORD_NAME = 13,
       WORD_QUALNAME = 14, CODE_WORDS = UNITS / 8 + INSTRS };

#define CODES 16 /* user code objects, shared by every thread */
static uintptr_t user_code[CODES][CODE_WORDS], fw_code[CODE_WORDS], main_code[CODE_WORDS];
static string strings[3 * (CODES + 2)]; /* file, name, qualname of each */
static uintptr_t not_code[4]; /* what an entry frame's executable points to */

/* Exported: the shim finds them by name (ds_resolve_real). */
unsigned long Py_Version;
char PyCode_Type[256], PyUnicode_Type[256];
int Py_IsInitialized(void);
int PyGILState_Check(void);
void *PyErr_Occurred(void);
void PyErr_Clear(void);
void *PyEval_GetFrame(void);
int PyFrame_GetLasti(void *);
void *PyFrame_GetCode(void *);
void *PyObject_GetAttrString(void *, const char *);
const char *PyUnicode_AsUTF8(void *);
void Py_DecRef(void *);
void *_PyThreadState_UncheckedGet(void);
void *PyGILState_GetThisThreadState(void);
int PyCode_Addr2Line(void *, int);
void *PyFrame_GetBack(void *);
int PyFrame_GetLineNumber(void *);

static bool free_threaded; /* code objects with the free-threaded header */
static atomic_int api_detached;   /* API calls by threads not attached: must stay 0 */
static _Thread_local thread_state *own;
static _Thread_local bool attached;

static void api_call(void)
{
    if (!attached)
        atomic_fetch_add(&api_detached, 1);
}

int Py_IsInitialized(void) { return 1; }
int PyGILState_Check(void) { return 1; } /* as after a subinterpreter was made */
void *PyErr_Occurred(void) { return NULL; }
void PyErr_Clear(void) {}
void Py_DecRef(void *o) { (void)o; }
void *_PyThreadState_UncheckedGet(void) { return attached ? own : NULL; }
void *PyGILState_GetThisThreadState(void) { return own; }

static uintptr_t *code_of_frame(const iframe *f) { return (uintptr_t *)f->executable; }
static int lasti_of(const iframe *f)
{
    return (int)(f->instr - (f->executable + UNITS));
}

void *PyEval_GetFrame(void)
{
    api_call();
    iframe *f = own->current_frame;
    while (f && f->owner == 3)
        f = (iframe *)f->previous;
    return f ? (void *)f->frame_obj : NULL;
}

int PyFrame_GetLasti(void *fo)
{
    api_call();
    return lasti_of(((frame_object *)fo)->f_frame);
}

void *PyFrame_GetCode(void *fo)
{
    api_call();
    return code_of_frame(((frame_object *)fo)->f_frame);
}

void *PyFrame_GetBack(void *fo)
{
    api_call();
    iframe *f = (iframe *)((frame_object *)fo)->f_frame->previous;
    while (f && f->owner == 3)
        f = (iframe *)f->previous;
    return f ? (void *)f->frame_obj : NULL;
}

int PyCode_Addr2Line(void *code, int offset)
{
    return offset < 0 ? -1 : (int)((uintptr_t *)code)[WORD_LINE] + offset / 2;
}

int PyFrame_GetLineNumber(void *fo)
{
    api_call();
    iframe *f = ((frame_object *)fo)->f_frame;
    return PyCode_Addr2Line(code_of_frame(f), lasti_of(f));
}

void *PyObject_GetAttrString(void *code, const char *name)
{
    api_call();
    uintptr_t *c = code;
    if (!strcmp(name, "co_filename"))
        return (void *)c[WORD_FILE];
    if (!strcmp(name, "co_qualname"))
        return (void *)c[WORD_QUALNAME];
    if (!strcmp(name, "co_name"))
        return (void *)c[WORD_NAME];
    return NULL;
}

const char *PyUnicode_AsUTF8(void *s)
{
    api_call();
    return ((string *)s)->text;
}

static string *make_string(int *n, const char *text)
{
    string *s = &strings[(*n)++];
    *s = (string){.refcnt = 1, .type = (uintptr_t)PyUnicode_Type, .length = strlen(text),
                  .hash = (uintptr_t)-1, .state = STATE_ASCII};
    snprintf(s->text, sizeof(s->text), "%s", text);
    return s;
}

static void make_code(uintptr_t *c, int *n, const char *file, const char *qualname, int line)
{
    memset(c, 0, CODE_WORDS * sizeof(*c));
    c[0] = 1;
    c[free_threaded ? WORD_TYPE_FT : WORD_TYPE] = (uintptr_t)PyCode_Type;
    c[WORD_LINE] = (uintptr_t)line;
    c[WORD_FILE] = (uintptr_t)make_string(n, file);
    c[WORD_NAME] = (uintptr_t)make_string(n, "name");
    c[WORD_QUALNAME] = (uintptr_t)make_string(n, qualname);
}

#define USER_FILE "/work/app/user_%d.py"
#define FW_FILE "/usr/lib/python3/dist-packages/numpy/_core/fw.py"
#define MAIN_FILE "/work/app/main.py"

static void make_codes(void)
{
    int n = 0;
    for (int i = 0; i < CODES; i++) {
        char file[64], name[32];
        snprintf(file, sizeof(file), USER_FILE, i);
        snprintf(name, sizeof(name), "Step.f%d", i);
        make_code(user_code[i], &n, file, name, 100 * (i + 1));
    }
    make_code(fw_code, &n, FW_FILE, "from_dlpack", 10);
    make_code(main_code, &n, MAIN_FILE, "<module>", 1000);
}

/* ---- one thread's frames: innermost first --------------------------------
 *   fw:    a framework's frame (numpy), skipped for `py`
 *   user:  user_code[c] at instruction k: `py`
 *   entry: an entry frame of the C stack (no code), skipped by the walk
 *   main:  the script, at an instruction of this thread's own */
typedef struct {
    thread_state ts;
    iframe fw, user, entry, main;
    frame_object fw_o, user_o, main_o;
    int index;
    int bad, missing, detached_found;
} thread;

static void link_frames(thread *t)
{
    memset(&t->ts, 0, sizeof(t->ts));
    t->ts.thread_id = (uintptr_t)pthread_self();
    t->fw = (iframe){.executable = (uintptr_t)fw_code, .previous = (uintptr_t)&t->user,
                     .frame_obj = (uintptr_t)&t->fw_o};
    t->user = (iframe){.previous = (uintptr_t)&t->entry, .frame_obj = (uintptr_t)&t->user_o};
    t->entry = (iframe){.executable = (uintptr_t)not_code, .previous = (uintptr_t)&t->main,
                        .owner = 3};
    t->main = (iframe){.executable = (uintptr_t)main_code,
                       .instr = (uintptr_t)main_code + UNITS + 2u * (unsigned)t->index,
                       .frame_obj = (uintptr_t)&t->main_o};
    t->fw_o = (frame_object){.refcnt = 1, .f_frame = &t->fw};
    t->user_o = (frame_object){.refcnt = 1, .f_frame = &t->user};
    t->main_o = (frame_object){.refcnt = 1, .f_frame = &t->main};
    t->ts.current_frame = &t->fw;
}

/* The thread's own frames move on, as only that thread's calls move them. */
static void step(thread *t, int round, int *c, int *k)
{
    *c = (t->index * 7 + round) % CODES;
    *k = (round * 3 + t->index) % INSTRS;
    t->user.executable = (uintptr_t)user_code[*c];
    t->user.instr = (uintptr_t)user_code[*c] + UNITS + 2u * (unsigned)*k;
    t->fw.instr = (uintptr_t)fw_code + UNITS + 2u * (unsigned)(round % 8);
}

static pthread_barrier_t started, settled;
static bool layout_expected; /* lines also while detached */

static void expect_text(thread *t, const char *got, const char *want)
{
    if (strcmp(got, want)) {
        if (t->bad++ < 3)
            fprintf(stderr, "thread %d: \"%s\", expected \"%s\"\n", t->index, got, want);
    }
}

static void *run(void *arg)
{
    thread *t = arg;
    own = &t->ts;
    link_frames(t);
    attached = true;
    pthread_barrier_wait(&started);
    ds_py_bind((const void *)Py_IsInitialized); /* all at once: one binds */
    for (int round = 0; round < ROUNDS; round++) {
        int c, k;
        step(t, round, &c, &k);
        attached = round == 0 || round % 2;
        char user[DS_WHERE_MAX], fw[DS_WHERE_MAX], script[DS_WHERE_MAX];
        snprintf(user, sizeof(user), USER_FILE ":%d in Step.f%d", c, 100 * (c + 1) + k, c);
        snprintf(fw, sizeof(fw), FW_FILE ":%d in from_dlpack", 10 + round % 8);
        snprintf(script, sizeof(script), MAIN_FILE ":%d in <module>", 1000 + t->index);

        char where[DS_WHERE_MAX], stack[4][DS_WHERE_MAX], package[DS_NAME_MAX];
        size_t n = ds_context_where(where, sizeof(where));
        int frames = ds_context_stack(stack, 4);
        bool in_package = ds_py_package_here(package, sizeof(package));
        ds_py_mark mark = {0};
        bool marked = attached && ds_py_mark_here(&mark);
        bool should = attached || layout_expected;
        if (round == 0) { /* the bind and the check race here: answers may be missing */
            pthread_barrier_wait(&settled);
            continue;
        }
        if (!should) { /* the C API alone, detached: nothing, and no call made */
            t->detached_found += n > 0 || frames > 0 || in_package;
            continue;
        }
        if (!n || frames != 3 || !in_package || (attached && !marked)) {
            t->missing++;
            continue;
        }
        expect_text(t, where, user);
        expect_text(t, stack[0], fw);
        expect_text(t, stack[1], user);
        expect_text(t, stack[2], script);
        expect_text(t, package, "numpy");
        if (marked) {
            /* Still there, detached (a layout read) or not; then not, once
             * the innermost frame moved on. */
            attached = layout_expected ? false : attached;
            if (!ds_py_at_mark(&mark) && layout_expected)
                t->missing++;
            t->fw.instr += 2;
            if (ds_py_at_mark(&mark))
                t->bad++;
            attached = true;
        }
    }
    return NULL;
}

/* One case in a child process: 8 threads; exit status 0 when every answer
 * was right and no API call was made detached. */
static void run_case(unsigned long version, bool ft, bool layout, bool sites_full)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid) {
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        return;
    }
    harness_init((const char *[]){"DLSHIM_VERBOSE=1", NULL});
    Py_Version = version;
    free_threaded = ft;
    layout_expected = layout;
    make_codes();
    if (sites_full) { /* every location then keeps its own text, none interned */
        char text[32];
        for (int i = 0; ds_site_intern(text, (size_t)snprintf(text, sizeof(text), "filler:%d", i));
             i++)
            ;
    }
    static thread threads[THREADS];
    pthread_t ids[THREADS];
    pthread_barrier_init(&started, NULL, THREADS);
    pthread_barrier_init(&settled, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        threads[i].index = i;
        if (pthread_create(&ids[i], NULL, run, &threads[i]))
            _exit(3);
    }
    int bad = 0, missing = 0, detached = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(ids[i], NULL);
        bad += threads[i].bad, missing += threads[i].missing;
        detached += threads[i].detached_found;
    }
    int calls = atomic_load(&api_detached);
    fprintf(stderr, "case 3.%lu%s: %d wrong, %d missing, %d found detached, %d API calls detached\n",
            (version >> 16) & 0xff, ft ? "t" : "", bad, missing, detached, calls);
    _exit(bad || missing || detached || calls ? 1 : 0);
}

/* 3.13's layout, checked once against the fake API by whichever thread
 * gets there first: every thread's lines, attached or not. */
static void test_checked_layout_from_eight_threads(void **state)
{
    (void)state;
    run_case(0x030d00f0ul, false, true, false);
}

/* The same with the site table full: the lines' texts are the locations'
 * own, copied from the shared table, where they are usually the sites'. */
static void test_checked_layout_with_no_site_left(void **state)
{
    (void)state;
    run_case(0x030d00f0ul, false, true, true);
}

/* A version without a row: the C API, only by attached threads. */
static void test_api_alone_from_eight_threads(void **state)
{
    (void)state;
    run_case(0x030f00a0ul, false, false, false);
}

/* A free-threaded object header (ob_type at 24): the layout rows are the
 * default build's, so the C API alone, only by attached threads. */
static void test_free_threaded_header_uses_the_api_from_eight_threads(void **state)
{
    (void)state;
    run_case(0x030d00f0ul, true, false, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checked_layout_from_eight_threads),
        cmocka_unit_test(test_checked_layout_with_no_site_left),
        cmocka_unit_test(test_api_alone_from_eight_threads),
        cmocka_unit_test(test_free_threaded_header_uses_the_api_from_eight_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
