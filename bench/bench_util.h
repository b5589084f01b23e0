/*
 * bench_util.h: what the benchmark programs in bench/ share: a monotonic clock and a comparator for
 * medians (their weight matrices are nibble.h's nb_bench_matrix).
 */
#ifndef NB_BENCH_UTIL_H
#define NB_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
