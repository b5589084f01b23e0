/*
 * act_avx512.c: what the AVX-512 set's activation functions (nb_act_avx512, x86/avx2/act_avx2.c)
 * do in 512-bit registers rather than take from the AVX2 set: softmax's exponentials, which the
 * fused attention asks for once per score. The same operations lane by lane as the AVX2 set's
 * exp8 (ggml's polynomial), so the same bits.
 */
#include <math.h>

#include "kernels/kernels.h"
#include "kernels/x86/avx512/avx512.h"

/* e^x on 16 lanes: exp8's steps (act_avx2.c) with masks where it blends. */
static inline __m512 exp16(__m512 x) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f), z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __m512i e = _mm512_slli_epi32(_mm512_castps_si512(z), 23);
    const __m512 k = _mm512_castsi512_ps(_mm512_add_epi32(e, _mm512_castps_si512(_mm512_set1_ps(1.0f))));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_mul_ps(_mm512_set1_ps(0x1.ffffecp-1f), b));
    const __m512 plain = _mm512_fmadd_ps(j, k, k), an = _mm512_abs_ps(n);
    const __mmask16 big = _mm512_cmp_ps_mask(an, _mm512_set1_ps(126), _CMP_GT_OQ);
    if (!big) return plain;
    const __m512i g = _mm512_maskz_mov_epi32(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                             _mm512_set1_epi32((int)0x82000000u));
    const __m512 s1 = _mm512_castsi512_ps(_mm512_add_epi32(g, _mm512_set1_epi32(0x7f000000))),
                 s2 = _mm512_castsi512_ps(_mm512_sub_epi32(e, g));
    const __m512 split = _mm512_mul_ps(_mm512_fmadd_ps(s2, j, s2), s1);
    const __mmask16 huge = _mm512_cmp_ps_mask(an, _mm512_set1_ps(192), _CMP_GT_OQ);
    return _mm512_mask_blend_ps(huge, _mm512_mask_blend_ps(big, plain, split), _mm512_mul_ps(s1, s1));
}

/* nb_softmax_exp 16 at a time: the sum still takes each 8 exponentials' nb_avx2_lane_sum tree
 * (lanes i and i+4, then 0+2 and 1+3, then those two), both halves' trees at once, and adds the
 * halves' sums to its double in order, as the AVX2 set and the reference do. */
double nb_softmax_exp_avx512(const float *x, float *y, int64_t n, float max) {
    const __m512 m = _mm512_set1_ps(max), ninf = _mm512_set1_ps(-INFINITY);
    double sum = 0;
    for (int64_t i = 0; i < n; i += 16) {
        const int c = n - i < 16 ? (int)(n - i) : 16;
        const __mmask16 in = (__mmask16)((1u << c) - 1);
        const __m512 xv = _mm512_mask_loadu_ps(ninf, in, x + i);
        /* -inf (masked, or past the row) gives 0 */
        const __m512 v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(xv, ninf, _CMP_NEQ_UQ), exp16(_mm512_sub_ps(xv, m)));
        _mm512_mask_storeu_ps(y + i, in, v);
        __m512 s = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
        s = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(3, 2, 3, 2)));
        s = _mm512_add_ps(s, _mm512_permute_ps(s, _MM_SHUFFLE(1, 1, 1, 1)));
        sum += (double)_mm512_cvtss_f32(s);
        if (c > 8) sum += (double)_mm_cvtss_f32(_mm512_extractf32x4_ps(s, 2));
    }
    return sum;
}
