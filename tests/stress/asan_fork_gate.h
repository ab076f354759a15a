/* asan_fork_gate.h — what a stress program's threads do beside a fork, kept
 * out of the fork under AddressSanitizer only.
 *
 * ASan's allocator (gcc 12's libsanitizer) takes none of its locks around
 * fork: a child forked while another thread is inside malloc or free waits
 * forever on that lock, in the child's own first allocation (gdb-confirmed
 * in both programs that use this; no shim lock involved).  Under ASan those
 * threads allocate between FORK_GATE_ENTER and FORK_GATE_LEAVE, and the fork
 * is made inside the gate too; in every other run the gate is nothing, and
 * the threads race the fork as the test means them to. */
#ifndef ASAN_FORK_GATE_H
#define ASAN_FORK_GATE_H

#include <pthread.h>

#ifdef __SANITIZE_ADDRESS__
static pthread_mutex_t fork_gate = PTHREAD_MUTEX_INITIALIZER;
#define FORK_GATE_ENTER() pthread_mutex_lock(&fork_gate)
#define FORK_GATE_LEAVE() pthread_mutex_unlock(&fork_gate)
#else
#define FORK_GATE_ENTER() ((void)0)
#define FORK_GATE_LEAVE() ((void)0)
#endif

#endif
