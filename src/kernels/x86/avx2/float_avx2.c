/*
 * float_avx2.c: the routes with f32 activations, AVX2 + FMA + F16C, and the AVX2 kernel table.
 *
 * F32/F16/BF16 weights: 8 elements per step, converted in registers (vcvtph2ps for F16, a 16-bit
 * shift for BF16), 4 rows x 2 tokens per tile. Block types on the float route ("W4A32"): each
 * row's block is decoded by the type's bit-exact dequantizer into a stack buffer (at most 256
 * floats, stays in L1; never a weight matrix) and then used for every token of the tile.
 * Summation order differs from the sequential reference: tolerance in docs/KERNELS.md.
 */
#include "formats/blocks.h"
#include "kernels/x86/avx2/avx2.h"

#define RMAX 4
#define TMAX 2

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
    __m256 acc[RMAX][TMAX];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 av[TMAX];
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

#define TILE(ty, R, T)                                                                                        \
    static void ty##_##R##x##T(int64_t n, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, size_t as,  \
                               float *y, size_t ldy) {                                                         \
        tile_float(load_##ty, one_##ty, R, T, n, w, ws, rs, a, as, y, ldy);                                    \
    }
#define KERNEL(ty)                                                                                             \
    TILE(ty, 1, 1) TILE(ty, 1, 2) TILE(ty, 2, 1) TILE(ty, 2, 2)                                                \
    TILE(ty, 3, 1) TILE(ty, 3, 2) TILE(ty, 4, 1) TILE(ty, 4, 2)                                                \
    static const nb_avx2_tile_fn tiles_##ty[RMAX * TMAX] = {ty##_1x1, ty##_1x2, ty##_2x1, ty##_2x2,            \
                                                            ty##_3x1, ty##_3x2, ty##_4x1, ty##_4x2};           \
    void nb_mm_##ty##_f32_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,        \
                               int64_t nt, float *y, size_t ldy) {                                            \
        nb_avx2_tile_loop(tiles_##ty, TMAX, n, w, ws, a, as, nr, nt, y, ldy);                                  \
    }

KERNEL(f32)
KERNEL(f16)
KERNEL(bf16)

/* ------------------------------------------------------------ block types, f32 activations */

void nb_mm_blocks_f32_avx2(int type, int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,
                           int64_t nt, float *y, size_t ldy) {
    const nb_type_traits *tr = nb_type_traits_get(type);
    const int be = tr->info.block_elems, bb = tr->info.block_bytes;
    float buf[RMAX][NB_QK_K] __attribute__((aligned(32)));
    for (int64_t t0 = 0; t0 < nt; t0 += TMAX) {
        int tt = nt - t0 < TMAX ? (int)(nt - t0) : TMAX;
        for (int64_t r0 = 0; r0 < nr; r0 += RMAX) {
            int rr = nr - r0 < RMAX ? (int)(nr - r0) : RMAX;
            __m256 acc[RMAX][TMAX];
            #pragma GCC unroll 8
            for (int r = 0; r < rr; r++)
                #pragma GCC unroll 8
                for (int t = 0; t < tt; t++) acc[r][t] = _mm256_setzero_ps();
            for (int64_t b = 0; b < n / be; b++) {
                #pragma GCC unroll 8
                for (int r = 0; r < rr; r++)
                    tr->dequantize((const uint8_t *)w + (size_t)(r0 + r) * ws + (size_t)b * bb, buf[r], be);
                #pragma GCC unroll 8
                for (int t = 0; t < tt; t++) {
                    const float *x = (const float *)((const uint8_t *)a + (size_t)(t0 + t) * as) + b * be;
                    for (int j = 0; j < be; j += 8) {
                        __m256 xv = _mm256_loadu_ps(x + j);
                        #pragma GCC unroll 8
                        for (int r = 0; r < rr; r++) acc[r][t] = _mm256_fmadd_ps(_mm256_load_ps(buf[r] + j), xv, acc[r][t]);
                    }
                }
            }
            #pragma GCC unroll 8
            for (int r = 0; r < rr; r++)
                #pragma GCC unroll 8
                for (int t = 0; t < tt; t++) y[(size_t)(t0 + t) * ldy + (size_t)(r0 + r)] = nb_avx2_lane_sum(acc[r][t]);
        }
    }
}

#define BLOCKS_F32(ty, TYPE)                                                                                   \
    static void mmf_##ty(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, \
                         float *y, size_t ldy) {                                                               \
        nb_mm_blocks_f32_avx2(NB_TYPE_##TYPE, n, w, ws, a, as, nr, nt, y, ldy);                                \
    }
BLOCKS_F32(q4_0, Q4_0)
BLOCKS_F32(q5_0, Q5_0)
BLOCKS_F32(q8_0, Q8_0)
BLOCKS_F32(mxfp4, MXFP4)
BLOCKS_F32(nvfp4, NVFP4)
BLOCKS_F32(q4_k, Q4_K)
BLOCKS_F32(q5_k, Q5_K)
BLOCKS_F32(q6_k, Q6_K)

#define Q8(t, s, f) [NB_TYPE_##t] = {NB_TYPE_Q8_0, nb_mm_##s##_q8_0_avx2, f, "avx2 " #s " x q8_0", "avx2 " #s " x f32", 4}
#define QK(t, s, n, f) [NB_TYPE_##t] = {NB_TYPE_Q8_K, nb_mm_##s##_q8_k_avx2, f, "avx2 " n " x q8_K", "avx2 " n " x f32", 4}
#define FL(t, s) [NB_TYPE_##t] = {NB_TYPE_F32, nb_mm_##s##_f32_avx2, nb_mm_##s##_f32_avx2, "avx2 " #s " x f32", "avx2 " #s " x f32", 4}

const nb_kernel nb_kernels_avx2[NB_KERNEL_TYPES] = {
    Q8(Q4_0, q4_0, mmf_q4_0),
    Q8(Q5_0, q5_0, mmf_q5_0),
    Q8(Q8_0, q8_0, mmf_q8_0),
    Q8(MXFP4, mxfp4, mmf_mxfp4),
    Q8(NVFP4, nvfp4, mmf_nvfp4),
    QK(Q4_K, q4_k, "q4_K", mmf_q4_k),
    QK(Q5_K, q5_k, "q5_K", mmf_q5_k),
    QK(Q6_K, q6_k, "q6_K", mmf_q6_k),
    FL(F32, f32),
    FL(F16, f16),
    FL(BF16, bf16),
};
