/*
 * bench_gemm.c: prefill's products: GFLOP/s of one weight matrix against n activation rows, by
 * NB_ROUTE_QUANT (llama.cpp's order) and NB_ROUTE_BLOCK (fast_prefill's), on the shapes the
 * default models run.
 *
 *   bench_gemm [-t 1] [-n 512] [-r ROUNDS] [--types q5_0,mxfp4,...] [--shapes OUTxIN,...]
 *
 * Types (default): those a Q4_K_M file and the FP4 files hold (q4_K, q6_K, q8_0, q5_0, q4_0,
 * mxfp4, nvfp4). Shapes (n_out x n_in; default): Gemma 3 270M's 2048x640 (FFN up and gate) and
 * 640x2048 (FFN down), Qwen3-0.6B's 3072x1024 and 1024x3072; a type whose block does not divide
 * n_in skips the shape. The matrix (nb_bench_matrix: a quantized random 64-row slab repeated) stays in the caches
 * as a prefill's panels do; each round times every route of every cell in turn (each sample: calls
 * repeated for at least 200 ms), and the figures are the medians over rounds with their range.
 * A type without a block order shows "-" there (its NB_ROUTE_QUANT order is per block already).
 * The kernel set is the active one (NIBBLE_ISA=avx2 forces AVX2). Numbers only: nothing here
 * passes or fails.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "nibble.h"

#define MAX_LIST 16
#define MAX_ROUNDS 64

static void usage(void) {
    fprintf(stderr, "usage: bench_gemm [-t N] [-n TOKENS] [-r ROUNDS] [--types LIST] [--shapes OUTxIN,...]\n");
    exit(2);
}

/* GFLOP/s of calls repeated for at least 200 ms. */
static double sample(nb_pool *pool, int ty, const void *w, int64_t n_out, int64_t n_in, const float *x, int64_t n,
                     float *y, nb_route route) {
    int calls = 0;
    const double t0 = now_s();
    double t;
    do {
        nb_matmul_route(pool, ty, w, n_out, n_in, x, n, y, route);
        calls++;
    } while ((t = now_s() - t0) < 0.2);
    return 2.0 * (double)n_out * (double)n_in * (double)n * calls / t / 1e9;
}

int main(int argc, char **argv) {
    int threads = 1, rounds = 5;
    int64_t n = 512;
    const char *type_list = "q4_K,q6_K,q8_0,q5_0,q4_0,mxfp4,nvfp4";
    int64_t shapes[MAX_LIST][2] = {{2048, 640}, {640, 2048}, {3072, 1024}, {1024, 3072}};
    int nshapes = 4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) usage();
        i++;
        if (!strcmp(a, "-t")) threads = atoi(v);
        else if (!strcmp(a, "-n")) n = atoll(v);
        else if (!strcmp(a, "-r")) rounds = atoi(v);
        else if (!strcmp(a, "--types")) type_list = v;
        else if (!strcmp(a, "--shapes")) {
            nshapes = 0;
            for (const char *s = v; *s;) {
                char *end;
                const long long o = strtoll(s, &end, 10);
                if (end == s || *end != 'x' || o <= 0 || nshapes == MAX_LIST) usage();
                const long long in = strtoll(end + 1, &end, 10);
                if (in <= 0 || (*end && *end != ',')) usage();
                shapes[nshapes][0] = o, shapes[nshapes++][1] = in;
                s = *end ? end + 1 : end;
            }
        } else
            usage();
    }
    if (threads < 1 || n < 1 || rounds < 1 || rounds > MAX_ROUNDS || !nshapes) usage();
    int types[MAX_LIST], ntypes = 0;
    char names[256];
    snprintf(names, sizeof names, "%s", type_list);
    for (char *tok = strtok(names, ","); tok; tok = strtok(NULL, ",")) {
        const int id = nb_type_from_name(tok);
        if (id < 0 || ntypes == MAX_LIST) {
            fprintf(stderr, "bench_gemm: unknown type '%s'\n", tok);
            return 2;
        }
        types[ntypes++] = id;
    }
    nb_pool *pool;
    if (nb_pool_create(threads, &pool)) return fprintf(stderr, "bench_gemm: %s\n", nb_last_error()), 1;
    printf("nb_matmul, kernel set %s, %d thread%s, %lld tokens, %d rounds: GFLOP/s, median (min..max)\n\n",
           nb_isa_name(nb_isa_active()), threads, threads == 1 ? "" : "s", (long long)n, rounds);
    printf("| shape | type | NB_ROUTE_QUANT | NB_ROUTE_BLOCK | block/quant | kernel |\n|---|---|---|---|---|---|\n");
    for (int si = 0; si < nshapes; si++) {
        const int64_t n_out = shapes[si][0], n_in = shapes[si][1];
        float *x = malloc(sizeof(float) * (size_t)(n * n_in)), *y = malloc(sizeof(float) * (size_t)(n * n_out));
        if (!x || !y) return fprintf(stderr, "bench_gemm: out of memory\n"), 1;
        for (int64_t i = 0; i < n * n_in; i++) x[i] = (float)((i * 7919) % 2001 - 1000) / 1000.0f;
        for (int ti = 0; ti < ntypes; ti++) {
            const int ty = types[ti];
            size_t rb;
            if (nb_row_bytes(ty, n_in, &rb)) continue; /* the block does not divide the row */
            void *w;
            if (nb_bench_matrix(ty, n_out, n_in, 12345, &w, &rb)) return fprintf(stderr, "bench_gemm: %s\n", nb_last_error()), 1;
            /* the matrix's own kernels (a Q4_0 matrix of a multiple of 8 rows: its 8-row order on both routes) */
            const char *quant = nb_matmul_matrix_kernel_name(ty, n_out, NB_ROUTE_QUANT);
            const int has_block = nb_matmul_matrix_kernel_name(ty, n_out, NB_ROUTE_BLOCK) != quant;
            double r[2][MAX_ROUNDS];
            for (int k = 0; k < rounds; k++) {
                r[0][k] = sample(pool, ty, w, n_out, n_in, x, n, y, NB_ROUTE_QUANT);
                if (has_block) r[1][k] = sample(pool, ty, w, n_out, n_in, x, n, y, NB_ROUTE_BLOCK);
            }
            qsort(r[0], (size_t)rounds, sizeof(double), cmp_double);
            printf("| %lldx%lld | %s | %.1f (%.1f..%.1f) |", (long long)n_out, (long long)n_in, nb_type_name(ty),
                   r[0][rounds / 2], r[0][0], r[0][rounds - 1]);
            if (has_block) {
                qsort(r[1], (size_t)rounds, sizeof(double), cmp_double);
                printf(" %.1f (%.1f..%.1f) | %.2f |", r[1][rounds / 2], r[1][0], r[1][rounds - 1], r[1][rounds / 2] / r[0][rounds / 2]);
            } else
                printf(" - | |");
            printf(" %s |\n", quant);
            fflush(stdout);
            free(w);
        }
        free(x), free(y);
    }
    nb_pool_destroy(pool);
    return 0;
}
