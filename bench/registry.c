/*
 * bench/registry.c — the allocation registry at scale, linked with the
 * shim's core objects (no device needed).
 *
 *   registry N       prints {"allocations":N,"lookup_ns":…,"hot_lookup_ns":…,
 *                            "bytes_per_allocation":…}
 *
 * N allocations of 512 bytes (cudaMalloc's granularity), 1 KiB apart, are
 * recorded; then 1M lookups of interior pointers in a scattered order (every
 * allocation equally likely: the worst case, every lookup a cache miss),
 * and 1M lookups cycling over 64 allocations (a program's working set of
 * live tensors).  Memory per allocation is the growth of the resident set
 * while recording, so it counts everything the registry touches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

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
    printf("{\"allocations\":%u,\"lookup_ns\":%.2f,\"hot_lookup_ns\":%.2f,"
           "\"bytes_per_allocation\":%.1f}\n",
           n, elapsed_ns(&t0, &t1) / LOOKUPS, elapsed_ns(&t1, &t2) / LOOKUPS,
           (double)grown / n);
    return 0;
}
