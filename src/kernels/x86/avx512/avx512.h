/*
 * avx512.h: what the AVX-512 kernel files share (compiled with AVX-512F/BW/VL and VNNI; only
 * reached through dispatch when the CPU has them).
 */
#ifndef NB_KERNELS_AVX512_H
#define NB_KERNELS_AVX512_H

#include "kernels/x86/avx2/avx2.h"

/* acc + the sums of 4 products of q's unsigned bytes by the 4 signed bytes at a4, per dword
 * (vpdpbusd): the GEMM panels' group sum of 4 weights for 8 rows and a token. The bytes at a4
 * are broadcast by the instruction itself ({1to8}), which GCC does not fold from a set1 of them:
 * a separate vpbroadcastd per group and token took 30 % of a K-quant panel's time. */
typedef struct {
    int8_t b[4];
} nb_avx512_dword;
static inline __m256i nb_avx512_codes4(__m256i acc, __m256i q, const int8_t *a4) {
    __asm__("vpdpbusd %[a]%{1to8%}, %[q], %[acc]" : [acc] "+v"(acc) : [q] "v"(q), [a] "m"(*(const nb_avx512_dword *)a4));
    return acc;
}
/* The same for the 16 rows of a 512-bit panel register. */
static inline __m512i nb_avx512_codes16(__m512i acc, __m512i q, const int8_t *a4) {
    __asm__("vpdpbusd %[a]%{1to16%}, %[q], %[acc]" : [acc] "+v"(acc) : [q] "v"(q), [a] "m"(*(const nb_avx512_dword *)a4));
    return acc;
}

/* Two 8-row panel registers as one of 16 rows (lo: rows 0-7). */
static inline __m512i nb_avx512_join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
static inline __m512 nb_avx512_joinf(__m256 lo, __m256 hi) {
    return _mm512_castsi512_ps(nb_avx512_join(_mm256_castps_si256(lo), _mm256_castps_si256(hi)));
}

/* v[r] holds rows r and r + 8 (256-bit halves) of 8 dwords each: after it, dword r of v[k] is row
 * r's dword k. nb_transpose8's steps (which work within 128-bit lanes), and a two-source permute
 * for the last. */
static inline __attribute__((always_inline)) void nb_avx512_transpose8x2(__m512i v[8]) {
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    __m512i t[8], h[8];
    #pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
    }
    #pragma GCC unroll 2
    for (int i = 0; i < 8; i += 4)
        #pragma GCC unroll 2
        for (int j = 0; j < 2; j++) {
            h[i + 2 * j] = _mm512_unpacklo_epi64(t[i + j], t[i + j + 2]);
            h[i + 2 * j + 1] = _mm512_unpackhi_epi64(t[i + j], t[i + j + 2]);
        }
    #pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        v[k] = _mm512_permutex2var_epi64(h[k], lo, h[k + 4]);
        v[k + 4] = _mm512_permutex2var_epi64(h[k], hi, h[k + 4]);
    }
}

/* The 4 rows of a tile are rows 0, rs, 2rs, 3rs from w, so that a GEMV over short rows can draw
 * them from four distant parts of the matrix (nb_avx2_tile_loop). A tile with nr < 4 valid rows
 * repeats its last row (same instructions, surplus results dropped). */
static inline void nb_avx512_tile_rows(const uint8_t *p[4], const uint8_t *w, size_t ws, size_t rs, int nr) {
    for (int i = 0; i < 4; i++) p[i] = w + (size_t)(i < nr ? i : nr - 1) * rs * ws;
}

/* 16 bytes at the same offset of the 4 rows, row i in 128-bit lane i. */
static inline __m512i nb_avx512_rows16(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2, const uint8_t *p3) {
    __m512i z = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p0));
    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)p1), 1);
    z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)p2), 2);
    return _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)p3), 3);
}

#endif
