/*
 * log_flush.c — a flush: every slot's block taken at one instant, merged
 * by time, written.
 *
 * A flush takes every slot's lines at one instant (LOG_LINES whole: each
 * slot's block becomes its held block, a pointer swap; the threads go on in
 * their other block) and then, under LOG alone, merges the held blocks by
 * each line's time (kept beside it: t_ns, a mark per line), the runs of
 * each slot's lines handed to writev(2) where they lie.  So the file is in
 * time order across threads, as with one buffer, and each thread's lines
 * keep their order; a line is never written ahead of one that was in a
 * slot before it came (an export, then its import on another thread).  The
 * one exception to time order: a line whose event came just before a flush
 * but was added just after it goes with the next flush, after later lines
 * of other threads.  One thread alone writes its block where it is, no
 * merge; so does every thread in thread order (DLSHIM_LOG_ORDER=thread:
 * the lines of one flush grouped by thread, which dlshim-report sorts back
 * by time), which spares the merge's reading of every line's mark.  Blocks
 * are written whole.  What writes them (under LOG, or the writer thread
 * without it) is below, at write_blocks.
 */
#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"

#define slots ds_log_slots
/* A flush that merges two slots or more copies their lines here in time
 * order (2 blocks' bytes, mapped at the first such flush). */
static char *merged;
static size_t merged_size;
/* The slots whose `out` block the writer thread was given (below). */
static uint32_t out_slots;
_Static_assert(DS_LOG_SLOTS <= 32, "a bit a slot");

/* LOG and LOG_LINES held: each slot's lines become its held block, and the
 * room claimed for what they did not fill goes back to the file.  All
 * slots at one instant, so that no line is written ahead of one that was
 * in a slot before it came (an export before its import on another
 * thread).  Under a cap the file may refuse them (ds_log_cap_settle): then
 * they are counted, not written.  False then. */
bool ds_log_take_blocks(int fd)
{
    uint64_t unused = 0, held = 0, lines = 0;
    for (int i = 0; i < DS_LOG_SLOTS; i++) {
        ds_log_slot *s = &slots[i];
        if (!s->buf)
            continue;
        if (ds_log_file_max)
            unused += s->cap - s->len;
        char *b = s->buf;
        ds_line_mark *m = s->marks;
        s->buf = s->held.buf, s->marks = s->held.marks;
        s->held = (ds_log_block){b, m, s->len, s->lines};
        s->len = 0, s->lines = 0;
        s->cap = 0;
        held += s->held.len, lines += s->held.lines;
    }
    if (ds_log_cap_settle(fd, unused, held, lines))
        return true;
    for (int i = 0; i < DS_LOG_SLOTS; i++)
        slots[i].held.len = slots[i].held.lines = 0;
    return false;
}

/* Bytes of lines written, or dropped and counted (a short write
 * leaves a partial line: rare). */
static bool write_block(int fd, const char *p, size_t len, uint64_t lines)
{
    if (!len || ds_log_write_out(fd, p, len))
        return true;
    ds_log_count_drops(lines);
    return false;
}

/* Lines gathered for one writev(2), at most IOV_BATCH runs. */
#define IOV_BATCH 512
typedef struct {
    struct iovec iov[IOV_BATCH];
    int n;
    size_t bytes;
    uint64_t lines;
} gathered;
static gathered pieces; /* the writing thread's (see write_blocks) */

static bool write_gathered(int fd, gathered *g)
{
    bool ok = true;
    if (g->n) {
        int saved = errno;
        ssize_t w;
        do {
            w = writev(fd, g->iov, g->n);
        } while (w < 0 && errno == EINTR);
        errno = saved;
        if (w != (ssize_t)g->bytes) {
            ds_log_count_drops(g->lines);
            ok = false;
        }
    }
    g->n = 0, g->bytes = 0, g->lines = 0;
    return ok;
}

/* Lines of one block as a piece of the next writev (written where they
 * are). */
static bool put_piece(int fd, gathered *g, const char *p, size_t len, uint64_t lines)
{
    bool ok = g->n < IOV_BATCH || write_gathered(fd, g);
    g->iov[g->n++] = (struct iovec){(void *)(uintptr_t)p, len};
    g->bytes += len, g->lines += lines;
    return ok;
}

/* A run of lines of one block added to what goes out: into `merged`
 * (compressed), or as a piece of the next writev. */
static bool put_run(int fd, gathered *g, size_t *out, uint64_t *out_lines, const char *p,
                    size_t len, uint64_t lines)
{
    if (!ds_log_zstd)
        return put_piece(fd, g, p, len, lines);
    bool ok = true;
    for (size_t at = 0; at < len;) {
        /* whole lines only: a run is cut at a line's end where merged fills */
        size_t n = len - at;
        if (*out + n > merged_size) {
            ok = write_block(fd, merged, *out, *out_lines) && ok;
            *out = 0, *out_lines = 0;
        }
        memcpy(merged + *out, p + at, n);
        *out += n, at += n;
    }
    *out_lines += lines;
    return ok;
}

/* The blocks of one kind (`out`: the writer's, else the held ones)
 * written, by the one thread that may (LOG held and the writer idle, or the
 * writer while busy).  One alone (one thread), or each in thread order
 * (DLSHIM_LOG_ORDER=thread), is written where it is; in time order two
 * or more are merged by their lines' times, each slot's lines kept in their
 * order: runs of a slot's lines that no other slot's line comes between go
 * out as the pieces of one writev(2) each, where they are (no copy: the
 * kernel gathers them, and /dev/null not even that), or into `merged` for
 * a compressed log, written a block a time. */
static bool write_blocks(int fd, bool out)
{
    ds_log_block *b[DS_LOG_SLOTS];
    int n = 0;
    for (int i = 0; i < DS_LOG_SLOTS; i++) {
        /* the writer looks only at the slots it was given: another may be
         * laid out meanwhile */
        if (out && !((out_slots >> i) & 1u))
            continue;
        ds_log_block *k = out ? &slots[i].out : &slots[i].held;
        if (k->len)
            b[n++] = k;
    }
    if (n == 0)
        return true;
    bool ok = true;
    bool merge = n > 1 && ds_cfg.log_order == DS_LOG_ORDER_TIME;
    if (!merge && n > 1 && !ds_log_zstd) {
        /* In thread order: each block whole, a piece of one writev each. */
        for (int k = 0; k < n; k++) {
            ok = put_piece(fd, &pieces, b[k]->buf, b[k]->len, b[k]->lines) && ok;
            b[k]->len = b[k]->lines = 0;
        }
        return write_gathered(fd, &pieces) && ok;
    }
    size_t room = 2 * ds_log_block_bytes();
    if (merge && ds_log_zstd && merged_size < room) {
        void *p = ds_map(room, true);
        if (p) {
            ds_unmap(merged, merged_size);
            merged = p;
            merged_size = room;
        }
    }
    /* One block, compressed in thread order, or no memory to merge in:
     * each block written as it is. */
    if (!merge || (ds_log_zstd && merged_size < room)) {
        for (int k = 0; k < n; k++) {
            ok = write_block(fd, b[k]->buf, b[k]->len, b[k]->lines) && ok;
            b[k]->len = b[k]->lines = 0;
        }
        return ok;
    }
    uint32_t at[DS_LOG_SLOTS] = {0};
    size_t out_len = 0;
    uint64_t out_lines = 0;
    while (n > 0) {
        /* the block whose next line is the oldest, and the time of the next
         * line of any other: its lines up to that time go on together */
        int best = 0;
        uint64_t second = UINT64_MAX;
        for (int k = 1; k < n; k++) {
            uint64_t t = b[k]->marks[at[k]].ns;
            uint64_t bt = b[best]->marks[at[best]].ns;
            if (t < bt) {
                second = bt;
                best = k;
            } else if (t < second) {
                second = t;
            }
        }
        ds_log_block *s = b[best];
        uint32_t first = at[best];
        size_t from = first ? s->marks[first - 1].end : 0;
        while (++at[best] < s->lines && s->marks[at[best]].ns <= second) {
        }
        size_t end = s->marks[at[best] - 1].end;
        ok = put_run(fd, &pieces, &out_len, &out_lines, s->buf + from, end - from,
                     at[best] - first) &&
             ok;
        if (at[best] == s->lines) {
            s->len = s->lines = 0;
            n--;
            b[best] = b[n], at[best] = at[n];
        }
    }
    ok = write_gathered(fd, &pieces) && ok;
    return write_block(fd, merged, out_len, out_lines) && ok;
}

/* The writer's blocks (log_writer.c): the held blocks become each slot's
 * `out` block under LOG, and the writer writes them without it, so a thread
 * whose block fills swaps it while they are written.  While the writer is
 * busy, nothing else writes (the merge's buffers and the compressor are
 * one): a thread that must write in place, or hand over a second time
 * before the writer took the first, sleeps on the futex `out_state` until
 * it is done (or writes them itself if the writer has not begun: a writer
 * not given a core is not waited for). */
/* IDLE: no blocks given; GIVEN: given, the writer not begun (a thread
 * that must wait writes them itself, in place, as it would inline: they are
 * the oldest lines); BUSY: the writer writes them; WAITED: and a thread
 * sleeps until it is done. */
enum { OUT_IDLE, OUT_GIVEN, OUT_BUSY, OUT_WAITED };
static _Atomic uint32_t out_state;
static int out_fd;                /* the writer's while busy */
static atomic_bool held_waiting;  /* held blocks handed over, not given to the writer */
/* Leaving (_exit, a fatal signal): the writer is waited for this long at
 * most (it may have been stopped with the process). */
#define DS_LOG_OUT_WAIT_NS (200 * 1000000ull)

bool ds_log_out_wait(void)
{
    uint32_t st = atomic_load(&out_state);
    if (st == OUT_IDLE)
        return true;
    if (st == OUT_GIVEN && atomic_compare_exchange_strong(&out_state, &st, OUT_BUSY)) {
        write_blocks(out_fd, true); /* the writer has not begun: LOG held, none waits */
        atomic_store(&out_state, OUT_IDLE);
        return true;
    }
    bool leaving = atomic_load_explicit(&ds_leaving, memory_order_relaxed);
    uint64_t until = leaving ? ds_now_ns() + DS_LOG_OUT_WAIT_NS : 0;
    while (st != OUT_IDLE) {
        if (st == OUT_BUSY && !atomic_compare_exchange_strong(&out_state, &st, OUT_WAITED))
            continue;
        ds_futex_wait(&out_state, OUT_WAITED, leaving ? DS_LOG_OUT_WAIT_NS / 10 : 0);
        st = atomic_load(&out_state);
        if (st != OUT_IDLE && leaving && ds_now_ns() > until)
            return false;
    }
    return true;
}

bool ds_log_give_out(int fd, bool wait)
{
    bool any = false;
    for (int i = 0; i < DS_LOG_SLOTS && !any; i++)
        any = slots[i].held.len != 0;
    if (!any)
        return true;
    if (atomic_load(&out_state) != OUT_IDLE && (!wait || !ds_log_out_wait())) {
        atomic_store_explicit(&held_waiting, true, memory_order_relaxed);
        return false;
    }
    uint32_t given = 0;
    for (int i = 0; i < DS_LOG_SLOTS; i++) {
        ds_log_slot *s = &slots[i];
        if (!s->held.len)
            continue;
        ds_log_block written = s->out; /* empty: the writer is idle */
        s->out = s->held;
        s->held = written;
        given |= 1u << i;
    }
    out_slots = given;
    out_fd = fd;
    atomic_store_explicit(&held_waiting, false, memory_order_relaxed);
    atomic_store(&out_state, OUT_GIVEN);
    return true;
}

bool ds_log_held_waiting(void)
{
    return atomic_load_explicit(&held_waiting, memory_order_relaxed);
}

bool ds_log_claim_given(void)
{
    uint32_t given = OUT_GIVEN;
    return atomic_compare_exchange_strong(&out_state, &given, OUT_BUSY);
}

void ds_log_write_claimed(void)
{
    write_blocks(out_fd, true);
    if (atomic_exchange(&out_state, OUT_IDLE) == OUT_WAITED)
        ds_futex_wake(&out_state, INT32_MAX);
}

void ds_log_flush_after_fork(void)
{
    atomic_store(&out_state, OUT_IDLE);
    atomic_store(&held_waiting, false);
}

bool ds_log_write_held(int fd)
{
    return ds_log_out_wait() && write_blocks(fd, false);
}

/* LOG held: every slot's lines written, what was handed to the writer
 * thread first (the writer's, then the held blocks: older than the blocks
 * being filled, and ds_log_take_blocks reuses them). */
bool ds_log_flush_locked(int fd)
{
    if (!ds_log_out_wait())
        return false; /* leaving, and the writer does not finish */
    bool ok = write_blocks(fd, false);
    if (!ds_lock_take_bounded(DS_LOCK_LOG_LINES))
        return false; /* leaving, and a thread holds its slot */
    bool fits = ds_log_take_blocks(fd);
    ds_lock_give(DS_LOCK_LOG_LINES);
    return write_blocks(fd, false) && fits && ok;
}
