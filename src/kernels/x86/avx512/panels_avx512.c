/*
 * panels_avx512.c: the AVX-512 set's one-lane GEMM panels, the AVX2 set's (x86/avx2/units.h on
 * panel.h) with VNNI group sums and 8 tokens per register tile on 32 registers: NB_ROUTE_BLOCK's
 * kernels of Q4_0, Q5_0, Q8_0 and NVFP4 (against NB_ACT_Q8_0X, NVFP4's in its nibble order), and
 * MXFP4's own order from PANEL_MIN_TOKENS tokens. Per 4 weights, 8 rows and token one vpdpbusd
 * that broadcasts the token's 4 bytes itself, where AVX2 takes a broadcast, vpmaddubsw and a word
 * add; Q8_0 is read as unsigned codes + 128 (dword sums cannot overflow), so it needs no sign
 * trick. The sums are exact, so the bits are the reference's.
 */
#define NB_PANEL_G 8
#define PU 64 /* units per panel: 16 KiB of codes, so that a 2048-wide row is decoded once for every token */

#include "kernels/x86/avx512/avx512.h"

/* The one-lane panels' group sums (units.h): straight into dwords. */
static inline __m256i pu_codes4(__m256i acc, __m256i q, const int8_t *a4) { return nb_avx512_codes4(acc, q, a4); }
static inline __m256i pu_dwords(__m256i d) { return d; }

#include "kernels/x86/avx2/units.h"

KERNEL_BLOCK(q4_0, avx512, dec_q4_0u, q4_0b, q8_0x)
KERNEL_BLOCK(q5_0, avx512, dec_q5_0u, q5_0b, q8_0x)
KERNEL_BLOCK(q8_0, avx512, dec_q8_0u, q8_0ub, q8_0x)
KERNEL_BLOCK(nvfp4, avx512, dec_nvfp4, nvfp4b, q8_0x)

PANEL_DECODE(mxfp4)
void nb_mm_mxfp4_panel_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                              float *y, size_t ldy) {
    panel p;
    nb_panel_gemm(panel_decode_mxfp4, panel_tokens_mx, &p, PU, sizeof(nb_block_q8_0x), NB_PANEL_ONE, n / 32, w, ws, a, as,
                  nr, nt, y, ldy);
}

/* ---- The 8-lane contract (Q4_0, Q5_0, Q8_0) on 512-bit panels, from PANEL_MIN_TOKENS ---- */

/* A chunk of PU units of 8 rows as codes + 128, so that the activations' nc (-128 * sum4 of the
 * lane's codes) takes the offset out with no shift. Register m of unit u holds lanes 2m and
 * 2m + 1 of the 8 rows, dword 2r + j = row r's weights 4(2m + j)..4(2m + j) + 3, so one 64-bit
 * broadcast of a token's bytes 8m..8m + 7 meets both lanes; the scales likewise (dword 2r + j:
 * row r's). */
typedef struct {
    __m512i q[PU][4];
    __m512 s[PU];
} zpanel;

/* dec gives unsigned codes w + (128 >> nsh) (units.h). */
static inline __attribute__((always_inline)) void zpanel_decode(dec_fn dec, int nsh, const uint8_t *w, size_t ws, int rows,
                                                                int64_t u0, int un, zpanel *p) {
    const __m256i bias = _mm256_set1_epi8((char)(128 - (128 >> nsh)));
    for (int u = 0; u < un; u++) {
        uint64_t q[4][NB_PANEL_R]; /* [m][r] */
        float s[2 * NB_PANEL_R];
        for (int r = 0; r < NB_PANEL_R; r++) {
            uint64_t v[4] = {0, 0, 0, 0}; /* rows missing from the 8: zero codes and scales, never stored */
            float sr = 0;
            if (r < rows) {
                const unit x = dec(w + (size_t)r * ws, u0 + u);
                _mm256_storeu_si256((__m256i *)v, _mm256_add_epi8(x.q, bias));
                sr = _mm256_cvtss_f32(x.s);
            }
            for (int m = 0; m < 4; m++) q[m][r] = v[m];
            s[2 * r] = s[2 * r + 1] = sr;
        }
        for (int m = 0; m < 4; m++) p->q[u][m] = _mm512_loadu_si512(q[m]);
        p->s[u] = _mm512_loadu_ps(s);
    }
}

/* T tokens against a chunk, 4 at a time (16 accumulators): per unit and token one scale product
 * and, per lane pair, a vpdpbusd that starts from the pair's nc (both 64-bit broadcasts are
 * loads), a conversion and an fma for 8 rows. Each dword is one lane's chain over the units, the
 * tiles' lane values and fma sequence; acc[t] holds the 4 registers (NB_PANEL_PAIRS). */
static inline __attribute__((always_inline)) void zpanel_tokens(int T, const void *pv, int un, const uint8_t *a,
                                                                size_t as, __m256 acc[][8], int first) {
    const zpanel *p = pv;
    for (int t0 = 0; t0 < T; t0 += 4) {
        __m512 c[4][4];
        #pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
            #pragma GCC unroll 4
            for (int m = 0; m < 4; m++)
                c[t][m] = first || t0 + t >= T ? _mm512_setzero_ps() : _mm512_loadu_ps((const float *)acc[t0 + t] + 16 * m);
        for (int u = 0; u < un; u++) {
            __m512i q[4];
            #pragma GCC unroll 4
            for (int m = 0; m < 4; m++) q[m] = _mm512_load_si512(&p->q[u][m]);
            #pragma GCC unroll 4
            for (int t = 0; t < 4; t++) {
                if (t0 + t >= T) break;
                const nb_block_q8_0x *ab = (const nb_block_q8_0x *)(a + (size_t)(t0 + t) * as) + u;
                const __m512 sd = _mm512_mul_ps(p->s[u], _mm512_set1_ps(ab->d));
                #pragma GCC unroll 4
                for (int m = 0; m < 4; m++) {
                    long long nc2, a8;
                    memcpy(&nc2, ab->nc + 2 * m, 8);
                    memcpy(&a8, ab->qs + 8 * m, 8);
                    const __m512i l = _mm512_dpbusd_epi32(_mm512_set1_epi64(nc2), q[m], _mm512_set1_epi64(a8));
                    c[t][m] = _mm512_fmadd_ps(sd, _mm512_cvtepi32_ps(l), c[t][m]);
                }
            }
        }
        #pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
            #pragma GCC unroll 4
            for (int m = 0; m < 4; m++)
                if (t0 + t < T) _mm512_storeu_ps((float *)acc[t0 + t] + 16 * m, c[t][m]);
    }
}

#define ZPANEL(ty, dec, nsh)                                                                                       \
    static void zpanel_decode_##ty(const uint8_t *w, size_t ws, int rows, int64_t u0, int un, void *p) {           \
        zpanel_decode(dec, nsh, w, ws, rows, u0, un, p);                                                          \
    }                                                                                                             \
    void nb_mm_##ty##_panel_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,     \
                                   int64_t nt, float *y, size_t ldy) {                                            \
        zpanel p;                                                                                                 \
        nb_panel_gemm(zpanel_decode_##ty, zpanel_tokens, &p, PU, sizeof(nb_block_q8_0x), NB_PANEL_PAIRS, n / 32, w, \
                      ws, a, as, nr, nt, y, ldy);                                                                 \
    }
ZPANEL(q4_0, dec_q4_0u, q4_0_nsh)
ZPANEL(q5_0, dec_q5_0u, q5_0_nsh)
ZPANEL(q8_0, dec_q8_0u, 0)
