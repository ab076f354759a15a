/* libFuzzer target: the ELF dynamic-section reader and relocation walker fed
 * malformed images.  The input is the loaded image itself (the dynamic
 * section, symbol, string and relocation tables it points to, all fuzzed);
 * the program headers say what the dynamic loader would: one PT_LOAD over
 * the whole image, PT_DYNAMIC at an offset the first two bytes choose.
 * Nothing outside the image may be read, and no slot is written. */
#include <elf.h>
#include <stdint.h>
#include <string.h>

#include "image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static union {
    uint64_t align;
    unsigned char bytes[32768];
} image;

static void visit(void **slot, const char *name, void *arg)
{
    size_t *count = arg;
    uintptr_t lo = (uintptr_t)image.bytes, hi = lo + sizeof(image.bytes);
    if ((uintptr_t)slot < lo || (uintptr_t)slot + sizeof(void *) > hi)
        __builtin_trap(); /* a slot outside the image would be written */
    ++*count;
    (void)strlen(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t dyn_off = ((size_t)data[0] | (size_t)data[1] << 8) % sizeof(image.bytes) & ~(size_t)7;
    memset(&image, 0, sizeof(image));
    size_t n = size - 2 < sizeof(image.bytes) ? size - 2 : sizeof(image.bytes);
    memcpy(image.bytes, data + 2, n);
    Elf64_Phdr ph[2] = {
        {.p_type = PT_LOAD, .p_vaddr = 0, .p_memsz = sizeof(image.bytes)},
        {.p_type = PT_DYNAMIC, .p_vaddr = dyn_off, .p_memsz = sizeof(image.bytes) - dyn_off},
    };
    ds_elf_module m;
    if (ds_elf_open(&m, (uintptr_t)image.bytes, ph, 2) == NULL) {
        size_t count = 0;
        ds_elf_each_import(&m, visit, &count);
        (void)ds_elf_string(&m, m.runpath_off);
        (void)ds_elf_string(&m, m.rpath_off);
    }
    return 0;
}
