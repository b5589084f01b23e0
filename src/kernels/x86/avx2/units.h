/*
 * units.h: the 32-element-unit kernels (Q4_0, Q5_0, Q8_0, MXFP4, NVFP4 weights x Q8_0
 * activations), written once and compiled per ISA. The including file defines
 *   static inline __m256i unit_dot(__m256i wabs, __m256i asigned)
 * returning, in int32 lane k, the exact sum of the 4 byte products 4k..4k+3 (vpmaddubsw +
 * vpmaddwd on AVX2), and then instantiates KERNEL(type, isa). (The AVX-512 set has its own
 * two-rows-per-register kernels: x86/avx512/units_avx512.c.)
 *
 * Every type is read as 32-element units (a block; NVFP4: half a block) decoded in registers to
 * 32 signed bytes in element order plus 8 lane scales. The product uses the sign trick:
 * |w| unsigned times a*sign(w) signed (|w| <= 128 and |a| <= 127 keep vpmaddubsw's int16 pair
 * sums below 32767), which yields lane k = elements 4k..4k+3 exactly, as the lane contract in
 * kernels.h requires. A tile holds R weight rows x T activation rows in registers: each unit is
 * decoded once per tile and each activation unit loaded once per tile.
 */
#ifndef NB_KERNELS_X86_UNITS_H
#define NB_KERNELS_X86_UNITS_H

#include <string.h>

#include "formats/blocks.h"
#include "formats/codes.h"
#include "kernels/x86/avx2/avx2.h"

typedef struct {
    __m256i q; /* 32 signed weights, element order */
    __m256 s;  /* weight scale per lane */
} unit;

/* 16 packed bytes -> low nibbles (elements 0..15) then high nibbles (16..31). */
static inline __m256i nibbles(const uint8_t *p) {
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    __m128i m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

static inline __m256 fp16_bcast(uint16_t h) { return _mm256_set1_ps(_cvtsh_ss(h)); }

static inline __m256i e2m1_table(void) {
    __m128i t = _mm_loadu_si128((const __m128i *)nb_e2m1_doubled);
    return _mm256_set_m128i(t, t);
}

static inline unit dec_q4_0(const uint8_t *row, int64_t u) {
    const nb_block_q4_0 *b = (const nb_block_q4_0 *)row + u;
    return (unit){_mm256_sub_epi8(nibbles(b->qs), _mm256_set1_epi8(8)), fp16_bcast(b->d)};
}

static inline unit dec_q5_0(const uint8_t *row, int64_t u) {
    const nb_block_q5_0 *b = (const nb_block_q5_0 *)row + u;
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    /* byte i <- byte i/8 of qh, then test bit i%8: 0xFF where the fifth bit is set */
    __m256i x = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                                    _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(x, bit), bit);
    /* q - 16 = nibble when the bit is set, nibble - 16 (= nibble | 0xF0) when it is not */
    __m256i q = _mm256_or_si256(nibbles(b->qs), _mm256_andnot_si256(set, _mm256_set1_epi8((char)0xF0)));
    return (unit){q, fp16_bcast(b->d)};
}

static inline unit dec_q8_0(const uint8_t *row, int64_t u) {
    const nb_block_q8_0 *b = (const nb_block_q8_0 *)row + u;
    return (unit){_mm256_loadu_si256((const __m256i *)b->qs), fp16_bcast(b->d)};
}

static inline unit dec_mxfp4(const uint8_t *row, int64_t u) {
    const nb_block_mxfp4 *b = (const nb_block_mxfp4 *)row + u;
    return (unit){_mm256_shuffle_epi8(e2m1_table(), nibbles(b->qs)), _mm256_set1_ps(nb_e8m0_half_table[b->e])};
}

static inline unit dec_nvfp4(const uint8_t *row, int64_t u) {
    const nb_block_nvfp4 *b = (const nb_block_nvfp4 *)row + u / 2;
    int h = (int)(u & 1);
    __m128i x = _mm_loadu_si128((const __m128i *)(b->qs + 16 * h));
    __m128i m = _mm_set1_epi8(15);
    __m128i lo = _mm_and_si128(x, m), hi = _mm_and_si128(_mm_srli_epi16(x, 4), m);
    /* sub-block s: bytes 8s..8s+7, low nibbles are its elements 0..7, high nibbles 8..15 */
    __m256i idx = _mm256_set_m128i(_mm_unpackhi_epi64(lo, hi), _mm_unpacklo_epi64(lo, hi));
    __m256 s = _mm256_set_m128(_mm_set1_ps(nb_ue4m3_half_table[b->d[2 * h + 1]]),
                               _mm_set1_ps(nb_ue4m3_half_table[b->d[2 * h]]));
    return (unit){_mm256_shuffle_epi8(e2m1_table(), idx), s};
}

typedef unit (*dec_fn)(const uint8_t *row, int64_t u);

/* Weight bytes per unit and row (NVFP4: half a block), for the prefetch. */
enum { q4_0_unit_bytes = 18, q5_0_unit_bytes = 22, q8_0_unit_bytes = 34, mxfp4_unit_bytes = 17, nvfp4_unit_bytes = 18 };

#define RMAX 4
#define TMAX 3

static inline __attribute__((always_inline)) void tile(dec_fn dec, int ub, int R, int T, int64_t nu, const uint8_t *w,
                                                       size_t ws, size_t rs, const uint8_t *a, size_t as, float *y,
                                                       size_t ldy) {
    __m256 acc[RMAX][TMAX];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t u = 0; u < nu; u++) {
        __m256i aq[TMAX];
        __m256 ad[TMAX];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const nb_block_q8_0 *ab = (const nb_block_q8_0 *)(a + (size_t)t * as) + u;
            aq[t] = _mm256_loadu_si256((const __m256i *)ab->qs);
            ad[t] = fp16_bcast(ab->d);
        }
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            _mm_prefetch((const char *)w + (size_t)r * rs * ws + u * ub + NB_PREFETCH_BYTES, _MM_HINT_T0);
            unit wv = dec(w + (size_t)r * rs * ws, u);
            __m256i wa = _mm256_abs_epi8(wv.q);
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                __m256i p = unit_dot(wa, _mm256_sign_epi8(aq[t], wv.q));
                acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(wv.s, ad[t]), _mm256_cvtepi32_ps(p), acc[r][t]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) y[(size_t)t * ldy + (size_t)r * rs] = nb_avx2_lane_sum(acc[r][t]);
}

#define TILE(ty, R, T)                                                                                   \
    static void tile_##ty##_##R##x##T(int64_t nu, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, \
                                       size_t as, float *y, size_t ldy) {                                 \
        tile(dec_##ty, ty##_unit_bytes, R, T, nu, w, ws, rs, a, as, y, ldy);                              \
    }
#define TILES_R(ty, R) TILE(ty, R, 1) TILE(ty, R, 2) TILE(ty, R, 3)
#define KERNEL(ty, isa)                                                                                       \
    TILES_R(ty, 1) TILES_R(ty, 2) TILES_R(ty, 3) TILES_R(ty, 4)                                               \
    static const nb_avx2_tile_fn tiles_##ty[RMAX * TMAX] = {                                                  \
        tile_##ty##_1x1, tile_##ty##_1x2, tile_##ty##_1x3, tile_##ty##_2x1, tile_##ty##_2x2, tile_##ty##_2x3,   \
        tile_##ty##_3x1, tile_##ty##_3x2, tile_##ty##_3x3, tile_##ty##_4x1, tile_##ty##_4x2, tile_##ty##_4x3,   \
    };                                                                                                        \
    void nb_mm_##ty##_q8_0_##isa(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,   \
                                int64_t nt, float *y, size_t ldy) {                                          \
        nb_avx2_tile_loop(tiles_##ty, TMAX, n / 32, w, ws, a, as, nr, nt, y, ldy);                            \
    }

#endif
