/*
 * context.c — what an event says about where it happened, beyond the
 * process and thread: the rank of a distributed job, the test that runs, and
 * the source line of the interpreted program that caused it.
 *
 * The rank comes from the launchers' variables, read once at start-up.  The
 * test is set through the public API (dlshim_set_test) by a test runner's
 * plugin, from one thread, while other threads write events: it is kept
 * as a ds_seq_text (base/seq_text.c: a reader that races the writer leaves
 * the field out).  The
 * source line is asked of a locator that a hook family registers (the
 * Python one); the core knows no interpreter.
 */
#include <string.h>

#include "output/output.h"

/* Set by the thread that binds the interpreter while others write events,
 * any number of them at once (a free-threaded Python runs its threads in
 * parallel): published with release, read with acquire, so a thread that
 * finds the locator finds what the family set up before it. */
static _Atomic(const ds_locator *) locator;
static int rank = -1;
atomic_bool ds_context_any;

void ds_context_set_locator(const ds_locator *l)
{
    atomic_store_explicit(&locator, l, memory_order_release);
    if (l)
        atomic_store_explicit(&ds_context_any, true, memory_order_relaxed);
}

/* ---- rank --------------------------------------------------------------- */
/* The rank variables of torchrun / torch.distributed, Open MPI, PMI (MPICH,
 * Intel MPI) and Slurm, first set first. */
static const char *const rank_variables[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                             "SLURM_PROCID"};

/* A rank: up to seven decimal digits, nothing else. */
static int parse_rank(const char *s)
{
    int v = 0, digits = 0;
    for (; *s >= '0' && *s <= '9' && digits < 8; s++, digits++)
        v = v * 10 + (*s - '0');
    return digits > 0 && digits < 8 && *s == '\0' ? v : -1;
}

/* From envp, as the options are (no getenv during start-up). */
void ds_context_init(char *const *envp)
{
    rank = -1;
    size_t best = DS_ARRAY_LEN(rank_variables);
    for (char *const *e = envp; e && *e; e++)
        for (size_t i = 0; i < best; i++) {
            size_t n = strlen(rank_variables[i]);
            if (!strncmp(*e, rank_variables[i], n) && (*e)[n] == '=') {
                int r = parse_rank(*e + n + 1);
                if (r >= 0)
                    rank = r, best = i;
                break;
            }
        }
    if (rank >= 0)
        atomic_store_explicit(&ds_context_any, true, memory_order_relaxed);
}

int ds_rank(void)
{
    return rank;
}

/* ---- the test ----------------------------------------------------------- */
static ds_seq_text test;

void ds_context_set_test(const char *name)
{
    /* One writer at a time: a second one leaves the name as the first sets it. */
    ds_seq_text_set(&test, name, DS_TEST_MAX);
    atomic_store_explicit(&ds_context_any, true, memory_order_relaxed);
}

/* ---- the source line ---------------------------------------------------- */
static bool where_now(ds_where *w, char scratch[DS_WHERE_MAX])
{
    const ds_locator *l = atomic_load_explicit(&locator, memory_order_acquire);
    return ds_cfg.py && l && l->here(w, scratch);
}

size_t ds_context_where(char *out, size_t cap)
{
    ds_where w;
    char scratch[DS_WHERE_MAX];
    if (cap == 0 || !where_now(&w, scratch))
        return 0;
    size_t n = w.len < cap ? w.len : cap - 1;
    memcpy(out, w.text, n);
    out[n] = '\0';
    return n;
}

uint16_t ds_context_site(void)
{
    ds_where w;
    char scratch[DS_WHERE_MAX];
    return where_now(&w, scratch) ? w.site : 0;
}

int ds_context_stack(char (*frames)[DS_WHERE_MAX], int max)
{
    const ds_locator *l = atomic_load_explicit(&locator, memory_order_acquire);
    if (!ds_cfg.py || !l || max <= 0)
        return 0;
    return l->stack(frames, max < DS_PYSTACK_MAX ? max : DS_PYSTACK_MAX);
}

/* ---- the fields --------------------------------------------------------- */
void ds_context_capture(ds_context *c, int event_id)
{
    /* The summary is the process's, not a line's */
    c->has_where = event_id != DS_EV_SUMMARY && where_now(&c->where, c->scratch);
    c->rank = rank;
    c->has_test = ds_seq_text_get(&test, c->test, sizeof(c->test));
    c->any = c->has_where || c->rank >= 0 || c->has_test;
}

/* A field's separator and key, literal: `,"key":` or ` key=`. */
#define PUT_KEY(p, key, text)                                                  \
    ((text) ? (memcpy((p), " " key "=", sizeof(key) + 1), (p) + sizeof(key) + 1) \
            : (memcpy((p), ",\"" key "\":", sizeof(key) + 3), (p) + sizeof(key) + 3))

char *ds_put_context(char *p, const char *limit, const ds_context *c, bool text)
{
    /* The line first: the text rendering shows it right after the event's
     * name.  A plain location (the common case: a path, a line, a name) is
     * copied between its quotes as it is. */
    if (c->has_where) {
        const ds_where *w = &c->where;
        if (limit - p < (ptrdiff_t)(6 + DS_MOST_STR(w->len)))
            return NULL;
        p = PUT_KEY(p, "py", text);
        if (w->plain) {
            bool quoted = !text || w->spaced || w->len == 0;
            *p = '"';
            p += quoted;
            memcpy(p, w->text, w->len);
            p += w->len;
            *p = '"';
            p += quoted;
        } else {
            p = ds_put_str(p, w->text, w->len, text);
        }
    }
    if (c->rank >= 0) {
        if (limit - p < 8 + DS_MOST_INT)
            return NULL;
        p = ds_put_int(PUT_KEY(p, "rank", text), c->rank);
    }
    if (c->has_test) {
        size_t n = strnlen(c->test, sizeof(c->test));
        if (limit - p < (ptrdiff_t)(8 + DS_MOST_STR(n)))
            return NULL;
        p = ds_put_str(PUT_KEY(p, "test", text), c->test, n, text);
    }
    return p;
}
