/*
 * start.h — the start layer: start-up and shutdown (init.c) and the hook
 * families hooks/ declares (families.c).  Only hooks/ calls into it (and
 * only through shim.h); it calls every layer below.
 */
#ifndef DS_START_H
#define DS_START_H

#include "ledger/ledger.h"

/* ---- init.c ------------------------------------------------------------- */
/* Tests: (re)initialise from an explicit environment. */
void ds_init_with_env(char *const *envp);

/* ---- fatal.c ------------------------------------------------------------ */
/* A handler for each fatal signal left at its default: `report` (the report
 * and the buffered log, every lock only tried) runs before the signal ends
 * the process. */
void ds_fatal_install(void (*report)(void));

/* ---- zstd.c: libzstd for a DLSHIM_LOG named *.zst (before ds_log_open) -- */
void ds_zstd_load(void);

/* ---- families.c: the hook families hooks/ declares ---------------------- */
/* The families in the ds_families section (declared with DS_FAMILY), in
 * install order. */
int ds_families_count(void);
const ds_family *ds_family_at(int i);
/* The distinct DLSHIM_HOOKS names, and which are on unless asked (config.c
 * parses the option with them, ds_families_announce). */
int ds_hook_options(const char **names, int max);
uint32_t ds_hook_options_default(void);
/* Hands the DLSHIM_HOOKS names down to the option parser (before it runs). */
void ds_families_announce(void);
/* Installs the families DLSHIM_HOOKS turns on, then patches every module. */
void ds_families_install(void);
/* After start-up (the families' `started`). */
void ds_families_started(void);

#endif /* DS_START_H */
