/*
 * kquants_avx512.c: the Q4_K and Q6_K kernels of the AVX-512 set (body in x86/avx2/kquants.h),
 * compiled with AVX-512VL so that 32 registers hold tiles of 4 rows x 4 tokens (each block
 * decoded once per 4 tokens instead of 2), and with VNNI's vpdpwssd doing the scale multiply
 * and the add in one instruction. Same integer sums, so the same bits as the reference.
 */
#include <immintrin.h>

#define KQ_TMAX 4
#define KQ_ISA avx512
static inline __m256i kq_dot16(__m256i acc, __m256i pairs, __m256i scales) {
    return _mm256_dpwssd_epi32(acc, pairs, scales);
}

#include "kernels/x86/avx2/kquants.h"
