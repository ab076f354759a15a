/*
 * bench/registry.c — the allocation registry at scale, linked with the
 * shim's core objects (no device needed).
 *
 *   registry N       prints {"allocations":N,"lookup_ns":…,"hot_lookup_ns":…,
 *                            "miss_alone_ns":…,"misses_overlapped_ns":…,
 *                            "bytes_per_allocation":…}
 *
 * N allocations of 512 bytes (cudaMalloc's granularity), 1 KiB apart, are
 * recorded; then 1M lookups of interior pointers in a scattered order (every
 * allocation equally likely: the worst case, every lookup a cache miss),
 * and 1M lookups cycling over 64 allocations (a program's working set of
 * live tensors).  Memory per allocation is the growth of the resident set
 * while recording, so it counts everything the registry touches.
 *
 * For scale, what memory alone costs on this machine: 1M reads of one word
 * at a hashed line of a buffer as big as that growth, mapped as the
 * registry maps its table (huge pages where the kernel gives them).  Read
 * one after another, each address depending on the last value (a miss
 * alone: no lookup can be faster on its own), and independently (as many
 * misses in flight as the processor keeps: a bound no lookup can beat).
 * The scattered lookup lies between the two; where it lies says how much
 * of it is memory and how much its own work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "start/start.h"

#define LOOKUPS 1000000u
#define BASE 0x200000000000ull
#define STRIDE 1024u

static long resident_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

static double elapsed_ns(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) * 1e9 + (double)(b->tv_nsec - a->tv_nsec);
}

/* The i-th read's word: the first of a cache line picked by hashing, as the
 * registry picks a home slot (no stride a prefetcher could follow). */
static size_t word_of(uint64_t i, size_t lines)
{
    return (size_t)((i * 0x9E3779B97F4A7C15ull >> 20) % lines) * 8;
}

/* ns per read of one word at a hashed cache line of a `bytes` buffer,
 * over `count` reads: each address depending on the value read before when
 * `dependent`.  0 where the buffer cannot be mapped. */
static double memory_ns(size_t bytes, bool dependent, uint32_t count)
{
    size_t lines = bytes / 64;
    if (lines == 0)
        return 0;
    uint64_t *buf = mmap(NULL, lines * 64, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (buf == MAP_FAILED)
        return 0;
    (void)madvise(buf, lines * 64, MADV_HUGEPAGE);
    for (size_t i = 0; i < lines; i++)
        buf[i * 8] = 0; /* every line resident, as the registry's are */
    struct timespec t0, t1;
    uint64_t sum = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* Two loops, not one with a test: a conditional move would make the
     * independent reads depend on the sum too.  The values are all 0, so
     * `sum` adds nothing to the address but the wait for it. */
    if (dependent)
        for (uint64_t i = 0; i < count; i++)
            sum += buf[word_of(i, lines) + sum];
    else
        for (uint64_t i = 0; i < count; i++)
            sum += buf[word_of(i, lines)];
    clock_gettime(CLOCK_MONOTONIC, &t1);
    munmap(buf, lines * 64);
    return sum ? 0 : elapsed_ns(&t0, &t1) / count;
}

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1000;
    if (n < 64)
        return 2;
    char *env[] = {"DLSHIM_LOG=off", NULL};
    ds_init_with_env(env);
    ds_alloc_info warm = {.base = BASE - STRIDE, .size = 512, .kind = DS_ALLOC_DEVICE,
                          .api = 0};
    ds_alloc_record(&warm, ds_name_intern("bench")); /* the registry's first pool outside the count */
    uint16_t owner = ds_name_intern("bench");
    long before = resident_bytes();
    for (uint32_t i = 0; i < n; i++) {
        ds_alloc_info a = {.base = BASE + (uintptr_t)i * STRIDE, .size = 512,
                           .kind = DS_ALLOC_DEVICE, .api = 0};
        ds_alloc_record(&a, owner);
    }
    long grown = resident_bytes() - before;

    struct timespec t0, t1, t2;
    uint32_t found = 0, step = 2654435761u % n; /* coprime with n in practice */
    if (step == 0)
        step = 1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint32_t i = 0, k = 0; i < LOOKUPS; i++, k = (k + step) % n) {
        ds_alloc_info a;
        found += ds_alloc_lookup(BASE + (uintptr_t)k * STRIDE + 100, &a);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    for (uint32_t i = 0; i < LOOKUPS; i++) {
        ds_alloc_info a;
        found += ds_alloc_lookup(BASE + (uintptr_t)((i & 63u) * (n / 64u)) * STRIDE + 100, &a);
    }
    clock_gettime(CLOCK_MONOTONIC, &t2);
    if (found != 2 * LOOKUPS) {
        fprintf(stderr, "registry: %u of %u lookups found their allocation\n", found,
                2 * LOOKUPS);
        return 1;
    }
    size_t footprint = grown > 0 ? (size_t)grown : 0;
    printf("{\"allocations\":%u,\"lookup_ns\":%.2f,\"hot_lookup_ns\":%.2f,"
           "\"miss_alone_ns\":%.2f,\"misses_overlapped_ns\":%.2f,"
           "\"bytes_per_allocation\":%.1f}\n",
           n, elapsed_ns(&t0, &t1) / LOOKUPS, elapsed_ns(&t1, &t2) / LOOKUPS,
           memory_ns(footprint, true, LOOKUPS), memory_ns(footprint, false, LOOKUPS),
           (double)grown / n);
    return 0;
}
