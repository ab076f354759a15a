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
 * merge.  Blocks are written whole.
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
        s->buf = s->held, s->marks = s->held_marks;
        s->held = b, s->held_marks = m;
        s->held_len = s->len, s->held_lines = s->lines;
        s->len = 0, s->lines = 0;
        s->cap = 0;
        held += s->held_len, lines += s->held_lines;
    }
    if (ds_log_cap_settle(fd, unused, held, lines))
        return true;
    for (int i = 0; i < DS_LOG_SLOTS; i++)
        slots[i].held_len = slots[i].held_lines = 0;
    return false;
}

/* LOG held: bytes of lines written, or dropped and counted (a short write
 * leaves a partial line: rare). */
static bool write_block(int fd, const char *p, size_t len, uint64_t lines)
{
    if (!len || ds_log_write_out(fd, p, len))
        return true;
    ds_log_count_drops(lines);
    return false;
}

/* LOG held: lines gathered for one writev(2), at most IOV_BATCH runs. */
#define IOV_BATCH 512
typedef struct {
    struct iovec iov[IOV_BATCH];
    int n;
    size_t bytes;
    uint64_t lines;
} gathered;

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

/* LOG held: a run of lines of one slot, from `from` to `end` in its held
 * block, added to what goes out: into `merged` (compressed), or as a
 * piece of the next writev (the lines written where they are). */
static bool put_run(int fd, gathered *g, size_t *out, uint64_t *out_lines, const char *p,
                    size_t len, uint64_t lines)
{
    bool ok = true;
    if (!ds_log_zstd) {
        if (g->n == IOV_BATCH)
            ok = write_gathered(fd, g);
        g->iov[g->n++] = (struct iovec){(void *)(uintptr_t)p, len};
        g->bytes += len, g->lines += lines;
        return ok;
    }
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

/* LOG held: the held blocks written.  One alone (one thread) is written
 * where it is; two or more are merged by their lines' times, each slot's
 * lines kept in their order: runs of a slot's lines that no other slot's
 * line comes between go out as the pieces of one writev(2) each, where
 * they are (no copy: the kernel gathers them, and /dev/null not even
 * that), or into `merged` for a compressed log, written a block a time. */
bool ds_log_write_held(int fd)
{
    int with[DS_LOG_SLOTS], n = 0;
    for (int i = 0; i < DS_LOG_SLOTS; i++)
        if (slots[i].held_len)
            with[n++] = i;
    if (n == 0)
        return true;
    size_t room = 2 * ds_log_block_bytes();
    if (n > 1 && ds_log_zstd && merged_size < room) {
        void *p = ds_map(room, true);
        if (p) {
            ds_unmap(merged, merged_size);
            merged = p;
            merged_size = room;
        }
    }
    bool ok = true;
    if (n == 1 || (ds_log_zstd && merged_size < room)) { /* one block, or no memory to merge in */
        for (int k = 0; k < n; k++) {
            ds_log_slot *s = &slots[with[k]];
            ok = write_block(fd, s->held, s->held_len, s->held_lines) && ok;
            s->held_len = s->held_lines = 0;
        }
        return ok;
    }
    static gathered g; /* under LOG */
    uint32_t at[DS_LOG_SLOTS] = {0};
    size_t out = 0;
    uint64_t out_lines = 0;
    while (n > 0) {
        /* the slot whose next line is the oldest, and the time of the next
         * line of any other: its lines up to that time go on together */
        int best = 0;
        uint64_t second = UINT64_MAX;
        for (int k = 1; k < n; k++) {
            uint64_t t = slots[with[k]].held_marks[at[with[k]]].ns;
            uint64_t b = slots[with[best]].held_marks[at[with[best]]].ns;
            if (t < b) {
                second = b;
                best = k;
            } else if (t < second) {
                second = t;
            }
        }
        int i = with[best];
        ds_log_slot *s = &slots[i];
        uint32_t first = at[i];
        size_t from = first ? s->held_marks[first - 1].end : 0;
        while (++at[i] < s->held_lines && s->held_marks[at[i]].ns <= second) {
        }
        size_t end = s->held_marks[at[i] - 1].end;
        ok = put_run(fd, &g, &out, &out_lines, s->held + from, end - from, at[i] - first) && ok;
        if (at[i] == s->held_lines) {
            s->held_len = s->held_lines = 0;
            with[best] = with[--n];
        }
    }
    ok = write_gathered(fd, &g) && ok;
    return write_block(fd, merged, out, out_lines) && ok;
}

/* LOG held: every slot's lines written, what the writer thread was handed
 * and has not written yet first (the held blocks are older than the
 * blocks being filled, and ds_log_take_blocks reuses them). */
bool ds_log_flush_locked(int fd)
{
    bool ok = ds_log_write_held(fd);
    if (!ds_lock_take_bounded(DS_LOCK_LOG_LINES))
        return false; /* leaving, and a thread holds its slot */
    bool fits = ds_log_take_blocks(fd);
    ds_lock_give(DS_LOCK_LOG_LINES);
    return ds_log_write_held(fd) && fits && ok;
}
