/*
 * checked.h: size arithmetic on values that came from a file. Each helper returns 1 and stores the
 * result when it fits, 0 (leaving *r untouched) when it would overflow. Callers turn a 0 into an
 * NB_ERR_OVERFLOW naming the field.
 */
#ifndef NB_BASE_CHECKED_H
#define NB_BASE_CHECKED_H

#include <stdint.h>

static inline int nb_add_u64(uint64_t a, uint64_t b, uint64_t *r) {
    uint64_t t;
    if (__builtin_add_overflow(a, b, &t)) return 0;
    *r = t;
    return 1;
}

static inline int nb_mul_u64(uint64_t a, uint64_t b, uint64_t *r) {
    uint64_t t;
    if (__builtin_mul_overflow(a, b, &t)) return 0;
    *r = t;
    return 1;
}

/* Round a up to a multiple of the power of two `align`. */
static inline int nb_align_u64(uint64_t a, uint64_t align, uint64_t *r) {
    uint64_t t;
    if (!nb_add_u64(a, align - 1, &t)) return 0;
    *r = t & ~(align - 1);
    return 1;
}

#endif
