/*
 * floats.h: F32, F16 and BF16 weights against f32 activations, 8 elements per step converted in
 * registers (vcvtph2ps for F16, a 16-bit shift for BF16), tiles of 4 rows x FL_TMAX tokens. One
 * body compiled twice: by float_avx2.c (16 registers: 2 tokens) and by x86/avx512/floats_avx512.c
 * (AVX-512VL's 32 registers: 4 tokens, so each weight vector is loaded and converted once per 4
 * tokens, as attention's 4 query heads per KV head want). Each output's accumulator takes the same
 * fma sequence in either, so both give the same bits; from 17 tokens the AVX-512 set takes its
 * 16-row panels (below), in the same order. Before including, define FL_TMAX and FL_ISA
 * (the suffix of the nb_mm_<type>_f32_<isa> entry points; nb_mm_<type>_small_f32_<isa> are their small batches,
 * kernels.h's mm_small: the same tiles, each output the same fma sequence). The F16 route in
 * llama.cpp's single-row order (NB_ROUTE_VEC) takes 4 tokens in both: AVX2 by row pairs, one
 * accumulator index at a time (tile_f16_vec_jpass).
 */
#include "kernels/x86/avx2/avx2.h"
#include "kernels/x86/avx2/panel.h"

#define FL_RMAX 4
#define FL_CAT(a, b) a##b
#define FL_NAME(ty, isa) FL_CAT(nb_mm_##ty##_f32_, isa)

static inline __m256 load_f32(const void *p, int64_t i) { return _mm256_loadu_ps((const float *)p + i); }
static inline __m256 load_f16(const void *p, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
}
static inline __m256 load_bf16(const void *p, int64_t i) {
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
static inline float one_f32(const void *p, int64_t i) { return ((const float *)p)[i]; }
static inline float one_f16(const void *p, int64_t i) { return _cvtsh_ss(((const uint16_t *)p)[i]); }
static inline float one_bf16(const void *p, int64_t i) { return nb_bf16_to_fp32(((const uint16_t *)p)[i]); }

typedef __m256 (*load_fn)(const void *p, int64_t i);
typedef float (*one_fn)(const void *p, int64_t i);

static inline __attribute__((always_inline)) void tile_float(load_fn ld, one_fn one, int R, int T, int64_t n,
                                                             const uint8_t *w, size_t ws, size_t rs, const uint8_t *a,
                                                             size_t as, float *y, size_t ldy) {
    __m256 acc[FL_RMAX][FL_TMAX];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 av[FL_TMAX];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) av[t] = _mm256_loadu_ps((const float *)(a + (size_t)t * as) + i);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m256 wv = ld(w + (size_t)r * rs * ws, i);
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) acc[r][t] = _mm256_fmadd_ps(wv, av[t], acc[r][t]);
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            float s = nb_avx2_lane_sum(acc[r][t]);
            for (int64_t j = i; j < n; j++) s += one(w + (size_t)r * rs * ws, j) * ((const float *)(a + (size_t)t * as))[j];
            y[(size_t)t * ldy + (size_t)r * rs] = s;
        }
}

#define FL_TILE(ty, R, T)                                                                                     \
    static void ty##_##R##x##T(int64_t n, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, size_t as,  \
                               float *y, size_t ldy) {                                                         \
        tile_float(load_##ty, one_##ty, R, T, n, w, ws, rs, a, as, y, ldy);                                    \
    }
#if FL_TMAX == 2
#define FL_TILES_R(ty, R) FL_TILE(ty, R, 1) FL_TILE(ty, R, 2)
#define FL_TABLE(ty) {ty##_1x1, ty##_1x2, ty##_2x1, ty##_2x2, ty##_3x1, ty##_3x2, ty##_4x1, ty##_4x2}
#else
#define FL_TILES_R(ty, R) FL_TILE(ty, R, 1) FL_TILE(ty, R, 2) FL_TILE(ty, R, 3) FL_TILE(ty, R, 4)
#define FL_TABLE(ty)                                                                                          \
    {ty##_1x1, ty##_1x2, ty##_1x3, ty##_1x4, ty##_2x1, ty##_2x2, ty##_2x3, ty##_2x4,                          \
     ty##_3x1, ty##_3x2, ty##_3x3, ty##_3x4, ty##_4x1, ty##_4x2, ty##_4x3, ty##_4x4}
#endif
#if FL_TMAX == 4
/*
 * Many tokens in the AVX-512 set (FL_TMAX 4), on panels of 16 rows in 512-bit registers: the
 * tiles' order, lane j of an output summing elements j, j + 8, ... by one fma each from +0, then
 * nb_lane_sum's tree, but with the 8 lanes of the panel's rows held as 8 registers (dword r of
 * lane register j: row r's lane j), so that one fma, the token's element broadcast from memory,
 * serves every row of the panel, and the tree runs elementwise over the lane registers: no
 * horizontal sums, and each weight is converted once per FL_PT tokens instead of once per tile. Attention's score and value products (F16 cells against 16 tokens' queries) are
 * its users. Rows whose length is not a multiple of 8 take the tiles (their tail is added after
 * the tree there). The same panels of 8 rows in 256-bit registers measured slower than AVX2's
 * 4 x 2 tiles (bench_gemm, F16 on attention's shapes at 32 and 64 tokens: 0.75-0.85x), so the
 * AVX2 set has none.
 */
#define FL_PR 16 /* rows per panel */
#define FL_PG 8  /* tokens per register tile: 2 x 8 accumulators, two lanes at a time */
#define FL_PU 32 /* units of 8 elements per chunk: 16 KiB of panel */
#define FL_PT 64 /* tokens whose lane sums are kept between chunks (32 KiB) */
#define FL_PANEL_MIN 17 /* from here on (up to 16 tokens: the small-batch tiles) */
typedef struct {
    __m512 w[FL_PU][8]; /* [unit u][lane j] dword r: row r's element 8u + j */
} fl_panel;

/* Units u0 .. u0+un-1 of `rows` rows (of FL_PR; the others zero) into the panel, 8 rows at a time
 * (nb_transpose8, panel.h). */
static inline void fl_decode(load_fn ld, const uint8_t *w, size_t ws, int rows, int64_t u0, int un, fl_panel *p) {
    for (int u = 0; u < un; u++)
        for (int h = 0; h < 2; h++) {
            __m256i v[8];
            for (int r = 0; r < 8; r++)
                v[r] = 8 * h + r < rows ? _mm256_castps_si256(ld(w + (size_t)(8 * h + r) * ws, 8 * (u0 + u))) : _mm256_setzero_si256();
            nb_transpose8(v); /* v[j] dword r: row 8h + r's element 8u + j */
            for (int j = 0; j < 8; j++) {
                __m256 *half = (__m256 *)&p->w[u][j] + h;
                *half = _mm256_castsi256_ps(v[j]);
            }
        }
}

/* T tokens (floats, as bytes apart, from the chunk's first element) against the chunk: lane
 * registers acc[t][j] continued, or started from +0 when first. */
static inline __attribute__((always_inline)) void fl_tokens(int T, const fl_panel *p, int un, const uint8_t *a,
                                                            size_t as, __m512 acc[][8], int first) {
    #pragma GCC unroll 1
    for (int j = 0; j < 8; j += 2) {
        __m512 c0[FL_PG], c1[FL_PG];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            c0[t] = first ? _mm512_setzero_ps() : acc[t][j];
            c1[t] = first ? _mm512_setzero_ps() : acc[t][j + 1];
        }
        for (int u = 0; u < un; u++) {
            const __m512 w0 = p->w[u][j], w1 = p->w[u][j + 1];
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const float *at = (const float *)(a + (size_t)t * as) + 8 * u + j;
                c0[t] = _mm512_fmadd_ps(w0, _mm512_set1_ps(at[0]), c0[t]);
                c1[t] = _mm512_fmadd_ps(w1, _mm512_set1_ps(at[1]), c1[t]);
            }
        }
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[t][j] = c0[t], acc[t][j + 1] = c1[t];
    }
}

/* nb_lane_sum's tree over the lane registers: the panel's rows' results, stored at y. */
static inline void fl_store(const __m512 l[8], int rows, float *y) {
    const __m512 s0 = _mm512_add_ps(l[0], l[4]), s1 = _mm512_add_ps(l[1], l[5]);
    const __m512 s2 = _mm512_add_ps(l[2], l[6]), s3 = _mm512_add_ps(l[3], l[7]);
    _mm512_mask_storeu_ps(y, (__mmask16)((1u << rows) - 1), _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3)));
}

static inline __attribute__((always_inline)) void fl_panel_gemm(load_fn ld, int64_t n, const uint8_t *w, size_t ws,
                                                                const uint8_t *a, size_t as, int64_t nr, int64_t nt,
                                                                float *y, size_t ldy) {
    fl_panel p;
    __m512 acc[FL_PT][8];
    const int64_t nu = n / 8;
    for (int64_t r0 = 0; r0 < nr; r0 += FL_PR) {
        const int rows = nr - r0 < FL_PR ? (int)(nr - r0) : FL_PR;
        for (int64_t t0 = 0; t0 < nt; t0 += FL_PT) {
            const int tn = nt - t0 < FL_PT ? (int)(nt - t0) : FL_PT;
            for (int64_t u0 = 0; u0 < nu; u0 += FL_PU) {
                const int un = nu - u0 < FL_PU ? (int)(nu - u0) : FL_PU;
                if (nu > FL_PU || t0 == 0) fl_decode(ld, w + (size_t)r0 * ws, ws, rows, u0, un, &p);
                const uint8_t *au = a + (size_t)t0 * as + (size_t)u0 * 8 * sizeof(float);
                for (int t = 0; t < tn; t += FL_PG) {
                    const uint8_t *at = au + (size_t)t * as;
                    switch (tn - t < FL_PG ? tn - t : FL_PG) {
                    case 1: fl_tokens(1, &p, un, at, as, acc + t, u0 == 0); break;
                    case 2: fl_tokens(2, &p, un, at, as, acc + t, u0 == 0); break;
                    case 3: fl_tokens(3, &p, un, at, as, acc + t, u0 == 0); break;
                    case 4: fl_tokens(4, &p, un, at, as, acc + t, u0 == 0); break;
                    case 5: fl_tokens(5, &p, un, at, as, acc + t, u0 == 0); break;
                    case 6: fl_tokens(6, &p, un, at, as, acc + t, u0 == 0); break;
                    case 7: fl_tokens(7, &p, un, at, as, acc + t, u0 == 0); break;
                    default: fl_tokens(FL_PG, &p, un, at, as, acc + t, u0 == 0);
                    }
                }
            }
            for (int t = 0; t < tn; t++) fl_store(acc[t], rows, y + (size_t)(t0 + t) * ldy + r0);
        }
    }
}
#define FL_GEMM(ty)                                                                                            \
    if (nt >= FL_PANEL_MIN && n % 8 == 0) {                                                                    \
        fl_panel_gemm(load_##ty, n, w, ws, a, as, nr, nt, y, ldy);                                             \
        return;                                                                                                \
    }
#else
#define FL_GEMM(ty)
#endif

#define FL_KERNEL(ty)                                                                                          \
    FL_TILES_R(ty, 1) FL_TILES_R(ty, 2) FL_TILES_R(ty, 3) FL_TILES_R(ty, 4)                                    \
    static const nb_avx2_tile_fn tiles_##ty[FL_RMAX * FL_TMAX] = FL_TABLE(ty);                                 \
    void FL_NAME(ty, FL_ISA)(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,         \
                             int64_t nt, float *y, size_t ldy) {                                              \
        FL_GEMM(ty)                                                                                            \
        nb_avx2_tile_loop(tiles_##ty, FL_TMAX, n, w, ws, a, as, nr, nt, y, ldy);                               \
    }                                                                                                          \
    void FL_NAME(ty##_small, FL_ISA)(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, \
                                     int64_t nt, float *y, size_t ldy) {                                      \
        nb_avx2_tile_loop_small(tiles_##ty, FL_TMAX, n, w, ws, a, as, nr, nt, y, ldy);                         \
    }

FL_KERNEL(f32)
FL_KERNEL(f16)
FL_KERNEL(bf16)

/* F16 in llama.cpp's single-row order (NB_ROUTE_VEC, kernels/api.h): four accumulators per output.
 * Row wr's outputs for T <= 4 tokens from their accumulators acc[t][0..3]: lanes m + (m+4) of
 * each token's (0+2)+(1+3), then one vphaddps tree for the tokens (lane t of the result is
 * ((u0+u1)+(u2+u3)) of token t), the elements past the last multiple of 32 added in double. */
static inline __attribute__((always_inline)) void f16_vec_store(int T, __m256 acc[][4], const uint8_t *wr,
                                                                int64_t np, int64_t n, const uint8_t *a, size_t as,
                                                                float *y, size_t ldy) {
    __m128 u[4];
    #pragma GCC unroll 4
    for (int t = 0; t < 4; t++) {
        if (t < T) {
            const __m256 s = _mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][2]), _mm256_add_ps(acc[t][1], acc[t][3]));
            u[t] = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
        } else {
            u[t] = _mm_setzero_ps();
        }
    }
    float v[4];
    _mm_storeu_ps(v, _mm_hadd_ps(_mm_hadd_ps(u[0], u[1]), _mm_hadd_ps(u[2], u[3])));
    #pragma GCC unroll 4
    for (int t = 0; t < T; t++) {
        if (np < n) {
            double sum = v[t];
            const float *at = (const float *)(a + (size_t)t * as);
            for (int64_t i = np; i < n; i++) sum += (double)(one_f16(wr, i) * at[i]);
            v[t] = (float)sum;
        }
        y[(size_t)t * ldy] = v[t];
    }
}

/* A tile's rows one at a time against its T <= FL_TMAX tokens, the 4*T accumulators in registers. */
static inline __attribute__((always_inline)) void tile_f16_vec(int R, int T, int64_t n, const uint8_t *w, size_t ws,
                                                               size_t rs, const uint8_t *a, size_t as, float *y,
                                                               size_t ldy) {
    const int64_t np = n & ~(int64_t)31;
    for (int r = 0; r < R; r++) {
        const uint8_t *wr = w + (size_t)r * rs * ws;
        __m256 acc[FL_TMAX][4];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++)
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) acc[t][j] = _mm256_setzero_ps();
        for (int64_t i = 0; i < np; i += 32) {
            /* the next row's same 64 bytes: decode attention's transposed V rows are short runs
             * 2 * n_cells bytes apart, each a stream the hardware prefetcher meets cold */
            _mm_prefetch((const char *)(wr + rs * ws) + 2 * i, _MM_HINT_T0);
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                const __m256 wv = load_f16(wr, i + 8 * j);
                #pragma GCC unroll 8
                for (int t = 0; t < T; t++)
                    acc[t][j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps((const float *)(a + (size_t)t * as) + i + 8 * j), acc[t][j]);
            }
        }
        f16_vec_store(T, acc, wr, np, n, a, as, y + (size_t)r * rs, ldy);
    }
}

#if FL_TMAX == 2
/* AVX2's 16 registers hold one row's accumulators for 2 tokens, so against 3 or 4 tokens (decode
 * attention's query heads) tile_f16_vec converts each element twice and loads a query vector per
 * fma. Here the rows go by in pairs once per accumulator index j instead (elements 32i + 8j ..
 * 32i + 8j + 7), that index's 2 x T accumulators in registers, the others parked meanwhile: each
 * element converted once, each query vector loaded once for both rows. Rows longer than JP_CHUNK
 * elements go a chunk at a time, so that the tokens' part stays in L1 for all 4 x R/2 passes
 * (unfused attention's transposed V rows are as long as the context). Every accumulator takes
 * the same fmas in the same order, so the bits are tile_f16_vec's. */
enum { JP_CHUNK = 512 };

/* Index j's elements in i0 .. i1-1 of row w0 (and w1 when P == 2) into the T tokens' accumulators
 * c0 (c1); the rows `next` bytes on are asked for as tile_f16_vec asks for its next row. */
static inline __attribute__((always_inline)) void jpass_span(int P, int T, int j, const uint8_t *w0, const uint8_t *w1,
                                                             size_t next, const uint8_t *a, size_t as, int64_t i0,
                                                             int64_t i1, __m256 c0[4], __m256 c1[4]) {
    for (int64_t i = i0 + 8 * j; i < i1; i += 32) {
        if (j == 0) {
            _mm_prefetch((const char *)(w0 + next) + 2 * i, _MM_HINT_T0);
            if (P == 2) _mm_prefetch((const char *)(w1 + next) + 2 * i, _MM_HINT_T0);
        }
        const __m256 x0 = load_f16(w0, i), x1 = P == 2 ? load_f16(w1, i) : x0;
        #pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const __m256 q = _mm256_loadu_ps((const float *)(a + (size_t)t * as) + i);
            c0[t] = _mm256_fmadd_ps(x0, q, c0[t]);
            if (P == 2) c1[t] = _mm256_fmadd_ps(x1, q, c1[t]);
        }
    }
}

static inline __attribute__((always_inline)) void tile_f16_vec_jpass(int R, int T, int64_t n, const uint8_t *w,
                                                                     size_t ws, size_t rs, const uint8_t *a, size_t as,
                                                                     float *y, size_t ldy) {
    const int64_t np = n & ~(int64_t)31;
    const size_t next = 2 * rs * ws; /* the next pair */
    __m256 acc[4][4][4];             /* [row][token][j] */
    if (np <= JP_CHUNK) {            /* one pair after another, each index's pass from +0 (kept
                                      * apart: one chunk loop for both measured slower at decode) */
        for (int r = 0; r < R; r += 2) {
            const int P = R - r < 2 ? 1 : 2;
            const uint8_t *w0 = w + (size_t)r * rs * ws, *w1 = w0 + rs * ws;
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __m256 c0[4], c1[4];
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) c0[t] = c1[t] = _mm256_setzero_ps();
                jpass_span(P, T, j, w0, w1, next, a, as, 0, np, c0, c1);
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) acc[r][t][j] = c0[t], acc[r + 1][t][j] = c1[t];
            }
        }
    } else { /* chunk by chunk, every pair's accumulators parked between chunks (all 4 rows' set, so
              * that a lone last row's pair reads defined values) */
        #pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            #pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                #pragma GCC unroll 4
                for (int j = 0; j < 4; j++) acc[r][t][j] = _mm256_setzero_ps();
        for (int64_t c = 0; c < np; c += JP_CHUNK) {
            const int64_t ce = np - c < JP_CHUNK ? np : c + JP_CHUNK;
            for (int r = 0; r < R; r += 2) {
                const int P = R - r < 2 ? 1 : 2;
                const uint8_t *w0 = w + (size_t)r * rs * ws, *w1 = w0 + rs * ws;
                for (int j = 0; j < 4; j++) {
                    __m256 c0[4], c1[4];
                    #pragma GCC unroll 4
                    for (int t = 0; t < T; t++) c0[t] = acc[r][t][j], c1[t] = acc[r + 1][t][j];
                    jpass_span(P, T, j, w0, w1, next, a, as, c, ce, c0, c1);
                    #pragma GCC unroll 4
                    for (int t = 0; t < T; t++) acc[r][t][j] = c0[t], acc[r + 1][t][j] = c1[t];
                }
            }
        }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++) f16_vec_store(T, acc[r], w + (size_t)r * rs * ws, np, n, a, as, y + (size_t)r * rs, ldy);
}
#endif

#define FL_VTILE(R, T, body)                                                                                  \
    static void f16_vec_##R##x##T(int64_t n, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a,         \
                                  size_t as, float *y, size_t ldy) {                                          \
        body(R, T, n, w, ws, rs, a, as, y, ldy);                                                              \
    }
/* Up to 4 tokens in either set: AVX2 takes 3 and 4 by row pairs per accumulator index. */
#if FL_TMAX == 2
#define FL_VTILES_R(R)                                                                                        \
    FL_VTILE(R, 1, tile_f16_vec) FL_VTILE(R, 2, tile_f16_vec) FL_VTILE(R, 3, tile_f16_vec_jpass)                \
    FL_VTILE(R, 4, tile_f16_vec_jpass)
#else
#define FL_VTILES_R(R)                                                                                        \
    FL_VTILE(R, 1, tile_f16_vec) FL_VTILE(R, 2, tile_f16_vec) FL_VTILE(R, 3, tile_f16_vec) FL_VTILE(R, 4, tile_f16_vec)
#endif
FL_VTILES_R(1) FL_VTILES_R(2) FL_VTILES_R(3) FL_VTILES_R(4)
static const nb_avx2_tile_fn tiles_f16_vec[FL_RMAX * 4] = {
    f16_vec_1x1, f16_vec_1x2, f16_vec_1x3, f16_vec_1x4, f16_vec_2x1, f16_vec_2x2, f16_vec_2x3, f16_vec_2x4,
    f16_vec_3x1, f16_vec_3x2, f16_vec_3x3, f16_vec_3x4, f16_vec_4x1, f16_vec_4x2, f16_vec_4x3, f16_vec_4x4};
void FL_NAME(f16_vec, FL_ISA)(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                              float *y, size_t ldy) {
    nb_avx2_tile_loop(tiles_f16_vec, 4, n, w, ws, a, as, nr, nt, y, ldy);
}
