/*
 * log_cap.c — a log file cannot fill the disk.
 *
 * DLSHIM_LOG_MAX_SIZE caps what the file holds (its size at open included,
 * and at each flush the size on disk, which other processes of the run may
 * have grown).  A block claims the file's room as it starts filling (as
 * much of a block as there is room for: one CAS a block, not a line), and a
 * flush gives back what its blocks did not fill, so the cap stays exact
 * with many slots.  Ordinary lines stop DS_LOG_TAIL_ROOM short of the cap;
 * then one `log_full` line says so, and the summary (and a text summary's
 * tables) may use the room left; every later line is counted, never
 * written (ds_log_capped, `capped_events` in the summary).  A stop rather
 * than rotation: a rotated log drops its oldest lines, and those are the
 * exports a later violation names; the start of a run explains its end,
 * and what was lost is a number in the summary.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

/* The room kept under the cap for the log_full line and the summary (at
 * most 64 KiB, ledger/summary.c), or half the cap where that is smaller. */
#define DS_LOG_TAIL_ROOM (72 * 1024ull)
uint64_t ds_log_file_max;
/* Bytes the file holds, claimed before they are written: a block's room
 * when a thread starts filling it (a few CAS per block, not per line). */
static struct {
    _Alignas(64) _Atomic uint64_t bytes;
} file_size;
enum { FULL_NO, FULL_OWED, FULL_WRITTEN };
static atomic_int file_full;            /* the log_full line: FULL_* */
static atomic_uint_fast64_t capped;     /* lines not written since */

/* Where ordinary lines stop: the cap less the tail's room. */
static uint64_t soft_max(void)
{
    uint64_t tail = ds_log_file_max / 2 < DS_LOG_TAIL_ROOM ? ds_log_file_max / 2 : DS_LOG_TAIL_ROOM;
    return ds_log_file_max - tail;
}

bool ds_log_cap_reached(void)
{
    return atomic_load_explicit(&file_full, memory_order_relaxed) != FULL_NO;
}

/* Claims between need and want bytes of the file under its soft cap for a
 * block (as many as there are); 0 when need does not fit, or the log_full
 * line is owed (then only the summary's lines are written: the slow path). */
size_t ds_log_claim_room(size_t need, size_t want)
{
    if (atomic_load_explicit(&file_full, memory_order_relaxed) != FULL_NO)
        return 0;
    uint64_t have = atomic_load_explicit(&file_size.bytes, memory_order_relaxed), soft = soft_max();
    size_t got;
    do {
        if (have >= soft || soft - have < need)
            return 0;
        got = soft - have < want ? (size_t)(soft - have) : want;
    } while (!atomic_compare_exchange_weak_explicit(&file_size.bytes, &have, have + got,
                                                     memory_order_relaxed, memory_order_relaxed));
    return got;
}

/* Claims len bytes of the file under limit; false when they do not fit. */
static bool claim(size_t len, uint64_t limit)
{
    if (!ds_log_file_max)
        return true;
    uint64_t have = atomic_load_explicit(&file_size.bytes, memory_order_relaxed);
    do {
        if (have + len > limit)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&file_size.bytes, &have, have + len,
                                                     memory_order_relaxed, memory_order_relaxed));
    return true;
}

/* Claims the file's room for one line written at once: an ordinary line
 * under the soft cap, and none once the log_full line is owed (a shorter
 * line than the one refused may still fit, but must not follow log_full);
 * a summary's line (`tail`) under the cap itself. */
bool ds_log_claim_line(size_t len, bool tail)
{
    if (!tail && ds_log_file_max && atomic_load_explicit(&file_full, memory_order_relaxed) != FULL_NO)
        return false;
    return claim(len, tail ? ds_log_file_max : soft_max());
}

void ds_log_cap_set(int fd)
{
    struct stat st;
    ds_log_file_max = 0;
    atomic_store(&file_full, FULL_NO);
    if (fd > STDERR_FILENO && ds_cfg.log_max_size > 0 && ds_fstat(fd, &st) == 0 &&
        S_ISREG(st.st_mode)) {
        ds_log_file_max = (uint64_t)ds_cfg.log_max_size;
        atomic_store(&file_size.bytes, (uint64_t)st.st_size);
    }
}

/* The first ordinary line with no room left under the soft cap: the
 * log_full line is owed, and written by the event builder, which this file
 * does not call (ds_log_full_owed). */
static void owe_log_full(void)
{
    int none = FULL_NO;
    atomic_compare_exchange_strong(&file_full, &none, FULL_OWED);
}

bool ds_log_refuse_capped(void)
{
    atomic_fetch_add_explicit(&capped, 1, memory_order_relaxed);
    owe_log_full();
    return false;
}

void ds_log_count_capped(uint64_t lines)
{
    atomic_fetch_add_explicit(&capped, lines, memory_order_relaxed);
}

/* Under a cap, the file's size on disk is looked at (a fstat per flush):
 * other processes of the run may have grown it past what the blocks were
 * promised, and then the blocks are not written but counted. */
bool ds_log_cap_settle(int fd, uint64_t unused, uint64_t held, uint64_t lines)
{
    if (!ds_log_file_max)
        return true;
    uint64_t have = atomic_fetch_sub_explicit(&file_size.bytes, unused, memory_order_relaxed) - unused;
    struct stat st;
    if (!held || ds_fstat(fd, &st) != 0)
        return true;
    uint64_t seen = (uint64_t)st.st_size + held; /* what we wrote is on disk: LOG is held */
    while (seen > have && !atomic_compare_exchange_weak_explicit(&file_size.bytes, &have, seen,
                                                                  memory_order_relaxed,
                                                                  memory_order_relaxed)) {
    }
    if ((seen > have ? seen : have) <= ds_log_file_max)
        return true;
    atomic_fetch_sub_explicit(&file_size.bytes, held, memory_order_relaxed);
    atomic_fetch_add_explicit(&capped, lines, memory_order_relaxed);
    owe_log_full();
    return false;
}

bool ds_log_full_owed(uint64_t *max_size)
{
    int owed = FULL_OWED;
    if (atomic_load_explicit(&file_full, memory_order_relaxed) != FULL_OWED ||
        !atomic_compare_exchange_strong(&file_full, &owed, FULL_WRITTEN))
        return false;
    *max_size = ds_log_file_max;
    return true;
}

uint64_t ds_log_capped(void)
{
    return atomic_load(&capped);
}
