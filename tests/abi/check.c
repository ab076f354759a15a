/*
 * check.c — compares each family's facts as the real headers state them
 * with those of the shim's own declarations (facts.h), and names every
 * difference.  Exit status 1 when any differs.
 */
#include <stdio.h>
#include <string.h>

#include "facts.h"

#define FAMILY(f) extern const ds_fact ds_facts_##f##_sdk[], ds_facts_##f##_ours[];
#define FAMILIES FAMILY(cuda) FAMILY(hip) FAMILY(vulkan) FAMILY(ffi) FAMILY(dlpack)
FAMILIES
#undef FAMILY
#define FAMILY(f) {#f, ds_facts_##f##_sdk, ds_facts_##f##_ours},
static const struct {
    const char *family;
    const ds_fact *sdk, *ours;
} lists[] = {FAMILIES};

int main(void)
{
    int bad = 0, n = 0;
    for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++) {
        const ds_fact *s = lists[l].sdk, *o = lists[l].ours;
        for (; s->what && o->what; s++, o++, n++)
            if (strcmp(s->what, o->what) || s->value != o->value) {
                printf("abi: %s: %s is %lld in the real header, %lld in the shim's\n",
                       lists[l].family, s->what, s->value, o->value);
                bad = 1;
            }
        if (s->what || o->what) {
            printf("abi: %s: the lists differ in length\n", lists[l].family);
            bad = 1;
        }
    }
    if (!bad)
        printf("abi: %d facts agree with the real headers\n", n);
    return bad;
}
