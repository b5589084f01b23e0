/*
 * test_kernels.c: the matmul kernels. Every kernel set against the scalar reference on random
 * data with edge shapes (one block, many blocks, rows and tokens not multiples of the tiles,
 * outputs prefilled with NaN so an unwritten element fails); the reference against
 * dequantize-then-dot in double; thread-count invariance; argument errors.
 */
#include <math.h>
#include <stdint.h>

#include "base/threads.h"
#include "formats/blocks.h"
#include "kernels/kernels.h"
#include "nibble.h"
#include "test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* roughly normal, with an occasional outlier */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        s += (float)(rng >> 40) / (float)(1 << 24) - 0.5f;
    }
    if ((rng & 255) == 0) s *= 8;
    return s;
}

/* The type table's weight types, each of which has kernels (listed by main). */
static int types[64], ntypes;

typedef struct {
    int type;
    int64_t n_out, n_in, n_tok;
    void *w;        /* quantized weights */
    float *wd;      /* the same, dequantized (for the double-precision oracle) */
    float *x, *y, *y_ref;
} problem;

static int make(problem *p, int type, int64_t n_out, int64_t n_in, int64_t n_tok) {
    size_t rb;
    if (nb_row_bytes(type, n_in, &rb) != NB_OK) return 0;
    *p = (problem){.type = type, .n_out = n_out, .n_in = n_in, .n_tok = n_tok};
    float *wf = malloc(sizeof(float) * (size_t)(n_out * n_in));
    p->w = malloc(rb * (size_t)n_out);
    p->wd = malloc(sizeof(float) * (size_t)(n_out * n_in));
    p->x = malloc(sizeof(float) * (size_t)(n_tok * n_in));
    p->y = malloc(sizeof(float) * (size_t)(n_tok * n_out));
    p->y_ref = malloc(sizeof(float) * (size_t)(n_tok * n_out));
    for (int64_t i = 0; i < n_out * n_in; i++) wf[i] = frand();
    for (int64_t i = 0; i < n_tok * n_in; i++) p->x[i] = frand();
    int ok = nb_quantize(type, wf, p->w, n_out * n_in) == NB_OK && nb_dequantize(type, p->w, p->wd, n_out * n_in) == NB_OK;
    free(wf);
    return ok;
}

static void drop(problem *p) {
    free(p->w), free(p->wd), free(p->x), free(p->y), free(p->y_ref);
}

static void fill_nan(float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = NAN;
}

static int is_block_type(int type) { return nb_type_get(type)->block_elems > 1; }

/* Shapes per type: one block, a few blocks, many blocks; rows and tokens off the tile sizes. */
static void shapes(int type, int64_t n_in[3]) {
    int be = nb_type_get(type)->block_elems;
    if (be == 1) be = 8;
    n_in[0] = be, n_in[1] = be == 256 ? 1024 : 640, n_in[2] = be == 256 ? 2560 : be * 67 + (be == 8 ? 3 : 0);
}

/* Compares an ISA's matmul with the reference set on one problem: integer routes exactly (same
 * bits: the lane contract of kernels.h), float routes within 2*n*u*sum|w*x| (two summation
 * orders, each within n*u*sum|w*x| of the exact sum; u = 2^-24). */
static void compare_isa(nb_isa isa, problem *p, nb_route route) {
    int64_t ny = p->n_out * p->n_tok;
    fill_nan(p->y_ref, ny);
    fill_nan(p->y, ny);
    CHECK(nb_matmul_isa(NB_ISA_REF, NULL, p->type, p->w, 0, p->n_out, p->n_in, p->x, p->n_tok, p->y_ref, route) == NB_OK,
          "ref matmul: %s", nb_last_error());
    CHECK(nb_matmul_isa(isa, NULL, p->type, p->w, 0, p->n_out, p->n_in, p->x, p->n_tok, p->y, route) == NB_OK, "%s matmul: %s",
          nb_isa_name(isa), nb_last_error());
    int exact = ((route == NB_ROUTE_QUANT || route == NB_ROUTE_BLOCK) && is_block_type(p->type)) || route == NB_ROUTE_VEC;
    int bad = 0;
    for (int64_t t = 0; t < p->n_tok; t++)
        for (int64_t o = 0; o < p->n_out; o++) {
            float a = p->y[t * p->n_out + o], b = p->y_ref[t * p->n_out + o];
            int ok;
            if (exact) ok = memcmp(&a, &b, sizeof a) == 0;
            else {
                double mag = 0;
                for (int64_t i = 0; i < p->n_in; i++) mag += fabs((double)p->wd[o * p->n_in + i] * p->x[t * p->n_in + i]);
                ok = isfinite(a) && fabs((double)a - b) <= 2.0 * (double)p->n_in * 0x1p-24 * mag;
            }
            if (!ok && bad++ < 3)
                CHECK(0, "%s %s route %d: %lldx%lldx%lld y[%lld,%lld] = %.9g, ref %.9g", nb_isa_name(isa),
                      nb_type_name(p->type), (int)route, (long long)p->n_out, (long long)p->n_in, (long long)p->n_tok,
                      (long long)t, (long long)o, a, b);
        }
}

static void all_shapes_isa(nb_isa isa) {
    /* 67 rows, one token: the GEMV path that spreads a tile's rows over the matrix's quarters or
     * eighths, an odd number of rows apart (nb_stream_stride: 67 = 4 x 15 + 7 = 8 x 7 + 11), and
     * the rows left over */
    /* 7 and 9 tokens: the Q4_K batch order on 4 or 8 tokens and the ordinary one on the rest, the
     * Q6_K batch order from 8 */
    /* 2, 3 and 7 rows: the tiles of 2 and 3 rows (a row pair with an odd row in the FP4 tiles) */
    static const int64_t rows[] = {1, 2, 3, 5, 7, 13, 67}, toks[] = {1, 2, 7, 9};
    const int n_rows = (int)(sizeof rows / sizeof rows[0]);
    for (int ti = 0; ti < ntypes; ti++) {
        int64_t n_in[3];
        shapes(types[ti], n_in);
        for (int si = 0; si < 3; si++)
            for (int ri = 0; ri < n_rows; ri++) {
                problem p;
                int64_t nt = ri == n_rows - 1 ? 1 : toks[(si + ri) % 4];
                CHECK(make(&p, types[ti], rows[ri], n_in[si], nt), "setup %s", nb_type_name(types[ti]));
                compare_isa(isa, &p, NB_ROUTE_QUANT);
                compare_isa(isa, &p, NB_ROUTE_F32);
                if (types[ti] == NB_TYPE_F16) compare_isa(isa, &p, NB_ROUTE_VEC);
                drop(&p);
            }
    }
}

TEST(avx2_matches_reference) {
    if (nb_isa_best() < NB_ISA_AVX2) SKIP("no AVX2");
    all_shapes_isa(NB_ISA_AVX2);
}

/* Tokens past the 256 whose lane sums the GEMM panels keep (NB_PANEL_T, x86/avx2/panel.h). */
#define PANEL_TOKENS 263

/* The GEMM panels (x86/avx2/units.h for AVX2; kpanel.h's K-quant panels in both sets; the
 * AVX-512 set's own): rows of one decoded chunk (AVX2's NVFP4 takes panels only there) and rows
 * that span several, more tokens than a panel keeps lane sums for, and 29 rows: a whole 16-row
 * panel and one of 13, neither a multiple of 8. */
static void gemm_panels_isa(nb_isa isa) {
    for (int ti = 0; ti < ntypes; ti++) {
        if (!is_block_type(types[ti])) continue;
        int64_t n_in[3];
        shapes(types[ti], n_in);
        for (int si = 1; si < 3; si++) {
            problem p;
            CHECK(make(&p, types[ti], 29, n_in[si], PANEL_TOKENS), "setup %s", nb_type_name(types[ti]));
            compare_isa(isa, &p, NB_ROUTE_QUANT);
            drop(&p);
        }
    }
}

TEST(avx2_gemm_panels_match_reference) {
    if (nb_isa_best() < NB_ISA_AVX2) SKIP("no AVX2");
    gemm_panels_isa(NB_ISA_AVX2);
}

TEST(avx512_gemm_panels_match_reference) {
    if (nb_isa_best() < NB_ISA_AVX512 || !nb_cpu()->avx512vnni) SKIP("no AVX-512");
    gemm_panels_isa(NB_ISA_AVX512);
}

/* NB_ROUTE_BLOCK (kernels.h): every set equals the reference's block order bit for bit from its
 * block_min (Q4_0, Q5_0, Q8_0: 8 to 15 tokens in AVX-512's row lanes and AVX2's token lanes, one
 * and two groups of 8, over one and several chunks of units, a whole and a partial tile of rows;
 * 16 to 63 in AVX-512's row lanes by groups of tokens (31: three uneven ones, 63: the last count
 * before its panels); NVFP4 and all: the panels from NB_BLOCK_MIN, rows over several panel chunks
 * and more tokens than a panel keeps; Q4_K's, its GEMV's order, the same), and below it the
 * quantized route's; the types with a block order take it (the kernel's name says so, and it
 * differs from llama.cpp's order somewhere in 13 x 71 and 13 x 8 random products). */
TEST(block_route_matches_reference) {
    if (nb_isa_best() < NB_ISA_AVX2) SKIP("no AVX2");
    static const int64_t toks[] = {1, NB_BLOCK_MIN_SMALL - 1, NB_BLOCK_MIN_SMALL, 9, 12, NB_BLOCK_MIN - 1,
                                   NB_BLOCK_MIN, 31, 63, PANEL_TOKENS};
    const int ntoks = (int)(sizeof toks / sizeof toks[0]);
    for (int ti = 0; ti < ntypes; ti++) {
        if (!is_block_type(types[ti])) continue;
        int64_t n_in[3];
        shapes(types[ti], n_in);
        for (int isa = NB_ISA_AVX2; isa <= (int)nb_isa_best(); isa++)
            for (int si = 1; si < 3; si++)
                for (int k = 0; k < ntoks; k++) {
                    problem p;
                    CHECK(make(&p, types[ti], 29, n_in[si], toks[k]), "setup %s", nb_type_name(types[ti]));
                    compare_isa((nb_isa)isa, &p, NB_ROUTE_BLOCK);
                    drop(&p);
                }
    }
    /* each type with a block order, at 71 tokens; those from NB_BLOCK_MIN_SMALL at 8 as well */
    static const struct { int type, toks; } blocked[] = {{NB_TYPE_Q4_0, 71}, {NB_TYPE_Q5_0, 71}, {NB_TYPE_Q8_0, 71},
                                                         {NB_TYPE_NVFP4, 71}, {NB_TYPE_Q4_K, 71}, {NB_TYPE_Q4_0, 8},
                                                         {NB_TYPE_Q5_0, 8}, {NB_TYPE_Q8_0, 8}};
    for (int i = 0; i < (int)(sizeof blocked / sizeof blocked[0]); i++) {
        const int type = blocked[i].type;
        const char *name = nb_matmul_kernel_name(type, NB_ROUTE_BLOCK);
        CHECK(name && strstr(name, "(block)"), "%s block route kernel: %s", nb_type_name(type), name ? name : "NULL");
        problem p;
        CHECK(make(&p, type, 13, nb_type_get(type)->block_elems == 256 ? 1024 : 640, blocked[i].toks), "setup %s",
              nb_type_name(type));
        CHECK(nb_matmul_isa(NB_ISA_REF, NULL, p.type, p.w, 0, p.n_out, p.n_in, p.x, p.n_tok, p.y_ref, NB_ROUTE_QUANT) == NB_OK &&
                  nb_matmul_isa(NB_ISA_REF, NULL, p.type, p.w, 0, p.n_out, p.n_in, p.x, p.n_tok, p.y, NB_ROUTE_BLOCK) == NB_OK,
              "%s matmul: %s", nb_type_name(type), nb_last_error());
        CHECK(memcmp(p.y, p.y_ref, sizeof(float) * (size_t)(p.n_out * p.n_tok)), "%s, %lld tokens: the block route gave "
              "llama.cpp's order", nb_type_name(type), (long long)p.n_tok);
        drop(&p);
    }
}

/* Q4_0 matrices of a multiple of 8 rows take the block order (MXFP4's one lane per block: the
 * order of llama.cpp's 8-row copy of them, kernels.h) at every token count, on the quantized
 * route and in every set, bit for bit; the same rows as a matrix of 7 or as the KV cache's cells
 * (NB_ROUTE_CELLS) keep the 8 lanes, which differ from it somewhere in these random products.
 * Rows 8 (one GEMV tile of 8), 24 and 72 (the GEMV's tiles spread over the matrix), tokens from
 * the GEMV through the tiles and small batches to the panels. */
TEST(q4_0_rows_of_8_take_the_block_order) {
    static const int64_t rows[] = {8, 24, 72}, toks[] = {1, 2, 3, 5, 9, 15, 16, 40, PANEL_TOKENS};
    for (int ri = 0; ri < 3; ri++)
        for (int k = 0; k < (int)(sizeof toks / sizeof toks[0]); k++) {
            const int64_t nr = rows[ri], nt = toks[k], n = k % 2 ? 640 : 2176;
            problem p;
            CHECK(make(&p, NB_TYPE_Q4_0, nr, n, nt), "setup");
            for (int isa = NB_ISA_AVX2; isa <= (int)nb_isa_best(); isa++) compare_isa((nb_isa)isa, &p, NB_ROUTE_QUANT);
            float *lanes = malloc(sizeof(float) * (size_t)(nr * nt)), *cells = malloc(sizeof(float) * (size_t)(nr * nt));
            /* the reference's block order, token by token (the block route below 8 tokens is the quantized one) */
            fill_nan(p.y_ref, nr * nt);
            for (int64_t t = 0; t < nt; t++)
                CHECK(nb_matmul_isa(NB_ISA_REF, NULL, NB_TYPE_Q4_0, p.w, 0, nr, n, p.x + t * n, 1, p.y_ref + t * nr,
                                    NB_ROUTE_QUANT) == NB_OK, "ref: %s", nb_last_error());
            fill_nan(p.y, nr * nt);
            CHECK(nb_matmul_isa(NB_ISA_REF, NULL, NB_TYPE_Q4_0, p.w, 0, nr, n, p.x, nt, p.y, nt >= NB_BLOCK_MIN_SMALL ?
                                NB_ROUTE_BLOCK : NB_ROUTE_QUANT) == NB_OK, "ref block: %s", nb_last_error());
            CHECK(!memcmp(p.y, p.y_ref, sizeof(float) * (size_t)(nr * nt)), "%lld x %lld x %lld: not the block order",
                  (long long)nr, (long long)n, (long long)nt);
            CHECK(nb_matmul_isa(NB_ISA_REF, NULL, NB_TYPE_Q4_0, p.w, 0, 7, n, p.x, nt, lanes, NB_ROUTE_QUANT) == NB_OK &&
                      nb_matmul_isa(nb_isa_best(), NULL, NB_TYPE_Q4_0, p.w, 0, nr, n, p.x, nt, cells, NB_ROUTE_CELLS) == NB_OK,
                  "lanes: %s", nb_last_error());
            int same = 1, cells_ok = 1;
            for (int64_t t = 0; t < nt; t++)
                for (int64_t r = 0; r < 7; r++) {
                    same &= !memcmp(&lanes[t * 7 + r], &p.y_ref[t * nr + r], sizeof(float));
                    cells_ok &= !memcmp(&lanes[t * 7 + r], &cells[t * nr + r], sizeof(float));
                }
            CHECK(!same, "%lld x %lld x %lld: 7 rows took the block order too", (long long)nr, (long long)n, (long long)nt);
            CHECK(cells_ok, "%lld x %lld x %lld: the cells' route left the 8 lanes", (long long)nr, (long long)n,
                  (long long)nt);
            free(lanes), free(cells);
            drop(&p);
        }
}

/* Q5_K's largest products: every code 31 under scale 63 against activations of 127, the sums the
 * panels and tiles keep as words at their bound (4 groups: 4*2*31*127), every set against the
 * reference at 1 to 40 tokens (GEMV, tiles, the batch order's tiles and panels). */
TEST(q5_k_products_at_their_bound) {
    const int64_t n = 512, rows = 24;
    size_t rb;
    CHECK(nb_row_bytes(NB_TYPE_Q5_K, n, &rb) == NB_OK, "row bytes");
    uint8_t *w = malloc(rb * rows);
    memset(w, 0xFF, rb * rows);
    for (int64_t b = 0; b < rows * n / 256; b++) {
        nb_block_q5_k *blk = (nb_block_q5_k *)w + b;
        blk->d = 0x3C00, blk->dmin = 0x2C00; /* 1.0 and 0.0625 */
    }
    static const int64_t toks[] = {1, 9, 16, 40};
    for (int k = 0; k < 4; k++) {
        const int64_t nt = toks[k];
        float *x = malloc(sizeof(float) * (size_t)(n * nt)), *y = malloc(sizeof(float) * (size_t)(rows * nt)),
              *yr = malloc(sizeof(float) * (size_t)(rows * nt));
        for (int64_t i = 0; i < n * nt; i++) x[i] = 1.0f + (float)(i % 3) * 1e-3f;
        CHECK(nb_matmul_isa(NB_ISA_REF, NULL, NB_TYPE_Q5_K, w, 0, rows, n, x, nt, yr, NB_ROUTE_QUANT) == NB_OK, "ref");
        for (int isa = NB_ISA_AVX2; isa <= (int)nb_isa_best(); isa++) {
            fill_nan(y, rows * nt);
            CHECK(nb_matmul_isa((nb_isa)isa, NULL, NB_TYPE_Q5_K, w, 0, rows, n, x, nt, y, NB_ROUTE_QUANT) == NB_OK, "%s",
                  nb_isa_name((nb_isa)isa));
            CHECK(!memcmp(y, yr, sizeof(float) * (size_t)(rows * nt)), "%s q5_K at its bound, %lld tokens: %.9g, ref %.9g",
                  nb_isa_name((nb_isa)isa), (long long)nt, y[0], yr[0]);
        }
        free(x), free(y), free(yr);
    }
    free(w);
}

TEST(avx512_matches_reference) {
    if (nb_isa_best() < NB_ISA_AVX512 || !nb_cpu()->avx512vnni) SKIP("no AVX-512");
    all_shapes_isa(NB_ISA_AVX512);
}

/* Small batches (kernels.h, mm_small: 2 to 16 tokens in one call, a thread's rows in one piece):
 * every token count from 1 to 16, and 17 and 24 (the panels), against the reference, bit for bit
 * on the integer routes, with row counts that take the quarters (nb_stream_stride: 37 = 4 x 9 +
 * 1, 18 = 4 x 3 + 6) or only tiles (5, 3), and rows of one block, a few and many; the K-quants'
 * batch orders start at 4 (Q4_K, whole groups of 4) and 8 (Q6_K) tokens, so every split of a call
 * between the two orders is met. Outputs are prefilled with NaN (compare_isa). */
static void small_batches_isa(nb_isa isa) {
    static const int64_t rows[] = {37, 18, 5, 3};
    for (int ti = 0; ti < ntypes; ti++) {
        int64_t n_in[3];
        shapes(types[ti], n_in);
        for (int ri = 0; ri < 4; ri++)
            for (int nt = 1; nt <= 24; nt++) {
                if (nt > 16 && nt != 17 && nt != 24) continue;
                /* the long rows with every token count on the quarters' shapes, the others at a few */
                const int si = ri < 2 ? (nt % 3 == 0 ? 2 : nt % 3 == 1 ? 1 : 0) : (nt % 2 ? 0 : 1);
                if (ri >= 2 && nt % 5 && nt != 16) continue;
                problem p;
                CHECK(make(&p, types[ti], rows[ri], n_in[si], nt), "setup %s", nb_type_name(types[ti]));
                compare_isa(isa, &p, NB_ROUTE_QUANT);
                drop(&p);
            }
    }
}

TEST(avx2_small_batches_match_reference) {
    if (nb_isa_best() < NB_ISA_AVX2) SKIP("no AVX2");
    small_batches_isa(NB_ISA_AVX2);
}

TEST(avx512_small_batches_match_reference) {
    if (nb_isa_best() < NB_ISA_AVX512 || !nb_cpu()->avx512vnni) SKIP("no AVX-512");
    small_batches_isa(NB_ISA_AVX512);
}

/* The same small batch with 1, 2 and 3 threads: the same bits (each thread's rows in one piece go
 * by quarters of their own, so the rows' tiles differ with the threads; their instructions per row
 * may not). */
TEST(small_batches_thread_count_invariance) {
    static const int tt[] = {NB_TYPE_Q8_0, NB_TYPE_Q5_0, NB_TYPE_Q4_K, NB_TYPE_Q6_K, NB_TYPE_MXFP4, NB_TYPE_NVFP4, NB_TYPE_F16};
    for (size_t ti = 0; ti < sizeof tt / sizeof tt[0]; ti++) {
        problem p;
        const int64_t n = nb_type_get(tt[ti])->block_elems == 256 ? 512 : 128, rows = 75, toks = 13;
        CHECK(make(&p, tt[ti], rows, n, toks), "setup");
        for (int nt = 2; nt <= toks; nt += 3) {
            fill_nan(p.y_ref, rows * toks);
            CHECK(nb_matmul(NULL, p.type, p.w, rows, n, p.x, nt, p.y_ref) == NB_OK, "matmul");
            for (int threads = 1; threads <= 3; threads++) {
                nb_pool *pool;
                CHECK(nb_pool_create(threads, &pool) == NB_OK, "pool");
                fill_nan(p.y, rows * toks);
                CHECK(nb_matmul(pool, p.type, p.w, rows, n, p.x, nt, p.y) == NB_OK, "matmul: %s", nb_last_error());
                CHECK(memcmp(p.y, p.y_ref, sizeof(float) * (size_t)(rows * nt)) == 0, "%s, %d threads, %d tokens differ",
                      nb_type_name(p.type), threads, nt);
                nb_pool_destroy(pool);
            }
        }
        drop(&p);
    }
}

/* The float weights' AVX-512 tiles (4 tokens) and AVX2 tiles (2 tokens) share one body and give
 * each output the same fma sequence: the same bits, on tile-edge shapes and a ragged row length.
 * So do the AVX-512 panels from 17 tokens (rows of whole 8-element units), against the same
 * tokens one at a time (tiles): 37 rows end in a part-filled panel, 264 elements take two chunks,
 * 70 tokens two token blocks and a partial register tile. An AVX2 host checks its tiles' batches
 * against single tokens alone. */
TEST(float_tiles_agree_across_sets) {
    if (nb_isa_best() < NB_ISA_AVX2) SKIP("no AVX2");
    const int avx512 = nb_isa_best() >= NB_ISA_AVX512 && nb_cpu()->avx512vnni;
    static const int ft[] = {NB_TYPE_F32, NB_TYPE_F16, NB_TYPE_BF16};
    static const int64_t rows[] = {1, 6, 37}, toks[] = {1, 3, 4, 5, 9, 17, 70}, lens[] = {8, 539, 264};
    for (int ti = 0; ti < 3; ti++) {
        CHECK(!avx512 || !strncmp(nb_kernel_get(NB_ISA_AVX512, ft[ti])->name, "avx512 ", 7), "%s: no AVX-512 tile",
              nb_type_name(ft[ti]));
        for (int ri = 0; ri < 3; ri++)
            for (int ki = 0; ki < 7; ki++)
                for (int li = 0; li < 3; li++) {
                    problem p;
                    CHECK(make(&p, ft[ti], rows[ri], lens[li], toks[ki]), "setup");
                    const int64_t ny = p.n_out * p.n_tok;
                    for (int64_t t = 0; t < p.n_tok; t++)
                        CHECK(nb_matmul_isa(NB_ISA_AVX2, NULL, p.type, p.w, 0, p.n_out, p.n_in, p.x + t * p.n_in, 1,
                                            p.y_ref + t * p.n_out, NB_ROUTE_QUANT) == NB_OK, "avx2, one token");
                    for (int isa = NB_ISA_AVX2; isa <= (avx512 ? NB_ISA_AVX512 : NB_ISA_AVX2); isa++) {
                        fill_nan(p.y, ny);
                        CHECK(nb_matmul_isa((nb_isa)isa, NULL, p.type, p.w, 0, p.n_out, p.n_in, p.x, p.n_tok, p.y,
                                            NB_ROUTE_QUANT) == NB_OK, "%s", nb_isa_name((nb_isa)isa));
                        CHECK(!memcmp(p.y, p.y_ref, sizeof(float) * (size_t)ny), "%s %lldx%lldx%lld: %s != avx2 one token at a time",
                              nb_type_name(p.type), (long long)p.n_out, (long long)p.n_in, (long long)p.n_tok,
                              nb_isa_name((nb_isa)isa));
                    }
                    drop(&p);
                }
    }
}

/* Every FP4 scale code through every set: the SIMD scale decoders (E8M0 by table, UE4M3 through
 * fp16) against the reference's, including E8M0's subnormal codes 0 and 1, UE4M3 subnormals, the
 * ignored bit 7 and the code 0x7F that decodes to 0. Results must be the same bits (both NaN
 * counts as equal: huge scales may overflow). */
TEST(fp4_scale_codes_match_reference) {
    static const int fp4[] = {NB_TYPE_MXFP4, NB_TYPE_NVFP4};
    for (int ti = 0; ti < 2; ti++)
        for (int nt = 1; nt <= 3; nt += 2) {
            problem p;
            CHECK(make(&p, fp4[ti], 37, 640, nt), "setup");
            uint8_t *w = p.w;
            if (fp4[ti] == NB_TYPE_MXFP4)
                for (int b = 0; b < 37 * 20; b++) w[b * sizeof(nb_block_mxfp4)] = (uint8_t)b;
            else
                for (int b = 0; b < 37 * 10; b++)
                    for (int k = 0; k < 4; k++) w[b * sizeof(nb_block_nvfp4) + k] = (uint8_t)(4 * b + k);
            for (nb_isa isa = NB_ISA_AVX2; isa <= nb_isa_best(); isa++) {
                fill_nan(p.y_ref, 37 * nt);
                fill_nan(p.y, 37 * nt);
                CHECK(nb_matmul_isa(NB_ISA_REF, NULL, p.type, p.w, 0, 37, 640, p.x, nt, p.y_ref, NB_ROUTE_QUANT) == NB_OK,
                      "ref");
                CHECK(nb_matmul_isa(isa, NULL, p.type, p.w, 0, 37, 640, p.x, nt, p.y, NB_ROUTE_QUANT) == NB_OK, "%s",
                      nb_isa_name(isa));
                int bad = 0;
                for (int i = 0; i < 37 * nt; i++) {
                    const int both_nan = isnan(p.y[i]) && isnan(p.y_ref[i]);
                    if (memcmp(&p.y[i], &p.y_ref[i], sizeof(float)) && !both_nan && bad++ < 3)
                        CHECK(0, "%s %s y[%d] = %.9g, ref %.9g", nb_isa_name(isa), nb_type_name(p.type), i, p.y[i],
                              p.y_ref[i]);
                }
            }
            drop(&p);
        }
}

/* The reference against dequantize-then-dot in double. The quantized route also rounds the
 * activations: each x_i moves by at most half its block's step (amax/254 for Q8_0 and Q8_K), so
 * the bound is sum_i |w_i| * step_i / 2 plus float accumulation (4*n*u*sum|w*x|); the f32 route
 * has only the accumulation term. */
TEST(reference_matches_double) {
    for (int ti = 0; ti < ntypes; ti++) {
        problem p;
        int be = nb_type_get(types[ti])->block_elems;
        int64_t n = be == 256 ? 1024 : 640;
        CHECK(make(&p, types[ti], 3, n, 2), "setup");
        for (int route = 0; route < 2; route++) {
            fill_nan(p.y, 6);
            CHECK(nb_matmul_isa(NB_ISA_REF, NULL, p.type, p.w, 0, 3, n, p.x, 2, p.y, (nb_route)route) == NB_OK, "matmul");
            const nb_kernel *k = nb_kernel_get(NB_ISA_REF, p.type);
            int ab = route == NB_ROUTE_QUANT ? (k->act_type == NB_TYPE_Q8_K ? 256 : k->act_type == NB_TYPE_Q8_0 || k->act_type == NB_TYPE_Q8_1 ? 32 : 0) : 0;
            const int q8_1 = route == NB_ROUTE_QUANT && k->act_type == NB_TYPE_Q8_1;
            const size_t bb = (size_t)nb_type_get(p.type)->block_bytes, wrow = bb * (size_t)(n / 32);
            for (int t = 0; t < 2; t++)
                for (int o = 0; o < 3; o++) {
                    double exact = 0, mag = 0, qerr = 0;
                    for (int64_t i = 0; i < n; i++) {
                        double wv = p.wd[o * n + i], xv = p.x[t * n + i];
                        exact += wv * xv;
                        mag += fabs(wv * xv);
                        if (ab) {
                            double amax = 0;
                            for (int64_t j = i / ab * ab; j < i / ab * ab + ab; j++) amax = fmax(amax, fabs(p.x[t * n + j]));
                            qerr += fabs(wv) * amax / 254 * 1.0001;
                            mag += fabs(wv) * amax / 254;
                            /* Q8_1's s, d * (sum of 32 codes) by the unrounded d, rounded to fp16: the
                             * block's minimum m meets it, off by |m| * 2^-10 * d * 32 * 127 at most */
                            if (q8_1 && i % ab == 0) {
                                uint16_t m;
                                memcpy(&m, (const uint8_t *)p.w + (size_t)o * wrow + (size_t)(i / 32) * bb + 2, 2);
                                qerr += fabs(nb_fp16_to_fp32(m)) * amax / 32;
                            }
                        }
                    }
                    double got = p.y[t * 3 + o], tol = qerr + 4.0 * (double)n * 0x1p-24 * mag;
                    CHECK(fabs(got - exact) <= tol, "%s route %d y[%d,%d] = %.9g, exact %.9g, tol %.3g", nb_type_name(p.type),
                          route, t, o, got, exact, tol);
                }
        }
        drop(&p);
    }
}

/* The same matmul with 1, 2 and 3 threads gives the same bits (and equals the pool-less call; one
 * token on one thread takes a set's mm_solo where it has one, AVX2 Q4_K's 8-row tile, so this also
 * holds it to mm's bits). */
TEST(thread_count_invariance) {
    static const int tt[] = {NB_TYPE_Q8_0, NB_TYPE_Q4_K, NB_TYPE_NVFP4, NB_TYPE_F16, NB_TYPE_Q4_1, NB_TYPE_Q5_1};
    for (int ti = 0; ti < 6; ti++) {
        problem p;
        int64_t n = nb_type_get(tt[ti])->block_elems == 256 ? 512 : 128;
        CHECK(make(&p, tt[ti], 37, n, 5), "setup");
        for (int nt = 1; nt <= 5; nt += 4) {
            fill_nan(p.y_ref, 37 * 5);
            CHECK(nb_matmul(NULL, p.type, p.w, 37, n, p.x, nt, p.y_ref) == NB_OK, "matmul");
            for (int threads = 1; threads <= 3; threads++) {
                nb_pool *pool;
                CHECK(nb_pool_create(threads, &pool) == NB_OK, "pool");
                for (int rep = 0; rep < 2; rep++) {
                    fill_nan(p.y, 37 * 5);
                    CHECK(nb_matmul(pool, p.type, p.w, 37, n, p.x, nt, p.y) == NB_OK, "matmul: %s", nb_last_error());
                    CHECK(memcmp(p.y, p.y_ref, sizeof(float) * (size_t)(37 * nt)) == 0, "%s, %d threads, %d tokens differ",
                          nb_type_name(p.type), threads, nt);
                }
                nb_pool_destroy(pool);
            }
        }
        drop(&p);
    }
}

/* Activation rows that stress the quantizers: random, exact ties of x*id at k+0.5 (amax 127 and
 * 254 make id 1 and 0.5), equal magnitudes of both signs (Q8_K takes the first), zero blocks,
 * denormals (127/amax overflows), values whose d overflows fp16. n is a multiple of 256. */
static void act_row(float *x, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) x[i] = frand();
    for (int64_t b = 0; b < n; b += 32) {
        float *v = x + b;
        switch ((kind + b / 32) % 7) {
        case 0: break;
        case 1: /* id = 1: v = k + 0.5 are ties */
            for (int j = 0; j < 32; j++) v[j] = (float)((j * 37) % 255 - 127) + 0.5f;
            v[3] = 127;
            break;
        case 2: /* id = 0.5: odd integers are ties */
            for (int j = 0; j < 32; j++) v[j] = (float)(2 * ((j * 11) % 127) - 125);
            v[7] = -254;
            break;
        case 3: memset(v, 0, 32 * sizeof *v); break;
        case 4: /* both signs at the block maximum, the negative one first */
            v[2] = -3.5f, v[20] = 3.5f;
            break;
        case 5:
            for (int j = 0; j < 32; j++) v[j] = (float)(j - 16) * 1e-40f;
            break;
        case 6: v[1] = 1e20f; break;
        }
    }
}

/* The Q8_0 activation rule written out directly (kernels.h), with explicit tie cases; Q8_1's
 * codes and d are Q8_0's, its s is fp16(d * sum of codes) by the unrounded d. */
TEST(act_q8_0_reference_rule) {
    float x[256];
    nb_block_q8_0 q[8];
    nb_block_q8_1 q1[8];
    for (int kind = 0; kind < 7; kind++) {
        act_row(x, 256, kind);
        nb_act_q8_0_ref(x, q, 256);
        nb_act_q8_1_ref(x, q1, 256);
        for (int b = 0; b < 8; b++) {
            float amax = 0;
            int sum = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
            for (int j = 0; j < 32; j++) sum += q[b].qs[j]; /* apart: GCC 12 for aarch64 crashes vectorizing both at once */
            CHECK(!memcmp(q1[b].qs, q[b].qs, 32) && q1[b].d == q[b].d, "kind %d block %d: q8_1 codes and d are q8_0's", kind, b);
            /* blocks whose 127/amax overflows: every dword is INT32_MIN, 32 of them sum to 0 */
            if (isinf(127.f / amax)) sum = 0;
            CHECK(q1[b].s == nb_fp32_to_fp16(amax / 127.f * (float)sum), "kind %d block %d s", kind, b);
        }
        for (int b = 0; b < 8; b++) {
            const float *v = x + 32 * b;
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(v[j]));
            float id = amax != 0 ? 127.f / amax : 0;
            CHECK(q[b].d == nb_fp32_to_fp16(amax / 127.f), "kind %d block %d d", kind, b);
            for (int j = 0; j < 32; j++) {
                float r = nearbyintf(v[j] * id);
                int want = isfinite(r) ? (int)r : -128;
                CHECK(q[b].qs[j] == want, "kind %d block %d x %.9g: code %d, want %d", kind, b, v[j], q[b].qs[j], want);
            }
        }
    }
    /* ties go to even, away from the file rule's half-away-from-zero */
    float t[32] = {127, 0.5f, 1.5f, 2.5f, -2.5f, -0.5f, 126.5f, -3.5f};
    nb_act_q8_0_ref(t, q, 32);
    static const int8_t want[8] = {127, 0, 2, 2, -2, 0, 126, -4};
    CHECK(memcmp(q[0].qs, want, 8) == 0, "ties: %d %d %d %d %d %d %d %d", q[0].qs[0], q[0].qs[1], q[0].qs[2], q[0].qs[3],
          q[0].qs[4], q[0].qs[5], q[0].qs[6], q[0].qs[7]);
    nb_q8_0_quantize_ref(t, q, 32);
    CHECK(q[0].qs[3] == 3, "the file quantizer rounds 2.5 away from zero: %d", q[0].qs[3]);
}

/* Every ISA's activation quantizers give the reference's bytes (Q8_0, Q8_1: the rules above; Q8_K:
 * nb_q8_k_quantize_ref; Q8_0X: Q8_0 plus derived values). */
TEST(act_quantizers_match_reference) {
    const int64_t n = 2560;
    float *x = malloc(sizeof(float) * n);
    uint8_t *a = malloc(nb_act_row_bytes(NB_ACT_Q8_0X, n)), *b = malloc(nb_act_row_bytes(NB_ACT_Q8_0X, n));
    for (nb_isa isa = NB_ISA_AVX2; isa <= nb_isa_best(); isa++) {
        for (int kind = 0; kind < 40; kind++) {
            act_row(x, n, kind);
            if (kind >= 20) /* Q8_K blocks that are all ties, all tiny, or hold +-2 as the maximum (first wins) */
                for (int64_t i = 0; i < n; i++) {
                    int k3 = kind % 3, j = (int)(i % 256);
                    x[i] = k3 == 0 ? (float)(i % 255) - 127.5f : k3 == 1 ? (float)(i % 9) * 1e-39f : (float)((i * 7) % 13 - 6) * 0.1f;
                    if (k3 == 2 && (j == (kind * 8) % 200 || j == (kind * 8) % 200 + 3))
                        x[i] = (j == (kind * 8) % 200) == (kind % 2) ? 2.0f : -2.0f;
                }
            for (int at = 0; at < 4; at++) {
                int type = at == 0 ? NB_TYPE_Q8_0 : at == 1 ? NB_TYPE_Q8_K : at == 2 ? NB_ACT_Q8_0X : NB_TYPE_Q8_1;
                size_t bytes = nb_act_row_bytes(type, n);
                memset(a, 0xAA, bytes), memset(b, 0x55, bytes);
                nb_quantize_act(NB_ISA_REF, type, x, a, n);
                nb_quantize_act(isa, type, x, b, n);
                CHECK(memcmp(a, b, bytes) == 0, "%s %s activations differ from the reference (kind %d)",
                      nb_act_get(isa)->name, at == 2 ? "q8_0x" : nb_type_name(type), kind);
            }
        }
    }
    free(x), free(a), free(b);
}

static void count_rows(void *ctx, int64_t b, int64_t e) {
    int *hits = ctx;
    for (int64_t i = b; i < e; i++) hits[i]++;
}

TEST(pool_covers_every_index_once) {
    nb_pool *pool;
    CHECK(nb_pool_create(3, &pool) == NB_OK, "pool");
    CHECK(nb_pool_threads(pool) == 3, "threads");
    for (int64_t n = 0; n < 40; n += 3) {
        int hits[40] = {0};
        CHECK(nb_pool_for(pool, n, 4, count_rows, hits) == NB_OK, "for");
        for (int64_t i = 0; i < 40; i++) CHECK(hits[i] == (i < n), "n %lld index %lld hit %d times", (long long)n, (long long)i, hits[i]);
    }
    nb_pool_destroy(pool);
}

TEST(bad_arguments) {
    float x[64] = {0}, y[4];
    uint8_t w[4 * 34] = {0};
    CHECK(nb_matmul(NULL, NB_TYPE_Q8_0, w, 2, 48, x, 1, y) == NB_ERR_INVALID_ARG, "n_in 48 for q8_0");
    CHECK(strstr(nb_last_error(), "48") != NULL, "message names the length: %s", nb_last_error());
    CHECK(nb_matmul(NULL, NB_TYPE_Q4_K, w, 1, 64, x, 1, y) == NB_ERR_INVALID_ARG, "n_in 64 for q4_K");
    CHECK(nb_matmul(NULL, 10, w, 1, 256, x, 1, y) == NB_ERR_UNSUPPORTED, "q2_K has no kernel");
    CHECK(nb_matmul(NULL, NB_TYPE_Q8_K, w, 1, 256, x, 1, y) == NB_ERR_UNSUPPORTED, "q8_K is not a weight type");
    CHECK(nb_matmul(NULL, NB_TYPE_Q8_0, NULL, 1, 32, x, 1, y) == NB_ERR_INVALID_ARG, "NULL w");
    CHECK(nb_matmul(NULL, NB_TYPE_Q8_0, w, -1, 32, x, 1, y) == NB_ERR_RANGE, "negative rows");
    CHECK(nb_matmul_route(NULL, NB_TYPE_Q8_0, w, 1, 32, x, 1, y, (nb_route)7) == NB_ERR_INVALID_ARG, "bad route");
    CHECK(nb_matmul(NULL, NB_TYPE_Q8_0, w, 0, 32, x, 1, y) == NB_OK, "zero rows is a no-op");
}

/* A type runs as a weight exactly when the reference set has a kernel for it. */
TEST(weight_types_are_the_types_with_kernels) {
    const nb_type_info *t;
    for (int i = 0; (t = nb_type_at(i)); i++)
        CHECK(!nb_kernel_get(NB_ISA_REF, t->id) == !t->weight_type, "%s: weight_type %d, reference kernel %s", t->name,
              t->weight_type, nb_kernel_get(NB_ISA_REF, t->id) ? "yes" : "no");
    CHECK(ntypes > 0, "no weight types");
}

TEST(kernel_names) {
    const char *n = nb_matmul_kernel_name(NB_TYPE_Q4_K, NB_ROUTE_QUANT);
    /* the set that really runs it: the active one or a lower fallback */
    CHECK(n && strstr(n, "q4_K x q8_K") && (!strncmp(n, "ref ", 4) || !strncmp(n, "avx2 ", 5) || !strncmp(n, "avx512 ", 7)),
          "name %s", n ? n : "(null)");
    n = nb_matmul_kernel_name(NB_TYPE_MXFP4, NB_ROUTE_F32);
    CHECK(n && strstr(n, "mxfp4 x f32"), "name %s", n ? n : "(null)");
    CHECK(nb_matmul_kernel_name(NB_TYPE_Q8_K, NB_ROUTE_QUANT) == NULL, "q8_K");
    /* a Q4_0 matrix's row count chooses its kernel: 8-row copies of a multiple of 8 rows */
    n = nb_matmul_matrix_kernel_name(NB_TYPE_Q4_0, 16, NB_ROUTE_QUANT);
    CHECK(n && strstr(n, "q4_0 x q8_0 (8-row order)"), "16 rows: %s", n ? n : "(null)");
    n = nb_matmul_matrix_kernel_name(NB_TYPE_Q4_0, 12, NB_ROUTE_QUANT);
    CHECK(n && strstr(n, "q4_0 x q8_0") && !strstr(n, "8-row"), "12 rows: %s", n ? n : "(null)");
    CHECK(nb_matmul_matrix_kernel_name(NB_TYPE_Q4_0, 0, NB_ROUTE_QUANT) == nb_matmul_kernel_name(NB_TYPE_Q4_0, NB_ROUTE_QUANT),
          "n_out 0 names the type's own kernel");
}

/* A strided matrix (rows farther apart than their bytes, as a window of the transposed V cache)
 * gives the same products as the packed copy of its rows, bit for bit. */
TEST(strided_rows_match_packed) {
    const int types_s[] = {NB_TYPE_F16, NB_TYPE_F32, NB_TYPE_Q8_0, NB_TYPE_Q4_K};
    for (size_t ti = 0; ti < sizeof types_s / sizeof types_s[0]; ti++) {
        problem p;
        int64_t n = nb_type_get(types_s[ti])->block_elems == 256 ? 512 : 96;
        CHECK(make(&p, types_s[ti], 21, n, 4), "setup");
        size_t row;
        nb_row_bytes(types_s[ti], n, &row);
        const size_t stride = row + 72;
        uint8_t *wide = malloc(stride * 21);
        for (int r = 0; r < 21; r++) memcpy(wide + (size_t)r * stride, (const uint8_t *)p.w + (size_t)r * row, row);
        fill_nan(p.y, 21 * 4);
        fill_nan(p.y_ref, 21 * 4);
        CHECK(nb_matmul(NULL, p.type, p.w, 21, n, p.x, 4, p.y_ref) == NB_OK, "packed: %s", nb_last_error());
        CHECK(nb_matmul_strided(NULL, p.type, wide, stride, 21, n, p.x, 4, p.y) == NB_OK, "strided: %s", nb_last_error());
        CHECK(!memcmp(p.y, p.y_ref, sizeof(float) * 21 * 4), "%s: strided and packed differ", nb_type_name(p.type));
        CHECK(nb_matmul_strided(NULL, p.type, wide, row - 1, 21, n, p.x, 4, p.y) == NB_ERR_INVALID_ARG,
              "a stride shorter than a row must be refused");
        free(wide);
        drop(&p);
    }
}

/* Rounding to fp16 values (queries and probabilities against an F16 KV cache) and to fp16 bits
 * (the GELU table's index): every set equals the reference bit for bit, on random values, ties,
 * subnormals, overflow and an odd length. */
TEST(round_fp16_sets_match_reference) {
    enum { N = 4099 };
    static float x[N], a[N], b[N];
    static uint16_t ha[N], hb[N];
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ldexpf((float)(int32_t)s / 2147483648.0f, (int)(s % 40) - 24);
    }
    x[0] = 1.0f + 0x1p-11f, x[1] = 0x1p-25f, x[2] = 65520.0f, x[3] = -0.0f, x[4] = 3 * 0x1p-25f, x[5] = 1e-30f;
    memcpy(a, x, sizeof x);
    nb_act_get(NB_ISA_REF)->round_f16(a, N);
    nb_act_get(NB_ISA_REF)->to_f16(x, ha, N);
    for (int isa = NB_ISA_AVX2; isa <= (int)nb_isa_best(); isa++) {
        memcpy(b, x, sizeof x);
        nb_act_get((nb_isa)isa)->round_f16(b, N);
        CHECK(!memcmp(a, b, sizeof a), "%s round_f16 differs from the reference", nb_isa_name((nb_isa)isa));
        nb_act_get((nb_isa)isa)->to_f16(x, hb, N);
        CHECK(!memcmp(ha, hb, sizeof ha), "%s to_f16 differs from the reference", nb_isa_name((nb_isa)isa));
    }
    for (int i = 0; i < N; i++) CHECK(nb_fp16_to_fp32(ha[i]) == a[i] || isnan(a[i]), "to_f16 and round_f16 agree at %d", i);
    CHECK(a[0] == 1.0f && a[1] == 0.0f && isinf(a[2]) && signbit(a[3]), "ties, underflow, overflow, -0");
}

/* Softmax's exponentials: every set gives the reference's bits (values and sum), on rows with
 * masked (-inf) cells, lengths off the 8-chunks, and differences below -87 and -133, where ggml's
 * polynomial splits its power of two or returns 0 outright; the reference is e^x to a few ulps. */
TEST(softmax_exp_sets_match_reference) {
    enum { N = 45 };
    float x[N], ya[N], yb[N];
    uint32_t s = 777;
    for (int n = 1; n <= N; n += 4)
        for (int round = 0; round < 20; round++) {
            float mx = -INFINITY;
            for (int i = 0; i < n; i++) {
                s = s * 1664525u + 1013904223u;
                x[i] = (float)(int32_t)s / 2147483648.0f * (round < 10 ? 20.0f : 200.0f);
                if (s % 7 == 0) x[i] = -INFINITY;
                mx = x[i] > mx ? x[i] : mx;
            }
            if (mx == -INFINITY) x[0] = mx = 0;
            const double sa = nb_act_get(NB_ISA_REF)->softmax_exp(x, ya, n, mx);
            for (int isa = NB_ISA_AVX2; isa <= (int)nb_isa_best(); isa++) {
                const double sb = nb_act_get((nb_isa)isa)->softmax_exp(x, yb, n, mx);
                CHECK(!memcmp(ya, yb, sizeof(float) * (size_t)n) && sa == sb, "%s softmax_exp differs (n %d, round %d)",
                      nb_isa_name((nb_isa)isa), n, round);
            }
            for (int i = 0; i < n; i++) {
                const float dx = x[i] - mx; /* the difference the kernels take, rounded as theirs */
                const double e = exp((double)dx);
                CHECK(fabs(ya[i] - e) <= 4 * 0x1p-24 * e + 0x1p-149, "e^%g: %.9g, exact %.9g", (double)dx, ya[i], e);
            }
        }
}

/* The online softmax's maximum and rescaling: on every set the largest non-NaN value (-inf for
 * none: empty, all NaN, all -inf), whatever the length around the chains of 8 and 32 and wherever
 * the maximum, NaN and -inf sit; the rescaled values the correctly rounded products. */
TEST(vec_max_and_scale_sets) {
    enum { N = 80 };
    float x[N], y[N];
    uint32_t s = 99;
    for (int n = 0; n <= N; n++)
        for (int round = 0; round < 12; round++) {
            float want = -INFINITY;
            for (int i = 0; i < n; i++) {
                s = s * 1664525u + 1013904223u;
                x[i] = (float)(int32_t)s / 2147483648.0f * 50.0f;
                if (round >= 4 && s % 5 == 0) x[i] = round % 2 ? NAN : -INFINITY;
                if (round == 11) x[i] = NAN;
                if (!isnan(x[i]) && x[i] > want) want = x[i];
            }
            const float a = (float)(s >> 8) / 16777216.0f * 3.0f;
            for (int isa = NB_ISA_REF; isa <= (int)nb_isa_best(); isa++) {
                const nb_act_set *set = nb_act_get((nb_isa)isa);
                const float got = set->vec_max(x, n);
                CHECK(got == want || (isinf(got) && isinf(want) && got < 0 && want < 0), "%s vec_max %g, want %g (n %d, round %d)",
                      nb_isa_name((nb_isa)isa), (double)got, (double)want, n, round);
                memcpy(y, x, sizeof(float) * (size_t)n);
                set->vec_scale(y, n, a);
                for (int i = 0; i < n; i++) {
                    const float e = (float)((double)x[i] * a);
                    CHECK(!memcmp(&y[i], &e, sizeof e) || (isnan(y[i]) && isnan(e)), "%s vec_scale %d: %g, want %g",
                          nb_isa_name((nb_isa)isa), i, (double)y[i], (double)e);
                }
            }
        }
}

/* SiLU-gated rows: every set gives the reference's bits on lengths off the 8-chunks (the tail
 * takes libm's expf), inputs out to +-100 (e^-x overflowing and underflowing); the reference is
 * silu(x) * u to a few ulps (or 0 where e^-x overflows float, below x = -88.7). */
TEST(swiglu_sets_match_reference) {
    enum { N = 45 };
    float g[N], u[N], ya[N], yb[N];
    uint32_t s = 4242;
    for (int n = 1; n <= N; n += 4)
        for (int round = 0; round < 20; round++) {
            for (int i = 0; i < n; i++) {
                s = s * 1664525u + 1013904223u;
                g[i] = (float)(int32_t)s / 2147483648.0f * (round < 10 ? 8.0f : 100.0f);
                u[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
            }
            memcpy(ya, g, sizeof g);
            nb_act_get(NB_ISA_REF)->swiglu(ya, u, n);
            for (int isa = NB_ISA_AVX2; isa <= (int)nb_isa_best(); isa++) {
                memcpy(yb, g, sizeof g);
                nb_act_get((nb_isa)isa)->swiglu(yb, u, n);
                CHECK(!memcmp(ya, yb, sizeof(float) * (size_t)n), "%s swiglu differs (n %d, round %d)",
                      nb_isa_name((nb_isa)isa), n, round);
            }
            for (int i = 0; i < n; i++) {
                const double e = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
                CHECK(fabs(ya[i] - e) <= 8 * 0x1p-24 * fabs(e) + 0x1p-120, "silu(%g) * %g: %.9g, exact %.9g", (double)g[i],
                      (double)u[i], ya[i], e);
            }
        }
}

/* GELU-gated rows: every set gives the reference's bits on lengths off the 8s and across the
 * 256-element chunks, inputs out to +-12 (both bypasses) and NaN; the reference looks x up by its
 * fp16 bits, and passes x (x >= 10) or 0 (x <= -10). */
TEST(geglu_sets_match_reference) {
    enum { N = 531 };
    static float g[N], u[N], ya[N], yb[N];
    const float *t = nb_gelu_table();
    uint32_t s = 5151;
    for (int n = 1; n <= N; n += n < 20 ? 1 : 37)
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < n; i++) {
                s = s * 1664525u + 1013904223u;
                g[i] = (float)(int32_t)s / 2147483648.0f * (round ? 12.0f : 3.0f);
                if (round == 2 && s % 17 == 0) g[i] = NAN;
                u[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
            }
            memcpy(ya, g, sizeof(float) * (size_t)n);
            nb_act_get(NB_ISA_REF)->geglu(ya, u, n);
            for (int isa = NB_ISA_AVX2; isa <= (int)nb_isa_best(); isa++) {
                memcpy(yb, g, sizeof(float) * (size_t)n);
                nb_act_get((nb_isa)isa)->geglu(yb, u, n);
                CHECK(!memcmp(ya, yb, sizeof(float) * (size_t)n), "%s geglu differs (n %d, round %d)",
                      nb_isa_name((nb_isa)isa), n, round);
            }
            for (int i = 0; i < n; i++) {
                const float x = g[i], e = (x <= -10.0f ? 0.0f : x >= 10.0f ? x : t[nb_fp32_to_fp16(x)]) * u[i];
                CHECK(!memcmp(&ya[i], &e, sizeof e) || (isnan(ya[i]) && isnan(e)), "geglu(%g) * %g: %g, want %g",
                      (double)x, (double)u[i], (double)ya[i], (double)e);
            }
        }
}

/* RMS norm: every set gives the reference's bits for 1 to 19 rows (whole and partial groups of
 * 8, and of 4 within them), row lengths off the 4s and 8s, values from 1e-15 to 1e15 in one row,
 * in place and not; outputs start as NaN. The reference is x / sqrt(mean(x^2) + eps) * w to a few
 * ulps. (The order of a row's double sum hardly ever reaches the float result: 300,000 random rows
 * of mixed magnitudes showed no difference between element order and pairs swapped, so the sets
 * keep element order by construction, each row in one lane; a swapped product of scale and
 * weight fails here.) */
TEST(rmsnorm_sets_match_reference) {
    enum { R = 19, N = 261 };
    static float x[R * N], w[N], ya[R * N], yb[R * N];
    static const int lens[] = {1, 3, 4, 7, 8, 64, 255, 261};
    uint32_t s = 99;
    for (int li = 0; li < (int)(sizeof lens / sizeof lens[0]); li++)
        for (int rows = 1; rows <= R; rows++) {
            const int n = lens[li];
            for (int i = 0; i < rows * n; i++) {
                s = s * 1664525u + 1013904223u;
                const float mag = rows % 3 ? 4.0f : powf(10.0f, (float)((int)(s >> 24) % 31 - 15));
                x[i] = ((float)(int32_t)s / 2147483648.0f) * mag;
            }
            for (int i = 0; i < n; i++) w[i] = 0.5f + (float)((s >> (i % 16)) & 255) / 128.0f;
            const float eps = rows % 2 ? 1e-6f : 1e-5f;
            for (int i = 0; i < rows * n; i++) ya[i] = NAN;
            nb_act_get(NB_ISA_REF)->rmsnorm(ya, x, w, rows, n, eps);
            for (int isa = NB_ISA_AVX2; isa <= (int)nb_isa_best(); isa++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    if (inplace)
                        memcpy(yb, x, sizeof(float) * (size_t)(rows * n));
                    else
                        for (int i = 0; i < rows * n; i++) yb[i] = NAN;
                    nb_act_get((nb_isa)isa)->rmsnorm(yb, inplace ? yb : x, w, rows, n, eps);
                    CHECK(!memcmp(ya, yb, sizeof(float) * (size_t)(rows * n)), "%s rmsnorm differs (%d rows of %d%s)",
                          nb_isa_name((nb_isa)isa), rows, n, inplace ? ", in place" : "");
                }
            for (int r = 0; r < rows; r++) {
                double ss = 0;
                for (int i = 0; i < n; i++) ss += (double)x[r * n + i] * x[r * n + i];
                const double sc = 1.0 / sqrt(ss / n + eps);
                for (int i = 0; i < n; i++) {
                    const double e = x[r * n + i] * sc * w[i];
                    CHECK(fabs(ya[r * n + i] - e) <= 8 * 0x1p-24 * fabs(e) + 0x1p-140, "rmsnorm row %d of %d, [%d]: %.9g, "
                          "exact %.9g", r, n, i, (double)ya[r * n + i], e);
                }
            }
        }
}

/* RoPE's rotation: every set gives the reference's bits (NEOX and NORM pairs, partial rotation
 * n_rot < D leaving the rest alone, several heads), and the reference is the rotation to a few
 * ulps of each value's size (a*c - b*s with one product fused). */
TEST(rope_sets_match_reference) {
    enum { D = 64, H = 3 };
    float x[H * D], ya[H * D], yb[H * D], cs[D];
    uint32_t s = 777;
    for (int neox = 0; neox < 2; neox++)
        for (int n_rot = 2; n_rot <= D; n_rot += n_rot < 16 ? 2 : 16)
            for (int round = 0; round < 4; round++) {
                for (int i = 0; i < H * D; i++) {
                    s = s * 1664525u + 1013904223u;
                    x[i] = (float)(int32_t)s / 2147483648.0f * 4.0f;
                }
                for (int i = 0; i < n_rot / 2; i++) {
                    const float t = (float)(round * 97 + 1) * powf(10000.0f, -2.0f * (float)i / (float)n_rot);
                    cs[2 * i] = cosf(t), cs[2 * i + 1] = sinf(t);
                }
                memcpy(ya, x, sizeof x);
                nb_act_get(NB_ISA_REF)->rope(ya, H, D, n_rot, cs, neox);
                for (int isa = NB_ISA_AVX2; isa <= (int)nb_isa_best(); isa++) {
                    memcpy(yb, x, sizeof x);
                    nb_act_get((nb_isa)isa)->rope(yb, H, D, n_rot, cs, neox);
                    CHECK(!memcmp(ya, yb, sizeof x), "%s rope differs (neox %d, n_rot %d, round %d)", nb_isa_name((nb_isa)isa),
                          neox, n_rot, round);
                }
                for (int h = 0; h < H; h++)
                    for (int i = 0; i < D; i++) {
                        const int pair = i < n_rot ? (neox ? i % (n_rot / 2) : i / 2) : -1;
                        const int first = neox ? i < n_rot / 2 : i % 2 == 0, mate = neox ? (first ? i + n_rot / 2 : i - n_rot / 2)
                                                                                          : (first ? i + 1 : i - 1);
                        const double a = x[h * D + (first ? i : mate)], b = x[h * D + (first ? mate : i)];
                        const double c = pair < 0 ? 1 : cs[2 * pair], sn = pair < 0 ? 0 : cs[2 * pair + 1];
                        const double e = pair < 0 ? x[h * D + i] : first ? a * c - b * sn : a * sn + b * c;
                        CHECK(fabs(ya[h * D + i] - e) <= 4 * 0x1p-24 * (fabs(a) + fabs(b)), "rope %d/%d: %.9g, exact %.9g", i,
                              n_rot, ya[h * D + i], e);
                    }
            }
}

int main(void) {
    const nb_type_info *t;
    for (int i = 0; (t = nb_type_at(i)); i++)
        if (t->weight_type && ntypes < (int)(sizeof types / sizeof types[0])) types[ntypes++] = t->id;
    RUN(act_q8_0_reference_rule);
    RUN(act_quantizers_match_reference);
    RUN(avx2_matches_reference);
    RUN(avx2_gemm_panels_match_reference);
    RUN(avx512_gemm_panels_match_reference);
    RUN(avx512_matches_reference);
    RUN(block_route_matches_reference);
    RUN(q4_0_rows_of_8_take_the_block_order);
    RUN(q5_k_products_at_their_bound);
    RUN(avx2_small_batches_match_reference);
    RUN(avx512_small_batches_match_reference);
    RUN(small_batches_thread_count_invariance);
    RUN(float_tiles_agree_across_sets);
    RUN(fp4_scale_codes_match_reference);
    RUN(reference_matches_double);
    RUN(thread_count_invariance);
    RUN(pool_covers_every_index_once);
    RUN(bad_arguments);
    RUN(weight_types_are_the_types_with_kernels);
    RUN(kernel_names);
    RUN(strided_rows_match_packed);
    RUN(round_fp16_sets_match_reference);
    RUN(softmax_exp_sets_match_reference);
    RUN(vec_max_and_scale_sets);
    RUN(swiglu_sets_match_reference);
    RUN(geglu_sets_match_reference);
    RUN(rmsnorm_sets_match_reference);
    RUN(rope_sets_match_reference);
    return test_summary();
}
