/*
 * panel.h: the AVX2 GEMM driver of the 8-lane contracts (units.h: Q4_0, Q5_0, Q8_0, NVFP4;
 * kquants_avx2.c: Q6_K) for many tokens.
 *
 * The tiles decode a weight unit once per 2-3 tokens and spend one register per row on the
 * unit's 8 lanes, so with many tokens most of their instructions are decode, scale products and
 * conversions per row. Here 8 rows at a time are decoded once into an L1 panel, transposed so
 * that one register holds group k (4 weights) of a unit for all 8 rows (dword r = row r's
 * elements 4k..4k+3), and every token meets that register with one vpbroadcastd of its 4
 * activation bytes of group k. Dword r is then lane k of row r's dot, so the contract's lane
 * chain (kernels.h) runs for 8 rows per instruction, and the lanes being independent chains,
 * lane k runs over all units before lane k+1: one accumulator per token is live, so a register
 * tile holds NB_PANEL_G tokens, and the 8 lane results of a row are combined at the end by
 * nb_lane_sum's tree across the 8 lane registers, elementwise, which is each row's own tree.
 *
 * A family supplies its panel (a chunk of `chunk` units of 8 rows), a decoder into it, and the
 * token kernel (T tokens against a chunk, T a constant after inlining); the driver walks rows by
 * 8, tokens by NB_PANEL_T, and units by chunks, keeping each token's 8 lane registers between
 * the chunks of a long row. The batch orders of Q6_K and Q4_K have one chain per row (dword r of
 * acc[t][0]), Q4_K a second for its minimum (acc[t][1]): stored as acc[t][0], or acc[t][0] -
 * acc[t][1] (NB_PANEL_ONE, NB_PANEL_MINUS instead of NB_PANEL_TREE). The AVX-512 set's 512-bit
 * panels keep the 8 lanes in pairs (NB_PANEL_PAIRS, nb_panel_reduce_pairs), or hold 16 rows
 * (NB_PANEL_ONE16: one chain as a 512-bit register, rows 0-7 in acc[t][0], 8-15 in acc[t][1];
 * NB_PANEL_MINUS16: Q4_K's second chain in acc[t][2] and [3]); so do AVX2's panels of two 8-row
 * halves side by side (units.h panel2, kpanel.h q4k_panel2), one 256-bit register per half.
 */
#ifndef NB_KERNELS_X86_PANEL_H
#define NB_KERNELS_X86_PANEL_H

#include <string.h>

#include "kernels/x86/avx2/avx2.h"

#define NB_PANEL_R 8  /* rows per panel: the dwords of a register */
/* Tokens whose lane sums are kept between chunks of a long row (64 KiB on the stack): each chunk
 * is decoded once per NB_PANEL_T tokens (64 -> 256: a 512-token GEMM on 1024 x 3072, 1 thread,
 * Q6_K +15 % with the AVX-512 set, +23 % with AVX2's). */
#define NB_PANEL_T 256
#ifndef NB_PANEL_G /* tokens per register tile, 4 or 8: AVX2's 16 registers take 4 (6 and 8 measured the same) */
#define NB_PANEL_G 4
#endif
#if NB_PANEL_G != 4 && NB_PANEL_G != 8
#error "NB_PANEL_G is 4 or 8"
#endif
/* how a token's registers make its results */
enum { NB_PANEL_TREE, NB_PANEL_ONE, NB_PANEL_MINUS, NB_PANEL_PAIRS, NB_PANEL_ONE16, NB_PANEL_MINUS16 };

/* out[k] dword r = v[r] dword k. */
static inline __attribute__((always_inline)) void nb_transpose8(__m256i v[8]) {
    __m256i t[8], h[8];
    #pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);     /* rows i, i+1: dwords 0 1 | 4 5 */
        t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]); /* dwords 2 3 | 6 7 */
    }
    #pragma GCC unroll 2
    for (int i = 0; i < 8; i += 4)
        #pragma GCC unroll 2
        for (int j = 0; j < 2; j++) {
            h[i + 2 * j] = _mm256_unpacklo_epi64(t[i + j], t[i + j + 2]);     /* dword 2j | 2j+4 of 4 rows */
            h[i + 2 * j + 1] = _mm256_unpackhi_epi64(t[i + j], t[i + j + 2]); /* dword 2j+1 | 2j+5 */
        }
    #pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_permute2x128_si256(h[k], h[k + 4], 0x20);
        v[k + 4] = _mm256_permute2x128_si256(h[k], h[k + 4], 0x31);
    }
}

/* out[j] dword r = x[r] dword j within each 128-bit half (x[r] holds row r in its low half, row r + 4
 * in its high one, 4 dwords each): 4 rows' 4 dwords transposed, for 8 rows at once. */
static inline __attribute__((always_inline)) void nb_transpose4_halves(__m256i x[4]) {
    const __m256i u0 = _mm256_unpacklo_epi32(x[0], x[1]), u1 = _mm256_unpackhi_epi32(x[0], x[1]);
    const __m256i u2 = _mm256_unpacklo_epi32(x[2], x[3]), u3 = _mm256_unpackhi_epi32(x[2], x[3]);
    x[0] = _mm256_unpacklo_epi64(u0, u2), x[1] = _mm256_unpackhi_epi64(u0, u2);
    x[2] = _mm256_unpacklo_epi64(u1, u3), x[3] = _mm256_unpackhi_epi64(u1, u3);
}

/* nb_lane_sum's tree over the 8 lane registers: dword r = row r's result. */
static inline __m256 nb_panel_reduce(const __m256 l[8]) {
    const __m256 s0 = _mm256_add_ps(l[0], l[4]), s1 = _mm256_add_ps(l[1], l[5]);
    const __m256 s2 = _mm256_add_ps(l[2], l[6]), s3 = _mm256_add_ps(l[3], l[7]);
    return _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3));
}

/* The same tree where a token's 8 lanes come in pairs: 512-bit register m (l[2m], l[2m+1] as
 * 256-bit halves) holds lanes 2m and 2m+1 of the 8 rows, dword 2r + j = row r's lane 2m + j. */
static inline __m256 nb_panel_reduce_pairs(const __m256 l[8]) {
    /* rows 0-3 (then 4-7), dword 2r + j: lanes j + lanes j + 4 (s0, s1), plus those of 2 + j, 6 + j (s2, s3) */
    const __m256 lo = _mm256_add_ps(_mm256_add_ps(l[0], l[4]), _mm256_add_ps(l[2], l[6]));
    const __m256 hi = _mm256_add_ps(_mm256_add_ps(l[1], l[5]), _mm256_add_ps(l[3], l[7]));
    /* (s0 + s2) + (s1 + s3) in the row order 0 1 4 5 2 3 6 7, then in order */
    const __m256 h = _mm256_hadd_ps(lo, hi);
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(h), 0xD8));
}

/* Decodes units u0..u0+un-1 of `rows` rows ws bytes apart into the panel (rows missing from the
 * 8 as zero weights and scales: their lanes stay +0 and are never stored). */
typedef void (*nb_panel_decode_fn)(const uint8_t *w, size_t ws, int rows, int64_t u0, int un, void *panel);
/* The 8-row decoder dec on rows 0-7 and 8-15 of `rows` into two panels (a missing second half:
 * the last row again), for the 16-row panels (NB_PANEL_ONE16, NB_PANEL_MINUS16). */
static inline void nb_panel_decode_halves(nb_panel_decode_fn dec, const uint8_t *w, size_t ws, int rows, int64_t i0,
                                          int nb, void *h0, void *h1) {
    dec(w, ws, rows < NB_PANEL_R ? rows : NB_PANEL_R, i0, nb, h0);
    if (rows > NB_PANEL_R)
        dec(w + NB_PANEL_R * ws, ws, rows - NB_PANEL_R, i0, nb, h1);
    else
        dec(w + (size_t)(rows - 1) * ws, ws, 1, i0, nb, h1);
}
/* T tokens (activation rows as bytes apart, from the chunk's first unit) against the chunk's un
 * units: acc[t][k] continued from its value, or from +0 when first. */
typedef void (*nb_panel_tokens_fn)(int T, const void *panel, int un, const uint8_t *a, size_t as, __m256 acc[][8],
                                   int first);

/* Token t's results of a panel of `rows` rows (of R) at y, from its registers per `out`. */
static inline __attribute__((always_inline)) void nb_panel_store(const __m256 acc[8], int out, int rows, int R, float *y) {
    __m256 v[2];
    if (out == NB_PANEL_ONE16) {
        v[0] = acc[0];
        v[1] = acc[1];
    } else if (out == NB_PANEL_MINUS16) {
        v[0] = _mm256_sub_ps(acc[0], acc[2]);
        v[1] = _mm256_sub_ps(acc[1], acc[3]);
    } else
        v[0] = out == NB_PANEL_TREE    ? nb_panel_reduce(acc)
               : out == NB_PANEL_PAIRS ? nb_panel_reduce_pairs(acc)
               : out == NB_PANEL_ONE   ? acc[0]
                                       : _mm256_sub_ps(acc[0], acc[1]);
    if (rows == R) { /* stores, not a call to memcpy per token */
        _mm256_storeu_ps(y, v[0]);
        if (R > NB_PANEL_R) _mm256_storeu_ps(y + NB_PANEL_R, v[1]);
    } else {
        float part[2 * NB_PANEL_R];
        _mm256_storeu_ps(part, v[0]);
        if (R > NB_PANEL_R) _mm256_storeu_ps(part + NB_PANEL_R, v[1]);
        memcpy(y, part, sizeof(float) * (size_t)rows);
    }
}

/* nr rows x nt tokens of nu units, chunk units per panel, unit_bytes activation bytes per unit,
 * out one of NB_PANEL_TREE, _ONE, _MINUS, _PAIRS (8 rows per panel) or _ONE16, _MINUS16 (16).
 * A token group's results are stored as soon as its last chunk is done: each token's row of y
 * is a line of its own, rarely in cache, and storing the whole block's 256 at the end stalled
 * on the misses (8 % of a Q4_K GEMM); between the groups' products they overlap. The next
 * panel's weights are asked for while this one's products run: decoding them cold waited on
 * memory (Q4_K's decode 3.9 % of the Qwen3 shape's prefill at 1 thread, 1.9 % with the requests;
 * Q6_K's 1.1 %, then under 0.5 %: docs/BENCHMARKS.md, stop 60). */
static inline __attribute__((always_inline)) void nb_panel_gemm(nb_panel_decode_fn decode, nb_panel_tokens_fn tokens,
                                                                void *panel, int chunk, size_t unit_bytes, int out,
                                                                int64_t nu, const uint8_t *w, size_t ws,
                                                                const uint8_t *a, size_t as, int64_t nr, int64_t nt,
                                                                float *y, size_t ldy) {
    __m256 acc[NB_PANEL_T][8];
    const int R = out >= NB_PANEL_ONE16 ? 2 * NB_PANEL_R : NB_PANEL_R;
    for (int64_t r0 = 0; r0 < nr; r0 += R) {
        const int rows = nr - r0 < R ? (int)(nr - r0) : R;
        for (int64_t t0 = 0; t0 < nt; t0 += NB_PANEL_T) {
            const int tn = nt - t0 < NB_PANEL_T ? (int)(nt - t0) : NB_PANEL_T;
            for (int64_t u0 = 0; u0 < nu; u0 += chunk) {
                const int un = nu - u0 < chunk ? (int)(nu - u0) : chunk, last = u0 + un == nu;
                /* a row that fits one chunk is decoded once for all tokens */
                if (nu > chunk || t0 == 0) decode(w + (size_t)r0 * ws, ws, rows, u0, un, panel);
                const uint8_t *au = a + (size_t)t0 * as + (size_t)u0 * unit_bytes;
                /* the next panel's rows of this chunk (span bytes each: ws / nu a unit's bytes, or a
                 * little more where ws is a longer stride), asked into L2 a share per token group */
                const int64_t after = nr - r0 - R; /* rows past this panel */
                const size_t ub = ws / (size_t)nu, span = (size_t)un * ub, next = after <= 0 ? 0 : after < R ? (size_t)after : (size_t)R;
                const uint8_t *nw = w + (size_t)(r0 + R) * ws + (size_t)u0 * ub;
                const size_t total = next * span, share = (total / (size_t)((tn + NB_PANEL_G - 1) / NB_PANEL_G) + 63) & ~(size_t)63;
                size_t pf = 0;
                for (int t = 0; t < tn; t += NB_PANEL_G) {
                    for (const size_t end = pf + share; pf < end && pf < total; pf += 64)
                        _mm_prefetch((const char *)nw + pf / span * ws + pf % span, _MM_HINT_T1);
                    const uint8_t *at = au + (size_t)t * as;
                    const int g = tn - t < NB_PANEL_G ? tn - t : NB_PANEL_G;
                    switch (g) {
                    case 1: tokens(1, panel, un, at, as, acc + t, u0 == 0); break;
                    case 2: tokens(2, panel, un, at, as, acc + t, u0 == 0); break;
                    case 3: tokens(3, panel, un, at, as, acc + t, u0 == 0); break;
#if NB_PANEL_G == 8
                    case 4: tokens(4, panel, un, at, as, acc + t, u0 == 0); break;
                    case 5: tokens(5, panel, un, at, as, acc + t, u0 == 0); break;
                    case 6: tokens(6, panel, un, at, as, acc + t, u0 == 0); break;
                    case 7: tokens(7, panel, un, at, as, acc + t, u0 == 0); break;
#endif
                    default: tokens(NB_PANEL_G, panel, un, at, as, acc + t, u0 == 0);
                    }
                    for (int j = t; last && j < t + g; j++) nb_panel_store(acc[j], out, rows, R, y + (size_t)(t0 + j) * ldy + r0);
                }
            }
        }
    }
}

#endif
