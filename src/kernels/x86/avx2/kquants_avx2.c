/*
 * kquants_avx2.c: the AVX2 Q4_K and Q6_K kernels (body in kquants.h): 16 registers hold tiles of
 * up to 4 rows x 2 tokens; the scale multiply is vpmaddwd then an add.
 */
#include <immintrin.h>

#define KQ_TMAX 2
#define KQ_ISA avx2
static inline __m256i kq_dot16(__m256i acc, __m256i pairs, __m256i scales) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scales));
}

#include "kernels/x86/avx2/kquants.h"
