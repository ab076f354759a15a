/*
 * log.h — what the log's files share among themselves, and nothing else
 * of the layer sees (output.h is the log's API).  Each file does one job
 * and calls only those listed above it here, never one below (no circle:
 * scripts/check-layers):
 *
 *   log.c         the entry points: a line into its slot, a flush, open, fork
 *   log_writer.c  the writer thread (DLSHIM_LOG_WRITER=thread)
 *   log_flush.c   every slot's block taken at one instant, merged, written
 *   log_slots.c   the slots of lines, one a thread, two blocks each
 *   log_file.c    the descriptor: opened, reopened in a child, written to
 *   log_cap.c     DLSHIM_LOG_MAX_SIZE: the file's room, claimed as blocks fill
 *
 * "LOG held" and "LOG_LINES held" name the locks a function's caller holds.
 */
#ifndef DS_OUTPUT_LOG_H
#define DS_OUTPUT_LOG_H

#include "output/output.h"

#define DS_LOG_AGE_NS 100000000ull /* 100 ms: the longest a line waits while events flow */

/* ---- log_cap.c: the file's size cap ------------------------------------- */
extern uint64_t ds_log_file_max; /* 0: no cap (not a file we opened) */
/* The cap for fd: a regular file this log opened (not stderr). */
void ds_log_cap_set(int fd);
/* The log_full line is owed or written: ordinary lines stop. */
bool ds_log_cap_reached(void);
/* Between need and want bytes of the file under its soft cap for a block
 * (as many as there are); 0 when need does not fit, or the log_full line
 * is owed. */
size_t ds_log_claim_room(size_t need, size_t want);
/* The file's room for one line written at once (`tail`: a summary's). */
bool ds_log_claim_line(size_t len, bool tail);
/* An ordinary line with no room left under the soft cap: counted, and the
 * log_full line owed.  False. */
bool ds_log_refuse_capped(void);
void ds_log_count_capped(uint64_t lines);
/* LOG held, every slot's block just taken: `unused` bytes their room
 * claimed and they did not fill go back; `held` bytes of `lines` lines are
 * to be written, weighed against the size on disk.  False: over the cap,
 * the lines counted and not to be written. */
bool ds_log_cap_settle(int fd, uint64_t unused, uint64_t held, uint64_t lines);

/* ---- log_file.c: the descriptor and the writes to it -------------------- */
#define DS_LOG_LATER (-2) /* a forked child's own %p file: opened by its first line */
extern atomic_int ds_log_fd;   /* -1: off */
extern bool ds_log_buffered;   /* lines to this log go into the slots */
extern bool ds_log_zstd;       /* this log is compressed */
/* The log named by spec opened (off, stderr, a path), the cap set; its
 * descriptor, not yet published in ds_log_fd. */
int ds_log_file_open(const char *spec);
/* A forked child's own file (%p) closed in it, to open at its first line. */
void ds_log_file_after_fork(void);
/* The descriptor to write to, opening a forked child's own file first. */
int ds_log_writable_fd(void);
/* LOG held where the log is compressed: len bytes written (compressed). */
bool ds_log_write_out(int fd, const char *p, size_t len);
/* A line that does not go into the buffer: written at once, or counted. */
bool ds_log_write_now(int fd, const char *line, size_t len);
void ds_log_count_drops(uint64_t lines);

/* ---- log_slots.c: the slots of lines ------------------------------------ */
extern size_t ds_log_buffer_size; /* DLSHIM_LOG_BUFFER: a block's bytes */
/* Bytes of a block's lines, rounded so that its marks are aligned. */
size_t ds_log_block_bytes(void);
/* Whether lines to fd go into the slots (the slots' key made first). */
bool ds_log_slots_wanted(int fd);
/* LOG and LOG_LINES held: every slot laid out afresh at its next line. */
void ds_log_slots_lay_out(bool buffer);
void ds_log_slots_after_fork(void);
/* s's shard held: room for len more bytes in its block (`whole`: a flush
 * was just done). */
bool ds_log_room_for(ds_log_slot *s, size_t len, bool whole);
/* LOG and s's shard held: s laid out in its memory. */
bool ds_log_slot_ready(ds_log_slot *s);
/* LOG held: this thread's slot (taken at its first line). */
unsigned ds_log_own_slot_index(void);
/* LOG held: the line added to this thread's slot, unless a flush is due
 * first (`flushed`: one was just done). */
bool ds_log_add_own(const char *line, size_t len, uint64_t now, bool flushed);
static inline void ds_log_add_line(ds_log_slot *s, const char *line, size_t len, uint64_t now)
{
    memcpy(s->buf + s->len, line, len);
    s->len += len;
    s->marks[s->lines++] = (ds_line_mark){now, (uint32_t)s->len};
}

/* ---- log_flush.c: the slots' blocks taken and written ------------------- */
/* LOG and LOG_LINES held: each slot's lines become its held block (which
 * must be empty).  False when the file's cap refused them. */
bool ds_log_take_blocks(int fd);
/* LOG held: the held blocks written, merged by time, after the writer
 * thread's (waited for). */
bool ds_log_write_held(int fd);
/* LOG held: every slot's lines written, what was handed over first. */
bool ds_log_flush_locked(int fd);
/* LOG held: the writer thread done with the blocks it was given (a futex
 * wait); false when leaving and it does not finish. */
bool ds_log_out_wait(void);
/* LOG held: the held blocks given to the writer thread, to write to fd
 * without LOG (ds_log_write_given), if it is done with the last ones; if
 * not, waited for when `wait`, else they stay held (ds_log_held_waiting).
 * False when they stay held. */
bool ds_log_give_out(int fd, bool wait);
bool ds_log_held_waiting(void);
/* The writer thread: what it was given claimed (false: nothing, or a
 * thread that could not wait for it wrote it), then written. */
bool ds_log_claim_given(void);
void ds_log_write_claimed(void);
void ds_log_flush_after_fork(void);

/* ---- log_writer.c: the writer thread ------------------------------------ */
/* LOG held, a block full or a flush due: every slot's lines handed to the
 * writer, or written here where there is none (yet). */
bool ds_log_hand_over_locked(int fd);
/* Outside every shim lock: the writer started when a hand-over asked. */
void ds_log_writer_start_if_owed(void);
/* After LOG is given back: the writer woken if a hand-over was made. */
void ds_log_writer_wake_if_owed(void);
/* The writer stopped and joined; false when none was running. */
bool ds_log_writer_stop(void);
void ds_log_writer_after_fork(void);

#endif /* DS_OUTPUT_LOG_H */
