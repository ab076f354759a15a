/* libFuzzer target: the JSON writer.  Input bytes become string values, keys
 * and numbers of an event (strings of any bytes: invalid UTF-8, controls,
 * quotes); the finished line must be exactly one valid JSON object, or
 * dropped whole when it does not fit.  The text rendering of that line must
 * stay within it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "json_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    int64_t num = 0;
    memcpy(&num, data, size < sizeof(num) ? size : sizeof(num));
    double real;
    memcpy(&real, &num, sizeof(real));

    ds_ev e;
    ds_ev_begin(&e, DS_EV_VIOLATION);
    ds_ev_str(&e, "detail", s);
    ds_ev_int(&e, "n", num);
    ds_ev_double(&e, "x", real);
    ds_ev_open(&e, "nested", '{');
    ds_ev_str(&e, "k", s + size / 2);
    ds_ev_open(&e, "list", '[');
    ds_ev_str(&e, NULL, s + size / 3);
    ds_ev_hex(&e, NULL, (uintptr_t)num);
    /* What ds_ev_end does before writing, without a log. */
    while (e.depth > 0)
        ds_ev_close(&e);
    if (!e.overflow) {
        e.buf[e.len++] = '}';
        if (!json_is_object(e.buf, e.len)) {
            fprintf(stderr, "not one JSON object: %.*s\n", (int)e.len, e.buf);
            abort();
        }
        char *text = malloc(e.len + 1);
        memcpy(text, e.buf, e.len);
        size_t n = ds_text_from_json(text, e.len);
        if (n > e.len + 1)
            abort();
        free(text);
    }
    free(s);
    return 0;
}
