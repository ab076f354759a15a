/*
 * log_slots.c — the slots of lines, one a thread.
 *
 * A thread adds its lines to a slot of its own (DS_LOG_SLOTS, a shard each
 * of LOG_LINES, a cache line of its own), so that threads logging at once
 * share no lock and write no common line: the one lock they share (LOG) is
 * taken only to write (log_flush.c).  Each slot holds two blocks of
 * DLSHIM_LOG_BUFFER bytes and the marks of their lines (a line's time and
 * end): the one its threads add to, and the one a flush took from it; with
 * the writer thread a third, the one the writer is writing (log_writer.c).
 * Memory: mapped at a slot's first line and kept; at most DS_LOG_SLOTS - 1
 * threads have slots of their own at a time (a thread that ends gives its
 * slot back, its lines staying there for the next flush); the others share
 * slot 0.  Lines of concurrent threads never interleave: whole lines go
 * into the slots.
 */
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

/* Slot 0 is shared by threads that found no slot of their own free; slot i
 * is guarded by shard i of LOG_LINES, the whole lock taken by a flush. */
ds_log_slot ds_log_slots[DS_LOG_SLOTS];
#define slots ds_log_slots
DS_TLS unsigned char ds_log_own_slot;
struct ds_log_due ds_log_flush_due;
#define flush_due ds_log_flush_due
size_t ds_log_buffer_size;
#define buffer_size ds_log_buffer_size
static uint32_t mark_cap;    /* a block's lines at most */
static pthread_key_t slot_key; /* its destructor frees a thread's slot */
static atomic_uint slot_users; /* threads with slots of their own, and slot 0 once used */
static bool slot0_counted;     /* under LOG */
static atomic_bool slot_key_made;

size_t ds_log_block_bytes(void)
{
    return (buffer_size + 15) & ~(size_t)15;
}

/* A thread that ends gives its slot back; what its lines wait for there
 * is written by the next flush, as any slot's. */
static void slot_given_back(void *value)
{
    unsigned i = (unsigned)(uintptr_t)value - 1;
    if (ds_log_own_slot != i + 1)
        return; /* a slot of the parent's, in a forked child */
    ds_log_own_slot = 0;
    atomic_fetch_sub_explicit(&slot_users, 1, memory_order_relaxed);
    if (ds_holds_lock() || !ds_lock_take_bounded(DS_LOCK_LOG))
        return; /* leaving: the slot stays taken, its lines are flushed */
    slots[i].taken = false;
    ds_lock_give(DS_LOCK_LOG);
}

/* Buffer lines for fd if it is a regular file, or a device nobody reads
 * line by line (not a terminal), and a buffer is asked for. */
bool ds_log_slots_wanted(int fd)
{
    struct stat st;
    size_t want = (size_t)ds_cfg.log_buffer;
    bool buffer = false;
    if (want > 0 && fd >= STDERR_FILENO && ds_fstat(fd, &st) == 0) {
        bool quiet_device = S_ISCHR(st.st_mode) && !isatty(fd);
        buffer = quiet_device || (fd != STDERR_FILENO && S_ISREG(st.st_mode));
    }
    if (buffer && !atomic_exchange(&slot_key_made, true) &&
        pthread_key_create(&slot_key, slot_given_back) != 0)
        atomic_store(&slot_key_made, false);
    return buffer;
}

/* Every slot is laid out afresh at its next line (ds_log_slot_ready), in
 * its memory if that is large enough. */
void ds_log_slots_lay_out(bool buffer)
{
    ds_log_buffered = buffer;
    buffer_size = buffer ? (size_t)ds_cfg.log_buffer : 0;
    /* lines are DS_LOG_LINE_MIN bytes at least: the marks never run out */
    mark_cap = (uint32_t)(buffer_size / DS_LOG_LINE_MIN + 2);
    for (int i = 0; i < DS_LOG_SLOTS; i++) {
        slots[i].buf = NULL;
        slots[i].len = slots[i].cap = 0;
        slots[i].lines = 0;
    }
    atomic_store(&flush_due.at, 0);
}

void ds_log_slots_after_fork(void)
{
    /* The parent flushed before forking (ds_log_before_fork): nothing is
     * pending.  The child's one thread takes a slot at its next line. */
    for (int i = 0; i < DS_LOG_SLOTS; i++) {
        slots[i].len = slots[i].cap = slots[i].held.len = slots[i].out.len = 0;
        slots[i].lines = slots[i].held.lines = slots[i].out.lines = 0;
        slots[i].taken = false;
    }
    ds_log_own_slot = 0;
    atomic_store(&slot_users, 0);
    slot0_counted = false;
    atomic_store(&flush_due.at, 0);
}

/* s's shard held: room for len more bytes in its block, and under a cap
 * the file's room for them, claimed as the block fills (as much of it as
 * the file has room for, a CAS at a time).  A block asks for a flush when
 * half full when other threads log too, and fills on past the half only
 * while another thread's flush is being written (LOG held): so a thread
 * seldom waits for another's flush while its block has room.  `whole`: a flush was just done, and
 * the line goes in if the block can take it. */
__attribute__((noinline)) bool ds_log_room_for(ds_log_slot *s, size_t len, bool whole)
{
    if (!s->buf || len < DS_LOG_LINE_MIN || s->len + len > buffer_size || s->lines >= mark_cap)
        return false;
    if (s->len + len <= s->cap)
        return true;
    size_t upto = buffer_size;
    if (s->len + len <= buffer_size / 2 &&
        atomic_load_explicit(&slot_users, memory_order_relaxed) > 1)
        upto = buffer_size / 2;
    else if (!whole && (ds_holds(DS_LOCK_LOG) ||
                        !atomic_load_explicit(ds_spin_of(DS_LOCK_LOG, 0), memory_order_relaxed)))
        return false; /* time to flush */
    if (!ds_log_file_max) {
        s->cap = upto;
        return true;
    }
    size_t got = ds_log_claim_room(s->len + len - s->cap, upto - s->cap);
    s->cap += got;
    return got != 0;
}

/* LOG and s's shard held: s laid out in its memory (mapped, or mapped
 * afresh when too small for the buffer asked for, at its first line): two
 * blocks, or three for the writer thread (the one its threads fill, the
 * one handed over, the one the writer writes). */
bool ds_log_slot_ready(ds_log_slot *s)
{
    if (s->buf)
        return true;
    size_t blocks = ds_cfg.log_writer == DS_LOG_WRITER_THREAD ? 3 : 2;
    size_t block = ds_log_block_bytes(), marks = (size_t)mark_cap * sizeof(ds_line_mark);
    size_t need = blocks * (block + marks);
    if (s->mem_size < need) {
        void *p = ds_map(need, true);
        if (!p)
            return false;
        ds_unmap(s->mem, s->mem_size);
        s->mem = p;
        s->mem_size = need;
    }
    ds_line_mark *m = (ds_line_mark *)(void *)(s->mem + blocks * block);
    s->marks = m;
    s->held = (ds_log_block){s->mem + block, m + mark_cap, 0, 0};
    s->out = blocks == 3 ? (ds_log_block){s->mem + 2 * block, m + 2 * (size_t)mark_cap, 0, 0}
                         : (ds_log_block){NULL, NULL, 0, 0};
    s->len = s->cap = 0;
    s->lines = 0;
    s->buf = s->mem;
    return true;
}

/* LOG held: this thread's slot, a free one taken at its first line (given
 * back when the thread ends: slot_given_back), or the shared slot 0 when
 * none is free. */
unsigned ds_log_own_slot_index(void)
{
    if (ds_log_own_slot)
        return ds_log_own_slot - 1u;
    unsigned i = 1;
    while (i < DS_LOG_SLOTS && slots[i].taken)
        i++;
    if (i == DS_LOG_SLOTS || !atomic_load_explicit(&slot_key_made, memory_order_relaxed) ||
        pthread_setspecific(slot_key, (void *)(uintptr_t)(i + 1)) != 0)
        i = 0;
    else
        slots[i].taken = true;
    ds_log_own_slot = (unsigned char)(i + 1);
    /* slot 0's threads are counted once: they share its room */
    bool counted = i == 0 && slot0_counted;
    slot0_counted = slot0_counted || i == 0;
    if (!counted)
        atomic_fetch_add_explicit(&slot_users, 1, memory_order_relaxed);
    return i;
}

bool ds_log_add_own(const char *line, size_t len, uint64_t now, bool flushed)
{
    unsigned i = ds_log_own_slot_index();
    ds_log_slot *s = &slots[i];
    ds_lock_take_shard(DS_LOCK_LOG_LINES, i);
    bool in = (flushed || now < atomic_load_explicit(&flush_due.at, memory_order_relaxed)) &&
              ds_log_slot_ready(s) && ds_log_room_for(s, len, flushed);
    if (in)
        ds_log_add_line(s, line, len, now);
    ds_lock_give_shard(DS_LOCK_LOG_LINES, i);
    return in;
}
