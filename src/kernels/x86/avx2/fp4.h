/*
 * fp4.h: the reductions that the AVX2 and AVX-512 FP4 tiles share (their lane layouts are the
 * same at that point; the contracts are in kernels.h).
 *
 * MXFP4 keeps one lane per row and token: both sets first reduce a unit to 4 dword lanes per row,
 * two rows per register ([row 0 | row 1] and [row 2 | row 3] by 128-bit half), then two rounds of
 * vphaddd give the exact unit sums of 4 rows for two tokens A and B in one register,
 *   [r0 A, r2 A, r0 B, r2 B | r1 A, r3 A, r1 B, r3 B],
 * so that one conversion, one product of scales and one fma serve 8 of the contract's chains.
 * NVFP4 keeps 8 lanes in its nibbles' order (NB_ACT_Q8_0X_NV).
 */
#ifndef NB_KERNELS_X86_FP4_H
#define NB_KERNELS_X86_FP4_H

#include "kernels/x86/avx2/avx2.h"

/* The MXFP4 unit sums above from the 4-lane sums of rows (0,1) and (2,3) for tokens A and B
 * (a tile with one row pair passes it twice, a token pair of one token that token twice). */
static inline __m256i nb_mx_sums(__m256i a01, __m256i a23, __m256i b01, __m256i b23) {
    return _mm256_hadd_epi32(_mm256_hadd_epi32(a01, a23), _mm256_hadd_epi32(b01, b23));
}

/* Their scale products, weight scale times activation scale as the contract rounds them, from
 * the row pairs' scales s01 = [s0 x4 | s1 x4], s23 = [s2 x4 | s3 x4] and the tokens' da, db
 * (each in every lane). */
static inline __m256 nb_mx_scales(__m256 s01, __m256 s23, __m256 da, __m256 db) {
    return _mm256_mul_ps(_mm256_blend_ps(s01, s23, 0xAA), _mm256_shuffle_ps(da, db, 0));
}

/* An accumulator of that layout to rows r < nr of tokens t and t + 1 (where < nt). */
static inline void nb_mx_store(__m256 acc, int nr, int t, int nt, float *y, size_t ldy, size_t rs) {
    float v[8];
    _mm256_storeu_ps(v, acc);
    for (int b = 0; b < 2 && t + b < nt; b++)
        for (int r = 0; r < nr; r++) y[(size_t)(t + b) * ldy + (size_t)r * rs] = v[4 * (r & 1) + (r >> 1) + 2 * b];
}

/* The contract's tree (nb_lane_sum) over NVFP4's lanes, which hold groups 0,1,4,5,2,3,6,7: group
 * g and g + 4 are lanes j and j + 2 of one half, and the pair sums then end as nb_avx2_lane_sum. */
static inline float nb_nv_lane_sum(__m256 v) {
    v = _mm256_add_ps(v, _mm256_permute_ps(v, 0x4E)); /* g0+g4, g1+g5 | g2+g6, g3+g7 */
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

#endif
