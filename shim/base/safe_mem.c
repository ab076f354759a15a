/*
 * safe_mem.c — reading and writing memory whose address came from the
 * program (a tensor pointer, a shape array, a name) without faulting.
 *
 * process_vm_readv/writev on our own pid copy through the kernel, which
 * returns EFAULT instead of delivering SIGSEGV.  They transfer whole iovec
 * elements only, so requests are cut at page boundaries to get every
 * readable page up to the first bad one.
 *
 * Syscalls are slow (1-20 us in a VM), and DLPack structs live on a few heap
 * pages used again and again, so pages that a syscall proved readable (or
 * writable) are remembered in a small direct-mapped cache and later accesses
 * to them are plain copies.  The trade-off, documented in
 * docs/reliability.md: a page unmapped after it was proven, then handed to
 * us through a dangling pointer, would fault.  Where a seccomp policy forbids
 * the syscalls, mincore() checks that each page is mapped before a plain
 * copy (weaker still: a mapped PROT_NONE page faults).
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/base.h"

#define DS_IOV_MAX 8

static atomic_bool syscalls_refused;

/* Page numbers proven accessible; 0 never is (page 0 is never mapped).  The
 * slot and the probe (ds_page_slot, ds_page_proven) are inline in
 * base.h. */
atomic_uintptr_t ds_readable_pages[DS_PAGE_CACHE], ds_writable_pages[DS_PAGE_CACHE];

static bool cached(atomic_uintptr_t *cache, uintptr_t a, size_t n)
{
    uintptr_t first = a / DS_PAGE, last = (a + n - 1) / DS_PAGE;
    for (uintptr_t p = first; p <= last; p++)
        if (!ds_page_proven(cache, p))
            return false;
    return true;
}

static void remember(atomic_uintptr_t *cache, uintptr_t a, size_t n)
{
    for (uintptr_t p = a / DS_PAGE; p <= (a + n - 1) / DS_PAGE; p++)
        atomic_store_explicit(ds_page_slot(cache, p), p, memory_order_relaxed);
}

static bool page_mapped(uintptr_t addr)
{
    unsigned char vec;
    return mincore((void *)(addr & ~(uintptr_t)(DS_PAGE - 1)), 1, &vec) == 0;
}

/* Only canonical user-space addresses can be valid; rejecting the rest early
 * saves a syscall for NULL-ish and kernel-half garbage. */
static bool plausible(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    return a >= DS_PAGE && a + n >= a && a + n <= ((uintptr_t)1 << 47);
}

/* A plain copy of proven pages.  Under AddressSanitizer the copy must not be
 * checked: the bytes are the program's (a redzone, a freed chunk, ASan's own
 * shadow) and reading them safely is this file's job.  Volatile bytes keep
 * the compiler from turning the loop back into an intercepted memcpy.  Never
 * inlined: valgrind's suppressions (tests/valgrind.supp) name this frame, and
 * an inlined frame loses its name under link-time optimisation. */
#if defined(__SANITIZE_ADDRESS__)
#define DS_NO_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DS_NO_ASAN 1
#endif
#endif
#ifdef DS_NO_ASAN
__attribute__((no_sanitize("address"), noinline)) void ds_plain_copy(void *dst, const void *src,
                                                                    size_t n)
{
    volatile unsigned char *d = dst;
    const volatile unsigned char *s = src;
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
}
#else
/* In words of 16, 8 or 4 bytes, the last one overlapping the one before
 * (source and destination never overlap): a struct or a shape is a few
 * words, where memcpy's `rep movsq` spent more on starting than copying. */
__attribute__((noinline)) void ds_plain_copy(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (n >= 16) {
        for (size_t i = 0; i + 16 < n; i += 16)
            memcpy(d + i, s + i, 16);
        memcpy(d + n - 16, s + n - 16, 16);
    } else if (n >= 8) {
        memcpy(d, s, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else if (n >= 4) {
        memcpy(d, s, 4);
        memcpy(d + n - 4, s + n - 4, 4);
    } else {
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    }
}
#endif

/* A range over several pages, every one already proven: a plain copy
 * (errno untouched).  A range within one page was tried by the caller
 * (ds_safe_read and ds_safe_write in base.h). */
static bool copied_directly(void *local, const void *remote, size_t n, bool write_remote)
{
    atomic_uintptr_t *cache = write_remote ? ds_writable_pages : ds_readable_pages;
    if (n == 0 || !plausible(remote, n) || !cached(cache, (uintptr_t)remote, n))
        return false;
    if (write_remote)
        ds_plain_copy((void *)remote, local, n);
    else
        ds_plain_copy(local, remote, n);
    return true;
}

/* Through the kernel, page by page: for pages not proven yet, and for reads
 * that may run past their object (a string's window), which must not be
 * copied directly even when another thread proved the page meanwhile. */
static size_t transfer(void *local, const void *remote, size_t n, bool write_remote)
{
    if (n == 0 || !plausible(remote, n))
        return 0;
    atomic_uintptr_t *cache = write_remote ? ds_writable_pages : ds_readable_pages;
    size_t done = 0;
    while (done < n && !atomic_load_explicit(&syscalls_refused, memory_order_relaxed)) {
        struct iovec liov = {(char *)local + done, 0};
        struct iovec riov[DS_IOV_MAX];
        int cnt = 0;
        uintptr_t a = (uintptr_t)remote + done;
        size_t left = n - done;
        while (left && cnt < DS_IOV_MAX) {
            size_t chunk = DS_PAGE - (a & (DS_PAGE - 1));
            if (chunk > left)
                chunk = left;
            riov[cnt].iov_base = (void *)a;
            riov[cnt].iov_len = chunk;
            liov.iov_len += chunk;
            cnt++;
            a += chunk;
            left -= chunk;
        }
        ssize_t r = write_remote
                        ? process_vm_writev(ds_pid(), &liov, 1, riov, (unsigned long)cnt, 0)
                        : process_vm_readv(ds_pid(), &liov, 1, riov, (unsigned long)cnt, 0);
        if (r < 0 && (errno == ENOSYS || errno == EPERM)) {
            atomic_store(&syscalls_refused, true);
            break;
        }
        if (r <= 0)
            return done;
        remember(cache, (uintptr_t)remote + done, (size_t)r);
        done += (size_t)r;
        if ((size_t)r < liov.iov_len)
            return done;
    }
    /* Fallback: page by page after mincore. */
    while (done < n) {
        uintptr_t a = (uintptr_t)remote + done;
        if (!page_mapped(a))
            break;
        size_t chunk = DS_PAGE - (a & (DS_PAGE - 1));
        if (chunk > n - done)
            chunk = n - done;
        if (write_remote)
            ds_plain_copy((void *)a, (char *)local + done, chunk);
        else
            ds_plain_copy((char *)local + done, (const void *)a, chunk);
        done += chunk;
    }
    return done;
}

size_t ds_safe_read_any(void *dst, const void *src, size_t n)
{
    if (copied_directly(dst, src, n, false))
        return n;
    int saved = errno;
    size_t r = transfer(dst, src, n, false);
    errno = saved;
    return r;
}

bool ds_safe_write_any(void *dst, const void *src, size_t n)
{
    if (copied_directly((void *)src, dst, n, true))
        return true;
    int saved = errno;
    bool ok = transfer((void *)src, dst, n, true) == n;
    errno = saved;
    return ok;
}

void ds_safe_string(char *out, size_t cap, const char *s, const char *fallback)
{
    /* Page by page: on a proven page, copy up to the NUL and no further (no
     * read past the string's object); elsewhere one syscall to the page's
     * end, so a name near the end of the last mapped page still reads. */
    size_t got = 0;
    while (s && got + 1 < cap) {
        const char *p = s + got;
        size_t to_page_end = DS_PAGE - ((uintptr_t)p & (DS_PAGE - 1));
        size_t want = to_page_end < cap - 1 - got ? to_page_end : cap - 1 - got;
        if (plausible(p, want) && cached(ds_readable_pages, (uintptr_t)p, 1)) {
            size_t k = 0;
            while (k < want && p[k])
                out[got + k] = p[k], k++;
            got += k;
            if (k < want)
                break;
        } else {
            int saved = errno;
            size_t r = transfer(out + got, p, want, false);
            errno = saved;
            const char *nul = memchr(out + got, '\0', r);
            if (nul) {
                got = (size_t)(nul - out);
                break;
            }
            got += r;
            if (r < want)
                break;
        }
    }
    out[got] = '\0';
    if (got == 0) {
        size_t n = strlen(fallback);
        if (n >= cap)
            n = cap - 1;
        memcpy(out, fallback, n);
        out[n] = '\0';
    }
}
