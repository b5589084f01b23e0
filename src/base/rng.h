/*
 * rng.h: splitmix64, the library's one seedable generator (the sampler, explain's sampled
 * activations): small, and the same sequence on every platform.
 */
#ifndef NB_BASE_RNG_H
#define NB_BASE_RNG_H

#include <stdint.h>

/* Advances *state and returns a uniform double in [0, 1) with 53 random bits. */
static inline double nb_splitmix64_uniform(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

#endif
