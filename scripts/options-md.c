/* options-md — prints the README's options table from shim/options.def, so
 * the documentation and the parser never drift apart (`make docs` writes it
 * into README.md; `make check` fails if README.md differs). */
#include <stdio.h>
#include <string.h>

/* Markdown table cells: a '|' inside one must be escaped. */
static void cell(const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            putchar('\\');
        putchar(*s);
    }
}

int main(void)
{
    puts("| Variable | Type | Default | Meaning |");
    puts("|---|---|---|---|");
#define DS_OPTION(field, NAME, TYPE, def, lo, hi, choices, doc)                        \
    do {                                                                              \
        printf("| `DLSHIM_%s` | ", #NAME);                                           \
        if (!strcmp(#TYPE, "INT"))                                                    \
            printf("integer %lld–%lld", (long long)(lo), (long long)(hi));          \
        else if (!strcmp(#TYPE, "ENUM"))                                              \
            cell(choices);                                                            \
        else if (!strcmp(#TYPE, "BOOL"))                                              \
            printf("0/1");                                                            \
        else if (!strcmp(#TYPE, "EVENTS"))                                            \
            printf("event list");                                                     \
        else if (!strcmp(#TYPE, "HOOKS"))                                             \
            printf("hook family list");                                               \
        else if (!strcmp(#TYPE, "TEXT"))                                              \
            printf("text");                                                           \
        else                                                                          \
            printf("path");                                                           \
        printf(" | %s%s%s | ", *(def) ? "`" : "", *(def) ? (def) : "unset", *(def) ? "`" : ""); \
        cell(doc);                                                                    \
        puts(" |");                                                                   \
    } while (0);
#include "options.def"
#undef DS_OPTION
    return 0;
}
