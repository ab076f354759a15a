/*
 * facts.h — how a family's proof (tests/abi/<family>.c) states its facts.
 * Each proof is compiled twice: once with the real headers first and
 * DS_ABI_SDK_TYPES defined (so the compiler checks every function, typedef
 * and macro the shim's header repeats), once with the shim's header alone.
 * Each compile lists the same facts (sizes, alignments, offsets, enum
 * values) under its own name, and check.c compares the two lists.
 */
#ifndef DS_ABI_FACTS_H
#define DS_ABI_FACTS_H

#include <stddef.h>

typedef struct {
    const char *what;
    long long value;
} ds_fact;

#define DS_FACT(expr) {#expr, (long long)(expr)}
/* A structure's size and alignment, and a field's offset and size. */
#define DS_TYPE(T) DS_FACT(sizeof(T)), DS_FACT(_Alignof(T))
#define DS_FIELD(T, f) DS_FACT(offsetof(T, f)), DS_FACT(sizeof(((T *)0)->f))

#ifdef DS_ABI_SDK_TYPES
#define DS_FACTS(family) const ds_fact ds_facts_##family##_sdk[]
#else
#define DS_FACTS(family) const ds_fact ds_facts_##family##_ours[]
#endif

#endif /* DS_ABI_FACTS_H */
