/*
 * panels_avx512.c: the AVX-512 set's GEMM panels for the 32-element types, from PANEL_MIN_TOKENS
 * tokens, on panel.h's driver and units.h's decoders, with VNNI group sums and 8 tokens per
 * register tile on 32 registers:
 *  - the one-lane order (NB_ROUTE_BLOCK's Q4_0, Q5_0, Q8_0 and NVFP4 against NB_ACT_Q8_0X, NVFP4's
 *    in its nibble order; MXFP4's own order) on 16-row panels: per 4 weights, 16 rows and token
 *    one vpdpbusd that broadcasts the token's 4 bytes itself, where AVX2 takes a broadcast,
 *    vpmaddubsw and a word add for 8 rows;
 *  - below RL_MAX tokens, the same sums with the 16 rows decoded and transposed in registers per
 *    unit (the row lanes, rl_tile), with no panel in memory;
 *  - llama.cpp's 8-lane order of Q4_0, Q5_0, Q8_0 and NVFP4 on 8-row panels whose registers hold
 *    two lanes each (zpanel below).
 * Q8_0 is read as codes + 128 (dword sums cannot overflow), so it needs no sign trick. The sums are
 * exact and each chain keeps the reference's order, so the bits are the reference's.
 */
#define NB_PANEL_G 8

#include "kernels/x86/avx512/avx512.h"

#include "kernels/x86/avx2/units.h"

/* ---- The one-lane order on 16-row panels of 512-bit registers ---- */

/* units.h's one-lane panel for 16 rows: dword r of each register is row r (rows 0-7 in the low
 * half), so that each group sum (one vpdpbusd broadcasting the token's 4 bytes to 16 dwords) and
 * each unit's conversion, scale product and fma serve 16 rows. The two halves are decoded as
 * 8-row panels (a missing second half: the last row again; results past `rows` are never
 * stored) and joined: once per chunk and 256 tokens. */
typedef struct {
    __m512i q[PU][8]; /* PU units a chunk (units.h): 16 KiB of codes */
    __m512 s[PU][2];
} panel16;

static inline __attribute__((always_inline)) void panel16_decode(dec_fn dec, const uint8_t *w, size_t ws, int rows,
                                                                 int64_t u0, int un, panel16 *p) {
    panel h[2];
    panel_decode(dec, w, ws, rows < NB_PANEL_R ? rows : NB_PANEL_R, u0, un, &h[0]);
    panel_decode(dec, w + (size_t)(rows > NB_PANEL_R ? NB_PANEL_R : rows - 1) * ws, ws, rows > NB_PANEL_R ? rows - NB_PANEL_R : 1,
                 u0, un, &h[1]);
    for (int u = 0; u < un; u++) {
        for (int k = 0; k < 8; k++) p->q[u][k] = nb_avx512_join(h[0].q[u][k], h[1].q[u][k]);
        for (int j = 0; j < 2; j++) p->s[u][j] = nb_avx512_joinf(h[0].s[u][j], h[1].s[u][j]);
    }
}

/* panel_tokens_one's unsigned codes (x) on 16 rows: the same exact sums and one chain per row,
 * token t's in acc[t][0..1] as a 512-bit register (NB_PANEL_ONE16). */
static inline __attribute__((always_inline)) void panel16_tokens(int nsh, int split, int T, const void *pv, int un,
                                                                 const uint8_t *a, size_t as, __m256 acc[][8],
                                                                 int first) {
    const panel16 *p = pv;
    __m512 c[NB_PANEL_G];
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) c[t] = first ? _mm512_setzero_ps() : _mm512_loadu_ps((const float *)acc[t]);
    for (int u = 0; u < un; u++) {
        __m512i is[NB_PANEL_G];
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const int *k = one_groups[split][h];
            __m512i q[4];
            #pragma GCC unroll 4
            for (int i = 0; i < 4; i++) q[i] = _mm512_load_si512(&p->q[u][k[i]]);
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const nb_block_q8_0x *ab = (const nb_block_q8_0x *)(a + (size_t)t * as) + u;
                __m512i hs = _mm512_setzero_si512();
                #pragma GCC unroll 4
                for (int i = 0; i < 4; i++) hs = nb_avx512_codes16(hs, q[i], ab->qs + 4 * k[i]);
                if (split) {
                    const __m512i isum = _mm512_add_epi32(hs, _mm512_set1_epi32(ab->ns[h] >> nsh));
                    c[t] = _mm512_fmadd_ps(_mm512_mul_ps(p->s[u][h], _mm512_set1_ps(ab->d)), _mm512_cvtepi32_ps(isum), c[t]);
                } else
                    is[t] = h ? _mm512_add_epi32(is[t], hs) : hs;
            }
        }
        if (!split)
            #pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                const nb_block_q8_0x *ab = (const nb_block_q8_0x *)(a + (size_t)t * as) + u;
                const __m512i isum = _mm512_add_epi32(is[t], _mm512_set1_epi32((ab->ns[0] + ab->ns[1]) >> nsh));
                c[t] = _mm512_fmadd_ps(_mm512_mul_ps(p->s[u][0], _mm512_set1_ps(ab->d)), _mm512_cvtepi32_ps(isum), c[t]);
            }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; t++) _mm512_storeu_ps((float *)acc[t], c[t]);
}

/* The 16-row panels as the function fn (a declarator: linkage, type and name): NB_ROUTE_BLOCK's
 * kernels from NB_BLOCK_MIN tokens (codes by dec, offset 128 >> nsh, NVFP4's halves with split), and
 * MXFP4's own order. */
#define PANEL16(name, fn, dec, nsh, split)                                                                          \
    static void decode_##name(const uint8_t *w, size_t ws, int rows, int64_t u0, int un, void *p) {               \
        panel16_decode(dec, w, ws, rows, u0, un, p);                                                             \
    }                                                                                                            \
    static inline __attribute__((always_inline)) void tokens_##name(int T, const void *pv, int un,               \
                                                                    const uint8_t *a, size_t as,                 \
                                                                    __m256 acc[][8], int first) {                \
        panel16_tokens(nsh, split, T, pv, un, a, as, acc, first);                                                \
    }                                                                                                            \
    fn(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y,         \
       size_t ldy) {                                                                                             \
        panel16 p;                                                                                               \
        nb_panel_gemm(decode_##name, tokens_##name, &p, PU, sizeof(nb_block_q8_0x), NB_PANEL_ONE16, n / 32, w, ws, \
                      a, as, nr, nt, y, ldy);                                                                    \
    }
PANEL16(q4_0_block, static void panel_q4_0_block, dec_q4_0u, q4_0_nsh, 0)
PANEL16(q5_0_block, static void panel_q5_0_block, dec_q5_0u, q5_0_nsh, 0)
PANEL16(q8_0_block, static void panel_q8_0_block, dec_q8_0u, 0, 0)
PANEL16(nvfp4_block, void nb_mm_nvfp4_block_avx512, dec_nvfp4, 3, 1)
PANEL16(mxfp4_panel, void nb_mm_mxfp4_panel_avx512, dec_mxfp4, 3, 0)

/* ---- Below NB_BLOCK_MIN tokens: the rows in the lanes, decoded in registers ---- */

/* NB_ROUTE_BLOCK's batches of NB_BLOCK_MIN_SMALL to NB_BLOCK_MIN - 1 tokens of Q4_0, Q5_0 and Q8_0
 * (a server's steps). A unit of 16 rows is decoded and transposed in registers (dword r of v[k]:
 * row r's 4 codes of group k), then each token meets it with 8 vpdpbusd that broadcast its 4 bytes
 * of a group from memory, and one conversion, scale product and fma for the 16 rows: the 16-row
 * panels' sums with no panel in memory (whose stores and reloads cost more than the products at
 * these token counts) and no transposed copy of the activations (AVX2's token lanes,
 * x86/avx2/tlanes.h). Same exact sums, one chain per row and token in unit order: the bits of the
 * panels and the reference. */
#define RL_CH 64 /* units per chunk of the tokens' offset corrections */
#define RL_R 16  /* rows per tile: dword r of a 512-bit register */
#define RL_PF 4  /* tiles ahead that the prefetches read */

/* T tokens against RL_R rows from w (the last valid row again for missing ones) over units
 * u0..u0+un-1 of ub bytes, f[t] continuing token t's sums. The scale d is each unit's first two
 * bytes in all three types. The same unit of the rows RL_PF tiles on is asked for in step, into
 * L2: into L1 it held the fill buffers the loads need, and read 1.6x slower from DRAM. */
static inline __attribute__((always_inline)) void rl_tile(dec_fn dec, int ub, int T, const uint8_t *w, size_t ws,
                                                          int rows, int64_t u0, int un, const uint8_t *a, size_t as,
                                                          const int32_t corr[RL_CH][NB_BLOCK_MIN], __m512 f[]) {
    const uint8_t *wr[RL_R];
    #pragma GCC unroll 16
    for (int r = 0; r < RL_R; r++) wr[r] = w + (size_t)(r < rows ? r : rows - 1) * ws;
    for (int u = 0; u < un; u++) {
        const int64_t uu = u0 + u;
        __m512i v[8];
        uint64_t dh[4] = {0, 0, 0, 0};
        #pragma GCC unroll 16
        for (int r = 0; r < RL_R; r++) {
            _mm_prefetch((const char *)w + (size_t)(RL_PF * RL_R + r) * ws + (size_t)uu * ub, _MM_HINT_T1);
            uint16_t d;
            memcpy(&d, wr[r] + (size_t)uu * ub, 2);
            dh[r / 4] |= (uint64_t)d << 16 * (r % 4);
        }
        const __m512 sw = _mm512_cvtph_ps(
            _mm256_setr_epi64x((long long)dh[0], (long long)dh[1], (long long)dh[2], (long long)dh[3]));
        #pragma GCC unroll 8
        for (int r = 0; r < 8; r++) v[r] = nb_avx512_join(dec(wr[r], uu).q, dec(wr[r + 8], uu).q);
        nb_avx512_transpose8x2(v);
        /* tokens in groups of up to 8, each group's sums side by side: each vpdpbusd's inputs are
         * ready when it issues */
        #pragma GCC unroll 2
        for (int t0 = 0; t0 < T; t0 += 8) {
            const int tn = T - t0 < 8 ? T - t0 : 8;
            const nb_block_q8_0x *ab[8];
            __m512i acc[8];
            #pragma GCC unroll 8
            for (int t = 0; t < tn; t++) {
                ab[t] = (const nb_block_q8_0x *)(a + (size_t)(t0 + t) * as) + uu;
                acc[t] = _mm512_set1_epi32(corr[u][t0 + t]);
            }
            #pragma GCC unroll 8
            for (int k = 0; k < 8; k++)
                #pragma GCC unroll 8
                for (int t = 0; t < tn; t++) acc[t] = nb_avx512_codes16(acc[t], v[k], ab[t]->qs + 4 * k);
            #pragma GCC unroll 8
            for (int t = 0; t < tn; t++)
                f[t0 + t] = _mm512_fmadd_ps(_mm512_mul_ps(sw, _mm512_set1_ps(ab[t]->d)), _mm512_cvtepi32_ps(acc[t]),
                                            f[t0 + t]);
        }
    }
}

/* T tokens (NB_ACT_Q8_0X rows) against nr rows of codes by dec (offset 128 >> nsh), in chunks of
 * RL_CH units whose sums carry through y. */
static inline __attribute__((always_inline)) void rl_gemm(dec_fn dec, int ub, int nsh, int T, int64_t n,
                                                          const uint8_t *w, size_t ws, const uint8_t *a, size_t as,
                                                          int64_t nr, float *y, size_t ldy) {
    int32_t corr[RL_CH][NB_BLOCK_MIN];
    const int64_t nu = n / 32;
    for (int64_t u0 = 0; u0 < nu; u0 += RL_CH) {
        const int un = nu - u0 < RL_CH ? (int)(nu - u0) : RL_CH;
        for (int u = 0; u < un; u++)
            for (int t = 0; t < T; t++) {
                const nb_block_q8_0x *ab = (const nb_block_q8_0x *)(a + (size_t)t * as) + u0 + u;
                corr[u][t] = (ab->ns[0] + ab->ns[1]) >> nsh;
            }
        for (int64_t r0 = 0; r0 < nr; r0 += RL_R) {
            const int rows = nr - r0 < RL_R ? (int)(nr - r0) : RL_R;
            const __mmask16 m = (__mmask16)((1u << rows) - 1);
            __m512 f[NB_BLOCK_MIN];
            #pragma GCC unroll 16
            for (int t = 0; t < T; t++)
                f[t] = u0 ? _mm512_maskz_loadu_ps(m, y + (size_t)t * ldy + r0) : _mm512_setzero_ps();
            rl_tile(dec, ub, T, w + (size_t)r0 * ws, ws, rows, u0, un, a, as, corr, f);
            #pragma GCC unroll 16
            for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + (size_t)t * ldy + r0, m, f[t]);
        }
    }
}

/* NB_ROUTE_BLOCK's kernel of type ty: the row lanes from NB_BLOCK_MIN_SMALL to RL_MAX - 1 tokens,
 * the panels from RL_MAX. The row lanes are a function per token count up to 15 (rl_<ty>[T - 8]),
 * so that each token's sums stay in a register and each count's register allocation is its own.
 * From NB_BLOCK_MIN tokens they run near-equal groups of 8 to 15 tokens, each decoding the rows
 * again: matmul.c hands such products over in chunks of rows that stay in L2 (NB_PANEL_BYTES),
 * and below RL_MAX tokens this costs less than a panel's stores and reloads (docs/BENCHMARKS.md,
 * "Row lanes past 16 tokens"). */
#define RL_MAX 64
static inline __attribute__((always_inline)) void rl_block(const nb_mm_fn rl[NB_BLOCK_MIN - NB_BLOCK_MIN_SMALL],
                                                           nb_mm_fn panels, int64_t n, const void *w, size_t ws,
                                                           const void *a, size_t as, int64_t nr, int64_t nt, float *y,
                                                           size_t ldy) {
    if (nt >= RL_MAX) {
        panels(n, w, ws, a, as, nr, nt, y, ldy);
        return;
    }
    const int64_t ng = (nt + NB_BLOCK_MIN - 2) / (NB_BLOCK_MIN - 1);
    for (int64_t g = 0, t0 = 0, tn; g < ng; g++, t0 += tn) {
        tn = (nt - t0) / (ng - g);
        rl[tn - NB_BLOCK_MIN_SMALL](n, w, ws, (const uint8_t *)a + (size_t)t0 * as, as, nr, tn, y + (size_t)t0 * ldy,
                                   ldy);
    }
}
#define RL_COUNT(ty, dec, nsh, T)                                                                                \
    static __attribute__((noinline)) void rl_##ty##_##T(int64_t n, const void *w, size_t ws, const void *a,     \
                                                       size_t as, int64_t nr, int64_t nt, float *y, size_t ldy) { \
        (void)nt;                                                                                                \
        rl_gemm(dec, (int)sizeof(nb_block_##ty), nsh, T, n, w, ws, a, as, nr, y, ldy);                           \
    }
#define RL_KERNEL(ty, dec, nsh)                                                                                 \
    RL_COUNT(ty, dec, nsh, 8) RL_COUNT(ty, dec, nsh, 9) RL_COUNT(ty, dec, nsh, 10) RL_COUNT(ty, dec, nsh, 11)   \
    RL_COUNT(ty, dec, nsh, 12) RL_COUNT(ty, dec, nsh, 13) RL_COUNT(ty, dec, nsh, 14) RL_COUNT(ty, dec, nsh, 15) \
    static const nb_mm_fn rl_##ty[] = {rl_##ty##_8,  rl_##ty##_9,  rl_##ty##_10, rl_##ty##_11,                   \
                                       rl_##ty##_12, rl_##ty##_13, rl_##ty##_14, rl_##ty##_15};                  \
    _Static_assert(sizeof rl_##ty / sizeof rl_##ty[0] == NB_BLOCK_MIN - NB_BLOCK_MIN_SMALL, "a function per count"); \
    void nb_mm_##ty##_block_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,  \
                                   int64_t nt, float *y, size_t ldy) {                                         \
        rl_block(rl_##ty, panel_##ty##_block, n, w, ws, a, as, nr, nt, y, ldy);                                \
    }
RL_KERNEL(q4_0, dec_q4_0u, q4_0_nsh)
RL_KERNEL(q5_0, dec_q5_0u, q5_0_nsh)
RL_KERNEL(q8_0, dec_q8_0u, 0)

/* ---- The 8-lane contract (Q4_0, Q5_0, Q8_0, NVFP4) on 512-bit panels, from PANEL_MIN_TOKENS ---- */

/* A chunk of PU units of 8 rows as codes + 128, so that the activations' nc (-128 * sum4 of the
 * lane's codes) takes the offset out with no shift. Register m of unit u holds lanes 2m and
 * 2m + 1 of the 8 rows, dword 2r + j = row r's weights 4(2m + j)..4(2m + j) + 3, so one 64-bit
 * broadcast of a token's bytes 8m..8m + 7 meets both lanes; the scales likewise (dword 2r + j:
 * row r's). NVFP4 (nv) in its nibble order (NB_ACT_Q8_0X_NV's): lanes 0, 1, 4, 5 are its
 * sub-block 2h of unit h (scales s[u][0]), 2, 3, 6, 7 sub-block 2h + 1 (s[u][1]). */
typedef struct {
    __m512i q[PU][4];
    __m512 s[PU][2];
} zpanel;

/* dec gives unsigned codes w + (128 >> nsh) (units.h); NVFP4's scales are lanes 0 and 2 of its s. */
static inline __attribute__((always_inline)) void zpanel_decode(dec_fn dec, int nsh, int nv, const uint8_t *w, size_t ws,
                                                                int rows, int64_t u0, int un, zpanel *p) {
    const __m256i bias = _mm256_set1_epi8((char)(128 - (128 >> nsh)));
    for (int u = 0; u < un; u++) {
        uint64_t q[4][NB_PANEL_R]; /* [m][r] */
        float s[2][2 * NB_PANEL_R];
        for (int r = 0; r < NB_PANEL_R; r++) {
            uint64_t v[4] = {0, 0, 0, 0}; /* rows missing from the 8: zero codes and scales, never stored */
            float sr[2] = {0, 0};
            if (r < rows) {
                const unit x = dec(w + (size_t)r * ws, u0 + u);
                _mm256_storeu_si256((__m256i *)v, _mm256_add_epi8(x.q, bias));
                float xs[8];
                _mm256_storeu_ps(xs, x.s);
                sr[0] = xs[0], sr[1] = xs[2];
            }
            for (int m = 0; m < 4; m++) q[m][r] = v[m];
            for (int h = 0; h < 2; h++) s[h][2 * r] = s[h][2 * r + 1] = sr[h];
        }
        for (int m = 0; m < 4; m++) p->q[u][m] = _mm512_loadu_si512(q[m]);
        for (int h = 0; h < 1 + nv; h++) p->s[u][h] = _mm512_loadu_ps(s[h]);
    }
}

/* T tokens against a chunk, 4 at a time (16 accumulators): per unit and token one scale product
 * (NVFP4: two) and, per lane pair, a vpdpbusd that starts from the pair's nc (both 64-bit
 * broadcasts are loads), a conversion and an fma for 8 rows. Each dword is one lane's chain over
 * the units, the tiles' lane values and fma sequence; acc[t] holds the 4 registers in the
 * elements' group order (NB_PANEL_PAIRS), NVFP4's pairs 1 and 2 swapped into it. */
static inline __attribute__((always_inline)) void zpanel_tokens(int nv, int T, const void *pv, int un, const uint8_t *a,
                                                                size_t as, __m256 acc[][8], int first) {
    const zpanel *p = pv;
    static const int pos[2][4] = {{0, 1, 2, 3}, {0, 2, 1, 3}};
    for (int t0 = 0; t0 < T; t0 += 4) {
        __m512 c[4][4];
        #pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
            #pragma GCC unroll 4
            for (int m = 0; m < 4; m++)
                c[t][m] = first || t0 + t >= T ? _mm512_setzero_ps()
                                               : _mm512_loadu_ps((const float *)acc[t0 + t] + 16 * pos[nv][m]);
        for (int u = 0; u < un; u++) {
            __m512i q[4];
            #pragma GCC unroll 4
            for (int m = 0; m < 4; m++) q[m] = _mm512_load_si512(&p->q[u][m]);
            #pragma GCC unroll 4
            for (int t = 0; t < 4; t++) {
                if (t0 + t >= T) break;
                const nb_block_q8_0x *ab = (const nb_block_q8_0x *)(a + (size_t)(t0 + t) * as) + u;
                __m512 sd[2];
                #pragma GCC unroll 2
                for (int h = 0; h < 1 + nv; h++) sd[h] = _mm512_mul_ps(p->s[u][h], _mm512_set1_ps(ab->d));
                #pragma GCC unroll 4
                for (int m = 0; m < 4; m++) {
                    long long nc2, a8;
                    memcpy(&nc2, ab->nc + 2 * m, 8);
                    memcpy(&a8, ab->qs + 8 * m, 8);
                    const __m512i l = _mm512_dpbusd_epi32(_mm512_set1_epi64(nc2), q[m], _mm512_set1_epi64(a8));
                    c[t][m] = _mm512_fmadd_ps(sd[nv ? m & 1 : 0], _mm512_cvtepi32_ps(l), c[t][m]);
                }
            }
        }
        #pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
            #pragma GCC unroll 4
            for (int m = 0; m < 4; m++)
                if (t0 + t < T) _mm512_storeu_ps((float *)acc[t0 + t] + 16 * pos[nv][m], c[t][m]);
    }
}

#define ZPANEL(ty, dec, nsh, nv)                                                                                   \
    static void zpanel_decode_##ty(const uint8_t *w, size_t ws, int rows, int64_t u0, int un, void *p) {           \
        zpanel_decode(dec, nsh, nv, w, ws, rows, u0, un, p);                                                      \
    }                                                                                                             \
    static inline __attribute__((always_inline)) void zpanel_tokens_##ty(int T, const void *pv, int un,           \
                                                                         const uint8_t *a, size_t as,             \
                                                                         __m256 acc[][8], int first) {            \
        zpanel_tokens(nv, T, pv, un, a, as, acc, first);                                                          \
    }                                                                                                             \
    void nb_mm_##ty##_panel_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,     \
                                   int64_t nt, float *y, size_t ldy) {                                            \
        zpanel p;                                                                                                 \
        nb_panel_gemm(zpanel_decode_##ty, zpanel_tokens_##ty, &p, PU, sizeof(nb_block_q8_0x), NB_PANEL_PAIRS, n / 32, w, \
                      ws, a, as, nr, nt, y, ldy);                                                                 \
    }
ZPANEL(q4_0, dec_q4_0u, q4_0_nsh, 0)
ZPANEL(q5_0, dec_q5_0u, q5_0_nsh, 0)
ZPANEL(q8_0, dec_q8_0u, 0, 0)
ZPANEL(nvfp4, dec_nvfp4, 3, 1)
