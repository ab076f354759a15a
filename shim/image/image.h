/*
 * image.h — the image layer: the program's loaded modules as the shim sees
 * them.  ELF dynamic sections read without trusting them (elf.c), the GOT
 * patched for every hook (modules.c), the real function behind a hook
 * (resolve.c), and the DLSHIM_ENTRY spec language (entry_spec.c).  What
 * hook families use of it is in shim.h; here is what only the core shares.
 * Below it: base alone.
 */
#ifndef DS_IMAGE_H
#define DS_IMAGE_H

#include "shim.h"

/* ---- elf.c: a loaded module's dynamic section and GOT -------------------- */
/* Calls fn for every JUMP_SLOT and GLOB_DAT relocation with its symbol. */
void ds_elf_each_import(const ds_elf_module *m, void (*fn)(void **slot, const char *name, void *arg),
                        void *arg);
bool ds_elf_write_slot(const ds_elf_module *m, void **slot, void *value);
/* The GOT slot a PLT entry at f jumps through (a canonical PLT entry of a
 * non-PIE executable), or NULL where f is no such entry. */
void **ds_elf_plt_slot(const void *f);

/* ---- entry_spec.c: DLSHIM_ENTRY specs ------------------------------------ */
/* One spec; false with why = "column N: ..." when it does not parse. */
bool ds_entry_parse(const char *text, size_t len, ds_entry_spec *out, char *why, size_t cap);

#endif /* DS_IMAGE_H */
