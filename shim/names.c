/*
 * names.c — producer and consumer names, interned to small ids so records
 * and pair counters stay small.  Id 0 is "unknown".  Called with the
 * registry lock held.  The table is bounded: names past DS_NAMES_MAX share
 * the id of "other".
 */
#include <string.h>

#include "internal.h"

#define DS_NAMES_MAX 256

static char names[DS_NAMES_MAX][DS_NAME_MAX] = {"unknown", "other"};
static uint16_t count = 2;
enum { ID_OTHER = 1 };

uint16_t ds_name_intern(const char *name)
{
    if (!name || !*name)
        return DS_NAME_UNKNOWN;
    for (uint16_t i = 0; i < count; i++)
        if (strncmp(names[i], name, DS_NAME_MAX - 1) == 0)
            return i;
    if (count == DS_NAMES_MAX)
        return ID_OTHER;
    size_t n = strnlen(name, DS_NAME_MAX - 1);
    memcpy(names[count], name, n);
    names[count][n] = '\0';
    return count++;
}

const char *ds_name(uint16_t id)
{
    return id < count ? names[id] : names[DS_NAME_UNKNOWN];
}
