/*
 * cpu.h: the kernel-set choice as a pure function, so tests can run it on made-up features.
 */
#ifndef NB_BASE_CPU_H
#define NB_BASE_CPU_H

#include <stddef.h>

#include "nibble.h"

/* The best set `f` runs. */
nb_isa nb_isa_best_of(const nb_cpu_features *f);

/* The set to run given `f` and NIBBLE_ISA's value `env` (NULL or "": none); writes the reason to why.
 * A forced set `f` lacks falls back to the best one it has. */
nb_isa nb_isa_choose(const nb_cpu_features *f, const char *env, char *why, size_t why_size);

#endif
