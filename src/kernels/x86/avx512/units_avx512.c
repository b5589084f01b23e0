/*
 * units_avx512.c: Q4_0, Q5_0, Q8_0, MXFP4 and NVFP4 weights against Q8_0 activations with
 * AVX-512 (F/BW/VL) and VNNI, bit-identical to the reference (lane contract in kernels.h).
 *
 * A 512-bit register holds one 32-element unit of two weight rows (row 2i in the low half, row
 * 2i+1 in the high half), so every instruction serves two rows while each half keeps the 8-lane
 * partition of the contract: lane k of a half gets elements 4k..4k+3 of its row's unit.
 * vpdpbusd multiplies unsigned by signed bytes and AVX-512 has no vpsignb, so weights are biased
 * to unsigned (u = w + 128, folded into each decoder) and the bias is taken out exactly through
 * the accumulator's start value: dpbusd(-128*sum4(a), u, a) = sum4(w*a). The activations come as
 * NB_ACT_Q8_0X (kernels.h): the Q8_0 codes with -128*sum4(a) and the f32 scale computed once per
 * matmul, so that the per-row work has no activation arithmetic at all. Integer sums are exact,
 * so the lane values and the fma sequence are the reference's.
 *
 * Tiles are 4 rows x up to 4 tokens: each weight unit is decoded once per tile (each row
 * prefetched NB_PREFETCH_BYTES ahead) and each activation unit loaded once per tile; the four rows' scales come in one register ("slots")
 * and are spread over the lanes by one permute per row pair. A tile with fewer than 4 valid rows
 * repeats its last row (same instructions, surplus results dropped).
 */
#include <immintrin.h>
#include <string.h>

#include "formats/blocks.h"
#include "formats/codes.h"
#include "kernels/x86/avx2/avx2.h"

#define RT 4   /* rows per tile */
#define TMAX 4 /* tokens per tile */

/* Biased codes of rows 0,1 and 2,3 of a tile and the scales: slots[i] is row i's scale (one
 * scale per unit), or slots[2i], slots[2i+1] are row i's scales of elements 0-15 and 16-31. */
typedef struct {
    __m512i u01, u23;
    __m256 slots;
} quad;

static inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

/* 16 packed bytes of each of two rows -> [low nibbles | high nibbles] per row (element order). */
static inline __m512i nibbles2(const uint8_t *p0, const uint8_t *p1) {
    __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p0)),
                                        _mm_loadu_si128((const __m128i *)p1), 1);
    __m512i x = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3), _mm512_castsi256_si512(b));
    x = _mm512_mask_srli_epi16(x, (__mmask32)0xFF00FF00u, x, 4); /* 128-bit lanes 1 and 3: high nibbles */
    return _mm512_and_si512(x, _mm512_set1_epi8(15));
}

static inline __m256 fp16x4(uint16_t a, uint16_t b, uint16_t c, uint16_t d) {
    return _mm256_castps128_ps256(_mm_cvtph_ps(_mm_setr_epi16((short)a, (short)b, (short)c, (short)d, 0, 0, 0, 0)));
}

#define BLOCKS(T) const T *b0 = (const T *)p[0] + u, *b1 = (const T *)p[1] + u, *b2 = (const T *)p[2] + u, \
                          *b3 = (const T *)p[3] + u

static inline quad dec_q8_0(const uint8_t *const p[4], int64_t u) {
    BLOCKS(nb_block_q8_0);
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    quad q;
    q.u01 = _mm512_xor_si512(join(_mm256_loadu_si256((const __m256i *)b0->qs), _mm256_loadu_si256((const __m256i *)b1->qs)), bias);
    q.u23 = _mm512_xor_si512(join(_mm256_loadu_si256((const __m256i *)b2->qs), _mm256_loadu_si256((const __m256i *)b3->qs)), bias);
    q.slots = fp16x4(b0->d, b1->d, b2->d, b3->d);
    return q;
}

static inline quad dec_q4_0(const uint8_t *const p[4], int64_t u) {
    BLOCKS(nb_block_q4_0);
    const __m512i bias = _mm512_set1_epi8(120); /* (q - 8) + 128 */
    quad q;
    q.u01 = _mm512_add_epi8(nibbles2(b0->qs, b1->qs), bias);
    q.u23 = _mm512_add_epi8(nibbles2(b2->qs, b3->qs), bias);
    q.slots = fp16x4(b0->d, b1->d, b2->d, b3->d);
    return q;
}

/* (q5 - 16) + 128 = nibble + 0x70, plus 0x10 where the fifth bit is set: one masked add with the
 * two rows' 32 high bits as a 64-bit byte mask. */
static inline __m512i q5_pair(const nb_block_q5_0 *x, const nb_block_q5_0 *y) {
    uint32_t hx, hy;
    memcpy(&hx, x->qh, 4);
    memcpy(&hy, y->qh, 4);
    __m512i v = _mm512_or_si512(nibbles2(x->qs, y->qs), _mm512_set1_epi8(0x70));
    return _mm512_mask_add_epi8(v, _cvtu64_mask64((uint64_t)hy << 32 | hx), v, _mm512_set1_epi8(0x10));
}

static inline quad dec_q5_0(const uint8_t *const p[4], int64_t u) {
    BLOCKS(nb_block_q5_0);
    return (quad){q5_pair(b0, b1), q5_pair(b2, b3), fp16x4(b0->d, b1->d, b2->d, b3->d)};
}

/* E2M1 codes through a 16-entry table of biased doubled values (nb_e2m1_doubled + 128). */
static inline __m512i e2m1_biased(void) {
    __m512i t = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)nb_e2m1_doubled));
    return _mm512_xor_si512(t, _mm512_set1_epi8((char)0x80));
}

static inline quad dec_mxfp4(const uint8_t *const p[4], int64_t u) {
    BLOCKS(nb_block_mxfp4);
    const __m512i t = e2m1_biased();
    quad q;
    q.u01 = _mm512_shuffle_epi8(t, nibbles2(b0->qs, b1->qs));
    q.u23 = _mm512_shuffle_epi8(t, nibbles2(b2->qs, b3->qs));
    q.slots = _mm256_castps128_ps256(_mm_setr_ps(nb_e8m0_half_table[b0->e], nb_e8m0_half_table[b1->e],
                                                 nb_e8m0_half_table[b2->e], nb_e8m0_half_table[b3->e]));
    return q;
}

/* NVFP4 unit u = half h of block u/2 (two 16-element sub-blocks, bytes 16h..16h+15): sub-block
 * s is bytes 8s..8s+7, low nibbles its elements 0..7, high nibbles 8..15. */
static inline __m256i nv_idx(const nb_block_nvfp4 *b, int h) {
    __m128i x = _mm_loadu_si128((const __m128i *)(b->qs + 16 * h));
    __m128i m = _mm_set1_epi8(15);
    __m128i lo = _mm_and_si128(x, m), hi = _mm_and_si128(_mm_srli_epi16(x, 4), m);
    return _mm256_set_m128i(_mm_unpackhi_epi64(lo, hi), _mm_unpacklo_epi64(lo, hi));
}

/* ggml's halved UE4M3 decode of 8 scale codes at once (= nb_ue4m3_to_fp32_half, bit for bit): bit
 * 7 ignored; a normal code c is (1+m/8)·2^(e-8), whose f32 bits are (c << 20) + (119 << 23); a
 * subnormal one m·2^-10; codes 0x00 and 0x7F give 0. */
static inline __m256 ue4m3_half8(__m128i bytes) {
    const __m256i c = _mm256_cvtepu8_epi32(bytes), c7 = _mm256_and_si256(c, _mm256_set1_epi32(0x7F));
    const __m256 normal = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(c7, 20), _mm256_set1_epi32(119 << 23)));
    const __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(c7, _mm256_set1_epi32(7))), _mm256_set1_ps(0x1p-10f));
    const __m256 v = _mm256_blendv_ps(normal, sub, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), c7)));
    return _mm256_andnot_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(c, _mm256_set1_epi32(0x7F))), v);
}

static inline quad dec_nvfp4(const uint8_t *const p[4], int64_t u) {
    const int64_t bi = u / 2;
    const int h = (int)(u & 1);
    const nb_block_nvfp4 *b0 = (const nb_block_nvfp4 *)p[0] + bi, *b1 = (const nb_block_nvfp4 *)p[1] + bi,
                         *b2 = (const nb_block_nvfp4 *)p[2] + bi, *b3 = (const nb_block_nvfp4 *)p[3] + bi;
    const __m512i t = e2m1_biased();
    uint16_t d[4];
    memcpy(&d[0], b0->d + 2 * h, 2);
    memcpy(&d[1], b1->d + 2 * h, 2);
    memcpy(&d[2], b2->d + 2 * h, 2);
    memcpy(&d[3], b3->d + 2 * h, 2);
    quad q;
    q.u01 = _mm512_shuffle_epi8(t, join(nv_idx(b0, h), nv_idx(b1, h)));
    q.u23 = _mm512_shuffle_epi8(t, join(nv_idx(b2, h), nv_idx(b3, h)));
    q.slots = ue4m3_half8(_mm_loadl_epi64((const __m128i *)d));
    return q;
}

typedef quad (*dec_fn)(const uint8_t *const p[4], int64_t u);

/* The tile's rows are rows 0, rs, 2rs, 3rs from w (y likewise), so that a GEMV over short rows can
 * draw them from four distant parts of the matrix (nb_avx2_tile_loop). A tile of nr < 4 rows
 * repeats its last row and drops the surplus results. */
static inline __attribute__((always_inline)) void tile(dec_fn dec, int halves, int ub, int T, int64_t nu, const uint8_t *w,
                                                       size_t ws, size_t rs, int nr, const uint8_t *a, size_t as,
                                                       float *y, size_t ldy) {
    const uint8_t *p[RT];
    /* short neighbouring rows (a 640-wide matrix in a GEMM tile: 4 x 680 bytes) make the tile one
     * contiguous stream: prefetch the same unit of the next tile's rows instead, a tile ahead */
    const size_t pf = ws < NB_PREFETCH_BYTES && rs == 1 ? ws * RT : NB_PREFETCH_BYTES;
    for (int i = 0; i < RT; i++) p[i] = w + (size_t)(i < nr ? i : nr - 1) * rs * ws;
    const __m512i idx01 = halves ? _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)
                                 : _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i idx23 = _mm512_add_epi32(idx01, _mm512_set1_epi32(halves ? 4 : 2));
    __m512 acc[2][TMAX];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
    for (int64_t u = 0; u < nu; u++) {
        #pragma GCC unroll 8
        for (int i = 0; i < RT; i++) _mm_prefetch((const char *)p[i] + u * ub + pf, _MM_HINT_T0);
        quad q = dec(p, u);
        __m512 s01 = _mm512_permutexvar_ps(idx01, _mm512_castps256_ps512(q.slots));
        __m512 s23 = _mm512_permutexvar_ps(idx23, _mm512_castps256_ps512(q.slots));
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const nb_block_q8_0x *ab = (const nb_block_q8_0x *)(a + (size_t)t * as) + u;
            __m512i av = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)ab->qs));
            __m512i negc = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)ab->nc));
            __m512 ad = _mm512_set1_ps(ab->d);
            __m512i p01 = _mm512_dpbusd_epi32(negc, q.u01, av), p23 = _mm512_dpbusd_epi32(negc, q.u23, av);
            acc[0][t] = _mm512_fmadd_ps(_mm512_mul_ps(s01, ad), _mm512_cvtepi32_ps(p01), acc[0][t]);
            acc[1][t] = _mm512_fmadd_ps(_mm512_mul_ps(s23, ad), _mm512_cvtepi32_ps(p23), acc[1][t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        float r[RT];
        r[0] = nb_avx2_lane_sum(_mm512_castps512_ps256(acc[0][t]));
        r[1] = nb_avx2_lane_sum(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[0][t]), 1)));
        r[2] = nb_avx2_lane_sum(_mm512_castps512_ps256(acc[1][t]));
        r[3] = nb_avx2_lane_sum(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[1][t]), 1)));
        for (int i = 0; i < nr; i++) y[(size_t)t * ldy + (size_t)i * rs] = r[i];
    }
}

#define TILE(ty, H, UB, R, T)                                                                                       \
    static void tile_##ty##_##R##x##T(int64_t nu, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a,       \
                                       size_t as, float *y, size_t ldy) {                                        \
        tile(dec_##ty, H, UB, T, nu, w, ws, rs, R, a, as, y, ldy);                                                  \
    }
#define TILES_R(ty, H, UB, R) TILE(ty, H, UB, R, 1) TILE(ty, H, UB, R, 2) TILE(ty, H, UB, R, 3) TILE(ty, H, UB, R, 4)
/* The shared tile loop (avx2.h: edge tiles, and one token by quarters of the rows) */
#define KERNEL(ty, H, UB)                                                                                        \
    TILES_R(ty, H, UB, 1) TILES_R(ty, H, UB, 2) TILES_R(ty, H, UB, 3) TILES_R(ty, H, UB, 4)                      \
    static const nb_avx2_tile_fn tiles_##ty[RT * TMAX] = {                                                     \
        tile_##ty##_1x1, tile_##ty##_1x2, tile_##ty##_1x3, tile_##ty##_1x4, tile_##ty##_2x1, tile_##ty##_2x2,    \
        tile_##ty##_2x3, tile_##ty##_2x4, tile_##ty##_3x1, tile_##ty##_3x2, tile_##ty##_3x3, tile_##ty##_3x4,    \
        tile_##ty##_4x1, tile_##ty##_4x2, tile_##ty##_4x3, tile_##ty##_4x4};                                   \
    static void mm_##ty(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,    \
                        float *y, size_t ldy) {                                                                 \
        nb_avx2_tile_loop(tiles_##ty, TMAX, n / 32, w, ws, a, as, nr, nt, y, ldy);                              \
    }

KERNEL(q4_0, 0, 18)
KERNEL(q5_0, 0, 22)
KERNEL(q8_0, 0, 34)
KERNEL(mxfp4, 0, 17)
KERNEL(nvfp4, 1, 18)

#define Q8(t, s) [NB_TYPE_##t] = {NB_ACT_Q8_0X, mm_##s, NULL, "avx512 " #s " x q8_0", NULL, RT}

/* The float route (mm_f32 NULL here) and the other types come from the AVX2 table (dispatch). */
const nb_kernel nb_kernels_avx512[NB_KERNEL_TYPES] = {
    Q8(Q4_0, q4_0), Q8(Q5_0, q5_0), Q8(Q8_0, q8_0), Q8(MXFP4, mxfp4), Q8(NVFP4, nvfp4),
};
