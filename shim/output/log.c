/*
 * log.c — the event sink: where a line goes.
 *
 * Lines to a regular file are gathered in memory and written in blocks,
 * one write(2) per block, when a block fills, when DS_LOG_AGE_NS has passed
 * since the last flush, after a violation, at exit and _exit, on a fatal
 * signal and before fork: a system call per event cost more than all the
 * bookkeeping of a handoff.  What a killed process loses is what waits, so
 * DLSHIM_LOG_BUFFER=0 writes each line at once.  A character device that
 * is not a terminal (/dev/null) is buffered as a file is: nobody reads it
 * line by line, and a write per event there cost more than the whole file
 * log.  Terminals and pipes are never buffered: someone reads them as
 * lines come (`| jq`, `| grep`), and the 100 ms age is only looked at when
 * the next event comes, so a program gone quiet would hold its last lines
 * back from them.  stderr is buffered only when it is such a device (the
 * program's own messages to it cannot be put out of order).
 *
 * A line goes into its thread's slot (log_slots.c); a full or aged block
 * is flushed (log_flush.c: every slot's lines, merged by time) or handed to
 * the writer thread with DLSHIM_LOG_WRITER=thread (log_writer.c); a
 * summary's lines (ds_log_write_tail) are written at once, after a flush of
 * every slot.  The file, its cap and its compression: log_file.c and
 * log_cap.c (log.h lists the files).
 */
#include <string.h>
#include <unistd.h>

#include "log.h"

#define slots ds_log_slots
#define flush_due ds_log_flush_due

/* Buffer lines for fd where ds_log_slots_wanted says so.  What was handed
 * to the writer since the flush before this open goes to the log it was
 * made for, before the slots are laid out afresh. */
static void set_buffer(int fd)
{
    bool buffer = ds_log_slots_wanted(fd);
    bool locks = !ds_holds_lock();
    if (locks) {
        ds_lock_take(DS_LOCK_LOG);
        ds_lock_take(DS_LOCK_LOG_LINES);
    }
    int old = atomic_load_explicit(&ds_log_fd, memory_order_relaxed);
    if (locks && ds_log_buffered && old >= 0)
        ds_log_write_held(old);
    else if (locks)
        ds_log_out_wait(); /* the writer's blocks are in the slots' memory */
    ds_log_slots_lay_out(buffer);
    if (locks) {
        ds_lock_give(DS_LOCK_LOG_LINES);
        ds_lock_give(DS_LOCK_LOG);
    }
}

void ds_log_open(const char *spec)
{
    ds_log_flush(); /* lines held for a previous log go there */
    int fd = ds_log_file_open(spec);
    set_buffer(fd);
    atomic_store(&ds_log_fd, fd);
    ds_outputs_set(DS_OUT_LOG, fd >= 0);
}

void ds_log_after_fork(void)
{
    ds_log_slots_after_fork();
    ds_log_flush_after_fork();
    ds_log_writer_after_fork();
    ds_log_file_after_fork();
}

/* Everything but a line going into its slot's block with room: a
 * descriptor still to open, no buffer, a re-entry, a full block, a flush
 * due, a summary's line.  Out of line, so that the common case below needs
 * no registers saved. */
static __attribute__((noinline)) bool write_slow(const char *line, size_t len, uint64_t now,
                                                  bool tail)
{
    int fd = atomic_load_explicit(&ds_log_fd, memory_order_relaxed);
    ds_log_writer_start_if_owed();
    if (fd < 0 && (fd = ds_log_writable_fd()) < 0) {
        /* a child's file not open yet, in a handler inside the shim */
        ds_log_count_drop();
        return false;
    }
    /* Unbuffered, or re-entered from a signal handler that interrupted this
     * thread inside the shim (which may hold a slot's lock): written at
     * once.  So is a line while leaving through _exit as another thread
     * holds the log: ahead of what the slots hold. */
    if (ds_log_file_max && !tail && ds_log_cap_reached()) {
        ds_log_count_capped(1);
        return false;
    }
    /* The lock for the slots or the compressor; a plain unbuffered line
     * (stderr, a pipe) is one write(2), whole without it. */
    bool locked = (ds_log_buffered || ds_log_zstd) && !ds_holds_lock() && ds_lock_take_bounded(DS_LOCK_LOG);
    if (!ds_log_buffered || !locked) {
        bool ok;
        if (!ds_log_claim_line(len, tail))
            ok = tail ? (ds_log_count_capped(1), false)
                      : ds_log_refuse_capped();
        else if (ds_log_zstd && !locked) /* the compressor is the lock holder's */
            ok = (ds_log_count_drop(), false);
        else
            ok = ds_log_write_now(fd, line, len);
        if (locked)
            ds_lock_give(DS_LOCK_LOG);
        return ok;
    }
    bool ok = true;
    if (!tail && !atomic_load_explicit(&ds_leaving, memory_order_relaxed)) {
        if (ds_log_add_own(line, len, now, false)) {
            ds_lock_give(DS_LOCK_LOG);
            return true;
        }
        ok = ds_log_hand_over_locked(fd);
        atomic_store_explicit(&flush_due.at, now + DS_LOG_AGE_NS, memory_order_relaxed);
        if (ds_log_add_own(line, len, now, true)) {
            ds_lock_give(DS_LOCK_LOG);
            ds_log_writer_wake_if_owed();
            return ok;
        }
    } else {
        ok = ds_log_flush_locked(fd);
    }
    /* A summary's line, a line longer than a block, or the cap near:
     * written at once, after every line the slots held (what was just
     * handed to the writer too, waited for). */
    if (!ds_log_out_wait()) { /* leaving, and the writer does not finish */
        ds_lock_give(DS_LOCK_LOG);
        ds_log_count_drop();
        return false;
    }
    ok = ds_log_write_held(fd) && ok;
    if (ds_log_claim_line(len, tail)) {
        ok = ds_log_write_now(fd, line, len) && ok;
    } else if (tail) {
        ds_log_count_capped(1);
        ok = false;
    } else {
        ok = ds_log_refuse_capped();
        /* the room other threads' blocks claimed goes back, and what they
         * hold is written before the log_full line: no later line is */
        ds_log_flush_locked(fd);
    }
    ds_lock_give(DS_LOCK_LOG);
    ds_log_writer_wake_if_owed();
    return ok;
}

/* ds_log_write_at's way when its slot is held or has no room. */
static __attribute__((noinline)) bool write_own(unsigned mine, const char *line, size_t len,
                                                 uint64_t now)
{
    ds_log_slot *s = &slots[mine - 1];
    ds_lock_take_shard(DS_LOCK_LOG_LINES, mine - 1);
    bool in = now < atomic_load_explicit(&flush_due.at, memory_order_relaxed) &&
              ds_log_room_for(s, len, false);
    if (in)
        ds_log_add_line(s, line, len, now);
    ds_lock_give_shard(DS_LOCK_LOG_LINES, mine - 1);
    return in || write_slow(line, len, now, false);
}

bool ds_log_write_at(const char *line, size_t len, uint64_t now)
{
    int fd = atomic_load_explicit(&ds_log_fd, memory_order_relaxed);
    if (fd == -1)
        return true; /* DLSHIM_LOG=off is not a loss */
    /* The common case: this thread's block with room for the line, no
     * flush due, taken by a thread inside no other shim lock. */
    unsigned mine = ds_log_own_slot;
    if (!mine || fd < 0 || !ds_log_buffered || ds_holds_lock() ||
        atomic_load_explicit(&ds_leaving, memory_order_relaxed))
        return write_slow(line, len, now, false);
    ds_log_slot *s = &slots[mine - 1];
    if (!ds_spin_take_shard_now(DS_LOCK_LOG_LINES, mine - 1))
        return write_own(mine, line, len, now);
    if (now < atomic_load_explicit(&flush_due.at, memory_order_relaxed) &&
        s->len + len <= s->cap && len >= DS_LOG_LINE_MIN) {
        ds_log_add_line(s, line, len, now);
        ds_lock_give_shard(DS_LOCK_LOG_LINES, mine - 1);
        return true;
    }
    ds_lock_give_shard(DS_LOCK_LOG_LINES, mine - 1);
    return write_own(mine, line, len, now);
}

bool ds_log_write_tail(const char *line, size_t len, uint64_t now)
{
    if (atomic_load_explicit(&ds_log_fd, memory_order_relaxed) == -1)
        return true;
    return write_slow(line, len, now, true);
}

/* ds_log_reserve's way (output.h) when this thread has no slot yet, may
 * not take one, its slot is held elsewhere or has no room, or a flush is
 * due. */
char *ds_log_reserve_slow(uint64_t now)
{
    int fd = atomic_load_explicit(&ds_log_fd, memory_order_relaxed);
    if (fd < 0 || !ds_log_buffered || ds_log_buffer_size < DS_LOG_RESERVE || ds_holds_lock() ||
        atomic_load_explicit(&ds_leaving, memory_order_relaxed))
        return NULL;
    if (ds_log_file_max && ds_log_cap_reached())
        return NULL; /* built aside, and counted */
    ds_log_writer_start_if_owed();
    unsigned mine = ds_log_own_slot;
    if (mine) { /* its slot was held by a thread sharing it, or is full */
        ds_log_slot *s = &slots[mine - 1];
        ds_lock_take_shard(DS_LOCK_LOG_LINES, mine - 1);
        if (now < atomic_load_explicit(&flush_due.at, memory_order_relaxed) &&
            ds_log_room_for(s, DS_LOG_RESERVE, false))
            return s->buf + s->len;
        ds_lock_give_shard(DS_LOCK_LOG_LINES, mine - 1);
    }
    ds_lock_take(DS_LOCK_LOG);
    unsigned i = ds_log_own_slot_index();
    ds_log_slot *s = &slots[i];
    for (int round = 0; round < 2; round++) {
        ds_lock_take_shard(DS_LOCK_LOG_LINES, i);
        if ((round || now < atomic_load_explicit(&flush_due.at, memory_order_relaxed)) &&
            ds_log_slot_ready(s) && ds_log_room_for(s, DS_LOG_RESERVE, round == 1)) {
            ds_lock_give(DS_LOCK_LOG); /* the slot's stays taken until the commit */
            ds_log_writer_wake_if_owed();
            return s->buf + s->len;
        }
        ds_lock_give_shard(DS_LOCK_LOG_LINES, i);
        if (round == 0) {
            ds_log_hand_over_locked(fd);
            atomic_store_explicit(&flush_due.at, now + DS_LOG_AGE_NS, memory_order_relaxed);
        }
    }
    /* the file's cap is near: the line is built aside and weighed */
    ds_lock_give(DS_LOCK_LOG);
    ds_log_writer_wake_if_owed();
    return NULL;
}

bool ds_log_write(const char *line, size_t len)
{
    return ds_log_write_tail(line, len, ds_now_coarse_ns());
}

bool ds_log_flush(void)
{
    int fd = atomic_load_explicit(&ds_log_fd, memory_order_relaxed);
    if (fd < 0 || !ds_log_buffered || ds_holds_lock())
        return true;
    if (!ds_lock_take_bounded(DS_LOCK_LOG))
        return false;
    bool ok = ds_log_flush_locked(fd);
    ds_lock_give(DS_LOCK_LOG);
    return ok;
}

/* Before fork, with every shim lock taken (the log's and every slot's),
 * the slots are written, so that neither side writes them twice; the
 * child starts empty (ds_log_after_fork). */
void ds_log_before_fork(void)
{
    int fd = atomic_load_explicit(&ds_log_fd, memory_order_relaxed);
    if (ds_log_buffered && fd >= 0) {
        ds_log_write_held(fd); /* handed to the writer, not written yet */
        ds_log_take_blocks(fd);
        ds_log_write_held(fd);
    }
}

void ds_log_stop_writer(void)
{
    if (ds_log_writer_stop())
        ds_log_flush(); /* what was handed over as it stopped */
}
