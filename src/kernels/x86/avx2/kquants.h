/*
 * kquants.h: Q4_K, Q5_K and Q6_K weights against Q8_K activations ("W4A8" in integers), written once
 * for AVX2 (kquants_avx2.c: tiles of up to 4 rows x 2 tokens, 16 registers) and for the AVX-512
 * set (x86/avx512/kquants_avx512.c: the same instructions on 32 registers, so tiles of 4 x 4
 * tokens decode each block once per 4 tokens, and VNNI's vpdpwssd folds the scale multiply and
 * the add). The including file defines KQ_TMAX, KQ_ISA (the name suffix) and
 *   static inline __m256i kq_dot16(__m256i acc, __m256i pairs, __m256i scales)
 * returning acc + vpmaddwd(pairs, scales). It may also define KQ_GEMV and supply its own
 * one-token tiles of R rows, kq_gemv_q4_k(R, nb, w, ws, rs, a, y) and kq_gemv_q6_k(...), which
 * the R x 1 tiles of Q4_K and Q6_K then call (the AVX-512 set: a layout that only pays with one
 * token). It also defines kp_codes4, kp_scaled, kp_scale_word and KP_Q6_RUN for the GEMM panels
 * of many tokens (kpanel.h, included below).
 *
 * Q4_K: codes 0..15 are unsigned, so vpmaddubsw takes them directly against the signed Q8_K
 * bytes (pair sums <= 2*15*127); multiplying the pairs with the sub-block's 6-bit scale and
 * summing them two by two gives 8 lanes of scaled sums, which the contract (kernels.h) sums to
 * one integer per block (one fma per block and row). The minimum never touches the elements:
 * sum_i m_j*a_i over a sub-block is m_j times the activation block's precomputed bsums, one
 * scalar per block and row (the minus of d*sc*q - dmin*m applied once at the end). Both integers
 * of the tile's rows come out of one vphaddd tree each, row r in lane r, so that one conversion
 * and one fma per block advance every row's chain.
 * Q5_K: Q4_K with a fifth bit per code from qh, or'ed in at bit 4 (codes 0..31), but 8 lanes:
 * lane k the scaled sum of elements 4k..4k+3 of each 32-element group; in a batch one lane.
 * Q6_K: codes 0..63 (six bits, unsigned) meet the activations directly (pair sums <= 2*63*127);
 * the offset's -32*sc*a comes from the bsums: lane k takes -32 * (sc_2k*bsum_2k +
 * sc_2k+1*bsum_2k+1), the 32 elements 32k..32k+31 (kernels.h), one vpmaddwd and a shift per
 * block and token.
 */
#ifndef NB_KERNELS_X86_KQUANTS_H
#define NB_KERNELS_X86_KQUANTS_H

#include <string.h>

#include "formats/blocks.h"
#include "kernels/x86/avx2/avx2.h"

#define RMAX 4
#define TMAX KQ_TMAX

/* The 8 six-bit scales and mins of a Q4_K (or Q5_K) block (layout: nb_k_scale_min) as bytes:
 * [scales 0..7 | mins 0..7]. From the dwords A = bytes 0-3, B = 4-7, C = 8-11 (one 16-byte load
 * that ends inside the block: qs or qh follows): scales 0-3 = A & 63, mins 0-3 = B & 63,
 * scales 4-7 = low nibbles of C | top two bits of A << 4, mins 4-7 = high nibbles of C | top two
 * bits of B << 4; A and B in dwords 0 and 1, so C's nibbles go to the same dwords (C twice,
 * shifted by 0 and 4) and one unpack interleaves the low and high halves. Vector instructions
 * only: the scalar unpacking of four rows was a fifth of the GEMV's instructions. */
static inline __m128i k_scales_mins(const uint8_t *q) {
    const __m128i x = _mm_loadu_si128((const __m128i *)q);
    const __m128i lo = _mm_and_si128(x, _mm_set1_epi8(63));                                    /* dwords 0, 1: A, B & 63 */
    const __m128i top = _mm_and_si128(_mm_srli_epi32(x, 2), _mm_set1_epi8(0x30));             /* their top bits << 4 */
    const __m128i c = _mm_srlv_epi32(_mm_shuffle_epi32(x, 0xAA), _mm_setr_epi32(0, 4, 0, 0)); /* C, C >> 4 */
    const __m128i hi = _mm_or_si128(_mm_and_si128(c, _mm_set1_epi8(15)), top);
    return _mm_unpacklo_epi32(lo, hi); /* A' C' B' C'': scales 0-3, 4-7, mins 0-3, 4-7 */
}

/* The sums of the 8 dwords of each of v[0..3], as floats in lanes 0..3 (one vphaddd tree; the
 * integers exact, each rounded once by the conversion). */
static inline __m128 kq_sums4(const __m256i v[4]) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    return _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
}

/* The fifth bits of Q5_K's 32-element group g (bit g of each qh byte) at bit 4 of each byte. */
static inline __m256i q5_high(__m256i qh, int g) {
    const __m256i v = g <= 4 ? _mm256_slli_epi16(qh, 4 - g) : _mm256_srli_epi16(qh, g - 4);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

#include "kernels/x86/avx2/kpanel.h" /* after k_scales_mins, which its Q4_K decoder reads */

/* Q4_K, and Q5_K (five): the same but for a fifth bit per code from qh (codes 0..31: vpmaddubsw's
 * pair sums stay within 2*31*127). batch: the type's order in a batch (kernels.h): Q4_K's one fma
 * per 64 elements, Q5_K's one lane per block, the weight's d and dmin first. */
static inline __attribute__((always_inline)) void tile_q45_k(int five, int batch, int R, int T, int64_t nb,
                                                             const uint8_t *w, size_t ws, size_t rs, const uint8_t *a,
                                                             size_t as, float *y, size_t ldy) {
#ifdef KQ_GEMV
    if (T == 1 && !five && !batch) {
        kq_gemv_q4_k(R, nb, w, ws, rs, a, y);
        return;
    }
#endif
    __m256 acc[RMAX][TMAX]; /* Q5_K's 8 lanes */
    __m128 acc1[TMAX], macc[TMAX]; /* Q4_K's one lane and the minimum's chain, row r in lane r */
    __m128 bacc[RMAX], bmacc[RMAX]; /* the same in a batch, token t in lane t */
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        bacc[r] = bmacc[r] = _mm_setzero_ps();
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc1[t] = macc[t] = _mm_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int64_t i = 0; i < nb; i++) {
        const nb_block_q8_k *ab[TMAX];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) ab[t] = (const nb_block_q8_k *)(a + (size_t)t * as) + i;
        /* Q4_K: each row's block sum and minimum sum in 8 lanes, summed across the tile's rows by
         * one vphaddd tree (rows beyond R as zeros) */
        __m256i rsum[RMAX][TMAX], rmin[RMAX][TMAX];
        uint64_t dh[2] = {0, 0}; /* the rows' d and dmin (each block's first 4 bytes): [d0 dmin0 d1 dmin1 ...] */
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            /* Q4_K's and Q5_K's blocks share d, dmin and scales; Q5_K has qh before qs */
            const nb_block_q5_k *b5 = (const nb_block_q5_k *)(w + (size_t)r * rs * ws) + i;
            const nb_block_q4_k *b = five ? (const nb_block_q4_k *)b5 : (const nb_block_q4_k *)(w + (size_t)r * rs * ws) + i;
            const uint8_t *qs = five ? b5->qs : b->qs;
            for (int l = 0; l < (five ? 176 : 144); l += 64) _mm_prefetch((const char *)b + NB_PREFETCH_BYTES + l, _MM_HINT_T0);
            const __m256i qh = five ? _mm256_loadu_si256((const __m256i *)b5->qh) : _mm256_setzero_si256();
            const __m128i sm = k_scales_mins(b->scales);
            /* scale j as int16 in every word of both halves: one byte shuffle per j */
            const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
            float d = _cvtsh_ss(b->d), dmin = _cvtsh_ss(b->dmin);
            uint32_t ddr;
            memcpy(&ddr, b, 4);
            dh[r / 2] |= (uint64_t)ddr << 32 * (r & 1);
            const __m256i mdup = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm)); /* m0 m0 m1 m1 ... */
            __m256i ms[TMAX]; /* lane j: m_j * (bsums[2j] + bsums[2j+1]) */
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) ms[t] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)ab[t]->bsums), mdup);
            __m256i isum[TMAX], half[TMAX], pair[2][TMAX]; /* batch: vphaddd of groups 2c, 2c+1 per c pair */
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) isum[t] = _mm256_setzero_si256();
            #pragma GCC unroll 8
            for (int c = 0; c < 4; c++) {
                __m256i qv = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
                __m256i lo = _mm256_and_si256(qv, m4), hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
                if (five) {
                    lo = _mm256_or_si256(lo, q5_high(qh, 2 * c));
                    hi = _mm256_or_si256(hi, q5_high(qh, 2 * c + 1));
                }
                __m256i sl = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * c))));
                __m256i sh = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * c + 1))));
                #pragma GCC unroll 8
                for (int t = 0; t < T; t++) {
                    __m256i al = _mm256_loadu_si256((const __m256i *)(ab[t]->qs + 64 * c));
                    __m256i ah = _mm256_loadu_si256((const __m256i *)(ab[t]->qs + 64 * c + 32));
                    if (batch && !five) {
                        const __m256i sc = kq_dot16(kq_dot16(_mm256_setzero_si256(), _mm256_maddubs_epi16(lo, al), sl),
                                                    _mm256_maddubs_epi16(hi, ah), sh);
                        if (c & 1)
                            pair[c / 2][t] = _mm256_hadd_epi32(half[t], sc);
                        else
                            half[t] = sc;
                    } else {
                        isum[t] = kq_dot16(kq_dot16(isum[t], _mm256_maddubs_epi16(lo, al), sl), _mm256_maddubs_epi16(hi, ah), sh);
                        NB_CHAIN(isum[t]); /* one chain: GCC's tree of the 8 products spilled them */
                    }
                }
            }
            if (batch && five) {
                /* Q5_K: the block's sums of codes and of minimums of the tile's tokens, token t
                 * in lane t (one vphaddd tree each, tokens beyond T as zeros), then
                 * fma(fma(-dmin, s2, d * s1), da, acc) */
                __m128 sv[2];
                #pragma GCC unroll 2
                for (int k = 0; k < 2; k++) {
                    __m256i v[4];
                    #pragma GCC unroll 4
                    for (int t = 0; t < 4; t++) v[t] = t < T ? (k ? ms[t] : isum[t]) : _mm256_setzero_si256();
                    sv[k] = kq_sums4(v);
                }
                float da[4] = {0};
                #pragma GCC unroll 4
                for (int t = 0; t < T; t++) da[t] = ab[t]->d;
                const __m128 res = _mm_fnmadd_ps(_mm_set1_ps(dmin), sv[1], _mm_mul_ps(_mm_set1_ps(d), sv[0]));
                bacc[r] = _mm_fmadd_ps(res, _mm_loadu_ps(da), bacc[r]);
                continue;
            }
            if (batch) {
                /* per 64 elements c: the sums S_c (dword c of each half of the vphaddd tree, the two
                 * halves added) and the minimums' m_2c*B_2c + m_2c+1*B_2c+1; transposed so that
                 * one fma per c advances the chains of all the tile's tokens */
                __m128 sv[4], mv[4];
                float da[4] = {0};
                #pragma GCC unroll 4
                for (int t = 0; t < 4; t++) {
                    if (t < T) {
                        const __m256i h = _mm256_hadd_epi32(pair[0][t], pair[1][t]);
                        sv[t] = _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
                        mv[t] = _mm_cvtepi32_ps(_mm_hadd_epi32(_mm256_castsi256_si128(ms[t]), _mm256_extracti128_si256(ms[t], 1)));
                        da[t] = ab[t]->d;
                    } else {
                        sv[t] = mv[t] = _mm_setzero_ps();
                    }
                }
                _MM_TRANSPOSE4_PS(sv[0], sv[1], sv[2], sv[3]);
                _MM_TRANSPOSE4_PS(mv[0], mv[1], mv[2], mv[3]);
                const __m128 dav = _mm_loadu_ps(da), dd = _mm_mul_ps(_mm_set1_ps(d), dav), dm = _mm_mul_ps(_mm_set1_ps(dmin), dav);
                #pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    bacc[r] = _mm_fmadd_ps(dd, sv[c], bacc[r]);
                    bmacc[r] = _mm_fmadd_ps(dm, mv[c], bmacc[r]);
                }
                continue;
            }
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                rmin[r][t] = ms[t];
                if (five)
                    acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * ab[t]->d), _mm256_cvtepi32_ps(isum[t]), acc[r][t]);
                else
                    rsum[r][t] = isum[t];
            }
        }
        if (batch) continue;
        const __m256 dm = _mm256_permutevar8x32_ps(_mm256_cvtph_ps(_mm_set_epi64x((long long)dh[1], (long long)dh[0])),
                                                   _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7)); /* d x 4, dmin x 4 */
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            __m256i v[2][RMAX];
            #pragma GCC unroll 8
            for (int r = 0; r < RMAX; r++) {
                v[0][r] = r < R ? rmin[r][t] : _mm256_setzero_si256();
                v[1][r] = r < R && !five ? rsum[r][t] : _mm256_setzero_si256();
            }
            __m128 tot[2];
            #pragma GCC unroll 2
            for (int k = 0; k < 2; k++) tot[k] = kq_sums4(v[k]);
            const __m256 dda = _mm256_mul_ps(dm, _mm256_set1_ps(ab[t]->d));
            macc[t] = _mm_fmadd_ps(_mm256_extractf128_ps(dda, 1), tot[0], macc[t]);
            if (!five) acc1[t] = _mm_fmadd_ps(_mm256_castps256_ps128(dda), tot[1], acc1[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) {
        float one[4], mins[4];
        _mm_storeu_ps(one, acc1[t]);
        _mm_storeu_ps(mins, macc[t]);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            float bv[4];
            _mm_storeu_ps(bv, _mm_sub_ps(bacc[r], bmacc[r]));
            y[(size_t)t * ldy + (size_t)r * rs] = batch ? bv[t] : (five ? nb_avx2_lane_sum(acc[r][t]) : one[r]) - mins[r];
        }
    }
}

/* The four 32-element groups of half h of a Q6_K block (groups 4h .. 4h + 3), each in element
 * order as unsigned codes 0..63: low nibble | two high bits moved to bits 4-5 (16-bit shifts:
 * what crosses into a neighbour byte is masked off). */
static inline __attribute__((always_inline)) void q6_k_codes(const nb_block_q6_k *b, int h, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
    const __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
    const __m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
}

/* Q6_K; batch: its order in a batch, the block's whole sum scaled by the weight's d, then fma'd
 * with the activation's (kernels.h). */
static inline __attribute__((always_inline)) void tile_q6_k_in(int batch, int R, int T, int64_t nb, const uint8_t *w,
                                                            size_t ws, size_t rs, const uint8_t *a, size_t as,
                                                            float *y, size_t ldy) {
#ifdef KQ_GEMV
    if (T == 1 && !batch) {
        kq_gemv_q6_k(R, nb, w, ws, rs, a, y);
        return;
    }
#endif
    __m256 acc[RMAX][TMAX];
    float acc1[RMAX][TMAX]; /* batch: one lane */
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps(), acc1[r][t] = 0;
    /* a block's 16 int8 scales, even ones first (see s16 below) */
    const __m128i evens = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (int64_t i = 0; i < nb; i++) {
        const nb_block_q8_k *ab[TMAX];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) ab[t] = (const nb_block_q8_k *)(a + (size_t)t * as) + i;
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const nb_block_q6_k *b = (const nb_block_q6_k *)(w + (size_t)r * rs * ws) + i;
            for (int l = 0; l < 4; l++) _mm_prefetch((const char *)b + NB_PREFETCH_BYTES + 64 * l, _MM_HINT_T0);
            /* the sums start at the offset's share: lane k = -32 * (sc_2k*bsum_2k + sc_2k+1*bsum_2k+1) */
            const __m128i sc = _mm_loadu_si128((const __m128i *)b->scales);
            const __m256i sc16 = _mm256_cvtepi8_epi16(sc);
            /* word G of the low half: the first scale of group G (elements 32G..32G+15), of the
             * high half its second, as the group's elements lie in a register */
            const __m256i s16 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, evens));
            __m256i isum[TMAX];
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++)
                isum[t] = _mm256_slli_epi32(
                    _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)ab[t]->bsums), _mm256_sub_epi16(_mm256_setzero_si256(), sc16)), 5);
            #pragma GCC unroll 8
            for (int h = 0; h < 2; h++) {
                __m256i q[4];
                q6_k_codes(b, h, q);
                #pragma GCC unroll 8
                for (int g = 0; g < 4; g++) {
                    const int G = 4 * h + g; /* word G of each half of s16, in every word of that half */
                    const __m256i sv = _mm256_shuffle_epi8(s16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * G)));
                    #pragma GCC unroll 8
                    for (int t = 0; t < T; t++) {
                        __m256i av = _mm256_loadu_si256((const __m256i *)(ab[t]->qs + 128 * h + 32 * g));
                        isum[t] = kq_dot16(isum[t], _mm256_maddubs_epi16(q[g], av), sv);
                    }
                }
            }
            float d = _cvtsh_ss(b->d);
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                if (batch)
                    acc1[r][t] = __builtin_fmaf(d * (float)nb_avx2_hsum_epi32(isum[t]), ab[t]->d, acc1[r][t]);
                else
                    acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d * ab[t]->d), _mm256_cvtepi32_ps(isum[t]), acc[r][t]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) y[(size_t)t * ldy + (size_t)r * rs] = batch ? acc1[r][t] : nb_avx2_lane_sum(acc[r][t]);
}

#define KQ_TILE_OF(name, body)                                                                                \
    static inline __attribute__((always_inline)) void tile_##name(int R, int T, int64_t nb, const uint8_t *w,     \
                                                                  size_t ws, size_t rs, const uint8_t *a,       \
                                                                  size_t as, float *y, size_t ldy) {            \
        body;                                                                                                  \
    }
KQ_TILE_OF(q4_k, tile_q45_k(0, 0, R, T, nb, w, ws, rs, a, as, y, ldy))
KQ_TILE_OF(q4_k_batch, tile_q45_k(0, 1, R, T, nb, w, ws, rs, a, as, y, ldy))
KQ_TILE_OF(q5_k, tile_q45_k(1, 0, R, T, nb, w, ws, rs, a, as, y, ldy))
KQ_TILE_OF(q5_k_batch, tile_q45_k(1, 1, R, T, nb, w, ws, rs, a, as, y, ldy))
KQ_TILE_OF(q6_k, tile_q6_k_in(0, R, T, nb, w, ws, rs, a, as, y, ldy))
KQ_TILE_OF(q6_k_batch, tile_q6_k_in(1, R, T, nb, w, ws, rs, a, as, y, ldy))

/* The batch orders' GEMM of many tokens (kpanel.h's panels), from KQ_PANEL_MIN_TOKENS tokens. */
#define KQ_PANEL_MIN_TOKENS 16

#define KQ_CAT3(a, b, c) a##b##c
#define KQ_NAME(ty, isa) KQ_CAT3(nb_mm_##ty, _q8_k_, isa)
#define TILE(ty, R, T)                                                                                   \
    static void ty##_##R##x##T(int64_t nb, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a,        \
                               size_t as, float *y, size_t ldy) {                                         \
        tile_##ty(R, T, nb, w, ws, rs, a, as, y, ldy);                                                    \
    }
#if KQ_TMAX == 4
#define TILES_R(ty, R) TILE(ty, R, 1) TILE(ty, R, 2) TILE(ty, R, 3) TILE(ty, R, 4)
#define ROW(ty, R) ty##_##R##x1, ty##_##R##x2, ty##_##R##x3, ty##_##R##x4
#elif KQ_TMAX == 2
#define TILES_R(ty, R) TILE(ty, R, 1) TILE(ty, R, 2)
#define ROW(ty, R) ty##_##R##x1, ty##_##R##x2
#else
#error "KQ_TMAX is 2 or 4"
#endif
#define KERNEL(ty, panel_fn)                                                                              \
    TILES_R(ty, 1) TILES_R(ty, 2) TILES_R(ty, 3) TILES_R(ty, 4)                                           \
    static const nb_avx2_tile_fn tiles_##ty[RMAX * TMAX] = {ROW(ty, 1), ROW(ty, 2), ROW(ty, 3), ROW(ty, 4)}; \
    void KQ_NAME(ty, KQ_ISA)(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,   \
                             int64_t nt, float *y, size_t ldy) {                                         \
        const nb_mm_fn panel = panel_fn;                                                                  \
        if (panel && nt >= KQ_PANEL_MIN_TOKENS)                                                           \
            panel(n, w, ws, a, as, nr, nt, y, ldy);                                                       \
        else                                                                                              \
            nb_avx2_tile_loop(tiles_##ty, TMAX, n / NB_QK_K, w, ws, a, as, nr, nt, y, ldy);               \
    }

KERNEL(q4_k, NULL)
/* the including set's K-quant panels: kpanel.h's, or its own (AVX-512: 16 rows) */
#ifndef KQ_Q4K_PANEL
#define KQ_Q4K_PANEL q4k_panel_gemm
#endif
KERNEL(q4_k_batch, KQ_Q4K_PANEL)
KERNEL(q5_k, NULL)
KERNEL(q6_k, NULL)
#ifndef KQ_Q6K_PANEL
#define KQ_Q6K_PANEL q6_panel_gemm
#endif
KERNEL(q6_k_batch, KQ_Q6K_PANEL)

/* Q6_K's batch order (kernels.h: the block's whole integer sum, scaled by the weight's d, then
 * fma'd with the token's) for up to 4 rows against one group of 8 tokens, token t in lane t
 * (NB_ACT_Q8_KT), a row at a time (AVX2's 16 registers hold one row's chain and scales; both
 * sets run this body). The codes (0..63) come from q6_k_codes; each 16-element half of a
 * 32-element group goes to both 128-bit lanes (vperm2i128), its quads are broadcast (vpshufd)
 * against the tokens' quads by vpmaddubsw (pair sums within 2*63*127), two such added as words
 * (within 32004), and one vpmaddwd by the sub-block's scale in both words of every dword widens
 * and scales them. The offset's share, -32 * sum_m sc_m * bsum_m, starts each token's sum: one
 * vpmaddwd per pair of sub-blocks of the tokens' bsum pairs by the scale pair. */
static inline __attribute__((always_inline)) void q6k_kt(int nr, int64_t nb, const uint8_t *w, size_t ws, size_t rs,
                                                         const uint8_t *a, float *y, size_t ldy) {
    const nb_block_q8_kt *ab = (const nb_block_q8_kt *)a;
    for (int r = 0; r < nr; r++) {
        const nb_block_q6_k *row = (const nb_block_q6_k *)(w + (size_t)r * rs * ws);
        __m256 acc = _mm256_setzero_ps(); /* lane t: token t's chain */
        for (int64_t i = 0; i < nb; i++) {
            const nb_block_q8_kt *at = ab + i;
            const nb_block_q6_k *b = row + i;
            for (int l = 0; l < 4; l++) _mm_prefetch((const char *)b + NB_PREFETCH_BYTES + 64 * l, _MM_HINT_T0);
            const __m128i sc = _mm_loadu_si128((const __m128i *)b->scales);
            const __m256i sp = _mm256_cvtepi8_epi16(sc); /* dword j: sc_2j | sc_2j+1 << 16 */
            /* dword m of sd[0] (scales 0-7) and sd[1] (8-15): sc_m in both words */
            const __m256i sd[2] = {_mm256_cvtepi8_epi16(_mm_unpacklo_epi8(sc, sc)), _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(sc, sc))};
            __m256i off = _mm256_setzero_si256();
            #pragma GCC unroll 8
            for (int j = 0; j < 8; j++)
                off = _mm256_add_epi32(off, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)at->bp[j]),
                                                               _mm256_permutevar8x32_epi32(sp, _mm256_set1_epi32(j))));
            __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
            #pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m256i q[4];
                q6_k_codes(b, h, q);
                #pragma GCC unroll 4
                for (int g = 0; g < 4; g++) {
                    const int G = 4 * h + g;
                    #pragma GCC unroll 2
                    for (int e = 0; e < 2; e++) { /* sub-block m = 2G + e: quads 4e .. 4e + 3 of the group */
                        const int m = 2 * G + e;
                        const __m256i qd = e ? _mm256_permute2x128_si256(q[g], q[g], 0x11)
                                             : _mm256_permute2x128_si256(q[g], q[g], 0x00);
                        __m256i x[2];
                        #pragma GCC unroll 2
                        for (int k = 0; k < 2; k++)
                            x[k] = _mm256_add_epi16(
                                _mm256_maddubs_epi16(nb_avx2_dword_lane(qd, 2 * k), _mm256_loadu_si256((const __m256i *)at->qs[G][4 * e + 2 * k])),
                                _mm256_maddubs_epi16(nb_avx2_dword_lane(qd, 2 * k + 1),
                                                     _mm256_loadu_si256((const __m256i *)at->qs[G][4 * e + 2 * k + 1])));
                        const __m256i S = _mm256_permutevar8x32_epi32(sd[m / 8], _mm256_set1_epi32(m % 8));
                        isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_madd_epi16(x[0], S), _mm256_madd_epi16(x[1], S)));
                        NB_CHAIN(isum);
                    }
                }
            }
            acc = _mm256_fmadd_ps(_mm256_mul_ps(nb_avx2_fp16_bcast(b->d), _mm256_cvtepi32_ps(isum)),
                                  _mm256_loadu_ps(at->d), acc);
        }
        float v[8];
        _mm256_storeu_ps(v, acc);
        #pragma GCC unroll 8
        for (int t = 0; t < 8; t++) y[(size_t)t * ldy + (size_t)r * rs] = v[t];
    }
}
NB_KT_TILES(kt_tiles_q6_k, q6k_kt)

/* Q6_K's small batches: from 8 tokens all of them in its batch order (groups of 8 by q6k_kt, the
 * rest by the batch tiles), below 8 none (the table's 8 and 1; small_kt). */
#define KQ_SMALL_NAME(ty, isa) KQ_CAT3(nb_mm_##ty, _small_, isa)
void KQ_SMALL_NAME(q6_k, KQ_ISA)(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                                 float *y, size_t ldy) {
    const int64_t nb = n / NB_QK_K;
    if (nt < 8)
        nb_avx2_tile_loop_small(tiles_q6_k, TMAX, nb, w, ws, a, as, nr, nt, y, ldy);
    else
        nb_avx2_tile_loop_small_kt(kt_tiles_q6_k, nb_act_kt_groups(a, as, nt), (size_t)nb * sizeof(nb_block_q8_kt), nt / 8,
                                   tiles_q6_k_batch, TMAX, tiles_q6_k_batch, TMAX, nt, nb, w, ws, a, as, nr, nt, y, ldy);
}

#endif
