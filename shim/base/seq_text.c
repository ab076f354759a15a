/*
 * seq_text.c — a text many threads read while one thread now and then
 * rewrites it (the running test's name, the latest violation's line).
 *
 * A sequence counter, odd while the text is written, and the text copied
 * as atomic words (release stores, acquire loads): neither side waits, and
 * a reader that raced a writer sees the counter moved and leaves the text
 * out.  Words rather than fences: ThreadSanitizer does not model fences.
 */
#include <string.h>

#include "base/base.h"

bool ds_seq_text_set(ds_seq_text *t, const char *text, size_t cap)
{
    unsigned seq = atomic_load_explicit(&t->seq, memory_order_relaxed);
    if ((seq & 1) || !atomic_compare_exchange_strong_explicit(&t->seq, &seq, seq + 1,
                                                              memory_order_acquire,
                                                              memory_order_relaxed))
        return false;
    size_t n = text ? strnlen(text, cap - 1) : 0;
    for (size_t w = 0; w * 8 < cap; w++) {
        uint64_t word = 0; /* the text's bytes, then NULs */
        if (w * 8 < n)
            memcpy(&word, text + w * 8, n - w * 8 < 8 ? n - w * 8 : 8);
        __atomic_store_n(&t->words[w], word, __ATOMIC_RELEASE);
    }
    atomic_store_explicit(&t->seq, seq + 2, memory_order_release);
    return true;
}

bool ds_seq_text_copy(ds_seq_text *t, char *out, size_t cap)
{
    unsigned before = atomic_load_explicit(&t->seq, memory_order_acquire);
    if (before == 0 || (before & 1))
        return false;
    for (size_t w = 0; w * 8 < cap; w++) {
        uint64_t word = __atomic_load_n(&t->words[w], __ATOMIC_ACQUIRE);
        memcpy(out + w * 8, &word, 8);
    }
    out[cap - 1] = '\0';
    return out[0] && atomic_load_explicit(&t->seq, memory_order_acquire) == before;
}
