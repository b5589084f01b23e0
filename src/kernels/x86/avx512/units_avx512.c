/*
 * units_avx512.c: the AVX-512 kernel set. The 32-element-unit kernels (Q4_0, Q5_0, Q8_0, MXFP4,
 * NVFP4 x Q8_0; body in x86/avx2/units.h) use VNNI vpdpbusd on 256-bit registers (AVX512VL),
 * one instruction for the 4-byte dot that AVX2 does in two, with the same lane partition, so
 * results stay bit-identical to the reference. Types without an AVX-512 kernel here fall back to
 * the AVX2 table (dispatch.c); the set is chosen only when the CPU reports AVX512F/BW/VL and VNNI.
 */
#include <immintrin.h>

static inline __m256i unit_dot(__m256i wabs, __m256i asigned) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), wabs, asigned);
}

#include "kernels/x86/avx2/units.h"

KERNEL(q4_0, avx512)
KERNEL(q5_0, avx512)
KERNEL(q8_0, avx512)
KERNEL(mxfp4, avx512)
KERNEL(nvfp4, avx512)

#define Q8(t, s) [NB_TYPE_##t] = {NB_TYPE_Q8_0, nb_mm_##s##_q8_0_avx512, NULL, "avx512 " #s " x q8_0", NULL, 4}

/* The float route (mm_f32 NULL here) is taken from the AVX2 entry by dispatch. */
const nb_kernel nb_kernels_avx512[NB_KERNEL_TYPES] = {
    Q8(Q4_0, q4_0), Q8(Q5_0, q5_0), Q8(Q8_0, q8_0), Q8(MXFP4, mxfp4), Q8(NVFP4, nvfp4),
};
