/*
 * units_avx2.c: Q4_0, Q5_0, Q8_0, MXFP4 and NVFP4 weights against Q8_0 activations, AVX2
 * (the kernel body is units.h; here the 4-byte dot is vpmaddubsw then vpmaddwd with ones).
 */
#include <immintrin.h>

static inline __m256i unit_dot(__m256i wabs, __m256i asigned) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, asigned), _mm256_set1_epi16(1));
}

#include "kernels/x86/avx2/units.h"

KERNEL(q4_0, avx2)
KERNEL(q5_0, avx2)
KERNEL(q8_0, avx2)
KERNEL(mxfp4, avx2)
KERNEL(nvfp4, avx2)
