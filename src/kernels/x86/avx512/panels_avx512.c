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
