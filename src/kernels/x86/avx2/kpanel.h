/*
 * kpanel.h: the GEMM of many tokens for the batch orders of Q4_K and Q6_K, and Q4_K's block order
 * (kernels.h), on panel.h's 8-row panels (AVX2's Q4_K: two side by side), shared by both x86
 * sets: kquants.h includes it after k_scales_mins, and each set compiles it with its own group
 * sums and registers (kquants.h: kp_codes4, kp_scaled, kp_scale_word, KP_Q6_RUN; NB_PANEL_G).
 * Per group of 4 elements, one register holds the group for 8 rows and meets each token's 4
 * activation bytes in one kp_codes4 (AVX2: a broadcast, vpmaddubsw and a word add; AVX-512: one
 * vpdpbusd that broadcasts them from memory); the groups under one scale are summed first, so
 * that one kp_scaled applies it to all of them.
 */
#ifndef NB_KERNELS_X86_KPANEL_H
#define NB_KERNELS_X86_KPANEL_H

#include <string.h>

#include "formats/blocks.h"
#include "kernels/x86/avx2/panel.h"

/* Q6_K panel: KB blocks of 8 rows, the codes unsigned (0..63, so vpmaddubsw and vpdpbusd take
 * them as they are), each 16-element scale as the including set's scale dwords (kp_scale_word),
 * and the scale pairs for the code offset's share. Group k of 4 elements of a 32-element group g
 * shares the 16-element scale 2g + k/4. */
#define KB 4 /* blocks per chunk: 8 KiB of codes, 3 KiB of scales */
typedef struct {
    __m256i q[KB][8][8]; /* [block][group g][lane k] dword r: row r's codes 32g+4k..32g+4k+3 */
    __m256i s[KB][16];   /* [block][scale j] dword r: kp_scale_word(row r's scale j) */
    __m256i sp[KB][8];   /* [block][pair m] dword r: row r's scales 2m | 2m+1 << 16 */
    __m256 d[KB];        /* the 8 rows' d */
} q6_panel;

/* A row's 8 groups of 32 codes (element order), 0..63. */
static inline void q6_groups(const nb_block_q6_k *b, __m256i g[8]) {
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
        const __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
        const __m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
        const __m256i lo[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                               _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
        for (int j = 0; j < 4; j++)
            g[4 * h + j] = _mm256_or_si256(lo[j], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j), m2), 4));
    }
}

static void q6_decode(const uint8_t *w, size_t ws, int rows, int64_t i0, int nb, void *pv) {
    q6_panel *p = pv;
    for (int i = 0; i < nb; i++) {
        __m256i s0[NB_PANEL_R], s1[NB_PANEL_R], sp[NB_PANEL_R];
        float d[NB_PANEL_R];
        for (int r = 0; r < NB_PANEL_R; r++) {
            __m256i g[8];
            if (r < rows) {
                const nb_block_q6_k *b = (const nb_block_q6_k *)(w + (size_t)r * ws) + i0 + i;
                q6_groups(b, g);
                const __m128i sc = _mm_loadu_si128((const __m128i *)b->scales);
                s0[r] = kp_scale_word(_mm256_cvtepi8_epi32(sc));                     /* scales 0-7 */
                s1[r] = kp_scale_word(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(sc, sc))); /* 8-15 */
                sp[r] = _mm256_cvtepi8_epi16(sc); /* as dwords: the pairs 2m | 2m+1 << 16 */
                d[r] = _cvtsh_ss(b->d);
            } else {
                for (int j = 0; j < 8; j++) g[j] = _mm256_setzero_si256();
                s0[r] = s1[r] = sp[r] = _mm256_setzero_si256(), d[r] = 0;
            }
            for (int j = 0; j < 8; j++) p->q[i][j][r] = g[j]; /* row-major here, transposed below */
        }
        for (int j = 0; j < 8; j++) nb_transpose8(p->q[i][j]);
        nb_transpose8(s0);
        nb_transpose8(s1);
        nb_transpose8(sp);
        for (int j = 0; j < 8; j++) p->s[i][j] = s0[j], p->s[i][j + 8] = s1[j], p->sp[i][j] = sp[j];
        p->d[i] = _mm256_loadu_ps(d);
    }
}

/* The batch order (kernels.h): per block, row and token the exact sum over the block, then one
 * chain per row, acc = fma(d * (float)isum, da, acc), the 8 rows in the dwords of acc[t][0]. The
 * sum starts at the code offset's share, -32 * sum_j sc_j * bsums_j (8 kq_dot16 of scale pairs
 * against bsum pairs); then per group of 4 elements and token a broadcast and one kp_codes4 for 8
 * rows, and one kp_scaled per KP_Q6_RUN groups under one scale. */
static inline __attribute__((always_inline)) void q6_tokens(int T, const void *pv, int nb, const uint8_t *a, size_t as,
                                                            __m256 acc[][8], int first) {
    const q6_panel *p = pv;
    __m256 c[NB_PANEL_G];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) c[t] = first ? _mm256_setzero_ps() : acc[t][0];
    for (int i = 0; i < nb; i++) {
        const nb_block_q8_k *ab[NB_PANEL_G];
        __m256i isum[NB_PANEL_G];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            ab[t] = (const nb_block_q8_k *)(a + (size_t)t * as) + i;
            __m256i off = _mm256_setzero_si256();
            #pragma GCC unroll 8
            for (int m = 0; m < 8; m++) {
                int32_t bp;
                memcpy(&bp, ab[t]->bsums + 2 * m, 4);
                off = kq_dot16(off, p->sp[i][m], _mm256_set1_epi32(bp));
            }
            isum[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
        }
        #pragma GCC unroll 1
        for (int g = 0; g < 8; g++) { /* 32 elements: groups 8g..8g+7 of 4, under scales 2g and 2g + 1 */
            #pragma GCC unroll 8
            for (int k0 = 0; k0 < 8; k0 += KP_Q6_RUN) {
                __m256i run[NB_PANEL_G];
                #pragma GCC unroll 8
                for (int t = 0; t < T; t++) run[t] = _mm256_setzero_si256();
                #pragma GCC unroll 4
                for (int k = k0; k < k0 + KP_Q6_RUN; k++) {
                    const __m256i q = _mm256_load_si256(&p->q[i][g][k]);
                    #pragma GCC unroll 8
                    for (int t = 0; t < T; t++) run[t] = kp_codes4(run[t], q, ab[t]->qs + 32 * g + 4 * k);
                }
                const __m256i s = _mm256_load_si256(&p->s[i][2 * g + k0 / 4]);
                #pragma GCC unroll 8
                for (int t = 0; t < T; t++) isum[t] = kp_scaled(isum[t], run[t], s);
            }
        }
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++)
            c[t] = _mm256_fmadd_ps(_mm256_mul_ps(p->d[i], _mm256_cvtepi32_ps(isum[t])), _mm256_set1_ps(ab[t]->d), c[t]);
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) acc[t][0] = c[t];
}

static inline void q6_panel_gemm(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,
                                 int64_t nt, float *y, size_t ldy) {
    q6_panel p;
    nb_panel_gemm(q6_decode, q6_tokens, &p, KB, sizeof(nb_block_q8_k), NB_PANEL_ONE, n / NB_QK_K, w, ws, a, as, nr, nt, y, ldy);
}

/* Q4_K panel: KB blocks of 8 rows, the codes unsigned (0..15, taken as they are), each
 * 32-element group's scale as the including set's scale dwords (kp_scale_word), each 64
 * elements' two minimums as one int16 pair per row. */
typedef struct {
    __m256i q[KB][8][8]; /* [block][group g][lane k] dword r: row r's codes 32g+4k..32g+4k+3 */
    __m256i s[KB][8];    /* [block][group g] dword r: kp_scale_word(row r's scale g) */
    __m256i m[KB][4];    /* [block][64 elements c] dword r: row r's minimums 2c, 2c+1 */
    __m256 d[KB], dmin[KB];
} q4k_panel;

/* The low 16 bits of each dword of v, in order (AVX2: vpshufb and a qword permute). */
static inline __m128i kp_lo_words(__m256i v) {
    const __m256i sel = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9, 12, 13, -1,
                                         -1, -1, -1, -1, -1, -1, -1);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, sel), 0x08));
}

/* Token ab's 32-element sums in pairs for the minimums: bp[c] = B_2c | B_2c+1 << 16, B_j =
 * bsums[2j] + bsums[2j+1] (stored, so that each is broadcast from memory). */
static inline void q4k_bpairs(const nb_block_q8_k *ab, int32_t bp[4]) {
    _mm_storeu_si128((__m128i *)bp, _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)ab->bsums),
                                                   _mm_loadu_si128((const __m128i *)ab->bsums + 1)));
}

/* Block b[r]'s scales of 8 rows r into the panel's forms: s[g] dword r = kp_scale_word(row r's
 * scale g), m[c] dword r = row r's minimums 2c | 2c+1 << 16, d and dmin the rows' fp16 widened.
 * Each row's [sc0-3 | sc4-7 | m0-3 | m4-7] as 4 dwords, rows r and r + 4 in the two halves of
 * x[r], so that a 4 x 4 transpose within the halves leaves dword r of t[j] = row r's dword j. */
static inline __attribute__((always_inline)) void k_scales8(const nb_block_q4_k *const b[NB_PANEL_R], __m256i s[8],
                                                            __m256i m[4], __m256 *d, __m256 *dmin) {
    __m128i sm[NB_PANEL_R];
    uint32_t dd[NB_PANEL_R];
    for (int r = 0; r < NB_PANEL_R; r++) {
        sm[r] = k_scales_mins(b[r]->scales);
        memcpy(&dd[r], b[r], 4);
    }
    __m256i t[4];
    for (int r = 0; r < 4; r++) t[r] = _mm256_set_m128i(sm[r + 4], sm[r]);
    nb_transpose4_halves(t);
    const __m256i ff = _mm256_set1_epi32(0xFF);
    for (int g = 0; g < 8; g++) {
        const __m256i tg = t[g / 4];
        const __m256i sg = (g & 3) == 0 ? tg : (g & 3) == 1 ? _mm256_srli_epi32(tg, 8) : (g & 3) == 2 ? _mm256_srli_epi32(tg, 16) : _mm256_srli_epi32(tg, 24);
        s[g] = kp_scale_word(_mm256_and_si256(sg, ff));
    }
    /* minimum pair c (m_2c | m_2c+1 << 16): bytes 2(c % 2) and 2(c % 2) + 1 of dword 2 + c / 2 */
    const __m256i pair0 = _mm256_setr_epi8(0, -1, 1, -1, 4, -1, 5, -1, 8, -1, 9, -1, 12, -1, 13, -1, 0, -1, 1, -1, 4, -1, 5, -1,
                                           8, -1, 9, -1, 12, -1, 13, -1);
    const __m256i pair1 = _mm256_setr_epi8(2, -1, 3, -1, 6, -1, 7, -1, 10, -1, 11, -1, 14, -1, 15, -1, 2, -1, 3, -1, 6, -1, 7,
                                           -1, 10, -1, 11, -1, 14, -1, 15, -1);
    for (int c = 0; c < 4; c++) m[c] = _mm256_shuffle_epi8(t[2 + c / 2], c & 1 ? pair1 : pair0);
    const __m256i dv = _mm256_loadu_si256((const __m256i *)dd); /* d | dmin << 16 */
    *d = _mm256_cvtph_ps(kp_lo_words(dv));
    *dmin = _mm256_cvtph_ps(kp_lo_words(_mm256_srli_epi32(dv, 16)));
}

/* Rows missing from the 8 repeat the last one: their lanes are computed and never stored. Each
 * 32-byte run of codes is transposed as it is loaded (8 rows in registers, one nb_transpose8 per
 * run), then split into its two groups' nibbles; the scales and minimums as k_scales8 gives them.
 * Decoding a panel used to cost 2.6 ns per row and
 * 32 elements (in cache, 1 thread), 6 times the products of one token: every code went to memory
 * in row order, then through a transpose in memory. Q5_K (five; its blocks share Q4_K's d, dmin
 * and scales, then hold qh before qs): each row's 32 bytes of fifth bits are transposed once a
 * block, bit g of a byte going to bit 4 of group g's code (q5_high). */
static inline __attribute__((always_inline)) void k_decode(int five, const uint8_t *w, size_t ws, int rows, int64_t i0,
                                                           int nb, q4k_panel *p) {
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int i = 0; i < nb; i++) {
        const nb_block_q4_k *b[NB_PANEL_R];
        const uint8_t *qs[NB_PANEL_R];
        __m256i h[NB_PANEL_R]; /* Q5_K: h[k] dword r, row r's fifth bits of elements 4k..4k+3 of each group */
        for (int r = 0; r < NB_PANEL_R; r++) {
            const uint8_t *row = w + (size_t)(r < rows ? r : rows - 1) * ws;
            b[r] = five ? (const nb_block_q4_k *)((const nb_block_q5_k *)row + i0 + i) : (const nb_block_q4_k *)row + i0 + i;
            qs[r] = five ? ((const nb_block_q5_k *)b[r])->qs : b[r]->qs;
            if (five) h[r] = _mm256_loadu_si256((const __m256i *)((const nb_block_q5_k *)b[r])->qh);
        }
        if (five) nb_transpose8(h);
        for (int c = 0; c < 4; c++) {
            __m256i v[NB_PANEL_R];
            for (int r = 0; r < NB_PANEL_R; r++) v[r] = _mm256_loadu_si256((const __m256i *)(qs[r] + 32 * c));
            nb_transpose8(v); /* v[k] dword r: row r's bytes 4k..4k+3 of the run */
            for (int k = 0; k < 8; k++) {
                __m256i lo = _mm256_and_si256(v[k], m4), hi = _mm256_and_si256(_mm256_srli_epi16(v[k], 4), m4);
                if (five) lo = _mm256_or_si256(lo, q5_high(h[k], 2 * c)), hi = _mm256_or_si256(hi, q5_high(h[k], 2 * c + 1));
                _mm256_store_si256(&p->q[i][2 * c][k], lo);
                _mm256_store_si256(&p->q[i][2 * c + 1][k], hi);
            }
        }
        k_scales8(b, p->s[i], p->m[i], &p->d[i], &p->dmin[i]);
    }
}

static void q4k_decode(const uint8_t *w, size_t ws, int rows, int64_t i0, int nb, void *pv) {
    k_decode(0, w, ws, rows, i0, nb, pv);
}
static inline void q5k_decode(const uint8_t *w, size_t ws, int rows, int64_t i0, int nb, void *pv) {
    k_decode(1, w, ws, rows, i0, nb, pv);
}

/* The AVX2 set's Q4_K tiles take two 8-row panels side by side (rows 0-7 and 8-15: the halves of
 * NB_PANEL_MINUS16), so that each broadcast of a token's 4 bytes serves 16 rows: per 4 elements,
 * 16 rows and 4 tokens 2 panel loads, 4 broadcasts, 8 vpmaddubsw and 8 word adds, where one
 * panel took 1, 4, 4 and 4 for 8 rows: about 230 instructions per group where two 8-row tiles
 * took 260, 0.93-1.22x the GEMM, most runs 1.05-1.19x (Zen 3, docs/BENCHMARKS.md, stop 54). */
typedef struct {
    q4k_panel h[2];
} q4k_panel2;

static void q4k_decode2(const uint8_t *w, size_t ws, int rows, int64_t i0, int nb, void *pv) {
    q4k_panel2 *p = pv;
    nb_panel_decode_halves(q4k_decode, w, ws, rows, i0, nb, &p->h[0], &p->h[1]);
}

/* Group g (32 elements) of block i against T tokens (k_group), in runs of 4-element steps k0 ..
 * k0 + run - 1 (k_run): per 4 elements and token a broadcast, and per half vpmaddubsw and a word
 * add; a run's pair sums add as words before one kp_scaled applies the group's scale into
 * isum[t][half]. Q4_K's group is one run of 8 (|.| <= 8*2*15*127 < 2^15); Q5_K's codes (five, up
 * to 31) take two runs of 4 (4*2*31*127 < 2^15). Q4_K's loop as it was when it had no runs: GCC
 * kept two more registers live with a loop over runs (Q4_K's GEMM 0.80-0.96x). */
static inline __attribute__((always_inline)) void k_run(int T, const q4k_panel2 *p, int i, int g, int k0, int run,
                                                        const nb_block_q8_k *const ab[], __m256i isum[][2]) {
    __m256i p16[NB_PANEL_G][2];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) p16[t][0] = p16[t][1] = _mm256_setzero_si256();
    #pragma GCC unroll 8
    for (int k = k0; k < k0 + run; k++) {
        const __m256i q0 = _mm256_load_si256(&p->h[0].q[i][g][k]), q1 = _mm256_load_si256(&p->h[1].q[i][g][k]);
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            p16[t][0] = kp_codes4(p16[t][0], q0, ab[t]->qs + 32 * g + 4 * k);
            p16[t][1] = kp_codes4(p16[t][1], q1, ab[t]->qs + 32 * g + 4 * k);
        }
    }
    #pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i s = _mm256_load_si256(&p->h[h].s[i][g]);
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) isum[t][h] = kp_scaled(isum[t][h], p16[t][h], s);
    }
}

static inline __attribute__((always_inline)) void k_group(int five, int T, const q4k_panel2 *p, int i, int g,
                                                          const nb_block_q8_k *const ab[], __m256i isum[][2]) {
    if (!five) {
        k_run(T, p, i, g, 0, 8, ab, isum);
        return;
    }
    k_run(T, p, i, g, 0, 4, ab, isum);
    k_run(T, p, i, g, 4, 4, ab, isum);
}

/* The batch order (kernels.h): per 64 elements c, row and token the exact scaled sum and the two
 * minimums' m_2c*B_2c + m_2c+1*B_2c+1 (B_j: the activation's 32-element sums), then the two
 * chains per row: acc[t][h] and acc[t][2 + h] for half h. The minimums' chain reads no codes: it
 * runs after the sums', so that the sums' loop holds only their own registers. */
static inline __attribute__((always_inline)) void q4k_tokens(int T, const void *pv, int nb, const uint8_t *a,
                                                             size_t as, __m256 acc[][8], int first) {
    const q4k_panel2 *p = pv;
    __m256 c0[NB_PANEL_G][2], c1[NB_PANEL_G][2];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++)
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) c0[t][h] = first ? _mm256_setzero_ps() : acc[t][h];
    for (int i = 0; i < nb; i++) {
        const nb_block_q8_k *ab[NB_PANEL_G];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) ab[t] = (const nb_block_q8_k *)(a + (size_t)t * as) + i;
        #pragma GCC unroll 1
        for (int c = 0; c < 4; c++) {
            __m256i isum[NB_PANEL_G][2];
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) isum[t][0] = isum[t][1] = _mm256_setzero_si256();
            k_group(0, T, p, i, 2 * c, ab, isum);
            k_group(0, T, p, i, 2 * c + 1, ab, isum);
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++)
                #pragma GCC unroll 2
                for (int h = 0; h < 2; h++)
                    c0[t][h] = _mm256_fmadd_ps(_mm256_mul_ps(p->h[h].d[i], _mm256_set1_ps(ab[t]->d)),
                                               _mm256_cvtepi32_ps(isum[t][h]), c0[t][h]);
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++)
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) c1[t][h] = first ? _mm256_setzero_ps() : acc[t][2 + h];
    for (int i = 0; i < nb; i++) {
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            const nb_block_q8_k *ab = (const nb_block_q8_k *)(a + (size_t)t * as) + i;
            int32_t bp[4];
            q4k_bpairs(ab, bp);
            #pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256 dm = _mm256_mul_ps(p->h[h].dmin[i], _mm256_set1_ps(ab->d));
                #pragma GCC unroll 4
                for (int c = 0; c < 4; c++)
                    c1[t][h] = _mm256_fmadd_ps(dm, _mm256_cvtepi32_ps(_mm256_madd_epi16(p->h[h].m[i][c], _mm256_set1_epi32(bp[c]))),
                                               c1[t][h]);
            }
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++)
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) acc[t][h] = c0[t][h], acc[t][2 + h] = c1[t][h];
}

/* Per block, row and token the whole scaled sum and the 8 minimums' sum, exact in dwords, then
 * Q4_K's block order (kernels.h, NB_ROUTE_BLOCK: the GEMV's), one fma each into two chains, or
 * Q5_K's batch order (five; q5k_tokens). Against Q4_K's batch order, three conversions and fmas
 * fewer per block and token and no run of dependent fmas: 1.04-1.07x its GEMM in one process
 * (Zen 3, docs/BENCHMARKS.md, stop 53). */
static inline __attribute__((always_inline)) void k_tokens_block(int five, int T, const void *pv, int nb,
                                                                 const uint8_t *a, size_t as, __m256 acc[][8], int first) {
    const q4k_panel2 *p = pv;
    __m256 c0[NB_PANEL_G][2], c1[NB_PANEL_G][2];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++)
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            c0[t][h] = first ? _mm256_setzero_ps() : acc[t][h];
            if (!five) c1[t][h] = first ? _mm256_setzero_ps() : acc[t][2 + h];
        }
    for (int i = 0; i < nb; i++) {
        const nb_block_q8_k *ab[NB_PANEL_G];
        __m256i isum[NB_PANEL_G][2];
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            ab[t] = (const nb_block_q8_k *)(a + (size_t)t * as) + i;
            isum[t][0] = isum[t][1] = _mm256_setzero_si256();
        }
        #pragma GCC unroll 1
        for (int g = 0; g < 8; g++) k_group(five, T, p, i, g, ab, isum);
        #pragma GCC unroll 8
        for (int t = 0; t < T; t++) {
            int32_t bp[4];
            q4k_bpairs(ab[t], bp);
            const __m256 da = _mm256_set1_ps(ab[t]->d);
            #pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m256i ms = _mm256_madd_epi16(p->h[h].m[i][0], _mm256_set1_epi32(bp[0]));
                #pragma GCC unroll 3
                for (int c = 1; c < 4; c++) ms = _mm256_add_epi32(ms, _mm256_madd_epi16(p->h[h].m[i][c], _mm256_set1_epi32(bp[c])));
                if (five) {
                    const __m256 res = _mm256_fnmadd_ps(p->h[h].dmin[i], _mm256_cvtepi32_ps(ms),
                                                        _mm256_mul_ps(p->h[h].d[i], _mm256_cvtepi32_ps(isum[t][h])));
                    c0[t][h] = _mm256_fmadd_ps(res, da, c0[t][h]);
                } else {
                    c0[t][h] = _mm256_fmadd_ps(_mm256_mul_ps(p->h[h].d[i], da), _mm256_cvtepi32_ps(isum[t][h]), c0[t][h]);
                    c1[t][h] = _mm256_fmadd_ps(_mm256_mul_ps(p->h[h].dmin[i], da), _mm256_cvtepi32_ps(ms), c1[t][h]);
                }
            }
        }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++)
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            acc[t][h] = c0[t][h];
            if (!five) acc[t][2 + h] = c1[t][h];
        }
}

static inline __attribute__((always_inline)) void q4k_tokens_block(int T, const void *pv, int nb, const uint8_t *a,
                                                                   size_t as, __m256 acc[][8], int first) {
    k_tokens_block(0, T, pv, nb, a, as, acc, first);
}

/* Q5_K's batch order (kernels.h, llama.cpp's tiled kernel): the same sums (codes up to 31, so
 * k_group's shorter runs), then one chain per row, acc = fma(fma(-dmin, msum, d * isum), da,
 * acc): rows 0-7 in acc[t][0], 8-15 in acc[t][1]. */
static inline __attribute__((always_inline)) void q5k_tokens(int T, const void *pv, int nb, const uint8_t *a, size_t as,
                                                             __m256 acc[][8], int first) {
    k_tokens_block(1, T, pv, nb, a, as, acc, first);
}

/* The batch order's GEMM, and the block order's (kquants_avx2.c exports it as NB_ROUTE_BLOCK's),
 * 16 rows at a time. */
static inline void q4k_panel_gemm(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,
                                  int64_t nt, float *y, size_t ldy) {
    q4k_panel2 p;
    nb_panel_gemm(q4k_decode2, q4k_tokens, &p, KB, sizeof(nb_block_q8_k), NB_PANEL_MINUS16, n / NB_QK_K, w, ws, a, as,
                  nr, nt, y, ldy);
}
static inline void q4k_panel_gemm_block(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,
                                        int64_t nt, float *y, size_t ldy) {
    q4k_panel2 p;
    nb_panel_gemm(q4k_decode2, q4k_tokens_block, &p, KB, sizeof(nb_block_q8_k), NB_PANEL_MINUS16, n / NB_QK_K, w, ws,
                  a, as, nr, nt, y, ldy);
}

static inline void q5k_decode2(const uint8_t *w, size_t ws, int rows, int64_t i0, int nb, void *pv) {
    q4k_panel2 *p = pv;
    nb_panel_decode_halves(q5k_decode, w, ws, rows, i0, nb, &p->h[0], &p->h[1]);
}

/* Q5_K's batch order's GEMM, 16 rows at a time. */
static inline void q5k_panel_gemm(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,
                                  int64_t nt, float *y, size_t ldy) {
    q4k_panel2 p;
    nb_panel_gemm(q5k_decode2, q5k_tokens, &p, KB, sizeof(nb_block_q8_k), NB_PANEL_ONE16, n / NB_QK_K, w, ws, a, as,
                  nr, nt, y, ldy);
}

#endif
