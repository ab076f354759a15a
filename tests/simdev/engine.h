/*
 * engine.h — the simulated device behind the CUDA and HIP test doubles.
 *
 * Memory lives in host RAM (each allocation its own mapping; a freed one is
 * poisoned with 0xdd and never reused, so a read after free gives wrong
 * numbers, as on a GPU).  Streams are in-order queues, each run by its own
 * worker thread: work happens later and on another thread.  The legacy
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

SIM_HIDDEN void sim_memcpy(void *dst, const void *src, size_t n, sim_stream *s, bool sync);
SIM_HIDDEN void sim_memset(void *dst, int value, size_t n, sim_stream *s, bool sync);

#endif
