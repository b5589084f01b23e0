/*
 * bench_batch.c: small batches through nb_matmul: what 1, 2, 4, 8 and 16 activation rows cost
 * against one, per weight type, on the shapes the default models run.
 *
 *   bench_batch [-t 1,2] [-n 1,2,4,8,16] [-r ROUNDS] [--types q8_0,q4_K,...] [--shapes LIST]
 *               [--ms MS] [--ranges] [--hot] [--route quant|block]
 *
 * Types (default): those a Q4_K_M file and the FP4 files hold (q4_K, q6_K, q8_0, q5_0, q4_0,
 * mxfp4, nvfp4) and f16. Shapes (n_out x n_in; default all six): Gemma 3 270M's 640x2048 (FFN
 * down), 2048x640 (FFN up and gate) and 262144x640 (the tied output matrix), Qwen3-0.6B's
 * 1024x3072, 3072x1024 and 151936x1024; a type whose block does not divide n_in skips the shape.
 * --shapes takes any OUTxIN list.
 *
 * For every cell: effective weight GB/s (the matrix's bytes / time of one call) and the ratio
 * time(n) / time(1) (medians). Weights are nb_bench_matrix's: one quantized random 64-row slab
 * repeated over the matrix (quantizing 168M values with the reference quantizers would take
 * minutes), in 2 MiB pages as the runtime maps them; matrices smaller than 256 MiB are copied until the copies fill
 * 256 MiB and successive calls take successive copies, so that every call reads its weights from
 * DRAM as one decode step does (no copy stays in the 32 MiB L3). A round times every n in turn
 * (each sample: calls repeated for at least --ms milliseconds), so a drifting machine spreads
 * over all n; the figures are medians over the rounds, --ranges adds [min-max] of the GB/s. --hot
 * keeps one copy, so that a matrix that fits the caches is read from them (the kernels' compute
 * rate, for their development).
 * Activations are f32 random rows; the kernel set is the active one (NIBBLE_ISA=avx2 forces
 * AVX2). Numbers only: nothing here passes or fails.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench/bench_util.h"
#include "nibble.h"

#define MAX_LIST 16
#define SPAN_BYTES ((size_t)256 << 20)

static uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u; }

/* A comma-separated list of positive integers; returns the count, 0 on a bad list. */
static int parse_ints(const char *s, int *out, int max) {
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || v > 1 << 20 || n == max) return 0;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return 0;
    }
    return n;
}

static int type_id(const char *name, size_t len) {
    const nb_type_info *t;
    for (int i = 0; (t = nb_type_at(i)); i++)
        if (strlen(t->name) == len && !strncasecmp(t->name, name, len) && t->weight_type) return t->id;
    return -1;
}

typedef struct {
    int64_t out, in;
} shape;

typedef struct {
    int type;
    shape sh;
    size_t bytes;  /* one matrix */
    int copies;    /* matrices in the span */
    uint8_t *w;    /* copies x bytes */
    float *x, *y;  /* activations (max n rows), outputs */
    int next;      /* the copy the next call takes */
} matrix;

static int make_matrix(matrix *m, int type, shape sh, int max_n, int hot) {
    size_t rb, span;
    if (nb_row_bytes(type, sh.in, &rb) != NB_OK) return 0;
    *m = (matrix){.type = type, .sh = sh, .bytes = rb * (size_t)sh.out};
    m->copies = hot || m->bytes >= SPAN_BYTES ? 1 : (int)((SPAN_BYTES + m->bytes - 1) / m->bytes);
    void *w;
    if (nb_bench_matrix(type, sh.out * m->copies, sh.in, 12345, &w, &span) != NB_OK) return 0;
    m->w = w;
    m->x = malloc(sizeof(float) * (size_t)(max_n * sh.in));
    m->y = malloc(sizeof(float) * (size_t)max_n * (size_t)sh.out);
    if (!m->x || !m->y) return 0;
    uint32_t s = 777;
    for (int64_t i = 0; i < max_n * sh.in; i++) m->x[i] = (float)((int32_t)lcg(&s) >> 8) / (float)(1 << 23);
    return 1;
}

static void drop_matrix(matrix *m) { free(m->w), free(m->x), free(m->y); }

/* Seconds per call of n rows: calls repeated for at least min_s, each on the next copy. */
static double time_calls(nb_pool *pool, matrix *m, int n, double min_s, nb_route route) {
    int calls = 0;
    const double t0 = now_s();
    double t;
    do {
        const uint8_t *w = m->w + (size_t)m->next * m->bytes;
        m->next = (m->next + 1) % m->copies;
        if (nb_matmul_route(pool, m->type, w, m->sh.out, m->sh.in, m->x, n, m->y, route) != NB_OK) {
            fprintf(stderr, "bench_batch: %s\n", nb_last_error());
            exit(1);
        }
        calls++;
        t = now_s();
    } while (t - t0 < min_s);
    return (t - t0) / calls;
}

static void usage(void) {
    fprintf(stderr,
            "usage: bench_batch [-t 1,2] [-n 1,2,4,8,16] [-r ROUNDS] [--types q8_0,q4_K,...] [--shapes OUTxIN,...]\n"
            "                   [--ms MS] [--ranges] [--hot] [--route quant|block]\n"
            "  -t LIST        thread counts (default 1,2)\n"
            "  -n LIST        activation rows per call (default 1,2,4,8,16; the ratio is against the first)\n"
            "  -r ROUNDS      rounds, each timing every n once (default 5)\n"
            "  --types LIST   weight types (default q4_K,q6_K,q8_0,q5_0,q4_0,mxfp4,nvfp4,f16)\n"
            "  --shapes LIST  n_out x n_in (default 640x2048,2048x640,262144x640,1024x3072,3072x1024,151936x1024)\n"
            "  --ms MS        least milliseconds of calls per sample (default 30)\n"
            "  --ranges       each cell also shows [min-max] GB/s over the rounds\n"
            "  --hot          one copy of each matrix: a matrix that fits the caches is read from them\n"
            "  --route R      quant (default: llama.cpp's orders) or block (NB_ROUTE_BLOCK, the one-lane orders)\n");
    exit(2);
}

int main(int argc, char **argv) {
    int threads[MAX_LIST] = {1, 2}, nthreads = 2, ns[MAX_LIST] = {1, 2, 4, 8, 16}, nns = 5, rounds = 5, ranges = 0, hot = 0;
    double min_s = 0.030;
    nb_route route = NB_ROUTE_QUANT;
    const char *types_arg = "q4_K,q6_K,q8_0,q5_0,q4_0,mxfp4,nvfp4,f16";
    shape shapes[MAX_LIST] = {{640, 2048}, {2048, 640}, {262144, 640}, {1024, 3072}, {3072, 1024}, {151936, 1024}};
    int nshapes = 6;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--ranges") || !strcmp(a, "--hot")) {
            *(a[2] == 'r' ? &ranges : &hot) = 1;
            continue;
        }
        if (!v) usage();
        i++;
        if (!strcmp(a, "--route")) {
            if (!strcmp(v, "block"))
                route = NB_ROUTE_BLOCK;
            else if (strcmp(v, "quant"))
                usage();
        } else if (!strcmp(a, "-t")) {
            if (!(nthreads = parse_ints(v, threads, MAX_LIST))) usage();
        } else if (!strcmp(a, "-n")) {
            if (!(nns = parse_ints(v, ns, MAX_LIST))) usage();
        } else if (!strcmp(a, "-r")) {
            if ((rounds = atoi(v)) < 1 || rounds > 1000) usage();
        } else if (!strcmp(a, "--ms")) {
            if ((min_s = atof(v) / 1e3) <= 0 || min_s > 60) usage();
        } else if (!strcmp(a, "--types")) {
            types_arg = v;
        } else if (!strcmp(a, "--shapes")) {
            nshapes = 0;
            for (const char *s = v; *s;) {
                char *end;
                long long o = strtoll(s, &end, 10), in;
                if (end == s || *end != 'x' || o <= 0 || nshapes == MAX_LIST) usage();
                s = end + 1;
                in = strtoll(s, &end, 10);
                if (end == s || in <= 0 || (*end && *end != ',')) usage();
                shapes[nshapes++] = (shape){o, in};
                s = *end ? end + 1 : end;
            }
            if (!nshapes) usage();
        } else
            usage();
    }
    int types[MAX_LIST], ntypes = 0;
    for (const char *s = types_arg; *s;) {
        size_t len = strcspn(s, ",");
        int id = type_id(s, len);
        if (id < 0 || ntypes == MAX_LIST) {
            fprintf(stderr, "bench_batch: unknown weight type '%.*s'\n", (int)len, s);
            return 2;
        }
        types[ntypes++] = id;
        s += len + (s[len] == ',');
    }
    int max_n = 0;
    for (int i = 0; i < nns; i++) max_n = ns[i] > max_n ? ns[i] : max_n;

    printf("nb_matmul, kernel set %s, %d rounds of >= %.0f ms per sample; effective weight GB/s (median) and "
           "time(n)/time(%d)\n",
           nb_isa_name(nb_isa_active()), rounds, min_s * 1e3, ns[0]);
    double *gbs = malloc(sizeof(double) * (size_t)(rounds * nns));
    if (!gbs) return 1;
    for (int ti = 0; ti < nthreads; ti++) {
        nb_pool *pool;
        if (nb_pool_create(threads[ti], &pool) != NB_OK) {
            fprintf(stderr, "bench_batch: %s\n", nb_last_error());
            return 1;
        }
        printf("\n%d thread%s\n\n| type | shape | kernel |", threads[ti], threads[ti] > 1 ? "s" : "");
        for (int i = 0; i < nns; i++) printf(" n=%d |", ns[i]);
        printf("\n|---|---|---|");
        for (int i = 0; i < nns; i++) printf("---:|");
        printf("\n");
        for (int ty = 0; ty < ntypes; ty++)
            for (int si = 0; si < nshapes; si++) {
                const nb_type_info *info = nb_type_get(types[ty]);
                if (shapes[si].in % info->block_elems) continue;
                matrix m;
                if (!make_matrix(&m, types[ty], shapes[si], max_n, hot)) {
                    fprintf(stderr, "bench_batch: no memory for %s %lldx%lld\n", info->name, (long long)shapes[si].out,
                            (long long)shapes[si].in);
                    return 1;
                }
                for (int i = 0; i < nns; i++) /* warm: pages of every copy, the pool's scratch */
                    for (int c = 0; c < m.copies; c++) time_calls(pool, &m, ns[i], 0, route);
                for (int r = 0; r < rounds; r++)
                    for (int i = 0; i < nns; i++)
                        gbs[i * rounds + r] = (double)m.bytes / time_calls(pool, &m, ns[i], min_s, route) / 1e9;
                printf("| %s | %lldx%lld | %s |", info->name, (long long)shapes[si].out, (long long)shapes[si].in,
                       nb_matmul_kernel_name(types[ty], route));
                double base = 0;
                for (int i = 0; i < nns; i++) {
                    double *v = gbs + i * rounds;
                    qsort(v, (size_t)rounds, sizeof *v, cmp_double);
                    const double med = rounds % 2 ? v[rounds / 2] : 0.5 * (v[rounds / 2 - 1] + v[rounds / 2]);
                    if (i == 0) base = med;
                    printf(" %.1f", med);
                    if (ranges) printf(" [%.1f-%.1f]", v[0], v[rounds - 1]);
                    printf(" (%.2fx) |", base / med);
                }
                printf("\n");
                fflush(stdout);
                drop_matrix(&m);
            }
        nb_pool_destroy(pool);
    }
    free(gbs);
    return 0;
}
