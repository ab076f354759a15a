/* libFuzzer target: the DLSHIM_* environment parser.  Each input line is one
 * variable: its first byte picks an option name from the table (so the
 * fuzzer reaches every parser), the rest is the value, any bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {
#define DS_OPTION(field, NAME, TYPE, def, lo, hi, choices, doc) "DLSHIM_" #NAME "=",
#include "base/options.def"
#undef DS_OPTION
    "DLSHIM_NO_SUCH_OPTION=", "DLSHIM_=", "NOT_OURS=",
};
#define NNAMES (sizeof(names) / sizeof(names[0]))
#define MAX_VARS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1), *vars[MAX_VARS];
    char *env[MAX_VARS + 1];
    int n = 0;
    memcpy(copy, data, size);
    copy[size] = '\0';
    for (char *line = copy, *next; line && n < MAX_VARS; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (!*line)
            continue;
        const char *name = names[(unsigned char)line[0] % NNAMES];
        size_t len = strlen(name) + strlen(line + 1) + 1;
        vars[n] = malloc(len);
        strcpy(vars[n], name);
        strcat(vars[n], line + 1);
        env[n] = vars[n];
        n++;
    }
    env[n] = NULL;
    ds_config c;
    ds_config_load(&c, env);
    for (int i = 0; i < n; i++)
        free(vars[i]);
    free(copy);
    return 0;
}
