/*
 * engine.h — the simulated device behind the CUDA and HIP test doubles.
 *
 * Memory lives in host RAM (each allocation its own mapping; a freed one is
 * poisoned with 0xdd and never reused, so a read after free gives wrong
 * numbers, as on a GPU).  Streams are in-order queues, each run by its own
 * worker thread: work happens later and on another thread (SIMDEV_IMMEDIATE=1:
 * as it is queued, on the caller's, for instruction counts).  The legacy
 * default stream orders with blocking streams as CUDA specifies.
 * Test-only: never part of the installed shim.
 */
#ifndef SIM_ENGINE_H
#define SIM_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_HIDDEN __attribute__((visibility("hidden")))

enum sim_kind { SIM_DEVICE, SIM_HOST, SIM_MANAGED };

typedef struct sim_stream sim_stream;
typedef struct sim_event sim_event;

/* SIMDEV_NO_DEVICE=1: every call fails as on a machine without a GPU. */
SIM_HIDDEN bool sim_no_device(void);
/* SIMDEV_LOG=path: one line per free, so tests can see what reached the "device". */
SIM_HIDDEN void sim_log(const char *what, const void *p);

SIM_HIDDEN void *sim_alloc(size_t size, int kind);
/* 0, or -1 when p is not the start of a live allocation of that kind. */
SIM_HIDDEN int sim_free(void *p, int kind);

#define SIM_STREAM_NON_BLOCKING 1u
SIM_HIDDEN sim_stream *sim_stream_create(unsigned flags);
SIM_HIDDEN void sim_stream_destroy(sim_stream *s);
/* NULL and 1: the legacy default stream; 2: this thread's default stream. */
SIM_HIDDEN sim_stream *sim_stream_of(void *handle);
SIM_HIDDEN void sim_enqueue(sim_stream *s, void (*fn)(void *), void *arg);
SIM_HIDDEN void sim_stream_sync(sim_stream *s);
SIM_HIDDEN void sim_device_sync(void);

SIM_HIDDEN sim_event *sim_event_create(void);
SIM_HIDDEN void sim_event_destroy(sim_event *e);
SIM_HIDDEN void sim_event_record(sim_event *e, sim_stream *s);
SIM_HIDDEN void sim_event_sync(sim_event *e);
SIM_HIDDEN bool sim_event_done(sim_event *e);
SIM_HIDDEN void sim_stream_wait_event(sim_stream *s, sim_event *e);

/* External memory (cuImportExternalMemory): a file descriptor whose file can
 * be mapped, as Mesa's lavapipe exports Vulkan memory (a memfd), mapped
 * shared and read/write.  On success the mapping owns the memory and the fd
 * is closed (CUDA takes ownership of it); on failure the fd is left alone.
 * Returns 0 or an errno: EBADF (no such fd), EINVAL (size 0, or larger than
 * the file), or mmap's. */
typedef struct sim_extmem sim_extmem;
SIM_HIDDEN int sim_extmem_import(int fd, size_t size, sim_extmem **out);
/* *out = the buffer at offset (its address in the mapping).  Returns 0,
 * EBADF (m is not live) or EINVAL (size 0, or [offset, offset + size) not
 * within the imported size).  A buffer is released with
 * sim_extmem_free_buffer (cuMemFree), before or after the destroy. */
SIM_HIDDEN int sim_extmem_map(sim_extmem *m, uint64_t offset, uint64_t size, void **out);
/* 0, or -1 when p is not a buffer sim_extmem_map returned and not yet freed. */
SIM_HIDDEN int sim_extmem_free_buffer(void *p);
/* 0, or -1 when m is not live.  The memory is unmapped at once; the address
 * range stays reserved (inaccessible) until its last buffer is freed. */
SIM_HIDDEN int sim_extmem_destroy(sim_extmem *m);

/* External semaphores (cuImportExternalSemaphore, hipImportExternalSemaphore):
 * an event each.  A signal records it on the stream, a wait makes the
 * stream wait for the last signal enqueued before it (none: no wait, as if
 * the other API had signalled).  Looser than a binary semaphore, whose wait
 * also resets it, but a wait after a signal orders as on a GPU.  A timeline
 * one counts too: a signal of a value records the event and raises the
 * count to it; a wait for a value the streams here have not signalled is
 * no wait (the other API's signal, which nothing here sees, or a wait
 * before its signal: a GPU would wait).  Import: 0 and the descriptor
 * closed (the runtime owns it), or EBADF. */
typedef struct sim_semaphore sim_semaphore;
SIM_HIDDEN int sim_semaphore_import(int fd, bool timeline, sim_semaphore **out);
/* Each of sems[0..n) signalled (or waited for) on s, a timeline one at the
 * value (a uint64_t) at the start of the i-th of `params`, `stride` bytes
 * apart (params.fence.value, CUDA's and HIP's): 0, or EINVAL (no array) or
 * EBADF (a null semaphore), nothing done then. */
SIM_HIDDEN int sim_semaphores(void *const *sems, const void *params, size_t stride, unsigned n,
                              sim_stream *s, bool signal);
SIM_HIDDEN void sim_semaphore_destroy(sim_semaphore *sem);

SIM_HIDDEN void sim_memcpy(void *dst, const void *src, size_t n, sim_stream *s, bool sync);
SIM_HIDDEN void sim_memset(void *dst, int value, size_t n, sim_stream *s, bool sync);

#endif
