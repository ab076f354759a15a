/*
 * elf.c — reading a loaded module's dynamic section and rewriting its GOT.
 *
 * Why: where libpython is linked into the executable (Debian's and conda's
 * python3), extension modules bind PyCapsule_* to the executable's own
 * definitions, which come before any preloaded library in the lookup order.
 * Symbol interposition cannot catch those calls; rewriting the callers' GOT
 * entries can, and it works the same when libpython is a shared library.
 *
 * Written by hand: no Debian library patches GOT entries of a running
 * process (plthook, the usual reference, is not packaged).  x86-64 only; the
 * architecture details are the two relocation types below.
 *
 * Step by step, for one module:
 *  1. Its program headers give the load range (PT_LOAD), the dynamic section
 *     (PT_DYNAMIC) and the part made read-only after relocation (PT_GNU_RELRO).
 *  2. The dynamic section gives the symbol table (DT_SYMTAB), the string
 *     table (DT_STRTAB, DT_STRSZ), the PLT relocations (DT_JMPREL,
 *     DT_PLTRELSZ) and the other relocations (DT_RELA, DT_RELASZ).  glibc
 *     rewrites these addresses in place to absolute ones for most modules but
 *     not for all (the vDSO, read-only dynamic sections): a value below the
 *     load base is relative and gets the base added.
 *  3. Every R_X86_64_JUMP_SLOT (calls through the PLT) and R_X86_64_GLOB_DAT
 *     (calls compiled with -fno-plt, and function addresses taken) names a
 *     symbol; its r_offset is the GOT slot to rewrite.
 *  4. A slot inside the RELRO range is on a read-only page: it is made
 *     writable for the one store and read-only again.
 * Every pointer and size read from the image is checked against the load
 * range first, so a malformed image is refused, never followed.
 *
 * One more x86-64 detail: a non-PIE executable that takes a function's
 * address has a canonical PLT entry for it, and every module's reference
 * then binds to that entry, which jumps through the executable's own GOT
 * slot.  Once that slot holds a wrapper, the entry leads to the wrapper:
 * ds_elf_plt_slot names the slot an entry jumps through, so that the real
 * function is found behind it (modules.c).
 */
#include <elf.h>
#include <string.h>
#include <sys/mman.h>

#include "image/image.h"

#define DS_PAGE_SIZE 4096u

/* Architecture: the relocation types that hold a function's address. */
#define DS_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define DS_R_GLOB_DAT R_X86_64_GLOB_DAT

static bool inside(const ds_elf_module *m, uintptr_t p, size_t n)
{
    return p >= m->lo && n <= m->hi - m->lo && p - m->lo <= m->hi - m->lo - n;
}

static uintptr_t absolute(const ds_elf_module *m, uintptr_t v)
{
    return v < m->base ? v + m->base : v;
}

const char *ds_elf_open(ds_elf_module *m, uintptr_t base, const void *phdrs, int phnum)
{
    memset(m, 0, sizeof(*m));
    m->base = base;
    const Elf64_Phdr *ph = phdrs;
    const Elf64_Phdr *dynamic = NULL;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < phnum; i++) {
        if (ph[i].p_type == PT_LOAD && ph[i].p_memsz) {
            uintptr_t s = base + ph[i].p_vaddr, e = s + ph[i].p_memsz;
            if (e < s)
                return "a PT_LOAD segment wraps around";
            lo = s < lo ? s : lo;
            hi = e > hi ? e : hi;
        } else if (ph[i].p_type == PT_DYNAMIC) {
            dynamic = &ph[i];
        } else if (ph[i].p_type == PT_GNU_RELRO) {
            /* glibc protects whole pages only: [down(start), down(end)). */
            uintptr_t s = base + ph[i].p_vaddr;
            m->relro_lo = s & ~(uintptr_t)(DS_PAGE_SIZE - 1);
            m->relro_hi = (s + ph[i].p_memsz) & ~(uintptr_t)(DS_PAGE_SIZE - 1);
        }
    }
    if (hi == 0)
        return "no PT_LOAD segment";
    m->lo = lo;
    m->hi = hi;
    if (!dynamic)
        return "no PT_DYNAMIC segment (static executable)";
    uintptr_t dyn = base + dynamic->p_vaddr;
    if (!inside(m, dyn, dynamic->p_memsz) || dyn % 8)
        return "PT_DYNAMIC lies outside the loaded image";

    uintptr_t symtab = 0, strtab = 0, jmprel = 0, rela = 0, hash = 0;
    size_t strsz = 0, jmprelsz = 0, relasz = 0, pltrel = DT_RELA;
    size_t ndyn = dynamic->p_memsz / sizeof(Elf64_Dyn);
    const Elf64_Dyn *d = (const Elf64_Dyn *)dyn;
    for (size_t i = 0; i < ndyn && d[i].d_tag != DT_NULL; i++) {
        uintptr_t v = d[i].d_un.d_ptr;
        switch (d[i].d_tag) {
        case DT_SYMTAB: symtab = absolute(m, v); break;
        case DT_STRTAB: strtab = absolute(m, v); break;
        case DT_STRSZ: strsz = v; break;
        case DT_JMPREL: jmprel = absolute(m, v); break;
        case DT_PLTRELSZ: jmprelsz = v; break;
        case DT_PLTREL: pltrel = v; break;
        case DT_RELA: rela = absolute(m, v); break;
        case DT_RELASZ: relasz = v; break;
        case DT_HASH: hash = absolute(m, v); break;
        case DT_RUNPATH: m->runpath_off = v, m->has_runpath = true; break;
        case DT_RPATH: m->rpath_off = v, m->has_rpath = true; break;
        default: break;
        }
    }
    if (!symtab || !strtab)
        return "no DT_SYMTAB or DT_STRTAB";
    if (!inside(m, strtab, strsz) || strsz == 0)
        return "DT_STRTAB lies outside the loaded image";
    if (!inside(m, symtab, sizeof(Elf64_Sym)) || symtab % 8)
        return "DT_SYMTAB lies outside the loaded image";
    if (pltrel != DT_RELA)
        return "DT_PLTREL is not DT_RELA";
    m->symtab = (const void *)symtab;
    m->strtab = (const char *)strtab;
    m->strsz = strsz;
    /* Symbol count: DT_HASH's nchain, else what fits before the image end
     * (or before the string table, where the linker puts it after). */
    uintptr_t sym_end = m->hi;
    if (strtab > symtab)
        sym_end = strtab;
    m->nsyms = (sym_end - symtab) / sizeof(Elf64_Sym);
    if (hash && inside(m, hash, 8)) {
        uint32_t nchain; /* a malformed image may misalign it (found by fuzz_elf) */
        memcpy(&nchain, (const char *)hash + 4, sizeof(nchain));
        if (nchain < m->nsyms)
            m->nsyms = nchain;
    }
    if (jmprel) {
        if (!inside(m, jmprel, jmprelsz) || jmprel % 8)
            return "DT_JMPREL lies outside the loaded image";
        m->jmprel = (const void *)jmprel;
        m->njmprel = jmprelsz / sizeof(Elf64_Rela);
    }
    if (rela) {
        if (!inside(m, rela, relasz) || rela % 8)
            return "DT_RELA lies outside the loaded image";
        m->rela = (const void *)rela;
        m->nrela = relasz / sizeof(Elf64_Rela);
    }
    return NULL;
}

const char *ds_elf_string(const ds_elf_module *m, size_t offset)
{
    if (offset >= m->strsz || !memchr(m->strtab + offset, '\0', m->strsz - offset))
        return NULL;
    return m->strtab + offset;
}

static void walk(const ds_elf_module *m, const Elf64_Rela *r, size_t n,
                 void (*fn)(void **slot, const char *name, void *arg), void *arg)
{
    const Elf64_Sym *syms = m->symtab;
    for (size_t i = 0; i < n; i++) {
        uint32_t type = ELF64_R_TYPE(r[i].r_info), sym = ELF64_R_SYM(r[i].r_info);
        if ((type != DS_R_JUMP_SLOT && type != DS_R_GLOB_DAT) || sym == 0 || sym >= m->nsyms)
            continue;
        const char *name = ds_elf_string(m, syms[sym].st_name);
        uintptr_t slot = m->base + r[i].r_offset;
        if (!name || !inside(m, slot, sizeof(void *)) || slot % sizeof(void *))
            continue;
        fn((void **)slot, name, arg);
    }
}

void ds_elf_each_import(const ds_elf_module *m, void (*fn)(void **slot, const char *name, void *arg),
                        void *arg)
{
    walk(m, m->jmprel, m->njmprel, fn, arg);
    walk(m, m->rela, m->nrela, fn, arg);
}

void **ds_elf_plt_slot(const void *f)
{
    /* jmp *disp32(%rip): ff 25; after endbr64 (f3 0f 1e fa) and a bnd
     * prefix (f2) where the entry is an IBT one (.plt.sec). */
    unsigned char code[10];
    if (!f || ds_safe_read(code, f, sizeof(code)) != sizeof(code))
        return NULL;
    size_t at = 0;
    if (code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa)
        at = 4;
    if (code[at] == 0xf2)
        at++;
    if (code[at] != 0xff || code[at + 1] != 0x25 || at + 6 > sizeof(code))
        return NULL;
    int32_t disp;
    memcpy(&disp, &code[at + 2], sizeof(disp));
    return (void **)((uintptr_t)f + at + 6 + (intptr_t)disp);
}

bool ds_elf_write_slot(const ds_elf_module *m, void **slot, void *value)
{
    uintptr_t a = (uintptr_t)slot;
    bool protected_page = a >= m->relro_lo && a < m->relro_hi;
    void *page = (void *)(a & ~(uintptr_t)(DS_PAGE_SIZE - 1));
    if (protected_page && mprotect(page, DS_PAGE_SIZE, PROT_READ | PROT_WRITE) != 0)
        return false;
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    if (protected_page)
        mprotect(page, DS_PAGE_SIZE, PROT_READ);
    return true;
}
