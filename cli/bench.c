/*
 * bench.c: `nibble bench -m MODEL ...` (llama-bench's tests: bench_model.c), `nibble bench kernels
 * [-o md|json] [-t LIST] [-r REPS]`: kernel throughput, and `nibble bench roofline -m MODEL
 * [-t LIST] [-n N] [-r REPS]`: decode against its memory ceiling.
 *
 * `bench kernels`, for each thread count: the machine's streaming-read bandwidth (a sum over a
 * 1 GiB buffer split over the pool), then per weight type: GEMV effective GB/s of weight bytes on
 * a 16384 x 14336 matrix (larger than any L3 here) and its share of the streaming bandwidth just
 * measured, GEMM GFLOP/s at 512 activation rows on 4096 x 4096 (NB_ROUTE_QUANT, and NB_ROUTE_BLOCK
 * where a type has it), and the activation quantization cost. Medians and spreads (max - min) over
 * repetitions. Weights are one quantized random 64-row slab tiled over the matrix (quantizing 235M
 * values with the reference quantizers would take minutes); one matrix is allocated at a time.
 * Numbers only: nothing here passes or fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>

#include "cli/args.h"
#include "cli/bench.h"
#include "cli/commands.h"
#include "nibble.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double med, spread;
} stat;

static stat stats(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return (stat){n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[n - 1] - v[0]};
}

/* ----------------------------------------------------------- streaming read */

typedef struct {
    const uint64_t *buf;
    uint64_t sums[256];
} stream_job;

/* 16-byte vector adds (SSE2, baseline x86-64): the scalar version of this loop was compute bound
 * on one core (it read slower than the F16 GEMV). */
typedef uint64_t u64x2 __attribute__((vector_size(16)));

static void stream_part(void *ctx, int64_t b, int64_t e) {
    stream_job *j = ctx;
    u64x2 s0 = {0, 0}, s1 = s0, s2 = s0, s3 = s0;
    const u64x2 *p = (const u64x2 *)j->buf;
    for (int64_t i = b * 4; i < e * 4; i += 4) { /* one 64-byte line per step */
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    u64x2 s = (s0 ^ s1) ^ (s2 ^ s3);
    j->sums[(b / 4096) % 256] += s[0] ^ s[1]; /* keep the loads alive */
}

/* Large buffers in 2 MiB pages where the kernel allows (madvise mode included), as the model's
 * weights come after nb_gguf_open's hint: the stream and the GEMV matrices then see the same TLB
 * as decode (docs/BENCHMARKS.md, "Kernels", gives the 4 KiB figure). */
static void *big_alloc(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, (size_t)2 << 20, bytes)) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

#define STREAM_BYTES ((size_t)1 << 30)

/* The streaming buffer, touched (so that its pages exist before any pass is timed). */
static uint64_t *stream_buf(void) {
    uint64_t *buf = big_alloc(STREAM_BYTES);
    if (buf) memset(buf, 1, STREAM_BYTES);
    return buf;
}

/* GB/s of reps passes over buf. */
static stat stream_passes(nb_pool *pool, const uint64_t *buf, int reps) {
    stream_job j = {.buf = buf};
    double v[32];
    for (int r = 0; r < reps; r++) {
        double t = arg_now();
        nb_pool_for(pool, (int64_t)(STREAM_BYTES / 64), 4096, stream_part, &j);
        v[r] = (double)STREAM_BYTES / (arg_now() - t) / 1e9;
    }
    return stats(v, reps);
}

static stat stream_gbs(nb_pool *pool, int reps) {
    uint64_t *buf = stream_buf();
    if (!buf) return (stat){0, 0};
    stat st = stream_passes(pool, buf, reps);
    free(buf);
    return st;
}

/* ------------------------------------------------------------------- matmul */

/* n_out x n_in weights of a type: a quantized random 64-row slab, repeated. */
static void *make_weights(int type, int64_t n_out, int64_t n_in, size_t *bytes) {
    size_t rb;
    if (nb_row_bytes(type, n_in, &rb) != NB_OK) return NULL;
    int64_t slab = 64;
    float *x = malloc(sizeof(float) * (size_t)(slab * n_in));
    uint8_t *w = big_alloc(rb * (size_t)n_out);
    if (!x || !w) {
        free(x), free(w);
        return NULL;
    }
    uint32_t s = 12345;
    for (int64_t i = 0; i < slab * n_in; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((int32_t)s >> 8) / (float)(1 << 23);
    }
    nb_quantize(type, x, w, slab * n_in);
    for (int64_t r = slab; r < n_out; r += slab)
        memcpy(w + (size_t)r * rb, w, rb * (size_t)(n_out - r < slab ? n_out - r : slab));
    free(x);
    *bytes = rb * (size_t)n_out;
    return w;
}

static float *make_acts(int64_t n) {
    float *x = malloc(sizeof(float) * (size_t)n);
    if (!x) return NULL;
    uint32_t s = 777;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((int32_t)s >> 8) / (float)(1 << 23);
    }
    return x;
}

typedef struct {
    int type, threads;
    const char *kernel;
    stat gemv, gemm, gemm_block, quant_ms; /* gemm_block: NB_ROUTE_BLOCK's, where the type has one (else med 0) */
    double stream;
} row;

/* GFLOP/s of reps products of tok activation rows on an n x n matrix by a route (after one warm call). */
static stat gemm_rate(nb_pool *pool, int type, const void *w, int64_t n, const float *x, int64_t tok, float *y,
                      nb_route route, int reps) {
    double v[32];
    nb_matmul_route(pool, type, w, n, n, x, tok, y, route);
    for (int r = 0; r < reps; r++) {
        double t = arg_now();
        nb_matmul_route(pool, type, w, n, n, x, tok, y, route);
        v[r] = 2.0 * (double)n * (double)n * (double)tok / (arg_now() - t) / 1e9;
    }
    return stats(v, reps);
}

static int bench_type(nb_pool *pool, int type, int reps, row *out) {
    const int64_t gv_out = 16384, gv_in = 14336, gm_n = 4096, gm_tok = 512;
    size_t bytes;
    double v[32];
    out->type = type;
    out->kernel = nb_matmul_kernel_name(type, NB_ROUTE_QUANT);
    void *w = make_weights(type, gv_out, gv_in, &bytes);
    float *x = make_acts(gm_n * gm_tok > gv_in ? gm_n * gm_tok : gv_in);
    float *y = malloc(sizeof(float) * (size_t)(gv_out > gm_n * gm_tok ? gv_out : gm_n * gm_tok));
    if (!w || !x || !y) return free(w), free(x), free(y), 0;
    nb_matmul(pool, type, w, gv_out, gv_in, x, 1, y); /* warm: pages, scratch */
    for (int r = 0; r < reps; r++) {
        double t = arg_now();
        nb_matmul(pool, type, w, gv_out, gv_in, x, 1, y);
        v[r] = (double)bytes / (arg_now() - t) / 1e9;
    }
    out->gemv = stats(v, reps);
    free(w);
    w = make_weights(type, gm_n, gm_n, &bytes);
    if (!w) return free(x), free(y), 0;
    int gr = reps < 3 ? reps : 3;
    out->gemm = gemm_rate(pool, type, w, gm_n, x, gm_tok, y, NB_ROUTE_QUANT, gr);
    if (nb_matmul_kernel_name(type, NB_ROUTE_BLOCK) != out->kernel)
        out->gemm_block = gemm_rate(pool, type, w, gm_n, x, gm_tok, y, NB_ROUTE_BLOCK, gr);
    /* activation quantization alone: a 1-row matmul is dominated by it (n_in = 4096, 0 rows
     * would skip it), so time a 4-row one on 512 tokens and subtract nothing: an upper bound */
    for (int r = 0; r < gr; r++) {
        double t = arg_now();
        nb_matmul(pool, type, w, 4, gm_n, x, gm_tok, y);
        v[r] = (arg_now() - t) * 1e3;
    }
    out->quant_ms = stats(v, gr);
    free(w), free(x), free(y);
    return 1;
}

static const char USAGE_KERNELS[] = "usage: nibble bench kernels [-o md|json] [-t 1,2] [-r REPS]\n"
                                    "  -o md|json   a Markdown table (default) or JSON\n"
                                    "  -t LIST      thread counts, comma-separated (default 1,2)\n"
                                    "  -r REPS      repetitions per figure, 1..32 (default 5)\n";
static const char USAGE_ROOFLINE[] = "usage: nibble bench roofline -m MODEL [-t 1,2] [-n N] [-r REPS]\n"
                                     "  -m, --model FILE  the GGUF model\n"
                                     "  -t LIST           thread counts, comma-separated (default 1,2)\n"
                                     "  -n N              decode steps per round, 1..4096 (default 64)\n"
                                     "  -r REPS           rounds per thread count, 1..32 (default 5)\n";

static int bench_kernels(int argc, char **argv) {
    int json = 0, reps = 5;
    arg_list threads = {{1, 2}, 2};
    arg_opt opts[] = {OPT_CHOICE("-o|--output", &json, "md|json"), OPT_LIST("-t|--threads", &threads, 1, NB_MAX_THREADS),
                      OPT_INT("-r|--repetitions", &reps, 1, 32)};
    arg_spec spec = ARG_SPEC("bench kernels", USAGE_KERNELS, opts, NULL, 0);
    int rc = arg_parse(&spec, argc - 1, argv + 1);
    if (rc >= 0) return rc;
    if (json) printf("{\"isa\": \"%s\", \"results\": [", nb_isa_name(nb_isa_active()));
    else {
        printf("kernel set: %s (%s)\n\n", nb_isa_name(nb_isa_active()), nb_isa_note());
        printf("| type | threads | GEMV GB/s | %% of stream | GEMM GFLOP/s (512 rows) | block route | quantize+4 rows ms | kernel |\n");
        printf("|---|---|---|---|---|---|---|---|\n");
    }
    int first = 1;
    for (int ti = 0; ti < threads.n; ti++) {
        nb_pool *pool;
        nb_status s = nb_pool_create(threads.v[ti], &pool);
        if (s) return arg_status(s);
        stat st = stream_gbs(pool, reps);
        if (!json) printf("| stream read | %d | %.1f ± %.1f | 100 | | | | 1 GiB sum |\n", threads.v[ti], st.med, st.spread);
        const nb_type_info *t;
        for (int k = 0; (t = nb_type_at(k)); k++) {
            if (!t->weight_type) continue;
            row r = {.threads = threads.v[ti], .stream = st.med};
            if (!bench_type(pool, t->id, reps, &r)) {
                arg_error("out of memory for %s", t->name);
                nb_pool_destroy(pool);
                return 1;
            }
            if (json)
                printf("%s\n {\"type\": \"%s\", \"threads\": %d, \"kernel\": \"%s\", \"stream_gbs\": %.2f, "
                       "\"gemv_gbs\": %.2f, \"gemv_spread\": %.2f, \"gemv_pct_stream\": %.1f, \"gemm_gflops\": %.1f, "
                       "\"gemm_spread\": %.1f, \"gemm_block_gflops\": %.1f, \"quant_ms\": %.3f}",
                       first ? "" : ",", nb_type_name(r.type), r.threads, r.kernel, st.med, r.gemv.med, r.gemv.spread,
                       100 * r.gemv.med / st.med, r.gemm.med, r.gemm.spread, r.gemm_block.med, r.quant_ms.med);
            else {
                char blk[48] = "";
                if (r.gemm_block.med > 0) snprintf(blk, sizeof blk, "%.1f ± %.1f", r.gemm_block.med, r.gemm_block.spread);
                printf("| %s | %d | %.1f ± %.1f | %.0f | %.1f ± %.1f | %s | %.2f | %s |\n", nb_type_name(r.type), r.threads,
                       r.gemv.med, r.gemv.spread, 100 * r.gemv.med / st.med, r.gemm.med, r.gemm.spread, blk,
                       r.quant_ms.med, r.kernel);
            }
            fflush(stdout);
            first = 0;
        }
        nb_pool_destroy(pool);
    }
    if (json) printf("\n]}\n");
    return 0;
}

/* ----------------------------------------------------------- roofline */

/* Per thread count, REPS rounds of a streaming read (the median of 3 passes over 1 GiB) followed
 * by N decode steps after one token (nb_bench_run's tgN at depth 1: `nibble bench -n N -d 1`,
 * one warm-up step); the ceiling of a round is its streaming rate over the mean bytes a step
 * reads (nb_decode_step_bytes), and the share of it that decode reached is taken per round (the
 * machine's bandwidth drifts between rounds), then summarized as median (min..max). */
static int bench_roofline(int argc, char **argv) {
    int reps = 5, n_gen = 64;
    arg_list threads = {{1, 2}, 2};
    const char *path = NULL;
    arg_opt opts[] = {OPT_STR("-m|--model", &path), OPT_LIST("-t|--threads", &threads, 1, NB_MAX_THREADS),
                      OPT_INT("-n|--n-gen", &n_gen, 1, 4096), OPT_INT("-r|--repetitions", &reps, 1, 32)};
    arg_spec spec = ARG_SPEC("bench roofline", USAGE_ROOFLINE, opts, NULL, 0);
    int rc = arg_parse(&spec, argc - 1, argv + 1);
    if (rc >= 0) return rc;
    if (!path) return arg_usage_error(&spec, "-m MODEL is required");
    nb_model *m;
    nb_status st = nb_model_load(path, &m);
    if (st) return arg_status(st);
    printf("kernel set: %s; %s, %d decode step%s after one token, %d round%s per thread count\n",
           nb_isa_name(nb_isa_active()), path, n_gen, nb_plural(n_gen), reps, nb_plural(reps));
    const double huge = nb_gguf_huge_share(nb_model_gguf(m));
    if (huge >= 0) printf("weights mapped in 2 MiB pages: %.0f %%\n\n", 100 * huge);
    else printf("weights mapped in 2 MiB pages: unknown\n\n");
    printf("| threads | stream GB/s | decode tok/s | MB read per step | ceiling tok/s | share of ceiling |\n");
    printf("|---|---|---|---|---|---|\n");
    nb_bench_params bp = nb_bench_default_params();
    bp.n_prompt = 0, bp.n_gen = n_gen, bp.n_depth = 1, bp.reps = 1;
    rc = 0;
    for (int ti = 0; ti < threads.n && !rc; ti++) {
        nb_pool *pool = NULL;
        nb_bench_result res;
        double gbs[32], tps[32], ceil[32], share[32], bytes = 0;
        uint64_t *buf = stream_buf();
        rc = !buf || nb_pool_create(threads.v[ti], &pool) != NB_OK;
        bp.ctx.pool = pool;
        if (!rc) rc = nb_bench_run(m, &bp, &res) != NB_OK; /* pages of the weights */
        for (int r = 0; r < reps && !rc; r++) {
            gbs[r] = stream_passes(pool, buf, 3).med;
            rc = nb_bench_run(m, &bp, &res) != NB_OK;
            tps[r] = res.avg_ts, bytes = res.step_bytes;
            ceil[r] = gbs[r] * 1e9 / bytes;
            share[r] = 100 * tps[r] / ceil[r];
        }
        if (rc) arg_error("%s", buf ? nb_last_error() : "out of memory for the streaming buffer");
        else {
            const stat g = stats(gbs, reps), t = stats(tps, reps), cl = stats(ceil, reps), sh = stats(share, reps);
            printf("| %d | %.1f ± %.1f | %.1f ± %.1f | %.1f | %.1f ± %.1f | %.0f %% (%.0f..%.0f) |\n", threads.v[ti], g.med,
                   g.spread, t.med, t.spread, bytes / 1e6, cl.med, cl.spread, sh.med, share[0], share[reps - 1]);
            fflush(stdout);
        }
        nb_pool_destroy(pool);
        free(buf);
    }
    nb_model_free(m);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "kernels")) return bench_kernels(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "roofline")) return bench_roofline(argc, argv);
    const int help = argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
    if (argc >= 2 && !help && argv[1][0] == '-') return bench_model(argc, argv);
    if (argc < 2) fprintf(stderr, "nibble bench: which benchmark? -m MODEL (llama-bench's tests), kernels or roofline\n");
    else if (!help) fprintf(stderr, "nibble bench: unknown benchmark '%s' (-m MODEL, kernels or roofline)\n", argv[1]);
    fputs(BENCH_USAGE_MODEL, help ? stdout : stderr);
    fputs(USAGE_KERNELS, help ? stdout : stderr);
    fputs(USAGE_ROOFLINE, help ? stdout : stderr);
    return help ? 0 : 2;
}
