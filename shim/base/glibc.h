/*
 * glibc.h — the oldest glibc the library runs on: 2.17 (manylinux_2_17,
 * also called manylinux2014).
 *
 * Force-included in every object of the library (Makefile, -include).  A
 * library linked against today's glibc asks for the newest version of each
 * symbol it names: glibc 2.34 moved the dl* and pthread_* functions into
 * libc.so.6 under new versions (GLIBC_2.34, pthread_sigmask GLIBC_2.32), so
 * the library would refuse to load on an older glibc.  Each .symver below
 * binds a name to the version that older glibcs define (in libdl.so.2 and
 * libpthread.so.0 there, which the library lists as needed; today's glibc
 * keeps these versions in libc.so.6 for compatibility).  A symbol newer than
 * 2.17 that is not here fails scripts/check-glibc in `make check`;
 * strerrorname_np and fstat, which 2.17 lacks, have base/ replacements.
 * Hand-written because no maintained tool does this for a C library built
 * with gcc: the alternative, a 2.17 sysroot (zig cc), changes the compiler.
 */
#ifndef DS_GLIBC_H
#define DS_GLIBC_H

#include <features.h>

#if defined(__x86_64__) && defined(__GLIBC__)
#define DS_GLIBC_PIN(name, version) __asm__(".symver " #name "," #name "@" version);
/* libdl.so.2 before 2.34 */
DS_GLIBC_PIN(dladdr, "GLIBC_2.2.5")
DS_GLIBC_PIN(dladdr1, "GLIBC_2.3.3")
DS_GLIBC_PIN(dlerror, "GLIBC_2.2.5")
DS_GLIBC_PIN(dlinfo, "GLIBC_2.3.3")
DS_GLIBC_PIN(dlvsym, "GLIBC_2.2.5")
/* libpthread.so.0 before 2.34 */
DS_GLIBC_PIN(pthread_create, "GLIBC_2.2.5")
DS_GLIBC_PIN(pthread_join, "GLIBC_2.2.5")
DS_GLIBC_PIN(pthread_key_create, "GLIBC_2.2.5")
DS_GLIBC_PIN(pthread_mutex_trylock, "GLIBC_2.2.5")
DS_GLIBC_PIN(pthread_rwlock_init, "GLIBC_2.2.5")
DS_GLIBC_PIN(pthread_rwlock_rdlock, "GLIBC_2.2.5")
DS_GLIBC_PIN(pthread_rwlock_tryrdlock, "GLIBC_2.2.5")
DS_GLIBC_PIN(pthread_rwlock_trywrlock, "GLIBC_2.2.5")
DS_GLIBC_PIN(pthread_rwlock_unlock, "GLIBC_2.2.5")
DS_GLIBC_PIN(pthread_rwlock_wrlock, "GLIBC_2.2.5")
DS_GLIBC_PIN(pthread_setspecific, "GLIBC_2.2.5")
DS_GLIBC_PIN(pthread_sigmask, "GLIBC_2.2.5")
#undef DS_GLIBC_PIN
#endif

#endif
