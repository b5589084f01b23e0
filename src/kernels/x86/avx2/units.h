/*
 * units.h: the AVX2 32-element-unit kernels (Q4_0, Q5_0, Q8_0, MXFP4, NVFP4 weights x Q8_0
 * activations, or their Q8_0X forms; Q4_1, Q5_1 x Q8_1: tile_m); units_avx2.c instantiates them.
 * (The AVX-512 set has its own kernels: x86/avx512/units_avx512.c.)
 *
 * Every type is read as 32-element units (a block; NVFP4: half a block) decoded in registers to
 * 32 bytes plus scales. vpmaddubsw multiplies unsigned by signed bytes, then vpmaddwd with ones
 * yields lane k = elements 4k..4k+3 exactly, as the lane contract in kernels.h requires (MXFP4's
 * and NVFP4's tiles decode two rows into one register, codes2, MXFP4's on the way to its one
 * lane, fp4.h; NVFP4 keeps the lanes in its nibbles' order, nv_lane_sum). Q8_0's codes take the
 * sign trick, |w| unsigned times a*sign(w) (|w| <= 128 and |a| <= 127 keep the int16 pair sums
 * below 32767; tile_s). The other types are decoded to unsigned codes c = w + c0 (Q4_0's nibble,
 * Q5_0's five bits, E2M1 through a table) that vpmaddubsw takes as they are, and the offset
 * leaves each lane exactly through the activations' precomputed -c0 * (sum of the lane's codes)
 * (NB_ACT_Q8_0X and its FP4 variants, kernels.h; tile_u, tile_fp4). A tile holds R weight rows x
 * T activation rows in registers: each unit is decoded once per tile and each activation unit
 * loaded once per tile. GEMM of many tokens goes through panel.h (the 8-lane types and MXFP4).
 */
#ifndef NB_KERNELS_X86_UNITS_H
#define NB_KERNELS_X86_UNITS_H

#include <string.h>

#include "formats/blocks.h"
#include "formats/codes.h"
#include "kernels/x86/avx2/avx2.h"
#include "kernels/x86/avx2/fp4.h"
#include "kernels/x86/avx2/panel.h"

typedef struct {
    __m256i q; /* 32 weights as bytes: signed (Q8_0, the panels' Q4_0 and Q5_0) or FP4's unsigned codes */
    __m256 s;  /* weight scale per lane */
} unit;

/* 16 bytes at p in both 128-bit halves. */
static inline __m256i bcast16(const void *p) { return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p)); }

/* 16 packed bytes -> low nibbles (elements 0..15) then high nibbles (16..31). */
static inline __m256i nibbles(const uint8_t *p) {
    const __m256i b = bcast16(p);
    return _mm256_and_si256(_mm256_srlv_epi32(b, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(15));
}

/* E2M1 codes doubled (as ggml, with halved scales) plus 16: the FP4 types' unsigned codes,
 * 4..28 (offset 16, so nsh 3 in tile_fp4). */
static inline __m256i e2m1_table(void) {
    const __m128i t = _mm_add_epi8(_mm_loadu_si128((const __m128i *)nb_e2m1_doubled), _mm_set1_epi8(16));
    return _mm256_set_m128i(t, t);
}

/* Q4_0 and Q5_0 as unsigned codes c = w + (128 >> nsh): Q4_0's nibble (w + 8, nsh 4), Q5_0's
 * five bits (w + 16, nsh 3). Their tiles (tile_u) take them as they are; the panels subtract the
 * offset (dec_q4_0, dec_q5_0). */
enum { q4_0_nsh = 4, q5_0_nsh = 3 };
typedef __m256i (*ucode_fn)(const uint8_t *row, int64_t u);

static inline __m256i ucode_q4_0(const uint8_t *row, int64_t u) { return nibbles(((const nb_block_q4_0 *)row + u)->qs); }

/* Five-bit codes from a qh field and 16 packed bytes (Q5_0, Q5_1). */
static inline __m256i codes5(const uint8_t *qh4, const uint8_t *qs) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    /* byte i <- byte i/8 of qh, then test bit i%8: 16 where the fifth bit is set */
    const __m256i x = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                                          _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(x, bit), bit);
    return _mm256_or_si256(nibbles(qs), _mm256_and_si256(set, _mm256_set1_epi8(16)));
}

static inline __m256i ucode_q5_0(const uint8_t *row, int64_t u) {
    const nb_block_q5_0 *b = (const nb_block_q5_0 *)row + u;
    return codes5(b->qh, b->qs);
}

/* Q4_1 and Q5_1: their codes are unsigned already (tile_m). */
static inline __m256i ucode_q4_1(const uint8_t *row, int64_t u) { return nibbles(((const nb_block_q4_1 *)row + u)->qs); }
static inline __m256i ucode_q5_1(const uint8_t *row, int64_t u) {
    const nb_block_q5_1 *b = (const nb_block_q5_1 *)row + u;
    return codes5(b->qh, b->qs);
}

/* Q4_0 and Q5_0 as their unsigned codes (NB_ROUTE_BLOCK's panels), and signed (the 8-lane panels). */
static inline unit dec_q4_0u(const uint8_t *row, int64_t u) {
    return (unit){ucode_q4_0(row, u), nb_avx2_fp16_bcast(((const nb_block_q4_0 *)row + u)->d)};
}
static inline unit dec_q5_0u(const uint8_t *row, int64_t u) {
    return (unit){ucode_q5_0(row, u), nb_avx2_fp16_bcast(((const nb_block_q5_0 *)row + u)->d)};
}
static inline unit dec_q4_0(const uint8_t *row, int64_t u) {
    const unit x = dec_q4_0u(row, u);
    return (unit){_mm256_sub_epi8(x.q, _mm256_set1_epi8(8)), x.s};
}
static inline unit dec_q5_0(const uint8_t *row, int64_t u) {
    const unit x = dec_q5_0u(row, u);
    return (unit){_mm256_sub_epi8(x.q, _mm256_set1_epi8(16)), x.s};
}

static inline unit dec_q8_0(const uint8_t *row, int64_t u) {
    const nb_block_q8_0 *b = (const nb_block_q8_0 *)row + u;
    return (unit){_mm256_loadu_si256((const __m256i *)b->qs), nb_avx2_fp16_bcast(b->d)};
}
/* Q8_0 as unsigned codes w + 128, for group sums in dwords (VNNI's panels; vpmaddubsw's word
 * pair sums could overflow with them). */
static inline unit dec_q8_0u(const uint8_t *row, int64_t u) {
    const unit x = dec_q8_0(row, u);
    return (unit){_mm256_xor_si256(x.q, _mm256_set1_epi8((char)0x80)), x.s};
}

/* The FP4 types' codes are unsigned (e2m1_table). */
static inline unit dec_mxfp4(const uint8_t *row, int64_t u) {
    const nb_block_mxfp4 *b = (const nb_block_mxfp4 *)row + u;
    return (unit){_mm256_shuffle_epi8(e2m1_table(), nibbles(b->qs)), _mm256_set1_ps(nb_e8m0_half_table[b->e])};
}

/* NVFP4 unit u = half h of block u/2, bytes 16h..16h+15; sub-block s is bytes 8s..8s+7, low
 * nibbles its elements 0..7, high nibbles 8..15. The nibble split gives elements 0-7,16-23 then
 * 8-15,24-31 of the unit, the order of NB_ACT_Q8_0X_NV's codes: the lanes hold groups
 * 0,1,4,5,2,3,6,7, so the scales are s0, s0, s1, s1 in both halves. */
static inline const uint8_t *nv_unit(const uint8_t *row, int64_t u, __m128 *s) { /* its bytes; *s: s0, s0, s1, s1 */
    const nb_block_nvfp4 *b = (const nb_block_nvfp4 *)row + u / 2;
    const int h = (int)(u & 1);
    const float s0 = nb_ue4m3_half_table[b->d[2 * h]][0], s1 = nb_ue4m3_half_table[b->d[2 * h + 1]][0];
    *s = _mm_setr_ps(s0, s0, s1, s1);
    return b->qs + 16 * h;
}

static inline unit dec_nvfp4(const uint8_t *row, int64_t u) {
    __m128 s;
    const uint8_t *q = nv_unit(row, u, &s);
    return (unit){_mm256_shuffle_epi8(e2m1_table(), nibbles(q)), _mm256_set_m128(s, s)};
}

typedef unit (*dec_fn)(const uint8_t *row, int64_t u);

/* Weight bytes per unit and row (NVFP4: half a block), for the prefetch. */
enum { q4_0_unit_bytes = 18, q5_0_unit_bytes = 22, q8_0_unit_bytes = 34, mxfp4_unit_bytes = 17, nvfp4_unit_bytes = 18,
       q4_1_unit_bytes = 20, q5_1_unit_bytes = 24 };

#define RMAX 4
#define TMAX 3

/* The unsigned codes of the 16 packed bytes at x and at z (a unit of two rows) in two registers,
 * one row per 128-bit half: lo = [x's low nibbles | z's], hi = their high nibbles: one load and
 * insert and one shift for both rows, no shuffle across halves. fp4: the FP4 types' codes
 * (e2m1_table), else Q4_0's, the nibbles as they are. vpmaddubsw takes each against the
 * activations of those elements in both halves (c <= 28 and |a| <= 127 keep a pair sum within
 * 7112, two added within 14224). MXFP4 and Q4_0: lo holds elements 0..15, hi 16..31, so lo and hi
 * products added and vpmaddwd with ones give [x's 4 lanes | z's 4 lanes], lane k the groups k and
 * k+4: the layout of fp4.h's reduction. NVFP4: lo holds the groups 0,1,4,5 of the nibbles' order,
 * hi the groups 2,3,6,7 (tile_nv). */
static inline void codes2(int fp4, const uint8_t *x, const uint8_t *z, __m256i *lo, __m256i *hi) {
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)x)),
                                              _mm_loadu_si128((const __m128i *)z), 1);
    const __m256i m = _mm256_set1_epi8(15);
    *lo = _mm256_and_si256(b, m);
    *hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m);
    if (fp4) *lo = _mm256_shuffle_epi8(e2m1_table(), *lo), *hi = _mm256_shuffle_epi8(e2m1_table(), *hi);
}

/* Scale of row r (a constant after inlining) in every lane: v holds the rows' scales in both
 * 128-bit halves. */
static inline __m256 row_scale(__m256 v, int r) {
    switch (r) {
    case 0: return _mm256_permute_ps(v, 0x00);
    case 1: return _mm256_permute_ps(v, 0x55);
    case 2: return _mm256_permute_ps(v, 0xAA);
    default: return _mm256_permute_ps(v, 0xFF);
    }
}

/* The fp16 scales (the first field of a Q4_0, Q5_0 or Q8_0 block) of R rows rstride bytes apart, at byte
 * off of each, widened by one conversion: row r's in lane r of both 128-bit halves. */
static inline __m256 row_scales(const uint8_t *w, size_t rstride, int R, size_t off) {
    uint64_t d4 = 0;
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        uint16_t d;
        memcpy(&d, w + (size_t)r * rstride + off, 2);
        d4 |= (uint64_t)d << 16 * r;
    }
    const __m128 s4 = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)d4));
    return _mm256_set_m128(s4, s4);
}

/* The first n x T accumulators of a tile set to zero. */
static inline __attribute__((always_inline)) void acc_zero(__m256 acc[RMAX][TMAX], int n, int T) {
    #pragma GCC unroll 8
    for (int i = 0; i < n; i++)
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[i][t] = _mm256_setzero_ps();
}

/* An 8-lane tile's results: row r, token t is the contract's tree over acc[r][t]. */
static inline __attribute__((always_inline)) void acc_store(__m256 acc[RMAX][TMAX], int R, int T, float *y, size_t ldy,
                                                            size_t rs) {
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) y[(size_t)t * ldy + (size_t)r * rs] = nb_avx2_lane_sum(acc[r][t]);
}

/* The tile of Q8_0 (codes up to 127 in magnitude: the sign trick) against Q8_0 activations. */
static inline __attribute__((always_inline)) void tile_s(dec_fn dec, int ub, int R, int T, int64_t nu, const uint8_t *w,
                                                         size_t ws, size_t rs, const uint8_t *a, size_t as, float *y,
                                                         size_t ldy) {
    __m256 acc[RMAX][TMAX];
    acc_zero(acc, R, T);
    for (int64_t u = 0; u < nu; u++) {
        __m256i aq[TMAX];
        __m256 sd[TMAX];
        const __m256 s8 = row_scales(w, ws * rs, R, u * ub);
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const nb_block_q8_0 *ab = (const nb_block_q8_0 *)(a + (size_t)t * as) + u;
            aq[t] = _mm256_loadu_si256((const __m256i *)ab->qs);
            sd[t] = _mm256_mul_ps(s8, nb_avx2_fp16_bcast(ab->d));
        }
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            _mm_prefetch((const char *)w + (size_t)r * rs * ws + u * ub + nb_prefetch_bytes(ub), _MM_HINT_T0);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const unit wv = dec(w + (size_t)r * rs * ws, u);
            const __m256i wa = _mm256_abs_epi8(wv.q);
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(aq[t], wv.q)), _mm256_set1_epi16(1));
                acc[r][t] = _mm256_fmadd_ps(row_scale(sd[t], r), _mm256_cvtepi32_ps(p), acc[r][t]);
            }
        }
    }
    acc_store(acc, R, T, y, ldy, rs);
}

/* The one-lane types of the 8-lane tiles' shape: MXFP4, and Q4_0 in the order of llama.cpp's 8-row
 * copy of its matrices (kernels.h, NB_KERNEL_Q4_0_X8). Both keep 16 bytes of nibbles per unit,
 * element j in byte j's low nibble and element j + 16 in its high one. */
enum { ONE_mxfp4, ONE_q4_0x8 };
static const int one_unit_bytes[2] = {mxfp4_unit_bytes, q4_0_unit_bytes};

/* Unit u of a row of type ty: its 16 bytes of codes, and its scale in *s (the halved E8M0 or d). */
static inline const uint8_t *one_unit(int ty, const uint8_t *row, int64_t u, float *s) {
    if (ty == ONE_q4_0x8) {
        const nb_block_q4_0 *b = (const nb_block_q4_0 *)row + u;
        *s = _cvtsh_ss(b->d);
        return b->qs;
    }
    const nb_block_mxfp4 *b = (const nb_block_mxfp4 *)row + u;
    *s = nb_e8m0_half_table[b->e];
    return b->qs;
}

/* The tile of MXFP4 or Q4_0 (ty) against NB_ACT_Q8_0X_MX activations (the corrections of groups
 * k and k+4 summed in nc[k]): two rows per register (codes2), nc >> 3 = -16 * (sum of the lane's
 * 8 activations; Q4_0's nibbles w + 8: nc >> 4) taken out of each lane exactly, then fp4.h's one
 * lane per row and token, token pairs in one accumulator each. */
static inline __attribute__((always_inline)) void tile_mx(int ty, int R, int T, int64_t nu, const uint8_t *w, size_t ws,
                                                          size_t rs, const uint8_t *a, size_t as, float *y, size_t ldy) {
    const int S = (R + 1) / 2, P = (T + 1) / 2; /* row pairs, token pairs */
    const int ub = one_unit_bytes[ty];
    __m256 acc[(TMAX + 1) / 2];
    #pragma GCC unroll 8
    for (int p = 0; p < P; p++) acc[p] = _mm256_setzero_ps();
    for (int64_t u = 0; u < nu; u++) {
        __m256i alo[TMAX], ahi[TMAX], nv[TMAX];
        __m256 ad[TMAX];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const nb_block_q8_0x *ab = (const nb_block_q8_0x *)(a + (size_t)t * as) + u;
            alo[t] = bcast16(ab->qs);
            ahi[t] = bcast16(ab->qs + 16);
            nv[t] = _mm256_srai_epi32(bcast16(ab->nc), ty == ONE_q4_0x8 ? 4 : 3);
            ad[t] = _mm256_set1_ps(ab->d);
        }
        if ((u & 1) == 0) /* two units (34 or 36 bytes) per prefetch of a row */
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                _mm_prefetch((const char *)w + (size_t)r * rs * ws + u * ub + nb_prefetch_bytes(ub), _MM_HINT_T0);
        __m256i m[TMAX][2]; /* [t][j]: rows 2j and 2j+1 (an odd last row pairs with itself) */
        __m256 s[2];
        #pragma GCC unroll 8
        for (int j = 0; j < S; j++) {
            float sx, sz;
            const uint8_t *x = one_unit(ty, w + (size_t)(2 * j) * rs * ws, u, &sx);
            const uint8_t *z = one_unit(ty, w + (size_t)(2 * j + 1 < R ? 2 * j + 1 : 2 * j) * rs * ws, u, &sz);
            __m256i lo, hi;
            codes2(ty == ONE_mxfp4, x, z, &lo, &hi);
            s[j] = _mm256_setr_m128(_mm_set1_ps(sx), _mm_set1_ps(sz));
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, alo[t]), _mm256_maddubs_epi16(hi, ahi[t]));
                m[t][j] = _mm256_add_epi32(_mm256_madd_epi16(p, _mm256_set1_epi16(1)), nv[t]);
            }
        }
        const int j1 = S - 1; /* one row pair stands in for the second */
        #pragma GCC unroll 8
        for (int p = 0; p < P; p++) {
            const int A = 2 * p, B = 2 * p + 1 < T ? 2 * p + 1 : 2 * p;
            acc[p] = _mm256_fmadd_ps(nb_mx_scales(s[0], s[j1], ad[A], ad[B]),
                                     _mm256_cvtepi32_ps(nb_mx_sums(m[A][0], m[A][j1], m[B][0], m[B][j1])), acc[p]);
        }
    }
    #pragma GCC unroll 8
    for (int p = 0; p < P; p++) nb_mx_store(acc[p], R, 2 * p, T, y, ldy, rs);
}

/* MXFP4's scales of 8 lanes from their rows' E8M0 codes (byte i of e: lane i's), as
 * nb_e8m0_to_fp32_half decodes them: (e - 1) << 23, and the denormals 0x00200000 << e for e < 2,
 * whose blend is skipped when no code is below 2 (one test of the 8 bytes in a general register;
 * real weights' scales are far above 2^-126). */
static inline __m256 mx_scales8(uint64_t e) {
    const __m256i v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)e));
    const __m256i norm = _mm256_slli_epi32(_mm256_sub_epi32(v, _mm256_set1_epi32(1)), 23);
    const uint64_t low = e & 0xFEFEFEFEFEFEFEFEull; /* a zero byte: a code below 2 */
    if (__builtin_expect(!((low - 0x0101010101010101ull) & ~low & 0x8080808080808080ull), 1))
        return _mm256_castsi256_ps(norm);
    const __m256i den = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), v);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(norm, den, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), v)));
}

/* The GEMV tile of MXFP4 or Q4_0 (ty): 8 rows rs rows apart (pair j: rows 2j and 2j + 1) against
 * one token, one accumulator for all 8. Each pair's 4-lane sums (codes2, the nibble split's
 * lanes) stay uncorrected up to the first round of pair sums (8 products of codes c <= 28 and
 * |a| <= 127: within 28448, as vpackssdw needs; Q4_0's c <= 15), which then take the correction
 * of their 16 activations at once (from nc; after it a sum of 16 products of |w| <= 12, within
 * 24384; Q4_0's |w| <= 8); a second round of packs and pair sums leaves pair j's rows in lanes
 * j and j + 4. So the scales of the 8 rows are one conversion of their codes (mx_scales8, or
 * Q4_0's fp16 d), and one product, conversion and fma serve 8 chains, where the 4-row tile gave
 * half of each register to a copy of the same token. */
static inline __attribute__((always_inline)) void tile_one8(int ty, int64_t nu, const uint8_t *w, size_t ws, size_t rs,
                                                            const uint8_t *a, float *y) {
    const __m256i one = _mm256_set1_epi16(1);
    const int ub = one_unit_bytes[ty];
    size_t off[8]; /* row r at off[r] from row 0: one pointer steps through the units */
    #pragma GCC unroll 8
    for (int r = 0; r < 8; r++) off[r] = (size_t)r * rs * ws;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t u = 0; u < nu; u++) {
        const uint8_t *b = w + u * ub;
        const nb_block_q8_0x *ab = (const nb_block_q8_0x *)a + u;
        const __m256i alo = bcast16(ab->qs), ahi = bcast16(ab->qs + 16);
        int64_t c2; /* nc[4], nc[5]: -16 * the sums of groups 0, 1, 4, 5 and 2, 3, 6, 7 (Q4_0: -8 *) */
        memcpy(&c2, ab->nc + 4, 8);
        const __m256i corr = _mm256_srai_epi32(_mm256_set1_epi64x(c2), ty == ONE_q4_0x8);
        if ((u & 1) == 0) /* two units (34 or 36 bytes) per prefetch of a row */
            #pragma GCC unroll 8
            for (int r = 0; r < 8; r++)
                _mm_prefetch((const char *)b + off[r] + nb_prefetch_bytes(ub), _MM_HINT_T0);
        __m256i p[4];
        uint64_t e2[4]; /* pair j's two codes at lanes j, j + 4; ored as a tree, not a chain of 8 */
        uint64_t dx = 0, dz = 0; /* Q4_0: pair j's two fp16 d at lanes j, j + 4 */
        #pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const uint8_t *x = b + off[2 * j], *z = b + off[2 * j + 1];
            __m256i lo, hi;
            if (ty == ONE_q4_0x8) {
                codes2(0, ((const nb_block_q4_0 *)x)->qs, ((const nb_block_q4_0 *)z)->qs, &lo, &hi);
                dx |= (uint64_t)((const nb_block_q4_0 *)x)->d << 16 * j;
                dz |= (uint64_t)((const nb_block_q4_0 *)z)->d << 16 * j;
            } else {
                codes2(1, ((const nb_block_mxfp4 *)x)->qs, ((const nb_block_mxfp4 *)z)->qs, &lo, &hi);
                e2[j] = (uint64_t)((const nb_block_mxfp4 *)x)->e << 8 * j | (uint64_t)((const nb_block_mxfp4 *)z)->e << (8 * j + 32);
            }
            const __m256i w16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo, alo), _mm256_maddubs_epi16(hi, ahi));
            p[j] = _mm256_madd_epi16(w16, one);
        }
        const __m256 sw = ty == ONE_q4_0x8 ? _mm256_cvtph_ps(_mm_set_epi64x((long long)dz, (long long)dx))
                                       : mx_scales8((e2[0] | e2[1]) | (e2[2] | e2[3]));
        const __m256i m0 = _mm256_add_epi32(_mm256_madd_epi16(_mm256_packs_epi32(p[0], p[1]), one), corr);
        const __m256i m1 = _mm256_add_epi32(_mm256_madd_epi16(_mm256_packs_epi32(p[2], p[3]), one), corr);
        const __m256i sum = _mm256_madd_epi16(_mm256_packs_epi32(m0, m1), one);
        acc = _mm256_fmadd_ps(_mm256_mul_ps(sw, _mm256_set1_ps(ab->d)), _mm256_cvtepi32_ps(sum), acc);
    }
    const __m128 x = _mm256_castps256_ps128(acc), z = _mm256_extractf128_ps(acc, 1); /* the pairs' rows x | z */
    #pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        y[(size_t)(2 * j) * rs] = _mm_cvtss_f32(_mm_permutevar_ps(x, _mm_set1_epi32(j)));
        y[(size_t)(2 * j + 1) * rs] = _mm_cvtss_f32(_mm_permutevar_ps(z, _mm_set1_epi32(j)));
    }
}

static inline void tile_mxfp4_8x1(int64_t nu, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, size_t as,
                                  float *y, size_t ldy) {
    (void)as, (void)ldy;
    tile_one8(ONE_mxfp4, nu, w, ws, rs, a, y);
}

static inline void tile_q4_0x8_8x1(int64_t nu, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, size_t as,
                                   float *y, size_t ldy) {
    (void)as, (void)ldy;
    tile_one8(ONE_q4_0x8, nu, w, ws, rs, a, y);
}

/* The contract's tree (nb_lane_sum) over NVFP4's lanes, which hold groups 0,1,4,5,2,3,6,7: group
 * g and g + 4 are lanes j and j + 2 of one half, and the pair sums then end as nb_avx2_lane_sum. */
static inline float nv_lane_sum(__m256 v) {
    v = _mm256_add_ps(v, _mm256_permute_ps(v, 0x4E)); /* g0+g4, g1+g5 | g2+g6, g3+g7 */
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

/* The scales of unit k of NVFP4 blocks x and z as tile_nv's lanes hold them, [x's d2k, d2k, d2k+1,
 * d2k+1 | z's], from the pair table: four loads, two vmovhps and a vinsertf128. On a Zen 3 core
 * (a throwaway harness in L1, tile_nv1's 8 rows) this took 4.3 cycles per row and unit where the
 * fp16 decode of each 4 rows' 16 codes (nb_nv_codes, a vcvtph2ps per row pair and unit) took
 * 4.75; four broadcasts and three blends instead of the vmovhps and vinsertf128 took 4.5. */
static inline __m256 nv_pair_scales(const nb_block_nvfp4 *x, const nb_block_nvfp4 *z, int k) {
    const float(*t)[2] = nb_ue4m3_half_table;
    const __m128 sx = _mm_loadh_pi(_mm_castpd_ps(_mm_load_sd((const double *)t[x->d[2 * k]])), (const __m64 *)t[x->d[2 * k + 1]]);
    const __m128 sz = _mm_loadh_pi(_mm_castpd_ps(_mm_load_sd((const double *)t[z->d[2 * k]])), (const __m64 *)t[z->d[2 * k + 1]]);
    return _mm256_setr_m128(sx, sz);
}

/* The tile of NVFP4 against NB_ACT_Q8_0X_NV activations: tile_u's 8 lanes per row and token (c <=
 * 28, nc >> 3 = -16 * sum4(a)) in the nibbles' order, two rows per register pair (codes2): lo
 * = [x's groups 0,1,4,5 | z's], hi = [x's groups 2,3,6,7 | z's], whose scales are s0, s0, s1, s1
 * in every half, so one scale product per row pair and token serves both; those scales come from
 * the pair table (nv_pair_scales: 1.06-1.09x at 2 tokens over nb_nv_codes' decode, 1.03x at 3
 * over a 4-lane build per row, in cache; stop 52). A row's 8 chains are those of one register,
 * [g0 g1 g4 g5 | g2 g3 g6 g7], gathered from lo and hi at the end. */
static inline __attribute__((always_inline)) void tile_nv(int ub, int R, int T, int64_t nu, const uint8_t *w, size_t ws,
                                                          size_t rs, const uint8_t *a, size_t as, float *y, size_t ldy) {
    const int S = (R + 1) / 2; /* row pairs (an odd last row pairs with itself) */
    const uint8_t *p[4];       /* pair j's rows x, z at p[2j], p[2j + 1] */
    #pragma GCC unroll 2
    for (int j = 0; j < S; j++) {
        const int z = 2 * j + 1 < R ? 2 * j + 1 : 2 * j;
        p[2 * j] = w + (size_t)(2 * j) * rs * ws, p[2 * j + 1] = w + (size_t)z * rs * ws;
    }
    __m256 lo_acc[RMAX / 2][TMAX], hi_acc[RMAX / 2][TMAX];
    #pragma GCC unroll 8
    for (int j = 0; j < S; j++)
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) lo_acc[j][t] = hi_acc[j][t] = _mm256_setzero_ps();
    for (int64_t u = 0; u < nu; u++) {
        const int k = (int)(u & 1); /* unit k of block u / 2 */
        const nb_block_nvfp4 *b[4];
        #pragma GCC unroll 4
        for (int i = 0; i < 2 * S; i++) b[i] = (const nb_block_nvfp4 *)p[i] + u / 2;
        if (k == 0) {
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) /* two units (36 bytes) per prefetch of a row */
                _mm_prefetch((const char *)w + (size_t)r * rs * ws + u * ub + nb_prefetch_bytes(ub), _MM_HINT_T0);
        }
        __m256 sc[2];
        #pragma GCC unroll 2
        for (int j = 0; j < S; j++) sc[j] = nv_pair_scales(b[2 * j], b[2 * j + 1], k);
        __m256i lo[RMAX / 2], hi[RMAX / 2];
        #pragma GCC unroll 8
        for (int j = 0; j < S; j++) codes2(1, b[2 * j]->qs + 16 * k, b[2 * j + 1]->qs + 16 * k, &lo[j], &hi[j]);
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const nb_block_q8_0x *ab = (const nb_block_q8_0x *)(a + (size_t)t * as) + u;
            const __m256i alo = bcast16(ab->qs), ahi = bcast16(ab->qs + 16);
            const __m256i nlo = _mm256_srai_epi32(bcast16(ab->nc), 3), nhi = _mm256_srai_epi32(bcast16(ab->nc + 4), 3);
            const __m256 ad = _mm256_set1_ps(ab->d);
            #pragma GCC unroll 8
            for (int j = 0; j < S; j++) {
                const __m256 sd = _mm256_mul_ps(sc[j], ad);
                const __m256i pl = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo[j], alo), _mm256_set1_epi16(1)), nlo);
                const __m256i ph = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(hi[j], ahi), _mm256_set1_epi16(1)), nhi);
                lo_acc[j][t] = _mm256_fmadd_ps(sd, _mm256_cvtepi32_ps(pl), lo_acc[j][t]);
                hi_acc[j][t] = _mm256_fmadd_ps(sd, _mm256_cvtepi32_ps(ph), hi_acc[j][t]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const __m256 l = lo_acc[r / 2][t], h = hi_acc[r / 2][t]; /* immediates even where r is not one (-O1) */
            y[(size_t)t * ldy + (size_t)r * rs] =
                nv_lane_sum(r & 1 ? _mm256_permute2f128_ps(l, h, 0x31) : _mm256_permute2f128_ps(l, h, 0x20));
        }
}

/* NVFP4's GEMV tiles: tile_nv's lanes and chains for R = 4 or 8 rows (rs rows apart) and one
 * token, a block (two units) per iteration, each row pair decoded where its products use it, so
 * that its 4 sums and the token's values stay in registers. The tile loop takes 8 rows
 * (tile_nvfp4_8x1): the token's loads and corrections serve twice the rows. */
static inline __attribute__((always_inline)) void tile_nv1(int R, int64_t nu, const uint8_t *w, size_t ws, size_t rs,
                                                           const uint8_t *a, float *y) {
    const nb_block_nvfp4 *row[8];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++) row[r] = (const nb_block_nvfp4 *)(w + (size_t)r * rs * ws);
    __m256 lo_acc[4], hi_acc[4]; /* pair j's lanes, as tile_nv's */
    #pragma GCC unroll 4
    for (int j = 0; j < R / 2; j++) lo_acc[j] = hi_acc[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nu / 2; i++) {
        const nb_block_nvfp4 *b[8];
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            b[r] = row[r] + i;
            _mm_prefetch((const char *)b[r] + nb_prefetch_bytes(nvfp4_unit_bytes), _MM_HINT_T0);
        }
        #pragma GCC unroll 2
        for (int k = 0; k < 2; k++) { /* unit k of the block */
            const nb_block_q8_0x *ab = (const nb_block_q8_0x *)a + 2 * i + k;
            const __m256i alo = bcast16(ab->qs), ahi = bcast16(ab->qs + 16);
            const __m256i nlo = _mm256_srai_epi32(bcast16(ab->nc), 3), nhi = _mm256_srai_epi32(bcast16(ab->nc + 4), 3);
            const __m256 ad = _mm256_set1_ps(ab->d);
            #pragma GCC unroll 4
            for (int j = 0; j < R / 2; j++) {
                const __m256 sd = _mm256_mul_ps(nv_pair_scales(b[2 * j], b[2 * j + 1], k), ad);
                __m256i lo, hi;
                codes2(1, b[2 * j]->qs + 16 * k, b[2 * j + 1]->qs + 16 * k, &lo, &hi);
                const __m256i one = _mm256_set1_epi16(1);
                const __m256i pl = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, alo), one), nlo);
                const __m256i ph = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(hi, ahi), one), nhi);
                lo_acc[j] = _mm256_fmadd_ps(sd, _mm256_cvtepi32_ps(pl), lo_acc[j]);
                hi_acc[j] = _mm256_fmadd_ps(sd, _mm256_cvtepi32_ps(ph), hi_acc[j]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        const __m256 l = lo_acc[r / 2], h = hi_acc[r / 2];
        const __m256 v = r & 1 ? _mm256_permute2f128_ps(l, h, 0x31) : _mm256_permute2f128_ps(l, h, 0x20);
        y[(size_t)r * rs] = nv_lane_sum(v);
    }
}

static inline void tile_nvfp4_8x1(int64_t nu, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, size_t as,
                                  float *y, size_t ldy) {
    (void)as, (void)ldy;
    tile_nv1(8, nu, w, ws, rs, a, y);
}

/* The tile of Q4_0 and Q5_0 against NB_ACT_Q8_0X activations. vpmaddubsw takes the unsigned
 * codes as they are (c <= 31 and |a| <= 127 keep its pair sums below 7900) and vpmaddwd's lane k
 * plus nc[k] >> nsh = -(128 >> nsh) * sum4(a) is lane k of w*a exactly, so the lane values and
 * the fma sequence are the sign trick's (tile_s) with two instructions per row and token fewer.
 * The R rows' fp16 scales are gathered in a general register and widened by one conversion.
 * With one token (GEMV) each row is decoded where its product uses it and its chain is pinned
 * (NB_CHAIN): decoding all R rows first kept Q5_0's codes, its six constants and the 4
 * accumulators live at once, more than 16 registers, and GCC kept the accumulators on the stack
 * (a load and a store per row and unit). */
static inline __attribute__((always_inline)) void tile_u(ucode_fn code, int ub, int nsh, int R, int T, int64_t nu,
                                                         const uint8_t *w, size_t ws, size_t rs, const uint8_t *a,
                                                         size_t as, float *y, size_t ldy) {
    __m256 acc[RMAX][TMAX];
    acc_zero(acc, R, T);
    for (int64_t u = 0; u < nu; u++) {
        if ((u & 1) == 0) /* two units (44 bytes at most) per prefetch of a row */
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                _mm_prefetch((const char *)w + (size_t)r * rs * ws + u * ub + nb_prefetch_bytes(ub), _MM_HINT_T0);
        __m256i q[RMAX];
        #pragma GCC unroll 8
        for (int r = 0; r < R && T > 1; r++) q[r] = code(w + (size_t)r * rs * ws, u);
        const __m256 s8 = row_scales(w, rs * ws, R, (size_t)u * ub);
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const nb_block_q8_0x *ab = (const nb_block_q8_0x *)(a + (size_t)t * as) + u;
            const __m256i av = _mm256_loadu_si256((const __m256i *)ab->qs);
            const __m256i nv = _mm256_srai_epi32(_mm256_loadu_si256((const __m256i *)ab->nc), nsh);
            const __m256 sd = _mm256_mul_ps(s8, _mm256_set1_ps(ab->d));
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const __m256i qr = T > 1 ? q[r] : code(w + (size_t)r * rs * ws, u);
                const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(qr, av), _mm256_set1_epi16(1)), nv);
                acc[r][t] = _mm256_fmadd_ps(row_scale(sd, r), _mm256_cvtepi32_ps(p), acc[r][t]);
                if (T == 1) NB_CHAIN(acc[r][t]);
            }
        }
    }
    acc_store(acc, R, T, y, ldy, rs);
}

/* The tile of Q4_1 and Q5_1 against Q8_1 activations (kernels.h): tile_u's lanes without an
 * offset (the codes are unsigned: c <= 31), and the minimum's chain of every row and token, row
 * r's in lane r of mc[t]: fma(m, s, macc) of the R rows' gathered minimums (the field after d)
 * and the token's s, converted with its d by one vcvtph2ps. */
static inline __attribute__((always_inline)) void tile_m(ucode_fn code, int ub, int R, int T, int64_t nu,
                                                         const uint8_t *w, size_t ws, size_t rs, const uint8_t *a,
                                                         size_t as, float *y, size_t ldy) {
    __m256 acc[RMAX][TMAX];
    __m128 mc[TMAX];
    acc_zero(acc, R, T);
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) mc[t] = _mm_setzero_ps();
    for (int64_t u = 0; u < nu; u++) {
        if ((u & 1) == 0) /* two units (48 bytes at most) per prefetch of a row */
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                _mm_prefetch((const char *)w + (size_t)r * rs * ws + u * ub + nb_prefetch_bytes(ub), _MM_HINT_T0);
        __m256i q[RMAX];
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) q[r] = code(w + (size_t)r * rs * ws, u);
        const __m256 s8 = row_scales(w, rs * ws, R, (size_t)u * ub);
        const __m128 m4 = _mm256_castps256_ps128(row_scales(w, rs * ws, R, (size_t)u * ub + 2));
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const nb_block_q8_1 *ab = (const nb_block_q8_1 *)(a + (size_t)t * as) + u;
            int32_t ds;
            memcpy(&ds, ab, 4);
            const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128(ds)); /* d, s */
            const __m256i av = _mm256_loadu_si256((const __m256i *)ab->qs);
            const __m256 sd = _mm256_mul_ps(s8, _mm256_broadcastss_ps(f));
            mc[t] = _mm_fmadd_ps(m4, _mm_shuffle_ps(f, f, 0x55), mc[t]);
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q[r], av), _mm256_set1_epi16(1));
                acc[r][t] = _mm256_fmadd_ps(row_scale(sd, r), _mm256_cvtepi32_ps(p), acc[r][t]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        float m[4];
        _mm_storeu_ps(m, mc[t]);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) y[(size_t)t * ldy + (size_t)r * rs] = nb_avx2_lane_sum(acc[r][t]) + m[r];
    }
}

/* GEMM of the 8-lane types with many tokens (panel.h): a chunk of PU units of 8 rows. */
#define PU 32 /* 8 KiB of codes and 1 KiB of scales */
typedef struct {
    __m256i q[PU][8]; /* q[u][k] dword r: row r's weights 4k..4k+3 of unit u (in the unit register's order) */
    __m256 s[PU][2];  /* the 8 rows' scales of unit u's halves (NVFP4's sub-blocks; else one scale twice) */
} panel;

static inline __attribute__((always_inline)) void panel_decode(dec_fn dec, const uint8_t *w, size_t ws, int rows,
                                                               int64_t u0, int un, panel *p) {
    for (int u = 0; u < un; u++) {
        __m256i v[NB_PANEL_R];
        float s[2][NB_PANEL_R];
        for (int r = 0; r < NB_PANEL_R; r++) {
            if (r < rows) {
                const unit x = dec(w + (size_t)r * ws, u0 + u);
                v[r] = x.q;
                s[0][r] = _mm256_cvtss_f32(x.s); /* lanes 0 and 2: the halves' scales (dec_nvfp4) */
                s[1][r] = _mm_cvtss_f32(_mm_movehl_ps(_mm256_castps256_ps128(x.s), _mm256_castps256_ps128(x.s)));
            } else
                v[r] = _mm256_setzero_si256(), s[0][r] = s[1][r] = 0;
        }
        nb_transpose8(v);
        for (int k = 0; k < 8; k++) _mm256_store_si256(&p->q[u][k], v[k]);
        p->s[u][0] = _mm256_loadu_ps(s[0]);
        p->s[u][1] = _mm256_loadu_ps(s[1]);
    }
}

/* Codes and scale of activation unit u of a token row: a Q8_0 block, or NB_ACT_Q8_0X's (x). */
static inline const int8_t *act_codes(int x, const uint8_t *a, int64_t u) {
    return x ? ((const nb_block_q8_0x *)a + u)->qs : ((const nb_block_q8_0 *)a + u)->qs;
}
static inline float act_scale(int x, const uint8_t *a, int64_t u) {
    return x ? ((const nb_block_q8_0x *)a + u)->d : _cvtsh_ss(((const nb_block_q8_0 *)a + u)->d);
}

/* Per unit, lane and token: vpsignb, vpmaddubsw, vpmaddwd, a conversion and an fma for 8 rows,
 * and one multiply for the 8 rows' scale products per unit and token (the tiles: 6 instructions
 * per row, plus the decode). x: the activations are NB_ACT_Q8_0X. nv: NVFP4 against
 * NB_ACT_Q8_0X_NV, tile_nv's lanes for 8 rows: the unsigned codes as they are and the offset out
 * of each lane by its nc >> 3 (an add for the sign trick's vpsignb), each lane scaled by its
 * sub-block's scale product (register lane k holds group nv_group[k], of sub-block k >> 1 & 1),
 * and its chain kept as that group's (acc[t][g]), where nb_panel_reduce's tree is nv_lane_sum's. */
static const int nv_group[8] = {0, 1, 4, 5, 2, 3, 6, 7};
static inline __attribute__((always_inline)) void panel_tokens(int x, int nv, int T, const void *pv, int un,
                                                               const uint8_t *a, size_t as, __m256 acc[][8], int first) {
    const panel *p = pv;
    __m256 sc[PU][2][NB_PANEL_G]; /* the 8 rows' scale products of each unit, half (NVFP4) and token */
    for (int u = 0; u < un; u++)
        #pragma GCC unroll 2
        for (int h = 0; h <= nv; h++)
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++)
                sc[u][h][t] = _mm256_mul_ps(p->s[u][h], _mm256_set1_ps(act_scale(x, a + (size_t)t * as, u)));
    const __m256i ones = _mm256_set1_epi16(1);
    for (int k = 0; k < 8; k++) {
        const int h = nv ? k >> 1 & 1 : 0, g = nv ? nv_group[k] : k;
        __m256 c[NB_PANEL_G];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) c[t] = first ? _mm256_setzero_ps() : acc[t][g];
        for (int u = 0; u < un; u++) {
            const __m256i q = _mm256_load_si256(&p->q[u][k]), qa = nv ? q : _mm256_abs_epi8(q);
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                int32_t g4;
                memcpy(&g4, act_codes(x, a + (size_t)t * as, u) + 4 * k, 4);
                const __m256i av = _mm256_set1_epi32(g4);
                __m256i pr = _mm256_madd_epi16(_mm256_maddubs_epi16(qa, nv ? av : _mm256_sign_epi8(av, q)), ones);
                if (nv) pr = _mm256_add_epi32(pr, _mm256_set1_epi32(((const nb_block_q8_0x *)(a + (size_t)t * as) + u)->nc[k] >> 3));
                c[t] = _mm256_fmadd_ps(sc[u][h][t], _mm256_cvtepi32_ps(pr), c[t]);
            }
        }
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[t][g] = c[t];
    }
}
static inline __attribute__((always_inline)) void panel_tokens_q8_0(int T, const void *pv, int un, const uint8_t *a,
                                                                    size_t as, __m256 acc[][8], int first) {
    panel_tokens(0, 0, T, pv, un, a, as, acc, first);
}
static inline __attribute__((always_inline)) void panel_tokens_q8_0x(int T, const void *pv, int un, const uint8_t *a,
                                                                     size_t as, __m256 acc[][8], int first) {
    panel_tokens(1, 0, T, pv, un, a, as, acc, first);
}
static inline __attribute__((always_inline)) void panel_tokens_nv(int T, const void *pv, int un, const uint8_t *a,
                                                                  size_t as, __m256 acc[][8], int first) {
    panel_tokens(1, 1, T, pv, un, a, as, acc, first);
}

/* The groups of 4 elements in each half of a unit: in order, or NVFP4's split (sub-block h is the
 * nibble order's groups 2h, 2h+1, 2h+4, 2h+5). */
static const int one_groups[2][2][4] = {{{0, 1, 2, 3}, {4, 5, 6, 7}}, {{0, 1, 4, 5}, {2, 3, 6, 7}}};

/* The one-lane orders take two 8-row panels side by side (rows 0-7 and 8-15, NB_PANEL_ONE16's
 * halves), so that each broadcast of a token's 4 bytes serves 16 rows (Zen 3, in one process:
 * MXFP4's GEMM 1.02-1.39x the 8-row panels, NVFP4's block order 1.21-1.39x; docs/BENCHMARKS.md,
 * stop 54). */
typedef struct {
    panel h[2];
} panel2;

/* One lane per row and token (kernels.h: MXFP4's order, and NB_ROUTE_BLOCK's): per unit, token
 * and half of the unit the 16 rows' exact sums, then per unit one conversion, scale product and
 * fma for each 8 rows, or with split one per half (NVFP4, whose sub-block h is the nibble order's
 * groups 2h, 2h+1, 2h+4, 2h+5). Unsigned codes c = w + (128 >> nsh) against an NB_ACT_Q8_0X
 * form: the vpmaddubsw pair sums of a half's 4 groups added as words (c <= 31, |a| <= 127: 4 pair
 * sums <= 31496), one vpmaddwd, and ns >> nsh takes the offset out; per 4 weights, 16 rows and
 * token a broadcast, two vpmaddubsw, two word adds and a share of the rest, about 3 instructions
 * per 8 rows against the 8-lane panels' 6 (panel_tokens, whose fma chains also run per 4
 * weights). Token t's chains are acc[t][0] (rows 0-7) and acc[t][1] (8-15). */
static inline __attribute__((always_inline)) void panel_tokens_one(int nsh, int split, int T, const void *pv, int un,
                                                                   const uint8_t *a, size_t as, __m256 acc[][8],
                                                                   int first) {
    const panel2 *p = pv;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 c[NB_PANEL_G][2];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++)
        #pragma GCC unroll 2
        for (int j = 0; j < 2; j++) c[t][j] = first ? _mm256_setzero_ps() : acc[t][j];
    for (int u = 0; u < un; u++) {
        __m256i is[NB_PANEL_G][2];
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const int *k = one_groups[split][h];
            __m256i hs[NB_PANEL_G][2];
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) hs[t][0] = hs[t][1] = _mm256_setzero_si256();
            #pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                const __m256i q[2] = {_mm256_load_si256(&p->h[0].q[u][k[i]]), _mm256_load_si256(&p->h[1].q[u][k[i]])};
                #pragma GCC unroll 8
                for (int t = 0; t < T; t++) {
                    const int8_t *g = act_codes(1, a + (size_t)t * as, u) + 4 * k[i];
                    #pragma GCC unroll 2
                    for (int j = 0; j < 2; j++) hs[t][j] = nb_avx2_codes4(hs[t][j], q[j], g);
                }
            }
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++)
                #pragma GCC unroll 2
                for (int j = 0; j < 2; j++) {
                    const __m256i hsum = _mm256_madd_epi16(hs[t][j], ones);
                    if (split) {
                        const nb_block_q8_0x *ab = (const nb_block_q8_0x *)(a + (size_t)t * as) + u;
                        const __m256i isum = _mm256_add_epi32(hsum, _mm256_set1_epi32(ab->ns[h] >> nsh));
                        c[t][j] = _mm256_fmadd_ps(_mm256_mul_ps(p->h[j].s[u][h], _mm256_set1_ps(ab->d)), _mm256_cvtepi32_ps(isum),
                                                  c[t][j]);
                    } else
                        is[t][j] = h ? _mm256_add_epi32(is[t][j], hsum) : hsum;
                }
        }
        if (!split)
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const nb_block_q8_0x *ab = (const nb_block_q8_0x *)(a + (size_t)t * as) + u;
                const __m256 d = _mm256_set1_ps(ab->d);
                const __m256i off = _mm256_set1_epi32((ab->ns[0] + ab->ns[1]) >> nsh);
                #pragma GCC unroll 2
                for (int j = 0; j < 2; j++)
                    c[t][j] = _mm256_fmadd_ps(_mm256_mul_ps(p->h[j].s[u][0], d),
                                              _mm256_cvtepi32_ps(_mm256_add_epi32(is[t][j], off)), c[t][j]);
            }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++)
        #pragma GCC unroll 2
        for (int j = 0; j < 2; j++) acc[t][j] = c[t][j];
}

/* Q8_0's one-lane panels (NB_ROUTE_BLOCK) in words: without VNNI, Q8_0's signed codes against
 * Q8_0's take the sign trick's vpsignb, vpmaddubsw and vpmaddwd per 4 weights, 8 rows and token,
 * all three (and vpabsb) on the same two pipes; as words, signed on both sides, two vpmaddwd do
 * it. The panel holds each unit's 16 code pairs per 8 rows as words (vpmovsxbw, then
 * nb_transpose8: dword r of q[u][m][j] is row 8j + r's codes 2m and 2m + 1), twice Q8_0's bytes,
 * so a chunk is WPU units (17 KiB); each token's units are widened the same way once per call into
 * wpanel_acts, from which every pair is broadcast (a load). Per 2 weights, 16 rows and token: a
 * broadcast, two vpmaddwd and two adds; exact in dwords (|w|, |a| <= 128), so the bits are the
 * reference's (dot_units_one). */
#define WPU 16
typedef struct {
    __m256i q[WPU][16][2];
    __m256 s[WPU][2]; /* the scales of rows 0-7 and 8-15 of unit u */
} wpanel;

static inline void wpanel_decode_q8_0(const uint8_t *w, size_t ws, int rows, int64_t u0, int un, void *pv) {
    wpanel *p = pv;
    for (int u = 0; u < un; u++)
        for (int j = 0; j < 2; j++) {
            __m256i lo[NB_PANEL_R], hi[NB_PANEL_R];
            float s[NB_PANEL_R];
            for (int r = 0; r < NB_PANEL_R; r++) {
                if (8 * j + r < rows) {
                    const unit x = dec_q8_0(w + (size_t)(8 * j + r) * ws, u0 + u);
                    lo[r] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(x.q));
                    hi[r] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(x.q, 1));
                    s[r] = _mm256_cvtss_f32(x.s);
                } else /* rows past the matrix: zero weights and scales, never stored */
                    lo[r] = hi[r] = _mm256_setzero_si256(), s[r] = 0;
            }
            nb_transpose8(lo);
            nb_transpose8(hi);
            for (int m = 0; m < 8; m++) {
                _mm256_store_si256(&p->q[u][m][j], lo[m]);
                _mm256_store_si256(&p->q[u][m + 8][j], hi[m]);
            }
            p->s[u][j] = _mm256_loadu_ps(s);
        }
}

/* The call's tokens' units of the chunk as word pairs (w[t][u][m]: token t's codes 2m, 2m + 1 of unit u). */
typedef struct {
    int32_t w[NB_PANEL_G][WPU][16] __attribute__((aligned(32)));
} wpanel_acts;

/* All T tokens run through every unit of the chunk together, their sums beside the pair's two
 * registers (each pinned in its chain: NB_CHAIN; GCC's trees of the adds spilled), their chains
 * in acc (token t's: acc[t][0], rows 0-7, and acc[t][1], 8-15). */
static inline __attribute__((always_inline)) void panel_tokens_q8_0w(int T, const void *pv, int un, const uint8_t *a,
                                                                     size_t as, __m256 acc[][8], int first) {
    const wpanel *p = pv;
    wpanel_acts A;
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        for (int u = 0; u < un; u++) {
            const __m128i *q = (const __m128i *)act_codes(0, a + (size_t)t * as, u);
            _mm256_store_si256((__m256i *)A.w[t][u], _mm256_cvtepi8_epi16(_mm_loadu_si128(q)));
            _mm256_store_si256((__m256i *)A.w[t][u] + 1, _mm256_cvtepi8_epi16(_mm_loadu_si128(q + 1)));
        }
        if (first) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    }
    for (int u = 0; u < un; u++) {
        __m256i is[NB_PANEL_G][2];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) is[t][0] = is[t][1] = _mm256_setzero_si256();
        #pragma GCC unroll 16
        for (int m = 0; m < 16; m++) {
            __m256i q0 = _mm256_load_si256(&p->q[u][m][0]), q1 = _mm256_load_si256(&p->q[u][m][1]);
            NB_CHAIN(q0);
            NB_CHAIN(q1);
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const __m256i av = _mm256_set1_epi32(A.w[t][u][m]);
                is[t][0] = _mm256_add_epi32(is[t][0], _mm256_madd_epi16(q0, av));
                is[t][1] = _mm256_add_epi32(is[t][1], _mm256_madd_epi16(q1, av));
                NB_CHAIN(is[t][0]);
                NB_CHAIN(is[t][1]);
            }
        }
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const __m256 d = _mm256_set1_ps(act_scale(0, a + (size_t)t * as, u));
            #pragma GCC unroll 2
            for (int j = 0; j < 2; j++)
                acc[t][j] = _mm256_fmadd_ps(_mm256_mul_ps(p->s[u][j], d), _mm256_cvtepi32_ps(is[t][j]), acc[t][j]);
        }
    }
}

/* The one-lane panels' token kernels by type (nsh: the codes' offset, 128 >> nsh). */
#define PANEL_TOKENS_ONE(name, nsh, split)                                                                    \
    static inline __attribute__((always_inline)) void panel_tokens_##name(int T, const void *pv, int un,      \
                                                                          const uint8_t *a, size_t as,        \
                                                                          __m256 acc[][8], int first) {       \
        panel_tokens_one(nsh, split, T, pv, un, a, as, acc, first);                                           \
    }
PANEL_TOKENS_ONE(mx, 3, 0)
PANEL_TOKENS_ONE(q4_0b, q4_0_nsh, 0)
PANEL_TOKENS_ONE(q5_0b, q5_0_nsh, 0)
PANEL_TOKENS_ONE(nvfp4b, 3, 1)

/* Tokens from which the panel beats the tiles (its decode and transpose cost about as much as the
 * products of 4 tokens; 2048 x 640 Q8_0, 1 thread: tiles ahead at 4-12 tokens, panel at 32). */
#define PANEL_MIN_TOKENS 16

#define PANEL_DECODE(ty)                                                                                      \
    static void panel_decode_##ty(const uint8_t *w, size_t ws, int rows, int64_t u0, int un, void *p) {        \
        panel_decode(dec_##ty, w, ws, rows, u0, un, p);                                                       \
    }
/* A tile R x T of type ty: Q8_0 by the sign trick (TILE_S), or unsigned codes against
 * NB_ACT_Q8_0X (TILE_U) or its FP4 variants (TILE_MX, TILE_NV). */
#define TILE_S(ty, R, T)                                                                                 \
    static void tile_##ty##_##R##x##T(int64_t nu, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, \
                                       size_t as, float *y, size_t ldy) {                                 \
        tile_s(dec_##ty, ty##_unit_bytes, R, T, nu, w, ws, rs, a, as, y, ldy);                            \
    }
#define TILE_MX(ty, R, T)                                                                                \
    static void tile_##ty##_##R##x##T(int64_t nu, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, \
                                       size_t as, float *y, size_t ldy) {                                 \
        tile_mx(ONE_##ty, R, T, nu, w, ws, rs, a, as, y, ldy);                                            \
    }
#define TILE_NV(ty, R, T)                                                                                \
    static void tile_##ty##_##R##x##T(int64_t nu, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, \
                                       size_t as, float *y, size_t ldy) {                                 \
        if (R == 4 && T == 1)                                                                            \
            tile_nv1(4, nu, w, ws, rs, a, y);                                                            \
        else                                                                                             \
            tile_nv(ty##_unit_bytes, R, T, nu, w, ws, rs, a, as, y, ldy);                                 \
    }
#define TILE_U(ty, R, T)                                                                                 \
    static void tile_##ty##_##R##x##T(int64_t nu, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, \
                                       size_t as, float *y, size_t ldy) {                                 \
        tile_u(ucode_##ty, ty##_unit_bytes, ty##_nsh, R, T, nu, w, ws, rs, a, as, y, ldy);                \
    }
#define TILE_M(ty, R, T)                                                                                 \
    static void tile_##ty##_##R##x##T(int64_t nu, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, \
                                       size_t as, float *y, size_t ldy) {                                 \
        tile_m(ucode_##ty, ty##_unit_bytes, R, T, nu, w, ws, rs, a, as, y, ldy);                          \
    }
#define TILES_R(TILE, ty, R) TILE(ty, R, 1) TILE(ty, R, 2) TILE(ty, R, 3)
#define TILE_TABLE(TILE, ty)                                                                                 \
    TILES_R(TILE, ty, 1) TILES_R(TILE, ty, 2) TILES_R(TILE, ty, 3) TILES_R(TILE, ty, 4)                      \
    static const nb_avx2_tile_fn tiles_##ty[RMAX * TMAX] = {                                                 \
        tile_##ty##_1x1, tile_##ty##_1x2, tile_##ty##_1x3, tile_##ty##_2x1, tile_##ty##_2x2, tile_##ty##_2x3,  \
        tile_##ty##_3x1, tile_##ty##_3x2, tile_##ty##_3x3, tile_##ty##_4x1, tile_##ty##_4x2, tile_##ty##_4x3,  \
    };
/* Its small batches (kernels.h, mm_small): the tiles, all tokens of a tile of rows at once. */
#define KERNEL_SMALL(ty, isa)                                                                                 \
    void nb_mm_##ty##_small_##isa(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,  \
                                  int64_t nt, float *y, size_t ldy) {                                         \
        nb_avx2_tile_loop_small(tiles_##ty, TMAX, n / 32, w, ws, a, as, nr, nt, y, ldy);                      \
    }
/* The tile loop of a type: MXFP4's and NVFP4's with their GEMV tiles of 8 rows (tile_mxfp4_8x1,
 * tile_nvfp4_8x1), the others' plain. */
#define GEMV_LOOP(ty) GEMV_LOOP_##ty
#define GEMV_LOOP_mxfp4(...) nb_avx2_gemv8_loop(tile_mxfp4_8x1, __VA_ARGS__)
#define GEMV_LOOP_q4_0x8(...) nb_avx2_gemv8_loop(tile_q4_0x8_8x1, __VA_ARGS__)
#define GEMV_LOOP_q4_0 nb_avx2_tile_loop
#define GEMV_LOOP_q5_0 nb_avx2_tile_loop
#define GEMV_LOOP_q8_0 nb_avx2_tile_loop
#define GEMV_LOOP_nvfp4(...) nb_avx2_gemv8_loop(tile_nvfp4_8x1, __VA_ARGS__)
/* The 8-lane orders' GEMM of type ty as panels_##ty: 8-row panels, the token kernel
 * panel_tokens_##tok against activation blocks nb_block_##ab, results by out (panel.h). */
#define LANE_PANELS(ty, tok, ab, out)                                                                         \
    PANEL_DECODE(ty)                                                                                          \
    static void panels_##ty(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,        \
                            int64_t nt, float *y, size_t ldy) {                                               \
        panel p;                                                                                              \
        nb_panel_gemm(panel_decode_##ty, panel_tokens_##tok, &p, PU, sizeof(nb_block_##ab), out, n / 32, w,   \
                      ws, a, as, nr, nt, y, ldy);                                                             \
    }
/* The one-lane orders' GEMM of type ty as the function fn (a declarator: linkage, type and name):
 * 16-row panels (panel2) decoded by dec, tokens by panel_tokens_##tok against activation blocks
 * nb_block_##ab. MXFP4's own order, and NB_ROUTE_BLOCK's from NB_BLOCK_MIN tokens (the smaller
 * batches of Q4_0, Q5_0 and Q8_0 take tlanes.h's token lanes, AVX2, or panels_avx512.c's row
 * lanes). */
#define ONE_PANELS(ty, fn, dec, tok, ab)                                                                      \
    static void panel_decode_##ty##b(const uint8_t *w, size_t ws, int rows, int64_t u0, int un, void *p) {     \
        panel_decode(dec, w, ws, rows, u0, un, p);                                                            \
    }                                                                                                         \
    static void panel2_decode_##ty##b(const uint8_t *w, size_t ws, int rows, int64_t u0, int un, void *p) {    \
        panel2 *q = p;                                                                                        \
        nb_panel_decode_halves(panel_decode_##ty##b, w, ws, rows, u0, un, &q->h[0], &q->h[1]);                \
    }                                                                                                         \
    fn(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y,      \
       size_t ldy) {                                                                                          \
        panel2 p;                                                                                             \
        nb_panel_gemm(panel2_decode_##ty##b, panel_tokens_##tok, &p, PU, sizeof(nb_block_##ab),               \
                      NB_PANEL_ONE16, n / 32, w, ws, a, as, nr, nt, y, ldy);                                  \
    }
/* The kernel of a panel type ty without its small batches: tiles TILE, and from PANEL_MIN_TOKENS
 * its GEMM `panels` on rows of at most max_nu units. */
#define KERNEL_TILES_PANEL(ty, isa, TILE, panels, max_nu)                                                     \
    TILE_TABLE(TILE, ty)                                                                                      \
    void nb_mm_##ty##_q8_0_##isa(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,   \
                                int64_t nt, float *y, size_t ldy) {                                          \
        if (nt >= PANEL_MIN_TOKENS && n / 32 <= (max_nu))                                                     \
            panels(n, w, ws, a, as, nr, nt, y, ldy);                                                          \
        else                                                                                                  \
            GEMV_LOOP(ty)(tiles_##ty, TMAX, n / 32, w, ws, a, as, nr, nt, y, ldy);                            \
    }
/* The same with its small batches through the tiles. */
#define KERNEL_PANEL(ty, isa, TILE, panels, max_nu) KERNEL_TILES_PANEL(ty, isa, TILE, panels, max_nu) KERNEL_SMALL(ty, isa)
/* The kernel of an 8-lane type ty, activations Q8_0 (act q8_0: nb_block_q8_0, panel_tokens_q8_0)
 * or NB_ACT_Q8_0X (q8_0x). */
#define KERNEL(ty, isa, TILE, act)                                                                            \
    LANE_PANELS(ty, act, act, NB_PANEL_TREE) KERNEL_PANEL(ty, isa, TILE, panels_##ty, INT64_MAX)
/* The kernel of Q4_1 or Q5_1 against Q8_1: its tiles for every token count. */
#define KERNEL_MIN(ty, isa)                                                                                   \
    TILE_TABLE(TILE_M, ty)                                                                                    \
    void nb_mm_##ty##_q8_1_##isa(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,   \
                                int64_t nt, float *y, size_t ldy) {                                          \
        nb_avx2_tile_loop(tiles_##ty, TMAX, n / 32, w, ws, a, as, nr, nt, y, ldy);                            \
    }                                                                                                         \
    KERNEL_SMALL(ty, isa)

#endif
