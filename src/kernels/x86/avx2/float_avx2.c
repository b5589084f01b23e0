/*
 * float_avx2.c: the routes with f32 activations, AVX2 + FMA + F16C, and the AVX2 kernel table.
 *
 * F32/F16/BF16 weights: floats.h, 4 rows x 2 tokens per tile. Block types on the float route
 * ("W4A32"): each row's block is decoded by the type's bit-exact dequantizer into a stack buffer
 * (at most 256 floats, stays in L1; never a weight matrix) and then used for every token of the
 * tile.
 * Summation order differs from the sequential reference: tolerance in docs/KERNELS.md.
 */
#include "formats/blocks.h"
#include "kernels/x86/avx2/avx2.h"

#define RMAX 4
#define TMAX 2

#define FL_TMAX 2
#define FL_ISA avx2
#include "kernels/x86/avx2/floats.h"

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
BLOCKS_F32(q4_1, Q4_1)
BLOCKS_F32(q5_1, Q5_1)
BLOCKS_F32(mxfp4, MXFP4)
BLOCKS_F32(nvfp4, NVFP4)
BLOCKS_F32(q4_k, Q4_K)
BLOCKS_F32(q5_k, Q5_K)
BLOCKS_F32(q6_k, Q6_K)

/* rows per tile r: matmul's row multiple, 8 for Q6_K's 8-row panels (panel.h) and RP for the types
 * with 16-row panels (the one-lane orders' panel2, MXFP4's and NB_ROUTE_BLOCK's, and Q4_K's and
 * Q5_K's in kpanel.h; their 8-lane orders' 8-row panels fit it twice), so that no row chunk ends
 * in half a panel: at 8, a long row's 64 KiB chunk (NB_PANEL_BYTES) of 8 or 24 rows left half of
 * a 16-row panel idle (docs/BENCHMARKS.md, stop 61) */
#define RP 16
#define SMALL_MAX 15 /* tokens for mm_small: from 16 most 8-lane types take panel.h's panels (Q8B: smax) */
#define Q8(t, s, f, r, act)                                                                                       \
    [NB_TYPE_##t] = {act, nb_mm_##s##_q8_0_avx2, f, "avx2 " #s " x q8_0", "avx2 " #s " x f32", r,                 \
                     .mm_small = nb_mm_##s##_small_avx2, .small_max = SMALL_MAX}
/* with NB_ROUTE_BLOCK's kernel from bmin tokens (kernels.h), against activations bact, and mm_small
 * up to smax tokens: Q4_0's and Q8_0's small batches read 1.06-1.37x the panels' speed at 16-24
 * tokens, Q5_0's 0.81-1.08x, NVFP4's 0.80-1.11x (docs/BENCHMARKS.md, stop 40) */
#define Q8B(t, s, f, r, act, bact, bmin, smax)                                                                    \
    [NB_TYPE_##t] = {act, nb_mm_##s##_q8_0_avx2, f, "avx2 " #s " x q8_0", "avx2 " #s " x f32", r,                 \
                     .mm_small = nb_mm_##s##_small_avx2, .small_max = smax, .mm_block = nb_mm_##s##_block_avx2,   \
                     .block_min = bmin, .block_act = bact, .name_block = "avx2 " #s " x q8_0 (block)"}
#define Q81(t, s)                                                                                                 \
    [NB_TYPE_##t] = {NB_TYPE_Q8_1, nb_mm_##s##_q8_1_avx2, mmf_##s, "avx2 " #s " x q8_1", "avx2 " #s " x f32", 4,      \
                     .mm_small = nb_mm_##s##_small_avx2, .small_max = SMALL_MAX}
/* K-quants with a batch order: mm_small up to 16 tokens, whose two groups of 8 in the token-lane
 * tiles (small_kt) read 1.0-1.5x the panels' speed (docs/BENCHMARKS.md, stop 40) */
#define QKB(t, s, n, f, r, bmin, bgroup)                                                                         \
    [NB_TYPE_##t] = {NB_TYPE_Q8_K, nb_mm_##s##_q8_k_avx2, f, "avx2 " n " x q8_K", "avx2 " n " x f32", r, NULL, \
                     nb_mm_##s##_batch_q8_k_avx2, bmin, bgroup, nb_mm_##s##_small_avx2, 16, 1}
#define FL(t, s)                                                                                                  \
    [NB_TYPE_##t] = {NB_TYPE_F32, nb_mm_##s##_f32_avx2, nb_mm_##s##_f32_avx2, "avx2 " #s " x f32", "avx2 " #s " x f32", 4, \
                     .mm_small = nb_mm_##s##_small_f32_avx2, .small_max = 16}

const nb_kernel nb_kernels_avx2[NB_KERNEL_TYPES] = {
    Q8B(Q4_0, q4_0, mmf_q4_0, RP, NB_ACT_Q8_0X, NB_ACT_Q8_0X, NB_BLOCK_MIN_SMALL, 24),
    Q8B(Q5_0, q5_0, mmf_q5_0, RP, NB_ACT_Q8_0X, NB_ACT_Q8_0X, NB_BLOCK_MIN_SMALL, SMALL_MAX),
    Q8B(Q8_0, q8_0, mmf_q8_0, RP, NB_TYPE_Q8_0, NB_TYPE_Q8_0, NB_BLOCK_MIN_SMALL, 24),
    Q8(MXFP4, mxfp4, mmf_mxfp4, RP, NB_ACT_Q8_0X_MX),
    [NB_KERNEL_Q4_0_X8] = {NB_ACT_Q8_0X_MX, nb_mm_q4_0x8_q8_0_avx2, mmf_q4_0, "avx2 q4_0 x q8_0 (8-row order)",
                           "avx2 q4_0 x f32", RP, .mm_small = nb_mm_q4_0x8_small_avx2, .small_max = SMALL_MAX},
    Q8B(NVFP4, nvfp4, mmf_nvfp4, RP, NB_ACT_Q8_0X_NV, NB_ACT_Q8_0X_NV, NB_BLOCK_MIN, SMALL_MAX),
    Q81(Q4_1, q4_1),
    Q81(Q5_1, q5_1),
    /* Q4_K as QKB, with its solo GEMV and NB_ROUTE_BLOCK's panels (kpanel.h) */
    [NB_TYPE_Q4_K] = {NB_TYPE_Q8_K, nb_mm_q4_k_q8_k_avx2, mmf_q4_k, "avx2 q4_K x q8_K", "avx2 q4_K x f32", RP, NULL,
                      nb_mm_q4_k_batch_q8_k_avx2, 4, 4, nb_mm_q4_k_small_avx2, 16, 1, nb_mm_q4_k_block_avx2, NB_BLOCK_MIN,
                      NB_TYPE_Q8_K, "avx2 q4_K x q8_K (block)", nb_mm_q4_k_solo_avx2},
    /* Q5_K: its tiles, and from 8 tokens its batch order (tiles, then kpanel.h's panels from 16) */
    [NB_TYPE_Q5_K] = {NB_TYPE_Q8_K, nb_mm_q5_k_q8_k_avx2, mmf_q5_k, "avx2 q5_K x q8_K", "avx2 q5_K x f32", RP, NULL,
                      nb_mm_q5_k_batch_q8_k_avx2, 8, 1},
    QKB(Q6_K, q6_k, "q6_K", mmf_q6_k, 8, 8, 1),
    FL(F32, f32),
    [NB_TYPE_F16] = {NB_TYPE_F32, nb_mm_f16_f32_avx2, nb_mm_f16_f32_avx2, "avx2 f16 x f32", "avx2 f16 x f32", 4,
                     nb_mm_f16_vec_f32_avx2, .mm_small = nb_mm_f16_small_f32_avx2, .small_max = 16},
    FL(BF16, bf16),
};
