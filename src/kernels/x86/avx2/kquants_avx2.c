/*
 * kquants_avx2.c: the AVX2 Q4_K, Q5_K and Q6_K kernels (body in kquants.h): 16 registers hold
 * tiles of up to 4 rows x 2 tokens; the scale multiply is vpmaddwd then an add. The batch orders
 * of Q6_K and Q4_K (kernels.h) go through 8-row panels instead from 16 tokens (kpanel.h).
 */
#include <immintrin.h>

#include "formats/blocks.h"

#define KQ_TMAX 2
#define KQ_ISA avx2
static inline __m256i kq_dot16(__m256i acc, __m256i pairs, __m256i scales) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scales));
}

#include "kernels/x86/avx2/kquants.h"
