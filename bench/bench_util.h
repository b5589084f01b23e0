/*
 * bench_util.h: what the benchmark programs in bench/ share: a monotonic clock, a comparator for
 * medians, and large buffers in 2 MiB pages (as the model's weights come).
 */
#ifndef NB_BENCH_UTIL_H
#define NB_BENCH_UTIL_H

#include <stdlib.h>
#include <sys/mman.h>
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

static inline void *big_alloc(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, (size_t)2 << 20, bytes)) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

#endif
