/*
 * fp4.h: the reduction that the AVX2 and AVX-512 MXFP4 tiles share (their lane layouts are the
 * same at that point; the contract is in kernels.h).
 *
 * MXFP4 keeps one lane per row and token: both sets first reduce a unit to 4 dword lanes per row,
 * two rows per register ([row 0 | row 1] and [row 2 | row 3] by 128-bit half), then two rounds of
 * pair sums (vpackssdw to words, then vpmaddwd with ones: exact, since a lane's 8 products stay
 * within 12 * 127 * 8 = 12192 and a pair within 24384) give the exact unit sums of 4 rows for two
 * tokens A and B in one register,
 *   [r0 A, r2 A, r0 B, r2 B | r1 A, r3 A, r1 B, r3 B],
 * so that one conversion, one product of scales and one fma serve 8 of the contract's chains.
 */
#ifndef NB_KERNELS_X86_FP4_H
#define NB_KERNELS_X86_FP4_H

#include "kernels/x86/avx2/avx2.h"

/* The MXFP4 unit sums above from the 4-lane sums of rows (0,1) and (2,3) for tokens A and B
 * (a tile with one row pair passes it twice, a token pair of one token that token twice). */
static inline __m256i nb_mx_sums(__m256i a01, __m256i a23, __m256i b01, __m256i b23) {
    const __m256i one = _mm256_set1_epi16(1);
    const __m256i ha = _mm256_madd_epi16(_mm256_packs_epi32(a01, a23), one);
    const __m256i hb = _mm256_madd_epi16(_mm256_packs_epi32(b01, b23), one);
    return _mm256_madd_epi16(_mm256_packs_epi32(ha, hb), one);
}

/* Their scale products, weight scale times activation scale as the contract rounds them, from
 * the row pairs' scales s01 = [s0 x4 | s1 x4], s23 = [s2 x4 | s3 x4] and the tokens' da, db
 * (each in every lane). */
static inline __m256 nb_mx_scales(__m256 s01, __m256 s23, __m256 da, __m256 db) {
    return _mm256_mul_ps(_mm256_blend_ps(s01, s23, 0xAA), _mm256_shuffle_ps(da, db, 0));
}

/* An accumulator of that layout to rows r < nr of tokens t and t + 1 (where < nt), each lane
 * taken out in registers (a store and scalar reloads stall on store forwarding). */
static inline void nb_mx_store(__m256 acc, int nr, int t, int nt, float *y, size_t ldy, size_t rs) {
    const __m128 h[2] = {_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1)}; /* rows 0, 2 | 1, 3 */
    for (int b = 0; b < 2 && t + b < nt; b++)
        for (int r = 0; r < nr; r++)
            y[(size_t)(t + b) * ldy + (size_t)r * rs] =
                _mm_cvtss_f32(_mm_permutevar_ps(h[r & 1], _mm_set1_epi32(2 * b + (r >> 1))));
}

#endif
