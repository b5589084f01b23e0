/*
 * tlanes.h: the AVX2 set's NB_ROUTE_BLOCK small batches of Q4_0, Q5_0 and Q8_0
 * (NB_BLOCK_MIN_SMALL to NB_BLOCK_MIN - 1 tokens: the steps of a server that decodes many streams
 * at once), with the tokens in the lanes. A weight unit is decoded once per tile and its 4-byte
 * groups are broadcast to every lane; lane t of an activation register holds token t's 4 codes of
 * the same group (a copy of the activations transposed per call and chunk of units, tl_acts). So
 * a unit's whole integer sum for token t lands in lane t, and one conversion, scale product and
 * fma serve 8 tokens, where the 8-lane contract takes three of each per token: this is kernels.h's
 * one-lane order, bit for bit the panels' and the reference's. The decode, the scale and the 8
 * group broadcasts of a unit are paid per row whatever the token count, so the lanes beat the
 * 8-lane tiles only from 8 tokens (docs/BENCHMARKS.md, "Token lanes"). (The AVX-512 set puts the
 * rows in the lanes instead, where vpdpbusd broadcasts a token's bytes itself: panels_avx512.c.)
 * Group sums, by mode:
 *  - TL_U (Q4_0 and Q5_0): vpmaddubsw of the unsigned codes (units.h: w + (128 >> nsh)), at most
 *    31, against the signed activation codes, from the activations' offset correction
 *    (NB_ACT_Q8_0X's ns >> nsh); four groups' word sums stay within 4 * 2 * 31 * 127 < 32767
 *    before vpmaddwd widens them;
 *  - TL_W (Q8_0 against plain Q8_0 activations): words, signed on both sides, by vpmaddwd: each
 *    token's codes widened to word pairs once per call and chunk (tl_acts.w), each row's unit
 *    widened a unit ahead (vpmovsxbw, stored: tl_widen) and its 16 pairs broadcast from there, one
 *    activation register serving the tile's 4 rows; exact in dwords, no correction. Per pair,
 *    row and 8 tokens a broadcast (a load), vpmaddwd and an add, where the sign trick took per 4
 *    bytes a broadcast, vpabsb, vpsignb, vpmaddubsw, vpmaddwd and an add (all but the add and the
 *    broadcast on vpmaddubsw's two pipes).
 */
#ifndef NB_KERNELS_X86_TLANES_H
#define NB_KERNELS_X86_TLANES_H

#include <string.h>

#include "kernels/kernels.h"
#include "kernels/x86/avx2/units.h"

#define TL_CH 32 /* units per chunk of transposed activations (20 KiB at 16 tokens) */
#define TL_R 4   /* weight rows per tile */
#define TL_G 2   /* groups of 8 tokens: up to 16 */

enum { TL_U, TL_W };

typedef struct {
    union {
        int32_t q[TL_CH][TL_G][8][8];  /* TL_U: [unit][group][k][lane]: codes 4k..4k+3 */
        int32_t w[TL_CH][TL_G][16][8]; /* TL_W: [unit][group][k][lane]: codes 2k, 2k+1 as words */
    } __attribute__((aligned(32)));
    int32_t c[TL_CH][TL_G][8] __attribute__((aligned(32)));    /* the offset's correction of each token */
    float d[TL_CH][TL_G][8] __attribute__((aligned(32)));      /* each token's scale */
} tl_acts;

/* Units u0..u0+un-1 of nt activation rows in G groups of 8 lanes: NB_ACT_Q8_0X (x: correction
 * (ns[0] + ns[1]) >> nsh) or Q8_0 as TL_W's words (no correction); lanes past nt are zero. Each
 * unit's 8 tokens are transposed in registers, where they went element by element after a memset of the whole copy
 * (the smaller a call's rows, the more that cost: 8 tokens on 256 x 640, 1 thread, 1.03-1.07x;
 * docs/BENCHMARKS.md, stop 62). */
static inline void tl_acts_fill(tl_acts *A, const uint8_t *a, size_t as, int64_t nt, int G, int64_t u0, int un,
                                int x, int nsh) {
    for (int g = 0; g < G; g++)
        for (int u = 0; u < un; u++) {
            __m256i v[2][8]; /* token l's codes (x), or its code pairs 0-7 and 8-15 as words, transposed below */
            for (int l = 0; l < 8; l++) {
                const int64_t t = 8 * g + l;
                v[0][l] = v[1][l] = _mm256_setzero_si256();
                A->c[u][g][l] = 0, A->d[u][g][l] = 0;
                if (t >= nt) continue;
                if (x) {
                    const nb_block_q8_0x *b = (const nb_block_q8_0x *)(a + (size_t)t * as) + u0 + u;
                    A->c[u][g][l] = (b->ns[0] + b->ns[1]) >> nsh;
                    A->d[u][g][l] = b->d;
                    v[0][l] = _mm256_loadu_si256((const __m256i *)b->qs);
                } else {
                    const nb_block_q8_0 *b = (const nb_block_q8_0 *)(a + (size_t)t * as) + u0 + u;
                    A->d[u][g][l] = _cvtsh_ss(b->d);
                    v[0][l] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->qs));
                    v[1][l] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b->qs + 1));
                }
            }
            nb_transpose8(v[0]);
            for (int k = 0; k < 8; k++) _mm256_store_si256((__m256i *)(x ? A->q[u][g][k] : A->w[u][g][k]), v[0][k]);
            if (!x) {
                nb_transpose8(v[1]);
                for (int k = 0; k < 8; k++) _mm256_store_si256((__m256i *)A->w[u][g][8 + k], v[1][k]);
            }
        }
}

/* Group k of a row's decoded 8 in every lane (TL_U), from lo and hi (the row's groups 0-3 and 4-7
 * in both 128-bit halves): one in-lane shuffle, where a broadcast from memory per group would take
 * a load port (the activations keep those busy; in cache 1.1-1.2x). */
static inline __attribute__((always_inline)) __m256i tl_group(__m256i lo, __m256i hi, int k) {
    return nb_avx2_dword_lane(k < 4 ? lo : hi, k & 3);
}

/* One unit's integer sums of 8 tokens against one row's codes (TL_U): the decoded unit w, whose
 * halves are permuted from the register (storing the unit and loading its halves back stalled on
 * store forwarding: Q4_0 and Q5_0 1.05-1.12x without, Zen 3). */
static inline __attribute__((always_inline)) __m256i tl_sum(__m256i acc, __m256i w, const int32_t aq[8][8]) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i lo = _mm256_permute2x128_si256(w, w, 0x00), hi = _mm256_permute2x128_si256(w, w, 0x11);
    #pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m256i s = _mm256_maddubs_epi16(tl_group(lo, hi, 4 * h), _mm256_load_si256((const __m256i *)aq[4 * h]));
        #pragma GCC unroll 3
        for (int k = 4 * h + 1; k < 4 * h + 4; k++)
            s = _mm256_add_epi16(s, _mm256_maddubs_epi16(tl_group(lo, hi, k), _mm256_load_si256((const __m256i *)aq[k])));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(s, ones));
    }
    return acc;
}

/* TL_W: unit u of the tile's rows as word pairs. */
static inline __attribute__((always_inline)) void tl_widen(const uint8_t *const wr[TL_R], int64_t u, int32_t wp[TL_R][16]) {
    #pragma GCC unroll 4
    for (int r = 0; r < TL_R; r++) {
        const int8_t *raw = ((const nb_block_q8_0 *)wr[r] + u)->qs;
        _mm256_store_si256((__m256i *)wp[r], _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)raw)));
        _mm256_store_si256((__m256i *)wp[r] + 1, _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)raw + 1)));
    }
}

/* A tile of TL_R rows (the last valid row again for missing ones, never stored) x G groups of
 * tokens over units u0..u0+un-1 of ub bytes: f[r][g] += each unit's sum, one fma per unit in unit
 * order. The rows TL_PF tiles further on are asked for in step, unit by unit (one tile's rows are
 * one memory stream, too few misses in flight for the hardware prefetcher alone). */
#define TL_PF 1
static inline __attribute__((always_inline)) void tl_tile(int mode, dec_fn dec, int ub, int G, const uint8_t *w,
                                                          size_t ws, int rows, int64_t u0, int un, const tl_acts *A,
                                                          __m256 f[TL_R][TL_G]) {
    const uint8_t *wr[TL_R];
    #pragma GCC unroll 4
    for (int r = 0; r < TL_R; r++) wr[r] = w + (size_t)(r < rows ? r : rows - 1) * ws;
    /* TL_W: each row's unit as 16 word pairs, for broadcasts from memory, a unit ahead (read
     * back at once, the stores stalled the broadcasts on store forwarding) */
    int32_t wp[2][TL_R][16] __attribute__((aligned(32)));
    if (mode == TL_W && un > 0) tl_widen(wr, u0, wp[0]);
    for (int u = 0; u < un; u++) {
        #pragma GCC unroll 4
        for (int r = 0; r < TL_R; r++)
            _mm_prefetch((const char *)w + (size_t)(TL_PF * TL_R + r) * ws + (size_t)(u0 + u) * ub, _MM_HINT_T0);
        __m256i wq[TL_R];
        __m256 s[TL_R];
        #pragma GCC unroll 4
        for (int r = 0; r < TL_R; r++) {
            const unit x = dec(wr[r], u0 + u);
            wq[r] = x.q;
            s[r] = x.s;
        }
        if (mode == TL_W && u + 1 < un) tl_widen(wr, u0 + u + 1, wp[(u + 1) & 1]);
        #pragma GCC unroll 2
        for (int g = 0; g < G; g++) {
            const __m256 d = _mm256_load_ps(A->d[u][g]);
            __m256i p[TL_R];
            if (mode == TL_W) {
                #pragma GCC unroll 4
                for (int r = 0; r < TL_R; r++) p[r] = _mm256_setzero_si256();
                #pragma GCC unroll 16
                for (int k = 0; k < 16; k++) {
                    __m256i av = _mm256_load_si256((const __m256i *)A->w[u][g][k]);
                    NB_CHAIN(av); /* one load for the 4 rows */
                    #pragma GCC unroll 4
                    for (int r = 0; r < TL_R; r++) {
                        p[r] = _mm256_add_epi32(p[r], _mm256_madd_epi16(_mm256_set1_epi32(wp[u & 1][r][k]), av));
                        NB_CHAIN(p[r]);
                    }
                }
            } else
                #pragma GCC unroll 4
                for (int r = 0; r < TL_R; r++) p[r] = tl_sum(_mm256_load_si256((const __m256i *)A->c[u][g]), wq[r], A->q[u][g]);
            #pragma GCC unroll 4
            for (int r = 0; r < TL_R; r++) f[r][g] = _mm256_fmadd_ps(_mm256_mul_ps(s[r], d), _mm256_cvtepi32_ps(p[r]), f[r][g]);
        }
    }
}

/* nb_mm_fn for 1..16 tokens (activations x as in tl_acts_fill): chunks of TL_CH units, each
 * transposed once and run by every tile of rows; a chunk's sums carry to the next through y. */
static inline __attribute__((always_inline)) void tl_gemm(int mode, dec_fn dec, int ub, int x, int nsh, int64_t n,
                                                          const void *w, size_t ws, const void *a, size_t as,
                                                          int64_t nr, int64_t nt, float *y, size_t ldy) {
    tl_acts A;
    const int64_t nu = n / 32;
    const int G = (int)(nt + 7) / 8;
    for (int64_t u0 = 0; u0 < nu; u0 += TL_CH) {
        const int un = nu - u0 < TL_CH ? (int)(nu - u0) : TL_CH;
        tl_acts_fill(&A, a, as, nt, G, u0, un, x, nsh);
        for (int64_t r0 = 0; r0 < nr; r0 += TL_R) {
            const int rows = nr - r0 < TL_R ? (int)(nr - r0) : TL_R;
            float o[TL_R][8 * TL_G] __attribute__((aligned(32)));
            __m256 f[TL_R][TL_G]; /* in registers: every index a constant once unrolled */
            if (u0) {
                memset(o, 0, sizeof o);
                for (int r = 0; r < rows; r++)
                    for (int64_t t = 0; t < nt; t++) o[r][t] = y[(size_t)t * ldy + (size_t)(r0 + r)];
            }
            #pragma GCC unroll 4
            for (int r = 0; r < TL_R; r++)
                #pragma GCC unroll 2
                for (int g = 0; g < TL_G; g++) f[r][g] = u0 ? _mm256_load_ps(o[r] + 8 * g) : _mm256_setzero_ps();
            const uint8_t *wr = (const uint8_t *)w + (size_t)r0 * ws;
            if (G == 1)
                tl_tile(mode, dec, ub, 1, wr, ws, rows, u0, un, &A, f);
            else
                tl_tile(mode, dec, ub, 2, wr, ws, rows, u0, un, &A, f);
            #pragma GCC unroll 4
            for (int r = 0; r < TL_R; r++)
                #pragma GCC unroll 2
                for (int g = 0; g < TL_G; g++) _mm256_store_ps(o[r] + 8 * g, f[r][g]);
            for (int r = 0; r < rows; r++)
                for (int64_t t = 0; t < nt; t++) y[(size_t)t * ldy + (size_t)(r0 + r)] = o[r][t];
        }
    }
}

/* NB_ROUTE_BLOCK's kernel of type ty on a set: the token lanes (mode, decoder dec, activations as
 * in tl_acts_fill) below NB_BLOCK_MIN tokens, the set's panels `panels` from there. */
#define TL_KERNEL(ty, isa, mode, dec, x, nsh, panels)                                                         \
    void nb_mm_##ty##_block_##isa(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,  \
                                  int64_t nt, float *y, size_t ldy) {                                         \
        if (nt < NB_BLOCK_MIN)                                                                                \
            tl_gemm(mode, dec, (int)sizeof(nb_block_##ty), x, nsh, n, w, ws, a, as, nr, nt, y, ldy);          \
        else                                                                                                  \
            panels(n, w, ws, a, as, nr, nt, y, ldy);                                                          \
    }

#endif
