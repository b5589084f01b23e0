/*
 * units_avx512.c: Q4_0, Q5_0, Q8_0, MXFP4 and NVFP4 weights against Q8_0 activations, Q4_1 and
 * Q5_1 against Q8_1, with AVX-512 (F/BW/VL) and VNNI, bit-identical to the reference (lane
 * contract in kernels.h).
 *
 * vpdpbusd multiplies unsigned by signed bytes and AVX-512 has no vpsignb, so weights are decoded
 * to unsigned codes u = w + c and the offset is taken out exactly through the accumulator's start
 * value: dpbusd(-c*sum4(a), u, a) = sum4(w*a). The activations come as NB_ACT_Q8_0X (kernels.h):
 * the Q8_0 codes with nc = -128*sum4(a) and the f32 scale computed once per matmul, so that the
 * per-row work has almost no activation arithmetic. Integer sums are exact, so the lane values and
 * the fma sequence are the reference's; only at the end of a row are the lanes summed, in the
 * contract's tree. A tile with fewer than 4 valid rows repeats its last row (same instructions,
 * surplus results dropped).
 *
 * The 32-element unit types (Q4_0, Q5_0, Q8_0) keep one row per 256-bit register, the unit in
 * element order: its 8 dword lanes are the contract's lanes, the activation is one plain load and
 * the Q5_0 qh word is the register's byte mask as stored. Per unit, row and token: 1 vpdpbusd, 1
 * conversion, 1 permute of the scale and 1 fma. On Zen 4, which splits 512-bit operations in two,
 * this beat 4 rows per 512-bit register (1 row per 128-bit lane, activation halves broadcast;
 * docs/BENCHMARKS.md, "AVX-512 register layouts"): the wider layout needs lane inserts,
 * broadcasts, a scale permute and, for Q5_0, qh bits regrouped in general registers, all of which
 * cost more than the halved count of multiply-adds saves.
 *
 * MXFP4 and NVFP4 keep 2 rows per 256-bit register, one 128-bit lane per row: `lo` holds the
 * codes that meet activation bytes 0-15 of the unit, `hi` those that meet bytes 16-31, so each
 * activation half is one 128-bit broadcast from memory. A 16-byte run of packed codes split into
 * low and high nibbles *is* lo and hi for MXFP4; NVFP4's nibbles split into elements 0-7,16-23 and
 * 8-15,24-31 of the unit instead, so its activations come in that order (NB_ACT_Q8_0X_NV). MXFP4
 * takes one lane per row, the unit's whole sum (kernels.h): its two vpdpbusd meet in the same 4
 * dword lanes, and two rounds of vpackssdw + vpmaddwd then give 4 rows x 2 tokens in one register
 * for the float work (x86/avx2/fp4.h). NVFP4 keeps the contract's 8 lanes as 4 in each of two
 * accumulators (lo: groups 0,1,4,5, hi: 2,3,6,7), one product of scales serving both. (4 rows
 * per 512-bit register, the same scheme one lane wider, was slower on Zen 4 for the same reasons
 * as above.)
 */
#include <immintrin.h>
#include <string.h>

#include "formats/blocks.h"
#include "formats/codes.h"
#include "kernels/x86/avx2/fp4.h"
#include "kernels/x86/avx512/avx512.h"

#define RT 4   /* rows per tile */
/* Units per software prefetch of a row: the largest power of two whose units fit a cache line. */
#define PF_EVERY(ub) ((ub) <= 16 ? 4 : (ub) <= 32 ? 2 : 1)
#define TMAX 4 /* tokens per tile */

/* Bytes ahead of the unit being decoded that each row prefetches. Short neighbouring rows (a
 * 640-wide matrix in a GEMM tile: 4 x 680 bytes) make the tile one contiguous stream: prefetch the
 * same unit of the next tile's rows instead, a tile ahead. */
static inline size_t tile_prefetch(size_t ws, size_t rs, int ub) {
    return ws < NB_PREFETCH_BYTES && rs == 1 ? ws * RT : nb_prefetch_bytes(ub);
}

/* ---- Q4_0, Q5_0, Q8_0: one row per 256-bit register ---- */

/* A row's unit u as unsigned codes w + (128 >> nsh), nsh the kernel's (see tile_units). */
typedef __m256i (*row_fn)(const uint8_t *p, int64_t u);

static inline __m256i row_q8_0(const uint8_t *p, int64_t u) {
    const nb_block_q8_0 *b = (const nb_block_q8_0 *)p + u;
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)b->qs), _mm256_set1_epi8((char)0x80));
}

/* 16 packed bytes in both 128-bit lanes, the second shifted down to its high nibbles: the low
 * nibbles are then the codes of elements 0-31 in order. */
static inline __m256i nibbles32(const uint8_t *qs) {
    const __m256i z = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_srlv_epi16(z, _mm256_setr_epi64x(0, 0, 0x0004000400040004, 0x0004000400040004));
}

/* The code itself, w + 8 (nsh 4): one operation per row fewer than a bias of 128 would take. */
static inline __m256i row_q4_0(const uint8_t *p, int64_t u) {
    const nb_block_q4_0 *b = (const nb_block_q4_0 *)p + u;
    return _mm256_and_si256(nibbles32(b->qs), _mm256_set1_epi8(15));
}

/* (q5 - 16) + 128 = nibble | 0x70, or nibble | 0x80 where the fifth bit is set (a zero-masked
 * load of 16s with the unbiased code measured slower than this blend). */
static inline __m256i row_q5_0(const uint8_t *p, int64_t u) {
    const nb_block_q5_0 *b = (const nb_block_q5_0 *)p + u;
    uint32_t h;
    memcpy(&h, b->qh, 4);
    const __m256i blend = _mm256_mask_blend_epi8(_cvtu32_mask32(h), _mm256_set1_epi8(0x70), _mm256_set1_epi8((char)0x80));
    /* A | (B & C) in one vpternlogd (truth table 0xF8) */
    return _mm256_ternarylogic_epi32(blend, nibbles32(b->qs), _mm256_set1_epi8(15), 0xF8);
}

/* nr valid rows (of RT) by T tokens. The codes are offset by 128 >> nsh, so the accumulator starts
 * at nc >> nsh (exact: nc is a multiple of 128). */
static inline __attribute__((always_inline)) void tile_units(row_fn dec, int ub, int nsh, int nr, int T, int64_t nu,
                                                             const uint8_t *w, size_t ws, size_t rs, const uint8_t *a,
                                                             size_t as, float *y, size_t ldy) {
    const uint8_t *p[RT];
    nb_avx512_tile_rows(p, w, ws, rs, nr);
    const size_t pf = tile_prefetch(ws, rs, ub);
    __m256 acc[RT][TMAX];
    #pragma GCC unroll 8
    for (int i = 0; i < RT; i++)
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[i][t] = _mm256_setzero_ps();
    for (int64_t u = 0; u < nu; u++) {
        if ((u & (PF_EVERY(ub) - 1)) == 0) /* about once per cache line of each row */
            #pragma GCC unroll 8
            for (int i = 0; i < RT; i++) _mm_prefetch((const char *)p[i] + u * ub + pf, _MM_HINT_T0);
        __m256i q[RT];
        uint64_t d4 = 0; /* the 4 fp16 scales (first field of each block), gathered in a general
                          * register: vpinsrw or masked vpbroadcastw measured slower */
        #pragma GCC unroll 8
        for (int i = 0; i < RT; i++) {
            q[i] = dec(p[i], u);
            uint16_t d;
            memcpy(&d, p[i] + u * ub, 2);
            d4 |= (uint64_t)d << 16 * i;
        }
        const __m128 s = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)d4));
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const nb_block_q8_0x *ab = (const nb_block_q8_0x *)(a + (size_t)t * as) + u;
            const __m256i av = _mm256_loadu_si256((const __m256i *)ab->qs);
            const __m256i nv = _mm256_srai_epi32(_mm256_loadu_si256((const __m256i *)ab->nc), nsh);
            const __m256 sd = _mm256_castps128_ps256(_mm_mul_ps(s, _mm_set1_ps(ab->d)));
            #pragma GCC unroll 8
            for (int i = 0; i < RT; i++) {
                const __m256 si = _mm256_permutexvar_ps(_mm256_set1_epi32(i), sd);
                acc[i][t] = _mm256_fmadd_ps(si, _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(nv, q[i], av)), acc[i][t]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++)
        #pragma GCC unroll 8
        for (int i = 0; i < nr; i++) y[(size_t)t * ldy + (size_t)i * rs] = nb_avx2_lane_sum(acc[i][t]);
}

/* ---- Q4_1, Q5_1 against Q8_1: the same layout, unsigned codes ---- */

static inline __m256i row_q4_1(const uint8_t *p, int64_t u) {
    return _mm256_and_si256(nibbles32(((const nb_block_q4_1 *)p + u)->qs), _mm256_set1_epi8(15));
}

/* the nibble | 16 where the fifth bit is set (the qh word is the byte mask as stored) */
static inline __m256i row_q5_1(const uint8_t *p, int64_t u) {
    const nb_block_q5_1 *b = (const nb_block_q5_1 *)p + u;
    uint32_t h;
    memcpy(&h, b->qh, 4);
    const __m256i hi = _mm256_maskz_mov_epi8(_cvtu32_mask32(h), _mm256_set1_epi8(16));
    return _mm256_ternarylogic_epi32(hi, nibbles32(b->qs), _mm256_set1_epi8(15), 0xF8);
}

/* tile_units without an offset (vpdpbusd from 0: the codes are the unsigned factor), plus the
 * minimum's chain of the contract (kernels.h). The 4 rows' (d, m) pairs, the blocks' first
 * dword, are gathered in two general registers and widened by one vcvtph2ps into d0 m0 .. d3 m3,
 * so that lane 2i of its product with the token's d is row i's scale and lane 2i+1 of
 * mc[t] = fma(dm, s, mc[t]) is row i's chain (the even lanes' products are not used). */
static inline __attribute__((always_inline)) void tile_min(row_fn dec, int ub, int nr, int T, int64_t nu,
                                                           const uint8_t *w, size_t ws, size_t rs, const uint8_t *a,
                                                           size_t as, float *y, size_t ldy) {
    const uint8_t *p[RT];
    nb_avx512_tile_rows(p, w, ws, rs, nr);
    const size_t pf = tile_prefetch(ws, rs, ub);
    __m256 acc[RT][TMAX], mc[TMAX];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        mc[t] = _mm256_setzero_ps();
        #pragma GCC unroll 8
        for (int i = 0; i < RT; i++) acc[i][t] = _mm256_setzero_ps();
    }
    for (int64_t u = 0; u < nu; u++) {
        if ((u & (PF_EVERY(ub) - 1)) == 0) /* about once per cache line of each row */
            #pragma GCC unroll 8
            for (int i = 0; i < RT; i++) _mm_prefetch((const char *)p[i] + u * ub + pf, _MM_HINT_T0);
        __m256i q[RT];
        uint64_t dm2[2] = {0, 0};
        #pragma GCC unroll 8
        for (int i = 0; i < RT; i++) {
            q[i] = dec(p[i], u);
            uint32_t v;
            memcpy(&v, p[i] + u * ub, 4);
            dm2[i / 2] |= (uint64_t)v << 32 * (i % 2);
        }
        const __m256 dm = _mm256_cvtph_ps(_mm_set_epi64x((long long)dm2[1], (long long)dm2[0]));
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const nb_block_q8_1 *ab = (const nb_block_q8_1 *)(a + (size_t)t * as) + u;
            int32_t ds;
            memcpy(&ds, ab, 4);
            const __m256 f = _mm256_castps128_ps256(_mm_cvtph_ps(_mm_cvtsi32_si128(ds))); /* d, s */
            const __m256i av = _mm256_loadu_si256((const __m256i *)ab->qs);
            const __m256 sd = _mm256_mul_ps(dm, _mm256_broadcastss_ps(_mm256_castps256_ps128(f)));
            mc[t] = _mm256_fmadd_ps(dm, _mm256_permutexvar_ps(_mm256_set1_epi32(1), f), mc[t]);
            #pragma GCC unroll 8
            for (int i = 0; i < RT; i++) {
                const __m256 si = _mm256_permutexvar_ps(_mm256_set1_epi32(2 * i), sd);
                acc[i][t] = _mm256_fmadd_ps(si, _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), q[i], av)),
                                            acc[i][t]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        float mv[8];
        _mm256_storeu_ps(mv, mc[t]);
        #pragma GCC unroll 8
        for (int i = 0; i < nr; i++) y[(size_t)t * ldy + (size_t)i * rs] = nb_avx2_lane_sum(acc[i][t]) + mv[2 * i + 1];
    }
}

/* ---- MXFP4, NVFP4: 2 rows per 256-bit register ---- */

/* A unit of the tile's 4 rows as two row pairs, rows 2j and 2j+1 in the 128-bit lanes of pair j:
 * codes meeting activation bytes 0-15 (lo) and 16-31 (hi), and the weight scale of every dword
 * lane. */
typedef struct {
    __m256i lo[2], hi[2];
    __m256 s[2];
} quad;

/* 16 bytes at the same offset of two rows, one per 128-bit lane. */
static inline __m256i rows2(const uint8_t *p0, const uint8_t *p1) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p0)),
                                   _mm_loadu_si128((const __m128i *)p1), 1);
}

/* E2M1 codes through a 16-entry table of biased doubled values (nb_e2m1_doubled + 128). */
static inline __m256i e2m1_biased(void) {
    const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)nb_e2m1_doubled));
    return _mm256_xor_si256(t, _mm256_set1_epi8((char)0x80));
}

/* lo and hi of pair j from its rows' 16 packed bytes z. */
static inline void fp4_codes(quad *q, int j, __m256i z) {
    const __m256i t = e2m1_biased(), m = _mm256_set1_epi8(15);
    q->lo[j] = _mm256_shuffle_epi8(t, _mm256_and_si256(z, m));
    q->hi[j] = _mm256_shuffle_epi8(t, _mm256_and_si256(_mm256_srli_epi16(z, 4), m));
}

/* Two rows' scales over their 4 lanes each: broadcasts from the table are plain loads, so the
 * pair costs one insert (4 table loads, vinsertps and a permute measured slower). */
static inline __m256 scale2(uint8_t e0, uint8_t e1) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_broadcast_ss(&nb_e8m0_half_table[e0])),
                                _mm_broadcast_ss(&nb_e8m0_half_table[e1]), 1);
}

/* Unit k of the 4 rows (an MXFP4 block is one unit). */
static inline void dec_mxfp4(const uint8_t *const p[4], int64_t k, quad *q) {
    const nb_block_mxfp4 *b0 = (const nb_block_mxfp4 *)p[0] + k, *b1 = (const nb_block_mxfp4 *)p[1] + k,
                         *b2 = (const nb_block_mxfp4 *)p[2] + k, *b3 = (const nb_block_mxfp4 *)p[3] + k;
    fp4_codes(q, 0, rows2(b0->qs, b1->qs));
    fp4_codes(q, 1, rows2(b2->qs, b3->qs));
    q->s[0] = scale2(b0->e, b1->e);
    q->s[1] = scale2(b2->e, b3->e);
}

/* nr valid rows (of RT) by T tokens against NB_ACT_Q8_0X_MX: per unit, row pair and token two
 * vpdpbusd from the folded corrections, then per 4 rows and 2 tokens the two rounds, one product of
 * scales, one conversion and one fma (fp4.h). */
static inline __attribute__((always_inline)) void tile_mx(int ub, int nr, int T, int64_t nu, const uint8_t *w, size_t ws,
                                                          size_t rs, const uint8_t *a, size_t as, float *y, size_t ldy) {
    const uint8_t *p[RT];
    nb_avx512_tile_rows(p, w, ws, rs, nr);
    const size_t pf = tile_prefetch(ws, rs, ub);
    const int P = (T + 1) / 2; /* token pairs */
    __m256 acc[TMAX / 2];
    #pragma GCC unroll 8
    for (int j = 0; j < P; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t u = 0; u < nu; u++) {
        if ((u & (PF_EVERY(ub) - 1)) == 0) /* about once per cache line of each row */
            #pragma GCC unroll 8
            for (int i = 0; i < RT; i++) _mm_prefetch((const char *)p[i] + u * ub + pf, _MM_HINT_T0);
        quad q;
        dec_mxfp4(p, u, &q);
        __m256i ip[TMAX][2];
        __m256 da[TMAX];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const nb_block_q8_0x *ab = (const nb_block_q8_0x *)(a + (size_t)t * as) + u;
            const __m256i alo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ab->qs));
            const __m256i ahi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(ab->qs + 16)));
            const __m256i nlo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ab->nc));
            da[t] = _mm256_set1_ps(ab->d);
            #pragma GCC unroll 2
            for (int j = 0; j < 2; j++) ip[t][j] = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(nlo, q.lo[j], alo), q.hi[j], ahi);
        }
        #pragma GCC unroll 8
        for (int j = 0; j < P; j++) {
            const int A = 2 * j, B = 2 * j + 1 < T ? 2 * j + 1 : 2 * j;
            acc[j] = _mm256_fmadd_ps(nb_mx_scales(q.s[0], q.s[1], da[A], da[B]),
                                     _mm256_cvtepi32_ps(nb_mx_sums(ip[A][0], ip[A][1], ip[B][0], ip[B][1])), acc[j]);
        }
    }
    #pragma GCC unroll 8
    for (int j = 0; j < P; j++) nb_mx_store(acc[j], nr, 2 * j, T, y, ldy, rs);
}

/* ---- NVFP4: the same row pairs, 8 lanes in two accumulators ---- */

/* NVFP4 block k = units 2k and 2k+1 (q[0], q[1]): unit h is sub-blocks 2h and 2h+1, bytes
 * 16h..16h+15 (sub-block s in bytes 8s..8s+7, low nibbles its elements 0..7, high nibbles 8..15).
 * Low nibbles of the 16 bytes are the unit's elements 0-7,16-23, high nibbles 8-15,24-31:
 * NB_ACT_Q8_0X_NV's order. A row's lanes are then groups 0,1,4,5 (lo) and 2,3,6,7 (hi), scales
 * [d2h, d2h, d2h+1, d2h+1] in both. Whole blocks, because the 4 rows' 16 scale codes are then one
 * decode, where a unit at a time took two of half the width. */
static inline __attribute__((always_inline)) void dec_nvfp4(const uint8_t *const p[4], int64_t k, quad *q) {
    const nb_block_nvfp4 *const b[4] = {(const nb_block_nvfp4 *)p[0] + k, (const nb_block_nvfp4 *)p[1] + k,
                                        (const nb_block_nvfp4 *)p[2] + k, (const nb_block_nvfp4 *)p[3] + k};
    #pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        fp4_codes(&q[h], 0, rows2(b[0]->qs + 16 * h, b[1]->qs + 16 * h));
        fp4_codes(&q[h], 1, rows2(b[2]->qs + 16 * h, b[3]->qs + 16 * h));
    }
    const __m256i codes = nb_nv_codes(b);
    #pragma GCC unroll 2
    for (int h = 0; h < 2; h++) nb_nv_unit_scales(codes, h, q[h].s);
}

/* The contract's tree over a row pair's lanes, lo = groups 0,1,4,5 and hi = groups 2,3,6,7 of
 * each row (one row per 128-bit half): group g and g + 4 are lanes j and j + 2, then
 * (s0 + s2) + (s1 + s3); stored to rows r and r + 1 where valid. */
static inline void store_nv_pair(__m256 lo, __m256 hi, int r, int nr, float *y, size_t rs) {
    const __m256 w = _mm256_add_ps(_mm256_add_ps(lo, _mm256_shuffle_ps(lo, lo, 0x4E)),
                                   _mm256_add_ps(hi, _mm256_shuffle_ps(hi, hi, 0x4E)));
    const __m256 sums = _mm256_add_ps(w, _mm256_shuffle_ps(w, w, 0xB1));
    if (r < nr) y[(size_t)r * rs] = _mm256_cvtss_f32(sums);
    if (r + 1 < nr) y[(size_t)(r + 1) * rs] = _mm_cvtss_f32(_mm256_extractf128_ps(sums, 1));
}

/* nr valid rows (of RT) by T tokens against NB_ACT_Q8_0X_NV, a block (two units) per step: per
 * unit, row pair and token 2 vpdpbusd from the corrections of their groups, one product of
 * scales for both, 2 conversions and 2 fma. */
static inline __attribute__((always_inline)) void tile_nv(int ub, int nr, int T, int64_t nu, const uint8_t *w, size_t ws,
                                                          size_t rs, const uint8_t *a, size_t as, float *y, size_t ldy) {
    const uint8_t *p[RT];
    nb_avx512_tile_rows(p, w, ws, rs, nr);
    const size_t pf = tile_prefetch(ws, rs, ub);
    __m256 acc[2][2][TMAX]; /* [row pair][lo, hi][token] */
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++)
        #pragma GCC unroll 2
        for (int j = 0; j < 2; j++) acc[j][0][t] = acc[j][1][t] = _mm256_setzero_ps();
    for (int64_t u0 = 0; u0 < nu; u0 += 2) {
        if ((u0 & (PF_EVERY(ub) - 1)) == 0) /* about once per cache line of each row */
            #pragma GCC unroll 8
            for (int i = 0; i < RT; i++) _mm_prefetch((const char *)p[i] + u0 * ub + pf, _MM_HINT_T0);
        quad q[2];
        dec_nvfp4(p, u0 / 2, q);
        #pragma GCC unroll 2
        for (int k = 0; k < 2; k++)
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const nb_block_q8_0x *ab = (const nb_block_q8_0x *)(a + (size_t)t * as) + u0 + k;
            const __m256i alo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ab->qs));
            const __m256i ahi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(ab->qs + 16)));
            const __m256i nlo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ab->nc));
            const __m256i nhi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(ab->nc + 4)));
            const __m256 da = _mm256_set1_ps(ab->d);
            #pragma GCC unroll 2
            for (int j = 0; j < 2; j++) {
                const __m256 sd = _mm256_mul_ps(q[k].s[j], da);
                acc[j][0][t] = _mm256_fmadd_ps(sd, _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(nlo, q[k].lo[j], alo)), acc[j][0][t]);
                acc[j][1][t] = _mm256_fmadd_ps(sd, _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(nhi, q[k].hi[j], ahi)), acc[j][1][t]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        store_nv_pair(acc[0][0][t], acc[0][1][t], 0, nr, y + (size_t)t * ldy, rs);
        store_nv_pair(acc[1][0][t], acc[1][1][t], 2, nr, y + (size_t)t * ldy, rs);
    }
}

/* A kernel of tile family tile_<kind> with its leading arguments ARGS, e.g. (row_q4_0, 18, 4). */
#define UNPACK(...) __VA_ARGS__
#define TILE(ty, kind, ARGS, R, T)                                                                                \
    static void tile_##ty##_##R##x##T(int64_t nu, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a,       \
                                       size_t as, float *y, size_t ldy) {                                        \
        tile_##kind(UNPACK ARGS, R, T, nu, w, ws, rs, a, as, y, ldy);                                            \
    }
#define TILES_R(ty, k, A, R) TILE(ty, k, A, R, 1) TILE(ty, k, A, R, 2) TILE(ty, k, A, R, 3) TILE(ty, k, A, R, 4)
/* The shared tile loop (avx2.h: edge tiles, and one token by quarters of the rows) */
#define KERNEL(ty, k, A)                                                                                         \
    TILES_R(ty, k, A, 1) TILES_R(ty, k, A, 2) TILES_R(ty, k, A, 3) TILES_R(ty, k, A, 4)                          \
    static const nb_avx2_tile_fn tiles_##ty[RT * TMAX] = {                                                     \
        tile_##ty##_1x1, tile_##ty##_1x2, tile_##ty##_1x3, tile_##ty##_1x4, tile_##ty##_2x1, tile_##ty##_2x2,    \
        tile_##ty##_2x3, tile_##ty##_2x4, tile_##ty##_3x1, tile_##ty##_3x2, tile_##ty##_3x3, tile_##ty##_3x4,    \
        tile_##ty##_4x1, tile_##ty##_4x2, tile_##ty##_4x3, tile_##ty##_4x4};                                   \
    static void mm_##ty(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,    \
                        float *y, size_t ldy) {                                                                 \
        nb_avx2_tile_loop(tiles_##ty, TMAX, n / 32, w, ws, a, as, nr, nt, y, ldy);                              \
    }
/* Small batches with the same tiles, all tokens of a tile of rows at once (kernels.h, mm_small) */
#define KERNEL_S(ty, k, A)                                                                                       \
    KERNEL(ty, k, A)                                                                                             \
    static void mm_small_##ty(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,         \
                              int64_t nt, float *y, size_t ldy) {                                               \
        nb_avx2_tile_loop_small(tiles_##ty, TMAX, n / 32, w, ws, a, as, nr, nt, y, ldy);                        \
    }

KERNEL_S(q4_0, units, (row_q4_0, 18, 4))
KERNEL_S(q5_0, units, (row_q5_0, 22, 0))
KERNEL_S(q8_0, units, (row_q8_0, 34, 0))
KERNEL_S(mxfp4, mx, (17))
KERNEL_S(nvfp4, nv, (18))
KERNEL_S(q4_1, min, (row_q4_1, 20))
KERNEL_S(q5_1, min, (row_q5_1, 24))

/* From 16 tokens the panels of panels_avx512.c (2048 x 640, 512 tokens, 1 thread: Q5_0 1.6x the
 * tiles, MXFP4 2.0x) */
#define PANELS(ty)                                                                                               \
    static void mm_##ty##_all(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,         \
                              int64_t nt, float *y, size_t ldy) {                                                \
        (nt >= 16 ? nb_mm_##ty##_panel_avx512 : mm_##ty)(n, w, ws, a, as, nr, nt, y, ldy);                       \
    }
PANELS(q4_0)
PANELS(q5_0)
PANELS(q8_0)
PANELS(mxfp4)
PANELS(nvfp4)

/* Q4_0 matrices of a multiple of 8 rows (kernels.h, NB_KERNEL_Q4_0_X8): the AVX2 set's tiles up to
 * 7 tokens, then the block order's row lanes and 16-row panels (panels_avx512.c), which read only
 * what NB_ACT_Q8_0X_MX shares with NB_ACT_Q8_0X */
#define X8(name, below)                                                                                          \
    static void name(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,      \
                     float *y, size_t ldy) {                                                                    \
        (nt >= NB_BLOCK_MIN_SMALL ? nb_mm_q4_0_block_avx512 : below)(n, w, ws, a, as, nr, nt, y, ldy);          \
    }
X8(mm_q4_0x8, nb_mm_q4_0x8_q8_0_avx2)
X8(mm_small_q4_0x8, nb_mm_q4_0x8_small_avx2)

#define SMALL_MAX 16 /* tokens for mm_small */
/* matmul's row multiple for the types with GEMM panels: their 16 rows (panels_avx512.c, the K-quant
 * panels of kquants_avx512.c), so that no row panel or thread's share ends in a part-filled one */
#define RP 16
#define Q8(t, s, act, mm)                                                                                        \
    [NB_TYPE_##t] = {act, mm, NULL, "avx512 " #s " x q8_0", NULL, RP, .mm_small = mm_small_##s, .small_max = SMALL_MAX}
/* with NB_ROUTE_BLOCK's kernel (panels_avx512.c) from bmin tokens (kernels.h), against NB_ACT_Q8_0X or
 * its NVFP4 order */
#define Q8B(t, s, act, mm, bact, bmin)                                                                           \
    [NB_TYPE_##t] = {act, mm, NULL, "avx512 " #s " x q8_0", NULL, RP, .mm_small = mm_small_##s,                  \
                     .small_max = SMALL_MAX, .mm_block = nb_mm_##s##_block_avx512, .block_min = bmin,            \
                     .block_act = bact, .name_block = "avx512 " #s " x q8_0 (block)"}
#define Q81(t, s)                                                                                                \
    [NB_TYPE_##t] = {NB_TYPE_Q8_1, mm_##s, NULL, "avx512 " #s " x q8_1", NULL, RT, .mm_small = mm_small_##s,         \
                     .small_max = SMALL_MAX}
#define QKB(t, s, n, bmin, bgroup, smax)                                                                        \
    [NB_TYPE_##t] = {NB_TYPE_Q8_K, nb_mm_##s##_q8_k_avx512, NULL, "avx512 " n " x q8_K", NULL, RP, NULL,        \
                     nb_mm_##s##_batch_q8_k_avx512, bmin, bgroup, nb_mm_##s##_small_avx512, smax, 1}

#define FL(t, s)                                                                                                 \
    [NB_TYPE_##t] = {NB_TYPE_F32, nb_mm_##s##_f32_avx512, nb_mm_##s##_f32_avx512, "avx512 " #s " x f32",            \
                     "avx512 " #s " x f32", RT, .mm_small = nb_mm_##s##_small_f32_avx512, .small_max = SMALL_MAX}

/* Q4_K, Q5_K and Q6_K: kquants_avx512.c; F32, F16 and BF16: floats_avx512.c. The block types'
 * float route (mm_f32 NULL here) comes from the AVX2 table (dispatch). */
const nb_kernel nb_kernels_avx512[NB_KERNEL_TYPES] = {
    Q8B(Q4_0, q4_0, NB_ACT_Q8_0X, mm_q4_0_all, NB_ACT_Q8_0X, NB_BLOCK_MIN_SMALL),
    Q8B(Q5_0, q5_0, NB_ACT_Q8_0X, mm_q5_0_all, NB_ACT_Q8_0X, NB_BLOCK_MIN_SMALL),
    Q8B(Q8_0, q8_0, NB_ACT_Q8_0X, mm_q8_0_all, NB_ACT_Q8_0X, NB_BLOCK_MIN_SMALL),
    Q8(MXFP4, mxfp4, NB_ACT_Q8_0X_MX, mm_mxfp4_all),
    [NB_KERNEL_Q4_0_X8] = {NB_ACT_Q8_0X_MX, mm_q4_0x8, NULL, "avx512 q4_0 x q8_0 (8-row order)", NULL, RP,
                           .mm_small = mm_small_q4_0x8, .small_max = SMALL_MAX},
    Q8B(NVFP4, nvfp4, NB_ACT_Q8_0X_NV, mm_nvfp4_all, NB_ACT_Q8_0X_NV, NB_BLOCK_MIN), Q81(Q4_1, q4_1), Q81(Q5_1, q5_1),
    /* Q4_K: its panels (kpanel.h) from 16 tokens, in cache 0.37 ns per row, token and 32 elements there
     * where the small batches' groups of 8 take 0.42 */
    [NB_TYPE_Q4_K] = {NB_TYPE_Q8_K, nb_mm_q4_k_q8_k_avx512, NULL, "avx512 q4_K x q8_K", NULL, RP, NULL,
                      nb_mm_q4_k_batch_q8_k_avx512, 4, 4, nb_mm_q4_k_small_kt_avx512, 15, 1, nb_mm_q4_k_block_avx512,
                      NB_BLOCK_MIN, NB_TYPE_Q8_K, "avx512 q4_K x q8_K (block)"},
    /* Q5_K: from 8 tokens its batch order (tiles, then the 16-row panels from 16) */
    [NB_TYPE_Q5_K] = {NB_TYPE_Q8_K, nb_mm_q5_k_q8_k_avx512, NULL, "avx512 q5_K x q8_K", NULL, RP, NULL,
                      nb_mm_q5_k_batch_q8_k_avx512, 8, 1},
    QKB(Q6_K, q6_k, "q6_K", 8, 1, 16), FL(F32, f32), FL(BF16, bf16),
    [NB_TYPE_F16] = {NB_TYPE_F32, nb_mm_f16_f32_avx512, nb_mm_f16_f32_avx512, "avx512 f16 x f32", "avx512 f16 x f32", RT,
                     nb_mm_f16_vec_f32_avx512, .mm_small = nb_mm_f16_small_f32_avx512, .small_max = SMALL_MAX},
};
