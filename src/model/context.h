/*
 * context.h: what other layers of the library read of a context (nb_perplexity evaluates on the
 * caller's context and shares its pool). The struct stays inside forward.c.
 */
#ifndef NB_MODEL_CONTEXT_H
#define NB_MODEL_CONTEXT_H

#include "nibble.h"

const nb_model *nb_ctx_model(const nb_ctx *c);
nb_pool *nb_ctx_pool(const nb_ctx *c); /* never NULL: the given pool or the context's own */

#endif
