/*
 * kquants_avx512.c: the Q4_K, Q5_K and Q6_K kernels of the AVX-512 set (body in
 * x86/avx2/kquants.h), compiled with AVX-512VL so that 32 registers hold tiles of 4 rows x 4
 * tokens (each block decoded once per 4 tokens instead of 2), and with VNNI's vpdpwssd doing the
 * scale multiply and the add in one instruction. Same integer sums, so the same bits as the
 * reference. From 16 tokens the batch orders of Q4_K, Q5_K and Q6_K and Q4_K's block order go
 * through 16-row panels of 512-bit registers (kpanel.h's, joined below), with vpdpbusd group sums
 * and 8-token register tiles.
 *
 * One token (GEMV) has its own Q4_K and Q6_K tiles here (KQ_GEMV, 4 rows): on Zen 4 the shared
 * body's GEMV is bound by instructions, and most of a row's instructions per block went to what
 * is not the product (scale and minimum unpacking in general registers, a vpshufb per group to
 * broadcast its scale, the minimum's horizontal sum, two fp16 conversions per row). Here:
 *  - Two groups share one vpdpwssd: vpdpbusd gives each group's unscaled lane sums (Q4_K:
 *    |.| <= 4*15*127; Q6_K: the unsigned codes, |.| <= 4*63*127, the offset's share starting the
 *    row's sums), which fit words, so the two are packed as the low and high word of each dword,
 *    and one vpdpwssd against the dword of their two scales scales both and adds them. Per 64
 *    elements and row: 2 vpdpbusd, a shift, a vpternlogd and 1 vpdpwssd instead of 2 vpmaddubsw,
 *    2 vpdpwssd and 2 vpshufb. Q4_K's smaller sums pack with neither the vpternlogd nor a zeroed
 *    start: the high group's sum, from 16 x its codes (the byte's high nibble in place, no shift
 *    down), starts the low group's, shifted to the high word over a bias that keeps the low word
 *    positive; the 4 rows' biases (sums of even scales, one vpsadbw) leave the block sums at once.
 *  - Q4_K's one lane per row (kernels.h): the 4 rows' 8 integer lanes are summed together by
 *    three vphaddd and one add, then one conversion and fma serve the 4 rows.
 *  - Q4_K: the 4 rows' packed scales and minimums are unpacked together in one 512-bit register
 *    (row r in 128-bit lane r) a block ahead, and the scale-word pairs stored, so that each
 *    vpdpwssd takes its scale dword as a broadcast load instead of a shuffle (stored and loaded
 *    in the same block it measured slower than the shuffles); the minimum sums of the 4 rows are
 *    one vpmaddwd and lane-wise adds into lane r of one fma chain (the reference's per-row chain).
 *  - Q6_K: a row's 16 int8 scales widened once with the even ones in lane 0, so the dword
 *    broadcast within lanes (vpshufd) of pair m is the pair's scales.
 *  - The 4 rows' fp16 d (and dmin) are gathered in general registers, converted and multiplied by
 *    the activation scale at once.
 */
#include <immintrin.h>
#include <string.h>

#include "formats/blocks.h"
#include "kernels/x86/avx512/avx512.h"

#define GR 4 /* rows per GEMV tile */

/* The 12 packed scale bytes of block i of each row (layout: nb_k_scale_min) as words A B C:
 * scales 0-3 = A & 63, 4-7 = (C & 15) | (A >> 6) << 4, mins 0-3 = B & 63, 4-7 = (C >> 4) | (B >> 6)
 * << 4. The 16-byte loads end inside the block (qs follows). Per lane: y = [A C B C>>4], z = [0
 * A>>2 0 B>>2] keeping bits 4-5 of each byte; the result is [scales 0-3, 4-7, mins 0-3, 4-7]. */
static inline __m512i q4_k_scales4(const uint8_t *const p[GR], int64_t i) {
    const nb_block_q4_k *b0 = (const nb_block_q4_k *)p[0] + i, *b1 = (const nb_block_q4_k *)p[1] + i,
                        *b2 = (const nb_block_q4_k *)p[2] + i, *b3 = (const nb_block_q4_k *)p[3] + i;
    const __m512i x = nb_avx512_rows16(b0->scales, b1->scales, b2->scales, b3->scales);
    const __m512i yv = _mm512_srlv_epi32(_mm512_shuffle_epi32(x, (_MM_PERM_ENUM)_MM_SHUFFLE(2, 1, 2, 0)),
                                         _mm512_set4_epi32(4, 0, 0, 0));
    const __m512i zv = _mm512_maskz_shuffle_epi32(0xAAAA, _mm512_and_si512(_mm512_srli_epi32(x, 2), _mm512_set1_epi8(0x30)),
                                                  (_MM_PERM_ENUM)_MM_SHUFFLE(1, 1, 0, 0));
    /* (yv & mask) | zv: truth table 0xEA */
    return _mm512_ternarylogic_epi32(yv, _mm512_set4_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f), zv, 0xEA);
}

static inline __attribute__((always_inline)) void kq_gemv_q4_k(int nr, int64_t nb, const uint8_t *w, size_t ws,
                                                               size_t rs, const uint8_t *a, float *y) {
    const uint8_t *p[GR];
    nb_avx512_tile_rows(p, w, ws, rs, nr);
    __m128 acc = _mm_setzero_ps(), macc = _mm_setzero_ps(); /* lane r: row r's chains */
    const __m256i m4 = _mm256_set1_epi8(15);
    __m512i sm_next = q4_k_scales4(p, 0);
    /* a block's scales as words, row r's scales 2c and 2c+1 in dword 4r + c; two halves so that
     * the next block's are stored while this block's are read */
    int32_t sbuf[2][16] __attribute__((aligned(64)));
    _mm512_store_si512(sbuf[0], _mm512_unpacklo_epi8(sm_next, _mm512_setzero_si512()));
    for (int64_t i = 0; i < nb; i++) {
        const nb_block_q8_k *ab = (const nb_block_q8_k *)a + i;
        const nb_block_q4_k *b[GR];
        #pragma GCC unroll 8
        for (int r = 0; r < GR; r++) {
            b[r] = (const nb_block_q4_k *)p[r] + i;
            for (int l = 0; l < 144; l += 64) _mm_prefetch((const char *)b[r] + NB_PREFETCH_BYTES + l, _MM_HINT_T0);
        }
        /* d and dmin of the 4 rows (the first 4 bytes of each block) times the activation scale:
         * [d0 dmin0 d1 dmin1 ...] * da, the products the reference forms */
        uint32_t dd[GR];
        #pragma GCC unroll 8
        for (int r = 0; r < GR; r++) memcpy(&dd[r], b[r], 4);
        const __m128i dh = _mm_set_epi64x((long long)(dd[2] | (uint64_t)dd[3] << 32), (long long)(dd[0] | (uint64_t)dd[1] << 32));
        const __m256 dm = _mm256_mul_ps(_mm256_cvtph_ps(dh), _mm256_set1_ps(ab->d));
        /* this block's scales were unpacked and stored during the previous block */
        const __m512i sm = sm_next, zero = _mm512_setzero_si512();
        const int32_t *sd = sbuf[i & 1];
        if (i + 1 < nb) {
            sm_next = q4_k_scales4(p, i + 1);
            _mm512_store_si512(sbuf[(i + 1) & 1], _mm512_unpacklo_epi8(sm_next, zero));
        }
        const __m512i mn16 = _mm512_unpackhi_epi8(sm, zero);
        /* sum_j m_j * (bsums[2j] + bsums[2j+1]) of each row: the 8 pair sums (|.| <= 2*16*127, so
         * words) in every lane, one vpmaddwd, then each lane's 4 dwords summed */
        const __m256i bp = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)ab->bsums), _mm256_set1_epi16(1));
        const __m512i bs = _mm512_broadcast_i32x4(_mm256_cvtepi32_epi16(bp));
        __m512i ms = _mm512_madd_epi16(mn16, bs);
        ms = _mm512_add_epi32(ms, _mm512_shuffle_epi32(ms, (_MM_PERM_ENUM)_MM_SHUFFLE(1, 0, 3, 2)));
        ms = _mm512_add_epi32(ms, _mm512_shuffle_epi32(ms, (_MM_PERM_ENUM)_MM_SHUFFLE(2, 3, 0, 1)));
        /* dwords 0, 4, 8, 12 of ms (the rows' minimum sums) and of es (the rows' sums of even
         * scales, for the pairs' bias below) in one register: msum | esum */
        const __m512i es = _mm512_sad_epu8(_mm512_and_si512(sm, _mm512_set1_epi16(0xff)), zero);
        const __m256i me = _mm512_castsi512_si256(
            _mm512_permutex2var_epi32(ms, _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0), es));
        const __m128i msum = _mm256_castsi256_si128(me);
        const __m256 dd4 = _mm256_permutexvar_ps(_mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7), dm); /* d x 4, dmin x 4 */
        macc = _mm_fmadd_ps(_mm256_extractf128_ps(dd4, 1), _mm_cvtepi32_ps(msum), macc);
        __m256i isum[GR];
        #pragma GCC unroll 8
        for (int r = 0; r < GR; r++) {
            __m256i i0 = _mm256_setzero_si256(), i1 = _mm256_setzero_si256(); /* two chains: half the latency */
            #pragma GCC unroll 8
            for (int c = 0; c < 4; c++) {
                const __m256i qv = _mm256_loadu_si256((const __m256i *)(b[r]->qs + 32 * c));
                const __m256i lo = _mm256_and_si256(qv, m4), hi16 = _mm256_andnot_si256(m4, qv); /* hi16: 16 x the code */
                const __m256i al = _mm256_loadu_si256((const __m256i *)(ab->qs + 64 * c));
                const __m256i ah = _mm256_loadu_si256((const __m256i *)(ab->qs + 64 * c + 32));
                /* lane k of groups 2c (lo) and 2c+1 (hi) unscaled (|.| <= 4*15*127 = 7620) as the
                 * low and high word of one dword, for one vpdpwssd against the dword of scales 2c,
                 * 2c+1: ((2 + 16 hi) << 12) + lo = (hi << 16) + (8192 + lo), whose low word
                 * 8192 + lo lies in [572, 15812], so the high word is hi and the low word reads
                 * 8192 + lo. The bias adds 8192 x scale 2c to each lane, 65536 x the row's sum of
                 * even scales to its block sum, taken out below. */
                const __m256i hs = _mm256_dpbusd_epi32(_mm256_set1_epi32(2), hi16, ah);
                const __m256i pair = _mm256_dpbusd_epi32(_mm256_slli_epi32(hs, 12), lo, al);
                const __m256i sp = _mm256_set1_epi32(sd[4 * r + c]);
                if (c & 1)
                    i1 = _mm256_dpwssd_epi32(i1, pair, sp);
                else
                    i0 = _mm256_dpwssd_epi32(i0, pair, sp);
            }
            isum[r] = _mm256_add_epi32(i0, i1);
        }
        /* row r's block sum in dword r (each 128-bit half of the vphaddd tree holds its half's
         * sums), less the bias */
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(isum[0], isum[1]), _mm256_hadd_epi32(isum[2], isum[3]));
        const __m128i tot = _mm_sub_epi32(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)),
                                          _mm_slli_epi32(_mm256_extracti128_si256(me, 1), 16));
        acc = _mm_fmadd_ps(_mm256_castps256_ps128(dd4), _mm_cvtepi32_ps(tot), acc);
    }
    float v[GR];
    _mm_storeu_ps(v, _mm_sub_ps(acc, macc));
    #pragma GCC unroll 8
    for (int r = 0; r < nr; r++) y[(size_t)r * rs] = v[r];
}

static inline __attribute__((always_inline)) void kq_gemv_q6_k(int nr, int64_t nb, const uint8_t *w, size_t ws,
                                                               size_t rs, const uint8_t *a, float *y) {
    const uint8_t *p[GR];
    nb_avx512_tile_rows(p, w, ws, rs, nr);
    __m256 acc[GR];
    #pragma GCC unroll 8
    for (int r = 0; r < GR; r++) acc[r] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    /* a row's 16 int8 scales, even ones first: sign-extended, lane 0 holds the first scale of each
     * 32-element group and lane 1 the second, as the group's elements lie in a register */
    const __m128i evens = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    for (int64_t i = 0; i < nb; i++) {
        const nb_block_q8_k *ab = (const nb_block_q8_k *)a + i;
        const nb_block_q6_k *b[GR];
        uint64_t d4 = 0;
        #pragma GCC unroll 8
        for (int r = 0; r < GR; r++) {
            b[r] = (const nb_block_q6_k *)p[r] + i;
            for (int l = 0; l < 256; l += 64) _mm_prefetch((const char *)b[r] + NB_PREFETCH_BYTES + l, _MM_HINT_T0);
            d4 |= (uint64_t)b[r]->d << 16 * r;
        }
        const __m128 ds = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)d4)), _mm_set1_ps(ab->d));
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)ab->bsums);
        #pragma GCC unroll 8
        for (int r = 0; r < GR; r++) {
            const __m128i sc = _mm_loadu_si128((const __m128i *)b[r]->scales);
            /* dword m of lane 0: the first scales of groups 2m and 2m+1, of lane 1 their second ones */
            const __m256i s16 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, evens));
            /* the code offset's share starts the sums: lane k = -32 * (sc_2k*bsum_2k + sc_2k+1*bsum_2k+1) */
            __m256i i0 = _mm256_slli_epi32(_mm256_madd_epi16(bsums, _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_cvtepi8_epi16(sc))), 5);
            __m256i i1 = _mm256_setzero_si256(); /* two chains: half the latency */
            #pragma GCC unroll 8
            for (int h = 0; h < 2; h++) {
                const __m256i l0 = _mm256_loadu_si256((const __m256i *)(b[r]->ql + 64 * h));
                const __m256i l1 = _mm256_loadu_si256((const __m256i *)(b[r]->ql + 64 * h + 32));
                const __m256i hb = _mm256_loadu_si256((const __m256i *)(b[r]->qh + 32 * h));
                /* the four 32-element groups of this half: low nibble | two high bits at bits 4-5,
                 * (x & 15) | hbits as one vpternlogd (truth table 0xEA: (a & b) | c) */
                __m256i q[4];
                q[0] = _mm256_ternarylogic_epi32(l0, m4, _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30), 0xEA);
                q[1] = _mm256_ternarylogic_epi32(l1, m4, _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30), 0xEA);
                q[2] = _mm256_ternarylogic_epi32(_mm256_srli_epi16(l0, 4), m4, _mm256_and_si256(hb, m30), 0xEA);
                q[3] = _mm256_ternarylogic_epi32(_mm256_srli_epi16(l1, 4), m4, _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30), 0xEA);
                #pragma GCC unroll 8
                for (int g = 0; g < 4; g += 2) {
                    const int G = 4 * h + g;
                    /* lane k of groups G and G+1 unscaled, q * a (|.| <= 4*63*127, so words),
                     * packed as the low and high word of one dword for one vpdpwssd against the
                     * dword of their scales */
                    const __m256i z = _mm256_setzero_si256();
                    const __m256i lo = _mm256_dpbusd_epi32(z, q[g], _mm256_loadu_si256((const __m256i *)(ab->qs + 32 * G)));
                    const __m256i hi = _mm256_dpbusd_epi32(z, q[g + 1], _mm256_loadu_si256((const __m256i *)(ab->qs + 32 * G + 32)));
                    const __m256i pair = _mm256_ternarylogic_epi32(lo, _mm256_set1_epi32(0xffff), _mm256_slli_epi32(hi, 16), 0xEA);
                    const __m256i sp = nb_avx2_dword_lane(s16, G / 2);
                    if (h)
                        i1 = _mm256_dpwssd_epi32(i1, pair, sp);
                    else
                        i0 = _mm256_dpwssd_epi32(i0, pair, sp);
                }
            }
            const __m256 dr = _mm256_permutexvar_ps(_mm256_set1_epi32(r), _mm256_castps128_ps256(ds));
            acc[r] = _mm256_fmadd_ps(dr, _mm256_cvtepi32_ps(_mm256_add_epi32(i0, i1)), acc[r]);
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < nr; r++) y[(size_t)r * rs] = nb_avx2_lane_sum(acc[r]);
}

#define KQ_TMAX 4
#define NB_PANEL_G 8 /* the K-quant panels' token tile on 32 registers: 8 measured 11-13 % above 4 */
#define KQ_ISA avx512
#define KQ_GEMV
static inline __m256i kq_dot16(__m256i acc, __m256i pairs, __m256i scales) {
    return _mm256_dpwssd_epi32(acc, pairs, scales);
}
/* The K-quant panels' group sums (kpanel.h): vpdpbusd adds each 4-element sum into a dword, then
 * one dword multiply by the scale per 8 groups (Q4_K) or 4 (Q6_K: a 16-element scale). */
static inline __m256i kp_codes4(__m256i acc, __m256i q, const int8_t *a4) { return nb_avx512_codes4(acc, q, a4); }
static inline __m256i kp_scaled(__m256i isum, __m256i acc, __m256i s) {
    return _mm256_add_epi32(isum, _mm256_mullo_epi32(acc, s));
}
static inline __m256i kp_scale_word(__m256i s32) { return s32; }
#define KP_Q6_RUN 4
/* Q4_K's and Q6_K's batch orders from 16 tokens on 16-row panels (below) */
static void q4k_panel16_gemm(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                             float *y, size_t ldy);
static void q6_panel16_gemm(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                            float *y, size_t ldy);
#define KQ_Q4K_PANEL q4k_panel16_gemm
#define KQ_Q6K_PANEL q6_panel16_gemm

#include "kernels/x86/avx2/kquants.h"

/* ---- Q4_K's, Q5_K's and Q6_K's batch orders and Q4_K's block order on 16-row panels of 512-bit
 * registers ---- */

/* kpanel.h's panels for 16 rows: dword r of each register is row r (rows 0-7 in the low half), so
 * each group sum (one vpdpbusd broadcasting the token's 4 bytes to 16 dwords), scale multiply,
 * conversion and fma serves 16 rows, half the instructions of two 8-row panels. Q5_K's panels
 * are Q4_K's with the fifth bits in the codes. */
typedef struct {
    __m512i q[KB][8][8], s[KB][8], m[KB][4];
    __m512 d[KB], dmin[KB];
} q4k_panel16;

/* q5_high on 16 rows: bit g of each byte of qh at bit 4. */
static inline __m512i q5_high16(__m512i qh, int g) {
    const __m512i v = g <= 4 ? _mm512_slli_epi16(qh, (unsigned)(4 - g)) : _mm512_srli_epi16(qh, (unsigned)(g - 4));
    return _mm512_and_si512(v, _mm512_set1_epi8(0x10));
}

/* k_decode's steps on 16 rows at once: each 32-byte run of codes of rows r and r + 8 loaded into
 * one register, the 8 transposed (nb_avx512_transpose8x2) and split into the two groups'
 * nibbles; the scales of each 8 rows by k_scales8, joined. Rows past `rows` repeat the last. Half
 * the instructions of the two 8-row decodes into memory and the copy joining them it replaced;
 * its time is mostly the wait on weights read cold, which panel.h's requests for the next panel
 * shorten (docs/BENCHMARKS.md, stop 60). */
static inline __attribute__((always_inline)) void k_decode16(int five, const uint8_t *w, size_t ws, int rows, int64_t i0,
                                                             int nb, q4k_panel16 *p) {
    const __m512i m4 = _mm512_set1_epi8(15);
    for (int i = 0; i < nb; i++) {
        const nb_block_q4_k *b[16];
        const uint8_t *qs[16];
        for (int r = 0; r < 16; r++) {
            const uint8_t *row = w + (size_t)(r < rows ? r : rows - 1) * ws;
            b[r] = five ? (const nb_block_q4_k *)((const nb_block_q5_k *)row + i0 + i) : (const nb_block_q4_k *)row + i0 + i;
            qs[r] = five ? ((const nb_block_q5_k *)b[r])->qs : b[r]->qs;
        }
        __m512i h[8]; /* Q5_K: h[k] dword r, row r's fifth bits of elements 4k..4k+3 of each group */
        if (five) {
            for (int r = 0; r < 8; r++)
                h[r] = nb_avx512_join(_mm256_loadu_si256((const __m256i *)((const nb_block_q5_k *)b[r])->qh),
                                      _mm256_loadu_si256((const __m256i *)((const nb_block_q5_k *)b[r + 8])->qh));
            nb_avx512_transpose8x2(h);
        }
        for (int c = 0; c < 4; c++) {
            __m512i v[8];
            for (int r = 0; r < 8; r++)
                v[r] = nb_avx512_join(_mm256_loadu_si256((const __m256i *)(qs[r] + 32 * c)),
                                      _mm256_loadu_si256((const __m256i *)(qs[r + 8] + 32 * c)));
            nb_avx512_transpose8x2(v); /* v[k] dword r: row r's bytes 4k..4k+3 of the run */
            for (int k = 0; k < 8; k++) {
                __m512i lo = _mm512_and_si512(v[k], m4), hi = _mm512_and_si512(_mm512_srli_epi16(v[k], 4), m4);
                if (five) lo = _mm512_or_si512(lo, q5_high16(h[k], 2 * c)), hi = _mm512_or_si512(hi, q5_high16(h[k], 2 * c + 1));
                _mm512_store_si512(&p->q[i][2 * c][k], lo);
                _mm512_store_si512(&p->q[i][2 * c + 1][k], hi);
            }
        }
        __m256i s[2][8], m[2][4];
        __m256 d[2], dmin[2];
        for (int half = 0; half < 2; half++) k_scales8(b + 8 * half, s[half], m[half], &d[half], &dmin[half]);
        for (int g = 0; g < 8; g++) p->s[i][g] = nb_avx512_join(s[0][g], s[1][g]);
        for (int c = 0; c < 4; c++) p->m[i][c] = nb_avx512_join(m[0][c], m[1][c]);
        p->d[i] = nb_avx512_joinf(d[0], d[1]);
        p->dmin[i] = nb_avx512_joinf(dmin[0], dmin[1]);
    }
}
static void q4k_decode16(const uint8_t *w, size_t ws, int rows, int64_t i0, int nb, void *pv) {
    k_decode16(0, w, ws, rows, i0, nb, pv);
}
static void q5k_decode16(const uint8_t *w, size_t ws, int rows, int64_t i0, int nb, void *pv) {
    k_decode16(1, w, ws, rows, i0, nb, pv);
}

/* The orders of kpanel.h's q4k_tokens (Q4_K's batch order), q4k_tokens_block (its block order)
 * and q5k_tokens (Q5_K's batch order) on 16 rows: the same sums, chains and order. Per group of
 * 32 elements and token one run of 8 vpdpbusd (their dwords hold any Q5_K group) and one dword
 * multiply by the scale. Q4_K's chains of token t are acc[t][0..1] and acc[t][2..3] as 512-bit
 * registers (NB_PANEL_MINUS16), Q5_K's one chain acc[t][0..1] (NB_PANEL_ONE16).
 * On Zen 4 the pipes of vpdpbusd also run every multiply, fma and 512-bit store (a store cost
 * about two vpdpbusd), so nothing is stored per block: the products' loop holds 8 tokens' runs,
 * sums and chains (24 of the 32 registers; the block order's 8 groups in one loop, the batch
 * order's in 4 pairs), and Q4_K's minimums, which read no codes, take a second pass with their
 * own chains, reading the tokens' pair sums (q4k_bpairs) formed once per call: formed per
 * block there, each waited on its store's forwarding (block order 2-3 % slower). Q5_K's, in the
 * products' pass, are formed per block, where the products hide the wait. */
enum { K16_Q4_BATCH, K16_Q4_BLOCK, K16_Q5_BATCH };

/* m_2c*B_2c + m_2c+1*B_2c+1 for 64 elements c of the 16 rows against a token's pair sums bp. */
static inline __m512i k16_mins(const q4k_panel16 *p, int i, int c, const int32_t bp[4]) {
    return _mm512_madd_epi16(p->m[i][c], _mm512_set1_epi32(bp[c]));
}
/* Their sum over the block's 4 (exact): one vpmaddwd, then vpdpwssd adds the others. */
static inline __m512i k16_msum(const q4k_panel16 *p, int i, const int32_t bp[4]) {
    __m512i ms = k16_mins(p, i, 0, bp);
    #pragma GCC unroll 3
    for (int c = 1; c < 4; c++) ms = _mm512_dpwssd_epi32(ms, p->m[i][c], _mm512_set1_epi32(bp[c]));
    return ms;
}

/* isum[t] += the scaled sums of groups g0 .. g1-1 of block i against the T tokens' blocks ab. */
static inline __attribute__((always_inline)) void k16_groups(int T, const q4k_panel16 *p, int i, int g0, int g1,
                                                             const nb_block_q8_k *const ab[], __m512i isum[]) {
    #pragma GCC unroll 1
    for (int g = g0; g < g1; g++) {
        __m512i p16[NB_PANEL_G];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) p16[t] = _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const __m512i q = _mm512_load_si512(&p->q[i][g][k]);
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) p16[t] = nb_avx512_codes16(p16[t], q, ab[t]->qs + 32 * g + 4 * k);
        }
        const __m512i s = _mm512_load_si512(&p->s[i][g]);
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(p16[t], s));
    }
}

static inline __attribute__((always_inline)) void k_tokens16(int order, int T, const void *pv, int nb,
                                                             const uint8_t *a, size_t as, __m256 acc[][8], int first) {
    const q4k_panel16 *p = pv;
    __m512 c[NB_PANEL_G];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) c[t] = first ? _mm512_setzero_ps() : _mm512_loadu_ps((const float *)acc[t]);
    for (int i = 0; i < nb; i++) {
        const nb_block_q8_k *ab[NB_PANEL_G];
        __m512i isum[NB_PANEL_G];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) ab[t] = (const nb_block_q8_k *)(a + (size_t)t * as) + i;
        if (order == K16_Q4_BATCH) {
            #pragma GCC unroll 1
            for (int m = 0; m < 4; m++) {
                #pragma GCC unroll 8
                for (int t = 0; t < T; t++) isum[t] = _mm512_setzero_si512();
                k16_groups(T, p, i, 2 * m, 2 * m + 2, ab, isum);
                #pragma GCC unroll 8
                for (int t = 0; t < T; t++)
                    c[t] = _mm512_fmadd_ps(_mm512_mul_ps(p->d[i], _mm512_set1_ps(ab[t]->d)), _mm512_cvtepi32_ps(isum[t]), c[t]);
            }
            continue;
        }
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) isum[t] = _mm512_setzero_si512();
        k16_groups(T, p, i, 0, 8, ab, isum);
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const __m512 da = _mm512_set1_ps(ab[t]->d);
            if (order == K16_Q4_BLOCK)
                c[t] = _mm512_fmadd_ps(_mm512_mul_ps(p->d[i], da), _mm512_cvtepi32_ps(isum[t]), c[t]);
            else {
                int32_t bq[4];
                q4k_bpairs(ab[t], bq);
                const __m512 res = _mm512_fnmadd_ps(p->dmin[i], _mm512_cvtepi32_ps(k16_msum(p, i, bq)),
                                                    _mm512_mul_ps(p->d[i], _mm512_cvtepi32_ps(isum[t])));
                c[t] = _mm512_fmadd_ps(res, da, c[t]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) _mm512_storeu_ps((float *)acc[t], c[t]);
    if (order == K16_Q5_BATCH) return;
    int32_t bp[NB_PANEL_G][KB][4];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++)
        for (int i = 0; i < nb; i++) q4k_bpairs((const nb_block_q8_k *)(a + (size_t)t * as) + i, bp[t][i]);
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) c[t] = first ? _mm512_setzero_ps() : _mm512_loadu_ps((const float *)acc[t] + 16);
    for (int i = 0; i < nb; i++) {
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const __m512 dm = _mm512_mul_ps(p->dmin[i], _mm512_set1_ps(((const nb_block_q8_k *)(a + (size_t)t * as) + i)->d));
            if (order == K16_Q4_BATCH) {
                #pragma GCC unroll 4
                for (int m = 0; m < 4; m++) c[t] = _mm512_fmadd_ps(dm, _mm512_cvtepi32_ps(k16_mins(p, i, m, bp[t][i])), c[t]);
            } else
                c[t] = _mm512_fmadd_ps(dm, _mm512_cvtepi32_ps(k16_msum(p, i, bp[t][i])), c[t]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) _mm512_storeu_ps((float *)acc[t] + 16, c[t]);
}

static inline __attribute__((always_inline)) void q4k_tokens16(int T, const void *pv, int nb, const uint8_t *a,
                                                               size_t as, __m256 acc[][8], int first) {
    k_tokens16(K16_Q4_BATCH, T, pv, nb, a, as, acc, first);
}
static inline __attribute__((always_inline)) void q4k_tokens16_block(int T, const void *pv, int nb, const uint8_t *a,
                                                                     size_t as, __m256 acc[][8], int first) {
    k_tokens16(K16_Q4_BLOCK, T, pv, nb, a, as, acc, first);
}
static inline __attribute__((always_inline)) void q5k_tokens16(int T, const void *pv, int nb, const uint8_t *a,
                                                               size_t as, __m256 acc[][8], int first) {
    k_tokens16(K16_Q5_BATCH, T, pv, nb, a, as, acc, first);
}

static void q4k_panel16_gemm(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                             float *y, size_t ldy) {
    q4k_panel16 p;
    nb_panel_gemm(q4k_decode16, q4k_tokens16, &p, KB, sizeof(nb_block_q8_k), NB_PANEL_MINUS16, n / NB_QK_K, w, ws, a, as,
                  nr, nt, y, ldy);
}

/* NB_ROUTE_BLOCK's Q4_K (kernels.h: the GEMV's order, from NB_BLOCK_MIN tokens) on 16-row panels. */
void nb_mm_q4_k_block_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                             float *y, size_t ldy) {
    q4k_panel16 p;
    nb_panel_gemm(q4k_decode16, q4k_tokens16_block, &p, KB, sizeof(nb_block_q8_k), NB_PANEL_MINUS16, n / NB_QK_K, w, ws,
                  a, as, nr, nt, y, ldy);
}

static void q5k_panel16_gemm(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                             float *y, size_t ldy) {
    q4k_panel16 p;
    nb_panel_gemm(q5k_decode16, q5k_tokens16, &p, KB, sizeof(nb_block_q8_k), NB_PANEL_ONE16, n / NB_QK_K, w, ws, a, as,
                  nr, nt, y, ldy);
}

/* Q5_K's batch order (kernels.h): its tiles, and from KQ_PANEL_MIN_TOKENS the 16-row panels above */
KERNEL(q5_k_batch, q5k_panel16_gemm)

typedef struct {
    __m512i q[KB][8][8], s[KB][16], sp[KB][8];
    __m512 d[KB];
} q6_panel16;

static void q6_decode16(const uint8_t *w, size_t ws, int rows, int64_t i0, int nb, void *pv) {
    q6_panel16 *p = pv;
    q6_panel h[2];
    nb_panel_decode_halves(q6_decode, w, ws, rows, i0, nb, &h[0], &h[1]);
    for (int i = 0; i < nb; i++) {
        for (int g = 0; g < 8; g++) {
            for (int k = 0; k < 8; k++) p->q[i][g][k] = nb_avx512_join(h[0].q[i][g][k], h[1].q[i][g][k]);
            p->sp[i][g] = nb_avx512_join(h[0].sp[i][g], h[1].sp[i][g]);
        }
        for (int j = 0; j < 16; j++) p->s[i][j] = nb_avx512_join(h[0].s[i][j], h[1].s[i][j]);
        p->d[i] = nb_avx512_joinf(h[0].d[i], h[1].d[i]);
    }
}

/* q6_tokens (kpanel.h) on 16 rows: the same sums, chain and order; token t's chain is acc[t][0..1]
 * as a 512-bit register (NB_PANEL_ONE16). */
static inline __attribute__((always_inline)) void q6_tokens16(int T, const void *pv, int nb, const uint8_t *a,
                                                              size_t as, __m256 acc[][8], int first) {
    const q6_panel16 *p = pv;
    __m512 c[NB_PANEL_G];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) c[t] = first ? _mm512_setzero_ps() : _mm512_loadu_ps((const float *)acc[t]);
    for (int i = 0; i < nb; i++) {
        const nb_block_q8_k *ab[NB_PANEL_G];
        __m512i isum[NB_PANEL_G];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            ab[t] = (const nb_block_q8_k *)(a + (size_t)t * as) + i;
            __m512i off = _mm512_setzero_si512();
            #pragma GCC unroll 8
            for (int m = 0; m < 8; m++) {
                int32_t bp;
                memcpy(&bp, ab[t]->bsums + 2 * m, 4);
                off = _mm512_dpwssd_epi32(off, p->sp[i][m], _mm512_set1_epi32(bp));
            }
            isum[t] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(off, 5));
        }
        #pragma GCC unroll 1
        for (int g = 0; g < 8; g++) {
            #pragma GCC unroll 8
            for (int k0 = 0; k0 < 8; k0 += KP_Q6_RUN) {
                __m512i run[NB_PANEL_G];
                #pragma GCC unroll 8
                for (int t = 0; t < T; t++) run[t] = _mm512_setzero_si512();
                #pragma GCC unroll 4
                for (int k = k0; k < k0 + KP_Q6_RUN; k++) {
                    const __m512i q = _mm512_load_si512(&p->q[i][g][k]);
                    #pragma GCC unroll 8
                    for (int t = 0; t < T; t++) run[t] = nb_avx512_codes16(run[t], q, ab[t]->qs + 32 * g + 4 * k);
                }
                const __m512i s = _mm512_load_si512(&p->s[i][2 * g + k0 / 4]);
                #pragma GCC unroll 8
                for (int t = 0; t < T; t++) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(run[t], s));
            }
        }
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++)
            c[t] = _mm512_fmadd_ps(_mm512_mul_ps(p->d[i], _mm512_cvtepi32_ps(isum[t])), _mm512_set1_ps(ab[t]->d), c[t]);
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) _mm512_storeu_ps((float *)acc[t], c[t]);
}

static void q6_panel16_gemm(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                            float *y, size_t ldy) {
    q6_panel16 p;
    nb_panel_gemm(q6_decode16, q6_tokens16, &p, KB, sizeof(nb_block_q8_k), NB_PANEL_ONE16, n / NB_QK_K, w, ws, a, as, nr,
                  nt, y, ldy);
}

/* ---- small batches (kernels.h, mm_small): Q4_K ---- */

#define SB_T 8 /* tokens per batch-order tile */

/* Lane r of the 128-bit lanes of v (r a constant after inlining; spelled out for any -O). */
static inline __m128i lane128(__m512i v, int r) {
    switch (r) {
    case 0: return _mm512_castsi512_si128(v);
    case 1: return _mm512_extracti32x4_epi32(v, 1);
    case 2: return _mm512_extracti32x4_epi32(v, 2);
    default: return _mm512_extracti32x4_epi32(v, 3);
    }
}

/* Row r's 128 packed code bytes as the low (groups 2c) and high (2c+1) nibbles of each 32 bytes. */
static inline void q4k_codes(const nb_block_q4_k *b, __m256i lo[4], __m256i hi[4]) {
    const __m256i m4 = _mm256_set1_epi8(15);
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i qv = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
        lo[c] = _mm256_and_si256(qv, m4);
        hi[c] = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
    }
}

/* The scaled lane sums of 64 elements c of a row against a token, v + sc_2c*(lo.a) + sc_2c+1*(hi.a):
 * vpmaddubsw's pair sums (|.| <= 2*15*127) and one vpdpwssd per group against its scale in every
 * word (slo, shi). 4 instructions per row, token and 64 elements, where kq_gemv_q4_k's pairs of
 * vpdpbusd packed in words take 8 (each vpdpbusd starts from a copy of a zero register): with
 * several tokens the count of instructions is what bounds a tile (Zen 4 ran these at about 3 per
 * cycle, products or not). first: v is not read (vpmaddwd starts the sum). */
static inline __m256i q4k_acc(__m256i v, int first, __m256i lo, __m256i hi, const int8_t *aq, __m256i slo, __m256i shi) {
    const __m256i pl = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)aq));
    const __m256i ph = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(aq + 32)));
    v = first ? _mm256_madd_epi16(pl, slo) : _mm256_dpwssd_epi32(v, pl, slo);
    return _mm256_dpwssd_epi32(v, ph, shi);
}

/* The sums of the 8 dwords of v0..v3 in dwords 0..3 (exact integers: the order does not matter).
 * Unpacks and adds: vphaddd takes two cycles of a pipe the products need on Zen 4, and three of
 * them per tree measured as slow as the products of a tile with several tokens. */
static inline __m128i sum4_epi32(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    const __m256i a = _mm256_add_epi32(_mm256_unpacklo_epi32(v0, v1), _mm256_unpackhi_epi32(v0, v1));
    const __m256i b = _mm256_add_epi32(_mm256_unpacklo_epi32(v2, v3), _mm256_unpackhi_epi32(v2, v3));
    const __m256i w = _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
    return _mm_add_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}

/* The 4 rows' d and dmin of block i (each block's first 4 bytes), widened: [d0 dmin0 d1 dmin1 ...]. */
static inline __m256 q4k_ddmin(const nb_block_q4_k *const b[GR]) {
    uint32_t dd[GR];
    #pragma GCC unroll 8
    for (int r = 0; r < GR; r++) memcpy(&dd[r], b[r], 4);
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)(dd[2] | (uint64_t)dd[3] << 32), (long long)(dd[0] | (uint64_t)dd[1] << 32)));
}

/* 4 rows x T tokens (T <= SB_T) in the batch order (kernels.h: per 64 elements c one fma for the
 * sums and one for the minimums). Per row and token, the 4 sums S_c (q4k_acc's lanes, reduced by
 * sum4_epi32) and minimum sums M_c = m_2c*B_2c + m_2c+1*B_2c+1 (one vpmaddwd of the row's
 * minimums by the token's 32-element sums B_j); per row and 4 tokens one transpose puts token t
 * in lane t, S above M, so that 4 fma, one per c in the contract's order, advance 8 chains. */
static inline __attribute__((always_inline)) void q4k_batch_small(int nr, int T, int64_t nb, const uint8_t *w, size_t ws,
                                                                  size_t rs, const uint8_t *a, size_t as, float *y,
                                                                  size_t ldy) {
    const uint8_t *p[GR];
    nb_avx512_tile_rows(p, w, ws, rs, nr);
    const int G = (T + 3) / 4; /* token groups */
    __m256 acc[GR][SB_T / 4];  /* lanes 0-3: the sums' chains of the group's tokens, 4-7 the minimums' */
    #pragma GCC unroll 8
    for (int r = 0; r < GR; r++)
        #pragma GCC unroll 2
        for (int g = 0; g < G; g++) acc[r][g] = _mm256_setzero_ps();
    __m512i sm_next = q4_k_scales4(p, 0);
    int32_t sbuf[2][16] __attribute__((aligned(64)));
    _mm512_store_si512(sbuf[0], _mm512_unpacklo_epi8(sm_next, _mm512_setzero_si512()));
    for (int64_t i = 0; i < nb; i++) {
        const nb_block_q8_k *ab[SB_T];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) ab[t] = (const nb_block_q8_k *)(a + (size_t)t * as) + i;
        const nb_block_q4_k *b[GR];
        #pragma GCC unroll 8
        for (int r = 0; r < GR; r++) {
            b[r] = (const nb_block_q4_k *)p[r] + i;
            for (int l = 0; l < 144; l += 64) _mm_prefetch((const char *)b[r] + NB_PREFETCH_BYTES + l, _MM_HINT_T0);
        }
        const __m256 dmf = q4k_ddmin(b);
        const __m512i sm = sm_next, zero = _mm512_setzero_si512();
        const int32_t *sd = sbuf[i & 1];
        if (i + 1 < nb) {
            sm_next = q4_k_scales4(p, i + 1);
            _mm512_store_si512(sbuf[(i + 1) & 1], _mm512_unpacklo_epi8(sm_next, zero));
        }
        const __m512i mn16 = _mm512_unpackhi_epi8(sm, zero);
        __m128i bw[SB_T]; /* B_j = bsums[2j] + bsums[2j+1] as 8 words */
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++)
            bw[t] = _mm256_cvtepi32_epi16(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)ab[t]->bsums), _mm256_set1_epi16(1)));
        __m256 dav[SB_T / 4]; /* the group's token scales, in both halves */
        #pragma GCC unroll 2
        for (int g = 0; g < G; g++) {
            float da[4];
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++) da[k] = 4 * g + k < T ? ab[4 * g + k]->d : 0.0f;
            const __m128 d4 = _mm_loadu_ps(da);
            dav[g] = _mm256_set_m128(d4, d4);
        }
        const int16_t *sw = (const int16_t *)sd; /* row r's scale g: word 8r + g */
        #pragma GCC unroll 8
        for (int r = 0; r < GR; r++) {
            __m256i lo[4], hi[4], sl[4], sh[4];
            q4k_codes(b[r], lo, hi);
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) sl[c] = _mm256_set1_epi16(sw[8 * r + 2 * c]), sh[c] = _mm256_set1_epi16(sw[8 * r + 2 * c + 1]);
            const __m128i mnr = lane128(mn16, r);
            __m256i x[SB_T]; /* token t: S_0..S_3 | M_0..M_3 */
            #pragma GCC unroll 8
            for (int t = 0; t < 4 * G; t++) {
                if (t >= T) {
                    x[t] = _mm256_setzero_si256();
                    continue;
                }
                __m256i v[4];
                #pragma GCC unroll 4
                for (int c = 0; c < 4; c++) v[c] = q4k_acc(_mm256_setzero_si256(), 1, lo[c], hi[c], ab[t]->qs + 64 * c, sl[c], sh[c]);
                x[t] = _mm256_set_m128i(_mm_madd_epi16(mnr, bw[t]), sum4_epi32(v[0], v[1], v[2], v[3]));
            }
            /* d and dmin of row r, in the low and the high half */
            const __m256 dr = _mm256_permutexvar_ps(_mm256_setr_epi32(2 * r, 2 * r, 2 * r, 2 * r, 2 * r + 1, 2 * r + 1, 2 * r + 1, 2 * r + 1), dmf);
            #pragma GCC unroll 2
            for (int g = 0; g < G; g++) {
                const __m256i *xg = x + 4 * g;
                const __m256i t0 = _mm256_unpacklo_epi32(xg[0], xg[1]), t1 = _mm256_unpackhi_epi32(xg[0], xg[1]);
                const __m256i t2 = _mm256_unpacklo_epi32(xg[2], xg[3]), t3 = _mm256_unpackhi_epi32(xg[2], xg[3]);
                const __m256i yc[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2), _mm256_unpacklo_epi64(t1, t3),
                                       _mm256_unpackhi_epi64(t1, t3)};
                const __m256 dd = _mm256_mul_ps(dr, dav[g]);
                #pragma GCC unroll 4
                for (int c = 0; c < 4; c++) acc[r][g] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(yc[c]), acc[r][g]);
            }
        }
    }
    #pragma GCC unroll 2
    for (int g = 0; g < G; g++)
        #pragma GCC unroll 8
        for (int r = 0; r < nr; r++) {
            float v[4];
            _mm_storeu_ps(v, _mm_sub_ps(_mm256_castps256_ps128(acc[r][g]), _mm256_extractf128_ps(acc[r][g], 1)));
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
                if (4 * g + k < T) y[(size_t)(4 * g + k) * ldy + (size_t)r * rs] = v[k];
        }
}

#define SB_TILE(name, body, R, T)                                                                                \
    static void name##_##R##x##T(int64_t nb, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, size_t as, \
                                 float *y, size_t ldy) {                                                         \
        body(R, T, nb, w, ws, rs, a, as, y, ldy);                                                                \
    }
#define SB_BATCH_R(R)                                                                                            \
    SB_TILE(sbb_q4_k, q4k_batch_small, R, 1) SB_TILE(sbb_q4_k, q4k_batch_small, R, 2)                            \
    SB_TILE(sbb_q4_k, q4k_batch_small, R, 3) SB_TILE(sbb_q4_k, q4k_batch_small, R, 4)                            \
    SB_TILE(sbb_q4_k, q4k_batch_small, R, 5) SB_TILE(sbb_q4_k, q4k_batch_small, R, 6)                            \
    SB_TILE(sbb_q4_k, q4k_batch_small, R, 7) SB_TILE(sbb_q4_k, q4k_batch_small, R, 8)
SB_BATCH_R(1) SB_BATCH_R(2) SB_BATCH_R(3) SB_BATCH_R(4)
#define SB_BROW(R) sbb_q4_k_##R##x1, sbb_q4_k_##R##x2, sbb_q4_k_##R##x3, sbb_q4_k_##R##x4, sbb_q4_k_##R##x5, \
                   sbb_q4_k_##R##x6, sbb_q4_k_##R##x7, sbb_q4_k_##R##x8
static const nb_avx2_tile_fn sb_batch_q4_k[GR * SB_T] = {SB_BROW(1), SB_BROW(2), SB_BROW(3), SB_BROW(4)};

/* ---- small batches of 8 tokens per register (kernels.h, NB_ACT_Q8_KT) ---- */

/* 4 rows against one group of 8 tokens in Q4_K's batch order (the order of q4k_batch_small), token
 * t in lane t of every register, so that no sum crosses lanes: per 32-element group g and 4 codes
 * k of a row, the row's 4 codes broadcast (vpermd) meet the 8 tokens' 4 codes in one vpdpbusd;
 * the group's unscaled sums G_g (<= 32*15*127) are scaled by one vpmulld, S_c = sc_2c*G_2c +
 * sc_2c+1*G_2c+1, and M_c = m_2c*B_2c + m_2c+1*B_2c+1 is one vpmaddwd of the tokens' B pairs by
 * the row's minimum pair. Per row and block of 8 tokens about 200 instructions, where the tiles of
 * 4 tokens take about 400 per 8. */
static inline __attribute__((always_inline)) void q4k_kt(int nr, int64_t nb, const uint8_t *w, size_t ws, size_t rs,
                                                         const uint8_t *a, float *y, size_t ldy) {
    const uint8_t *p[GR];
    nb_avx512_tile_rows(p, w, ws, rs, nr);
    const nb_block_q8_kt *ab = (const nb_block_q8_kt *)a;
    __m256 accs[GR], accm[GR]; /* lane t: token t's chains of the sums and of the minimums */
    #pragma GCC unroll 8
    for (int r = 0; r < GR; r++) accs[r] = accm[r] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(15);
    /* a block ahead (as kq_gemv_q4_k): each row's 8 scales and 8 minimums as dwords, and its
     * minimum pairs (dword c: m_2c | m_2c+1 << 16) */
    int32_t sc32[2][GR][16] __attribute__((aligned(64)));
    int32_t mp[2][16] __attribute__((aligned(64)));
    __m512i sm = q4_k_scales4(p, 0);
    for (int64_t i = 0; i < nb; i++) {
        {
            int32_t(*s32)[16] = sc32[i & 1];
            #pragma GCC unroll 8
            for (int r = 0; r < GR; r++) _mm512_store_si512(s32[r], _mm512_cvtepu8_epi32(lane128(sm, r)));
            _mm512_store_si512(mp[i & 1], _mm512_unpackhi_epi8(sm, _mm512_setzero_si512()));
            if (i + 1 < nb) sm = q4_k_scales4(p, i + 1);
        }
        const nb_block_q4_k *b[GR];
        #pragma GCC unroll 8
        for (int r = 0; r < GR; r++) {
            b[r] = (const nb_block_q4_k *)p[r] + i;
            for (int l = 0; l < 144; l += 64) _mm_prefetch((const char *)b[r] + NB_PREFETCH_BYTES + l, _MM_HINT_T0);
        }
        const nb_block_q8_kt *at = ab + i;
        const __m256 D = _mm256_loadu_ps(at->d);
        __m256i bb[4]; /* B_2c | B_2c+1 << 16 per token, B_j = bsums[2j] + bsums[2j+1] (|.| <= 32*127) */
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m256i one = _mm256_set1_epi16(1);
            const __m256i b0 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)at->bp[2 * c]), one);
            const __m256i b1 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)at->bp[2 * c + 1]), one);
            bb[c] = _mm256_ternarylogic_epi32(b0, _mm256_set1_epi32(0xffff), _mm256_slli_epi32(b1, 16), 0xEA);
        }
        const __m256 dmf = q4k_ddmin(b);
        const int32_t(*s32)[16] = sc32[i & 1];
        const int32_t *mpi = mp[i & 1];
        #pragma GCC unroll 8
        for (int r = 0; r < GR; r++) {
            const __m256 dr = _mm256_mul_ps(_mm256_permutexvar_ps(_mm256_set1_epi32(2 * r), dmf), D);
            const __m256 dm = _mm256_mul_ps(_mm256_permutexvar_ps(_mm256_set1_epi32(2 * r + 1), dmf), D);
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                __m256i l = _mm256_setzero_si256(), h = l;
                #pragma GCC unroll 2
                for (int half = 0; half < 2; half++) {
                    /* codes 16 half .. 16 half + 15 of the chunk in both 128-bit lanes */
                    const __m256i qv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b[r]->qs + 32 * c + 16 * half)));
                    const __m256i ql = _mm256_and_si256(qv, m4), qh = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4);
                    #pragma GCC unroll 4
                    for (int k = 0; k < 4; k++) {
                        l = _mm256_dpbusd_epi32(l, nb_avx2_dword_lane(ql, k), _mm256_loadu_si256((const __m256i *)at->qs[2 * c][4 * half + k]));
                        h = _mm256_dpbusd_epi32(h, nb_avx2_dword_lane(qh, k), _mm256_loadu_si256((const __m256i *)at->qs[2 * c + 1][4 * half + k]));
                    }
                }
                const __m256i S = _mm256_add_epi32(_mm256_mullo_epi32(l, _mm256_set1_epi32(s32[r][2 * c])),
                                                   _mm256_mullo_epi32(h, _mm256_set1_epi32(s32[r][2 * c + 1])));
                const __m256i M = _mm256_madd_epi16(bb[c], _mm256_set1_epi32(mpi[4 * r + c]));
                accs[r] = _mm256_fmadd_ps(dr, _mm256_cvtepi32_ps(S), accs[r]);
                accm[r] = _mm256_fmadd_ps(dm, _mm256_cvtepi32_ps(M), accm[r]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < nr; r++) {
        float v[8];
        _mm256_storeu_ps(v, _mm256_sub_ps(accs[r], accm[r]));
        #pragma GCC unroll 8
        for (int t = 0; t < 8; t++) y[(size_t)t * ldy + (size_t)r * rs] = v[t];
    }
}

NB_KT_TILES(kt_tiles_q4_k, q4k_kt)

/* The groups of 8 tokens by kt_tiles_q4_k, the batch tokens left (4 of them at most) by
 * sb_batch_q4_k, the rest (fewer than 4) in the GEMV order. */
void nb_mm_q4_k_small_kt_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                                float *y, size_t ldy) {
    const int64_t nb = n / NB_QK_K, nbat = nt >= 4 ? nt - nt % 4 : 0;
    nb_avx2_tile_loop_small_kt(kt_tiles_q4_k, nb_act_kt_groups(a, as, nt), (size_t)nb * sizeof(nb_block_q8_kt), nt / 8,
                               sb_batch_q4_k, SB_T, tiles_q4_k, TMAX, nbat, nb, w, ws, a, as, nr, nt, y, ldy);
}
