/* A small producer library for the integration tests: it makes DLPack
 * tensors whose deleters free everything (so a second deleter call is a real
 * double free) and announces them with the annotation API. */
#ifndef PROD_H
#define PROD_H

#include <dlshim.h>

/* A float32 CPU tensor of rows x cols holding 0, 1, 2, ...; exported as "prod". */
DLManagedTensor *prod_make(int64_t rows, int64_t cols);
DLManagedTensorVersioned *prod_make_versioned(int64_t n, uint64_t flags);
/* A tensor broken in the way `kind` names (see libprod.c), not yet exported. */
DLManagedTensor *prod_make_malformed(const char *kind);
DLManagedTensorVersioned *prod_make_future_version(void);
/* Tensors whose deleter has not run yet. */
int prod_live(void);

#endif
