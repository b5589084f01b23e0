/*
 * bench_formats.c: single-thread throughput of the reference codecs, per type.
 *
 *   bench_formats [elements] [runs]     (defaults: 16 Mi elements, 5 runs)
 *
 * Throughput is megabytes of f32 per second (elements * 4 / time), for nb_quantize (reference
 * quantizers, as a converter runs them) and nb_dequantize. Each figure is the median of `runs`
 * timed runs, with the slowest and fastest run beside it. Input: N(0,1) with magnitudes varying by
 * block, so that the scale searches see realistic data. Prints a markdown table.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench_util.h"
#include "nibble.h"

typedef nb_status (*codec_fn)(int id, const float *x, void *q, float *y, int64_t n);

static nb_status run_quantize(int id, const float *x, void *q, float *y, int64_t n) {
    (void)y;
    return nb_quantize(id, x, q, n);
}

static nb_status run_dequantize(int id, const float *x, void *q, float *y, int64_t n) {
    (void)x;
    return nb_dequantize(id, q, y, n);
}

static nb_status run_roundup(int id, const float *x, void *q, float *y, int64_t n) {
    (void)id, (void)y;
    return nb_quantize_mxfp4_roundup(x, q, n);
}

static nb_status run_2level(int id, const float *x, void *q, float *y, int64_t n) {
    (void)id, (void)y;
    float ts;
    return nb_quantize_nvfp4_2level(x, q, n, &ts);
}

/* Median, min and max MB/s over `runs` runs; returns 0 on a codec failure. */
static int measure(codec_fn fn, int id, const float *x, void *q, float *y, int64_t n, int runs, double out[3]) {
    double *mbs = malloc(sizeof(double) * (size_t)runs);
    if (!mbs) return 0;
    for (int r = 0; r < runs; r++) {
        double t0 = now_s();
        if (fn(id, x, q, y, n) != NB_OK) {
            fprintf(stderr, "%s\n", nb_last_error());
            free(mbs);
            return 0;
        }
        mbs[r] = (double)n * 4 / (now_s() - t0) / 1e6;
    }
    qsort(mbs, (size_t)runs, sizeof(double), cmp_double);
    out[0] = mbs[runs / 2];
    out[1] = mbs[0];
    out[2] = mbs[runs - 1];
    free(mbs);
    return 1;
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? strtoll(argv[1], NULL, 10) : (int64_t)16 << 20;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    if (n <= 0 || n % 256 || runs < 1) {
        fprintf(stderr, "usage: bench_formats [elements, a multiple of 256] [runs >= 1]\n");
        return 2;
    }
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    void *q = malloc((size_t)n * 4);
    if (!x || !y || !q) {
        fprintf(stderr, "out of memory for %lld elements\n", (long long)n);
        return 1;
    }
    uint64_t s = 0x2545F4914F6CDD1Du;
    for (int64_t i = 0; i < n; i += 2) { /* Box-Muller on an xorshift stream, magnitude per 32 */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double u = ((s >> 11) + 1) * 0x1p-53, v = (s & 0xFFFFFFFF) * 0x1p-32;
        float mag = ldexpf(1.0f, (int)((i / 32) % 7) - 3);
        x[i] = (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v)) * mag;
        x[i + 1] = (float)(sqrt(-2 * log(u)) * sin(6.283185307179586 * v)) * mag;
    }

    printf("Reference codecs, 1 thread, %lld elements (%.0f MiB of f32), median of %d runs [min-max], MB/s of f32\n\n",
           (long long)n, n * 4.0 / (1 << 20), runs);
    printf("| type | quantize MB/s | dequantize MB/s |\n|---|---:|---:|\n");
    const nb_type_info *t;
    for (int i = 0; (t = nb_type_at(i)); i++) { /* every type with a codec, in id order */
        double qr[3], dr[3];
        if (!measure(run_quantize, t->id, x, q, y, n, runs, qr) || !measure(run_dequantize, t->id, x, q, y, n, runs, dr))
            return 1;
        printf("| %s | %.0f [%.0f-%.0f] | %.0f [%.0f-%.0f] |\n", t->name, qr[0], qr[1], qr[2], dr[0], dr[1], dr[2]);
        fflush(stdout);
    }
    double r[3];
    if (!measure(run_roundup, 0, x, q, y, n, runs, r)) return 1;
    printf("| mxfp4 round-up (option) | %.0f [%.0f-%.0f] | (as mxfp4) |\n", r[0], r[1], r[2]);
    if (!measure(run_2level, 0, x, q, y, n, runs, r)) return 1;
    printf("| nvfp4 two-level (option) | %.0f [%.0f-%.0f] | (as nvfp4) |\n", r[0], r[1], r[2]);
    free(x), free(y), free(q);
    return 0;
}
