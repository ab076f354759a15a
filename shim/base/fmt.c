/*
 * fmt.c — the one formatter and the diagnostics channel.
 *
 * Written by hand because the shim formats inside signal handlers, deleters
 * and before malloc is safe to call: vsnprintf is not async-signal-safe and
 * may allocate.  Supports the subset the shim uses (see base.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"

#define DS_DIAG_MAX 64

typedef struct {
    char *buf;
    size_t cap, len;
} sink;

static void put(sink *s, char c)
{
    if (s->len + 1 < s->cap)
        s->buf[s->len++] = c;
}

static void put_padded(sink *s, const char *str, size_t n, int width, bool left, char pad)
{
    size_t w = width > 0 ? (size_t)width : 0;
    if (!left)
        for (size_t i = n; i < w; i++)
            put(s, pad);
    for (size_t i = 0; i < n; i++)
        put(s, str[i]);
    if (left)
        for (size_t i = n; i < w; i++)
            put(s, ' ');
}

/* Digits of v in `base`, right-aligned in tmp; returns the start. */
static char *digits(char *end, unsigned long long v, unsigned base)
{
    char *p = end;
    do {
        *--p = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    return p;
}

size_t ds_vfmt(char *buf, size_t cap, const char *fmt, va_list ap)
{
    sink s = {buf, cap, 0};
    if (cap == 0)
        return 0;
    for (const char *f = fmt; *f; f++) {
        if (*f != '%') {
            put(&s, *f);
            continue;
        }
        f++;
        bool left = false;
        char pad = ' ';
        for (;; f++) {
            if (*f == '-')
                left = true;
            else if (*f == '0')
                pad = '0';
            else
                break;
        }
        int width = 0;
        while (*f >= '0' && *f <= '9')
            width = width * 10 + (*f++ - '0');
        int lng = 0; /* 0: int, 1: long, 2: long long, 3: size_t */
        if (*f == 'l') {
            lng = 1;
            if (*++f == 'l') {
                lng = 2;
                f++;
            }
        } else if (*f == 'z') {
            lng = 3;
            f++;
        }
        char tmp[24], *end = tmp + sizeof(tmp);
        switch (*f) {
        case 's': {
            const char *str = va_arg(ap, const char *);
            if (!str)
                str = "(null)";
            put_padded(&s, str, strlen(str), width, left, ' ');
            break;
        }
        case 'c': {
            char c = (char)va_arg(ap, int);
            put_padded(&s, &c, 1, width, left, ' ');
            break;
        }
        case 'd':
        case 'i': {
            long long v = lng == 0 ? va_arg(ap, int)
                          : lng == 1 ? va_arg(ap, long)
                          : lng == 2 ? va_arg(ap, long long)
                                     : (long long)va_arg(ap, size_t);
            unsigned long long mag = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
            char *p = digits(end, mag, 10);
            if (v < 0)
                *--p = '-';
            put_padded(&s, p, (size_t)(end - p), width, left, pad);
            break;
        }
        case 'u':
        case 'x': {
            unsigned long long v = lng == 0 ? va_arg(ap, unsigned)
                                   : lng == 1 ? va_arg(ap, unsigned long)
                                   : lng == 2 ? va_arg(ap, unsigned long long)
                                              : va_arg(ap, size_t);
            char *p = digits(end, v, *f == 'x' ? 16 : 10);
            put_padded(&s, p, (size_t)(end - p), width, left, pad);
            break;
        }
        case 'p': {
            char *p = digits(end, (uintptr_t)va_arg(ap, void *), 16);
            *--p = 'x';
            *--p = '0';
            put_padded(&s, p, (size_t)(end - p), width, left, ' ');
            break;
        }
        case '%':
            put(&s, '%');
            break;
        default: /* unknown conversion: show it, consume nothing */
            put(&s, '%');
            if (!*f)
                goto done;
            put(&s, *f);
        }
    }
done:
    buf[s.len] = '\0';
    return s.len;
}

size_t ds_fmt(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = ds_vfmt(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}

void ds_printable(char *out, size_t cap, const char *s, size_t n)
{
    size_t i = 0;
    if (cap == 0)
        return;
    for (; i < n && i + 1 < cap && s[i]; i++)
        out[i] = (char)((unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i]);
    out[i] = '\0';
}

const char *ds_errno_name(int e)
{
    switch (e) {
#define NAME(x) case x: return #x;
    NAME(EPERM) NAME(ENOENT) NAME(EINTR) NAME(EIO) NAME(ENXIO) NAME(EBADF) NAME(EAGAIN)
    NAME(ENOMEM) NAME(EACCES) NAME(EFAULT) NAME(EBUSY) NAME(EEXIST) NAME(ENODEV)
    NAME(ENOTDIR) NAME(EISDIR) NAME(EINVAL) NAME(ENFILE) NAME(EMFILE) NAME(ETXTBSY)
    NAME(EFBIG) NAME(ENOSPC) NAME(ESPIPE) NAME(EROFS) NAME(EPIPE) NAME(ENAMETOOLONG)
    NAME(ELOOP) NAME(EOVERFLOW) NAME(EOPNOTSUPP) NAME(EDQUOT) NAME(ESTALE)
#undef NAME
    default: return NULL;
    }
}

int ds_fstat(int fd, struct stat *st)
{
    return (int)syscall(SYS_fstat, fd, st);
}

static atomic_uint diag_count;

unsigned ds_diag_count(void)
{
    return atomic_load_explicit(&diag_count, memory_order_relaxed);
}

void ds_diag(const char *fmt, ...)
{
    unsigned n = atomic_fetch_add_explicit(&diag_count, 1, memory_order_relaxed);
    if (n > DS_DIAG_MAX)
        return;
    int saved = errno;
    char line[512];
    size_t len = ds_fmt(line, sizeof(line), "dlshim: ");
    if (n == DS_DIAG_MAX) {
        len += ds_fmt(line + len, sizeof(line) - len, "further diagnostics suppressed");
    } else {
        va_list ap;
        va_start(ap, fmt);
        len += ds_vfmt(line + len, sizeof(line) - len, fmt, ap);
        va_end(ap);
    }
    if (len + 1 < sizeof(line))
        line[len++] = '\n';
    else
        line[sizeof(line) - 2] = '\n', len = sizeof(line) - 1;
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w; /* a diagnostic that cannot be written is lost, never retried */
    errno = saved;
}
