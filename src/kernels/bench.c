/*
 * bench.c: the machine benchmarks behind `nibble bench kernels` (nibble.h "benchmark"): the
 * streaming-read bandwidth, a product's throughput per weight type and route, and the weight
 * matrices they run on. Numbers only: nothing here passes or fails.
 *
 * Weights are one quantized random 64-row slab repeated down the rows (quantizing the 235M values
 * of the GEMV matrix with the reference quantizers would take minutes); the streaming and GEMV
 * buffers are larger than any L3 here and lie in 2 MiB pages where the kernel allows, as the
 * model's mapped weights do after nb_gguf_open's hint, so that both see decode's TLB.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/error.h"
#include "base/rng.h"
#include "base/threads.h"
#include "kernels/kernels.h"

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

nb_bench_stat nb_bench_stat_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return (nb_bench_stat){n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
}

static void *big_alloc(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, (size_t)2 << 20, bytes)) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

static float uniform(uint64_t *s) { return (float)(2 * nb_splitmix64_uniform(s) - 1); } /* [-1, 1] */

nb_status nb_bench_matrix(int type, int64_t n_out, int64_t n_in, uint32_t seed, void **w, size_t *bytes) {
    size_t rb;
    if (!w || !bytes) return nb_fail(NB_ERR_INVALID_ARG, "bench matrix: NULL result");
    *w = NULL;
    if (n_out < 1) return nb_fail(NB_ERR_INVALID_ARG, "bench matrix: %lld rows", (long long)n_out);
    nb_status s = nb_row_bytes(type, n_in, &rb);
    if (s) return s;
    const int64_t slab = n_out < 64 ? n_out : 64;
    float *x = malloc(sizeof *x * (size_t)(slab * n_in));
    uint8_t *m = big_alloc(rb * (size_t)n_out);
    if (!x || !m) s = nb_fail(NB_ERR_NOMEM, "bench matrix: out of memory for %lld x %lld %s", (long long)n_out,
                              (long long)n_in, nb_type_name(type));
    else {
        uint64_t st = seed;
        for (int64_t i = 0; i < slab * n_in; i++) x[i] = uniform(&st);
        s = nb_quantize(type, x, m, slab * n_in);
    }
    free(x);
    if (s) return free(m), s;
    for (int64_t r = slab; r < n_out; r += slab)
        memcpy(m + (size_t)r * rb, m, rb * (size_t)(n_out - r < slab ? n_out - r : slab));
    *w = m, *bytes = rb * (size_t)n_out;
    return NB_OK;
}

/* ----------------------------------------------------------- streaming read */

#define STREAM_BYTES ((size_t)1 << 30)

typedef struct {
    const uint64_t *buf;
    uint64_t sums[256];
} stream_job;

/* 16-byte vector adds (SSE2, baseline x86-64): the scalar version of this loop was compute bound
 * on one core (it read slower than the F16 GEMV). A thread reads its lines as a GEMV reads a
 * matrix (x86/avx2/tiles_avx2.c): four streams at once, an odd number of lines apart
 * (nb_stream_stride), each asked 1 KiB ahead. One stream per thread read 17-19 GB/s on a Zen 3
 * core whose GEMVs read 23-27 (docs/BENCHMARKS.md, "Streams a power of two apart"). */
typedef uint64_t u64x2 __attribute__((vector_size(16)));

static inline u64x2 line_sum(const u64x2 *p, int64_t line) {
    return (p[4 * line] + p[4 * line + 1]) + (p[4 * line + 2] + p[4 * line + 3]);
}

static void stream_part(void *ctx, int64_t b, int64_t e) {
    stream_job *j = ctx;
    const u64x2 *p = (const u64x2 *)j->buf;
    const int64_t q = nb_stream_stride(e - b, 4); /* lines per stream */
    u64x2 s0 = {0, 0}, s1 = s0, s2 = s0, s3 = s0;
    for (int64_t i = b; i < b + q; i++) { /* one 64-byte line of each stream per step */
        for (int k = 0; k < 4; k++) __builtin_prefetch(p + 4 * (i + k * q + 16));
        s0 += line_sum(p, i);
        s1 += line_sum(p, i + q);
        s2 += line_sum(p, i + 2 * q);
        s3 += line_sum(p, i + 3 * q);
    }
    for (int64_t i = b + 4 * q; i < e; i++) s0 += line_sum(p, i);
    const u64x2 s = (s0 ^ s1) ^ (s2 ^ s3);
    j->sums[(b / 4096) % 256] += s[0] ^ s[1]; /* keep the loads alive */
}

uint64_t *nb_stream_buffer(void) {
    uint64_t *buf = big_alloc(STREAM_BYTES);
    if (!buf) nb_fail(NB_ERR_NOMEM, "bench: out of memory for the 1 GiB streaming buffer");
    else memset(buf, 1, STREAM_BYTES); /* its pages exist before any pass is timed */
    return buf;
}

nb_bench_stat nb_stream_passes(nb_pool *pool, const uint64_t *buf, int passes) {
    stream_job j = {.buf = buf};
    double v[NB_BENCH_MAX_REPS];
    for (int r = 0; r < passes; r++) {
        const double t = nb_clock_s();
        nb_pool_for(pool, (int64_t)(STREAM_BYTES / 64), 4096, stream_part, &j);
        v[r] = (double)STREAM_BYTES / (nb_clock_s() - t) / 1e9;
    }
    return nb_bench_stat_of(v, passes);
}

static nb_status check_reps(const char *what, nb_pool *pool, int reps, const void *out) {
    if (!pool || !out) return nb_fail(NB_ERR_INVALID_ARG, "%s: NULL pool or result", what);
    if (reps < 1 || reps > NB_BENCH_MAX_REPS)
        return nb_fail(NB_ERR_INVALID_ARG, "%s: %d repetitions (1 to %d)", what, reps, NB_BENCH_MAX_REPS);
    return NB_OK;
}

nb_status nb_bench_stream(nb_pool *pool, int passes, nb_bench_stat *gbs) {
    nb_status s = check_reps("bench stream", pool, passes, gbs);
    if (s) return s;
    uint64_t *buf = nb_stream_buffer();
    if (!buf) return NB_ERR_NOMEM;
    *gbs = nb_stream_passes(pool, buf, passes);
    free(buf);
    return NB_OK;
}

/* ------------------------------------------------------------------- matmul */

enum { GEMV_OUT = 16384, GEMV_IN = 14336, GEMM_N = 4096, GEMM_TOK = 512 };

/* GFLOP/s of reps products of GEMM_TOK rows on the GEMM_N square w by a route, after one warm call. */
static nb_bench_stat gemm_rate(nb_pool *pool, int type, const void *w, const float *x, float *y, nb_route route,
                               int reps) {
    double v[NB_BENCH_MAX_REPS];
    nb_matmul_route(pool, type, w, GEMM_N, GEMM_N, x, GEMM_TOK, y, route);
    for (int r = 0; r < reps; r++) {
        const double t = nb_clock_s();
        nb_matmul_route(pool, type, w, GEMM_N, GEMM_N, x, GEMM_TOK, y, route);
        v[r] = 2.0 * GEMM_N * GEMM_N * GEMM_TOK / (nb_clock_s() - t) / 1e9;
    }
    return nb_bench_stat_of(v, reps);
}

static nb_status kernel_figures(nb_pool *pool, int type, int reps, float *x, float *y, nb_bench_kernel_result *out) {
    size_t bytes;
    double v[NB_BENCH_MAX_REPS];
    void *w;
    nb_status s = nb_bench_matrix(type, GEMV_OUT, GEMV_IN, 12345, &w, &bytes);
    if (s) return s;
    nb_matmul(pool, type, w, GEMV_OUT, GEMV_IN, x, 1, y); /* warm: pages, scratch */
    for (int r = 0; r < reps; r++) {
        const double t = nb_clock_s();
        nb_matmul(pool, type, w, GEMV_OUT, GEMV_IN, x, 1, y);
        v[r] = (double)bytes / (nb_clock_s() - t) / 1e9;
    }
    out->gemv_gbs = nb_bench_stat_of(v, reps);
    free(w);
    if ((s = nb_bench_matrix(type, GEMM_N, GEMM_N, 12345, &w, &bytes))) return s;
    const int gr = reps < 3 ? reps : 3; /* a GEMM takes seconds on the slow types */
    out->gemm_gflops = gemm_rate(pool, type, w, x, y, NB_ROUTE_QUANT, gr);
    if (nb_matmul_kernel_name(type, NB_ROUTE_BLOCK) != out->kernel)
        out->gemm_block_gflops = gemm_rate(pool, type, w, x, y, NB_ROUTE_BLOCK, gr);
    /* the activations' quantization: a 1-row product is dominated by it (0 rows would skip it), so
     * a 4-row one on GEMM_TOK tokens is timed, nothing subtracted: an upper bound */
    for (int r = 0; r < gr; r++) {
        const double t = nb_clock_s();
        nb_matmul(pool, type, w, 4, GEMM_N, x, GEMM_TOK, y);
        v[r] = (nb_clock_s() - t) * 1e3;
    }
    out->quant_ms = nb_bench_stat_of(v, gr);
    free(w);
    return NB_OK;
}

nb_status nb_bench_kernel(nb_pool *pool, int type, int reps, nb_bench_kernel_result *out) {
    nb_status s = check_reps("bench kernel", pool, reps, out);
    if (s) return s;
    memset(out, 0, sizeof *out);
    const nb_type_info *t = nb_type_get(type);
    if (!t || !t->weight_type) return nb_fail(NB_ERR_INVALID_ARG, "bench kernel: type %d is not a weight type", type);
    out->kernel = nb_matmul_kernel_name(type, NB_ROUTE_QUANT);
    const int64_t nx = (int64_t)GEMM_N * GEMM_TOK, ny = GEMV_OUT > nx ? GEMV_OUT : nx;
    float *x = malloc(sizeof *x * (size_t)nx), *y = malloc(sizeof *y * (size_t)ny);
    if (!x || !y) s = nb_fail(NB_ERR_NOMEM, "bench kernel: out of memory for %lld activations", (long long)nx);
    else {
        uint64_t st = 777;
        for (int64_t i = 0; i < nx; i++) x[i] = uniform(&st);
        s = kernel_figures(pool, type, reps, x, y, out);
    }
    free(x), free(y);
    if (s) memset(out, 0, sizeof *out);
    return s;
}
