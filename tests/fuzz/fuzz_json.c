/* libFuzzer target: the JSON writer.  Input bytes become string values, keys
 * and numbers of an event (strings of any bytes: invalid UTF-8, controls,
 * quotes); the finished line must be exactly one valid JSON object, or
 * dropped whole when it does not fit.  The text rendered from that line must
 * stay within it and equal the text line built directly. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output/output.h"
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

    /* Built as JSON, then directly as text (event.c picks the rendering
     * from the format): the text converted from the one must be the other. */
    char json_line[DS_LINE_MAX + 1];
    size_t json_len = 0;
    bool json_ok = false;
    for (int format = 0; format < 2; format++) {
        ds_cfg.format = format ? DS_FORMAT_TEXT : DS_FORMAT_JSONL;
        ds_ev e;
        ds_ev_begin(&e, DS_EV_VIOLATION);
        /* A generated writer's fields, with the input as the producer's
         * text and its first bytes as numbers and an address. */
        int64_t dims[2] = {num, ~num};
        ds_import_fields imp = {.tensor = (uintptr_t)num, .consumer = ds_name_intern(s),
                                .producer = DS_NAME_OTHER, .bytes = (uint64_t)num};
        ds_ev_import(&e, &imp);
        ds_export_fields exp = {.tensor = (uintptr_t)num, .producer = {DS_NAME_OTHER, s},
                                .shape = {dims, 2}, .byte_offset = (uint64_t)num};
        ds_ev_export(&e, &exp);
        ds_ev_str(&e, "detail", s);
        ds_ev_int(&e, "n", num);
        ds_ev_double(&e, "x", real);
        ds_ev_open(&e, "nested", '{');
        ds_ev_str(&e, "k", s + size / 2);
        ds_ev_open(&e, "list", '[');
        ds_ev_str(&e, NULL, s + size / 3);
        ds_ev_hex(&e, NULL, (uintptr_t)num);
        ds_ev_name(&e, NULL, ds_name_intern(s));
        /* What ds_ev_end does before writing, without a log. */
        if (!ds_ev_finish(&e))
            continue;
        if (!e.text) {
            if (!json_is_object(e.buf, ds_ev_len(&e))) {
                fprintf(stderr, "not one JSON object: %.*s\n", (int)ds_ev_len(&e), e.buf);
                abort();
            }
            memcpy(json_line, e.buf, ds_ev_len(&e));
            json_len = ds_text_from_json(json_line, ds_ev_len(&e));
            if (json_len == 0 || json_len > ds_ev_len(&e) + 1)
                abort();
            json_ok = true;
        } else if (json_ok) {
            /* Equal after the timestamp, which differs between the two. */
            *e.p++ = '\n';
            const char *a = strchr(e.buf + 8 + strspn(e.buf + 8, " "), ' ');
            const char *b = strchr(json_line + 8 + strspn(json_line + 8, " "), ' ');
            size_t na = ds_ev_len(&e) - (size_t)(a - e.buf), nb = json_len - (size_t)(b - json_line);
            if (na != nb || memcmp(a, b, na) != 0) {
                fprintf(stderr, "text differs:\n%.*s%.*s", (int)ds_ev_len(&e), e.buf, (int)json_len, json_line);
                abort();
            }
        }
    }
    free(s);
    return 0;
}
