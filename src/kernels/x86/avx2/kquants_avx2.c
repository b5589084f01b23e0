/*
 * kquants_avx2.c: the AVX2 Q4_K, Q5_K and Q6_K kernels (body in kquants.h): 16 registers hold
 * tiles of up to 4 rows x 2 tokens; the scale multiply is vpmaddwd then an add. The batch orders
 * of Q6_K and Q4_K (kernels.h) go through panels instead from 16 tokens (kpanel.h: 8 rows, Q4_K 16), and
 * their small batches take groups of 8 tokens in the lanes (q4k_kt here, kquants.h's q6k_kt).
 * One token of Q4_K on one thread takes an 8-row tile instead (q4k_gemv8, kernels.h mm_solo).
 */
#include <immintrin.h>
#include <string.h>

#include "formats/blocks.h"
#include "kernels/x86/avx2/avx2.h"

#define KQ_TMAX 2
#define KQ_ISA avx2
static inline __m256i kq_dot16(__m256i acc, __m256i pairs, __m256i scales) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scales));
}
/* The K-quant panels' group sums (kpanel.h): vpmaddubsw's pair sums added as words, then one
 * kq_dot16 against the scale in both words of each dword; words hold 8 Q4_K groups (8*2*15*127)
 * but only 2 of Q6_K's (2*2*63*127 < 2^15). */
static inline __m256i kp_codes4(__m256i acc, __m256i q, const int8_t *a4) { return nb_avx2_codes4(acc, q, a4); }
static inline __m256i kp_scaled(__m256i isum, __m256i acc, __m256i s) { return kq_dot16(isum, acc, s); }
static inline __m256i kp_scale_word(__m256i s32) { return _mm256_blend_epi16(s32, _mm256_slli_epi32(s32, 16), 0xAA); }
#define KP_Q6_RUN 2

#include "kernels/x86/avx2/kquants.h"

/* Q5_K's batch order (kernels.h): its tiles, and from KQ_PANEL_MIN_TOKENS kpanel.h's 16-row panels */
KERNEL(q5_k_batch, q5k_panel_gemm)

/* Up to 4 rows, one at a time, against one group of 8 tokens in Q4_K's batch order (kernels.h),
 * token t in lane t of every register (NB_ACT_Q8_KT, as the AVX-512 set's q4k_kt). Per
 * 32-element group and 4 codes of a row, the row's 4 codes broadcast within their 128-bit lane
 * meet the 8 tokens' 4 codes in one vpmaddubsw; a group's 8 such word pair sums (each within
 * 2*15*127) add up within 30480, and one vpmaddwd by the group's scale in every word gives
 * sc_g*G_g per token. S_c = sc_2c*G_2c + sc_2c+1*G_2c+1, M_c = m_2c*B_2c + m_2c+1*B_2c+1 (one
 * vpmaddwd of the tokens' B pairs by the row's minimum pair), one fma each per 64 elements: the
 * batch order's integers and chains. About 38 instructions per row, token and block (the object
 * code's loop), where the 2-token tiles take about 75; 8 tokens run 2.3x faster than through them
 * (bench_batch, 1 thread). */
static inline __attribute__((always_inline)) void q4k_kt(int nr, int64_t nb, const uint8_t *w, size_t ws, size_t rs,
                                                         const uint8_t *a, float *y, size_t ldy) {
    const nb_block_q8_kt *ab = (const nb_block_q8_kt *)a;
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi16(1);
    /* a row at a time over the blocks: its two chains and the row's unpacked scales stay in the 16
     * registers (4 rows at once spilled a third of the tile's instructions to the stack) */
    for (int r = 0; r < nr; r++) {
        const nb_block_q4_k *row = (const nb_block_q4_k *)(w + (size_t)r * rs * ws);
        __m256 accs = _mm256_setzero_ps(), accm = accs; /* lane t: token t's chains of the sums and of the minimums */
        for (int64_t i = 0; i < nb; i++) {
            const nb_block_q8_kt *at = ab + i;
            const nb_block_q4_k *b = row + i;
            for (int l = 0; l < 144; l += 64) _mm_prefetch((const char *)b + NB_PREFETCH_BYTES + l, _MM_HINT_T0);
            const __m128i sm = k_scales_mins(b->scales);
            const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm)); /* scales as words */
            const __m256i mp = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8))); /* dword c: m_2c | m_2c+1 << 16 */
            const __m256 D = _mm256_loadu_ps(at->d);
            const __m256 dr = _mm256_mul_ps(nb_avx2_fp16_bcast(b->d), D);
            const __m256 dm = _mm256_mul_ps(nb_avx2_fp16_bcast(b->dmin), D);
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                __m256i l = _mm256_setzero_si256(), h = l;
                #pragma GCC unroll 2
                for (int half = 0; half < 2; half++) {
                    /* codes 16 half .. 16 half + 15 of the 64 elements in both 128-bit lanes */
                    const __m256i qv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b->qs + 32 * c + 16 * half)));
                    const __m256i ql = _mm256_and_si256(qv, m4), qh = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
                    #pragma GCC unroll 4
                    for (int k = 0; k < 4; k++) {
                        l = _mm256_add_epi16(l, _mm256_maddubs_epi16(nb_avx2_dword_lane(ql, k),
                                                                     _mm256_loadu_si256((const __m256i *)at->qs[2 * c][4 * half + k])));
                        h = _mm256_add_epi16(h, _mm256_maddubs_epi16(nb_avx2_dword_lane(qh, k),
                                                                     _mm256_loadu_si256((const __m256i *)at->qs[2 * c + 1][4 * half + k])));
                        NB_CHAIN(l); /* as chains: GCC's trees of the 8 terms spilled */
                        NB_CHAIN(h);
                    }
                }
                const __m256i slo = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * c))));
                const __m256i shi = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * c + 1))));
                const __m256i S = _mm256_add_epi32(_mm256_madd_epi16(l, slo), _mm256_madd_epi16(h, shi));
                /* B_2c | B_2c+1 << 16 per token, B_j = bsums[2j] + bsums[2j+1] (|.| <= 32*127) */
                const __m256i b0 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)at->bp[2 * c]), one);
                const __m256i b1 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)at->bp[2 * c + 1]), one);
                const __m256i M = _mm256_madd_epi16(_mm256_blend_epi16(b0, _mm256_slli_epi32(b1, 16), 0xAA),
                                                    nb_avx2_dword_lane(mp, c));
                accs = _mm256_fmadd_ps(dr, _mm256_cvtepi32_ps(S), accs);
                accm = _mm256_fmadd_ps(dm, _mm256_cvtepi32_ps(M), accm);
            }
        }
        float v[8];
        _mm256_storeu_ps(v, _mm256_sub_ps(accs, accm));
        #pragma GCC unroll 8
        for (int t = 0; t < 8; t++) y[(size_t)t * ldy + (size_t)r * rs] = v[t];
    }
}
NB_KT_TILES(kt_tiles_q4_k, q4k_kt)

/* Dword r of v's bytes j0 and j1 of dword r as its two words (a constant control after inlining). */
static inline __m256i q4k_bytes_words(__m256i v, int j0, int j1) {
    const __m256i dword = _mm256_setr_epi32(0, 0x00040004, 0x00080008, 0x000C000C, 0, 0x00040004, 0x00080008, 0x000C000C);
    return _mm256_shuffle_epi8(v, _mm256_add_epi32(dword, _mm256_set1_epi32((int)(0x80008000u | (unsigned)j1 << 16 | (unsigned)j0))));
}

/* Q4_K's GEMV tile of 8 rows (rs rows apart: nb_avx2_gemv8_loop's eighths) against one token, in
 * the GEMV order (kernels.h: a block's exact integer sum and minimum sum per row, one fma each).
 * Each 32-byte run of codes of the 8 rows is transposed as it is loaded (nb_transpose8: dword r
 * of register k = row r's bytes 4k..4k+3), so that one broadcast of the token's 4 bytes and one
 * vpmaddubsw serve 8 rows, a group's 8 pair sums add as words (within 8*2*15*127 < 2^15) and one
 * vpmaddwd applies its scale to all 8 rows; the blocks' 16-byte heads (d, dmin, the packed
 * scales) are transposed likewise, so the six-bit scales and minimums unpack for 8 rows at once
 * (k_scales_mins' rule) and one conversion and fma per block advance 8 chains. The 4-row tiles
 * spend a shuffle on each scale, unpack each row's scales alone and reduce the rows' sums by
 * vphaddd trees: 19.5-23 cycles per row and block here in L1 on a Zen 3 core, 27-31 there. */
static void q4k_gemv8(int64_t nb, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, size_t as, float *y,
                      size_t ldy) {
    (void)as, (void)ldy;
    const __m256i m4 = _mm256_set1_epi8(15), m6 = _mm256_set1_epi8(63), top = _mm256_set1_epi8(0x30);
    __m256 accs = _mm256_setzero_ps(), accm = accs; /* lane r: row r's chains of the sums and of the minimums */
    for (int64_t i = 0; i < nb; i++) {
        const nb_block_q8_k *ab = (const nb_block_q8_k *)a + i;
        const nb_block_q4_k *b[8];
        #pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            b[r] = (const nb_block_q4_k *)(w + (size_t)r * rs * ws) + i;
            for (int l = 0; l < 144; l += 64) _mm_prefetch((const char *)b[r] + NB_PREFETCH_BYTES + l, _MM_HINT_T0);
        }
        /* the heads: rows r and r + 4 in the halves of x[r], so that a 4 x 4 transpose within the
         * halves leaves dword r = row r's d | dmin << 16 (dd), and the packed scales' dwords A, B, C */
        __m256i x[4];
        #pragma GCC unroll 4
        for (int r = 0; r < 4; r++)
            x[r] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)b[r])),
                                           _mm_loadu_si128((const __m128i *)b[r + 4]), 1);
        nb_transpose4_halves(x);
        const __m256i dd = x[0], A = x[1], B = x[2], C = x[3];
        /* byte j of dword r: row r's scale j (sc03) and j + 4 (sc47), minimum j and j + 4 */
        const __m256i sc03 = _mm256_and_si256(A, m6), mn03 = _mm256_and_si256(B, m6);
        const __m256i sc47 = _mm256_or_si256(_mm256_and_si256(C, m4), _mm256_and_si256(_mm256_srli_epi32(A, 2), top));
        const __m256i mn47 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(C, 4), m4), _mm256_and_si256(_mm256_srli_epi32(B, 2), top));
        /* the minimums' sum: pair c (m_2c | m_2c+1 << 16) against the token's B_2c | B_2c+1 << 16 */
        const __m256i bp = _mm256_broadcastsi128_si256(_mm_hadd_epi16(_mm_loadu_si128((const __m128i *)ab->bsums),
                                                                      _mm_loadu_si128((const __m128i *)ab->bsums + 1)));
        __m256i msum = _mm256_setzero_si256(), isum = msum;
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            msum = _mm256_add_epi32(msum, _mm256_madd_epi16(q4k_bytes_words(c < 2 ? mn03 : mn47, 2 * (c & 1), 2 * (c & 1) + 1),
                                                            nb_avx2_dword_lane(bp, c)));
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++) { /* 64 elements: groups 2c (low nibbles) and 2c + 1 (high) */
            __m256i v[8];
            #pragma GCC unroll 8
            for (int r = 0; r < 8; r++) v[r] = _mm256_loadu_si256((const __m256i *)(b[r]->qs + 32 * c));
            nb_transpose8(v);
            __m256i pl = _mm256_setzero_si256(), ph = pl;
            #pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                pl = nb_avx2_codes4(pl, _mm256_and_si256(v[k], m4), ab->qs + 64 * c + 4 * k);
                ph = nb_avx2_codes4(ph, _mm256_and_si256(_mm256_srli_epi16(v[k], 4), m4), ab->qs + 64 * c + 32 + 4 * k);
            }
            const __m256i s = c < 2 ? sc03 : sc47;
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pl, q4k_bytes_words(s, 2 * (c & 1), 2 * (c & 1))));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(ph, q4k_bytes_words(s, 2 * (c & 1) + 1, 2 * (c & 1) + 1)));
        }
        const __m256 da = _mm256_set1_ps(ab->d); /* dd: d | dmin << 16 */
        accs = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(kp_lo_words(dd)), da), _mm256_cvtepi32_ps(isum), accs);
        accm = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(kp_lo_words(_mm256_srli_epi32(dd, 16))), da),
                               _mm256_cvtepi32_ps(msum), accm);
    }
    float v[8];
    _mm256_storeu_ps(v, _mm256_sub_ps(accs, accm));
    #pragma GCC unroll 8
    for (int r = 0; r < 8; r++) y[(size_t)r * rs] = v[r];
}

/* One token on one core (kernels.h, mm_solo): the 8-row tile over eighths of the rows, eight
 * memory streams (decode 1.07-1.11x on one core); with two cores reading, sixteen streams measured
 * no faster than the 4-row tiles' eight (docs/BENCHMARKS.md, "An 8-row Q4_K GEMV for one core"). */
void nb_mm_q4_k_solo_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                          float *y, size_t ldy) {
    nb_avx2_gemv8_loop(q4k_gemv8, tiles_q4_k, TMAX, n / NB_QK_K, w, ws, a, as, nr, nt, y, ldy);
}

/* NB_ROUTE_BLOCK's Q4_K (kernels.h: the GEMV's order, from NB_BLOCK_MIN tokens): kpanel.h's
 * panels, one fma per block for each chain. */
void nb_mm_q4_k_block_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                           float *y, size_t ldy) {
    q4k_panel_gemm_block(n, w, ws, a, as, nr, nt, y, ldy);
}

/* Small batches (kernels.h, mm_small): the tiles above, every token of a tile of rows at once.
 * Q4_K's tokens in whole groups of 4 take the batch order, the others the GEMV order; Q6_K's all
 * take the batch order from 8 tokens (the table's batch_min and batch_group: the split nb_matmul
 * makes for mm_batch: kquants.h). Groups of 8 batch tokens go through q4k_kt, against the
 * NB_ACT_Q8_KT copy nb_matmul appends (the table's small_kt). */
void nb_mm_q4_k_small_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                           float *y, size_t ldy) {
    const int64_t nb = n / NB_QK_K, nbat = nt >= 4 ? nt - nt % 4 : 0;
    nb_avx2_tile_loop_small_kt(kt_tiles_q4_k, nb_act_kt_groups(a, as, nt), (size_t)nb * sizeof(nb_block_q8_kt), nt / 8,
                               tiles_q4_k_batch, TMAX, tiles_q4_k, TMAX, nbat, nb, w, ws, a, as, nr, nt, y, ldy);
}
