/*
 * fp4.h: the reduction that the AVX2 and AVX-512 MXFP4 tiles share (their lane layouts are the
 * same at that point; the contract is in kernels.h), and the AVX-512 set's NVFP4 scale decoder
 * (AVX2's tiles read the scales from a table instead, units.h nv_pair_scales: on Zen 3 the
 * decode's conversions and shuffles cost more than the loads).
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

/* NVFP4's scales as the half table holds them (nb_ue4m3_to_fp32_half), decoded in registers in two
 * steps: nb_nv_codes takes the 16 codes of block b[i] of 4 rows (row pairs 0, 1 and 2, 3) at once,
 * nb_nv_unit_scales gives unit h's, s[j] = row pair j's [d2h, d2h, d2h+1, d2h+1 | its second
 * row's]. A code's low 7 bits shifted into an fp16's exponent and mantissa make 2^-8 times its
 * value (the biases differ by 8), exactly widened and times 128; 0x7F (NaN) is 0 as in the
 * table, and bit 7 is ignored. Each code is doubled over its two lanes as fp16, before the
 * conversion (permuting converted floats takes a vpermps per register). */
static inline __attribute__((always_inline)) __m256i nb_nv_codes(const nb_block_nvfp4 *const b[4]) {
    uint32_t d[4];
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) memcpy(&d[i], b[i]->d, 4);
    /* code pairs (d2h, d2h+1) of rows 0, 1, 0, 1 | 2, 3, 2, 3 for h = 0, 0, 1, 1 | 0, 0, 1, 1 */
    const __m128i c8 = _mm_unpacklo_epi16(_mm_insert_epi32(_mm_cvtsi32_si128((int)d[0]), (int)d[2], 1),
                                          _mm_insert_epi32(_mm_cvtsi32_si128((int)d[1]), (int)d[3], 1));
    const __m256i c = _mm256_cvtepu8_epi16(c8);
    const __m256i h = _mm256_slli_epi16(_mm256_and_si256(c, _mm256_set1_epi16(0x7F)), 7);
    return _mm256_andnot_si256(_mm256_cmpeq_epi16(c, _mm256_set1_epi16(0x7F)), h);
}

static inline __attribute__((always_inline)) void nb_nv_unit_scales(__m256i codes, int h, __m256 s[2]) {
    const __m256i dup = h ? _mm256_unpackhi_epi16(codes, codes) : _mm256_unpacklo_epi16(codes, codes);
    s[0] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(dup)), _mm256_set1_ps(128.0f));
    s[1] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(dup, 1)), _mm256_set1_ps(128.0f));
}

#endif
