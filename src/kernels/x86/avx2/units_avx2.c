/*
 * units_avx2.c: Q4_0, Q5_0, Q8_0, MXFP4 and NVFP4 weights against Q8_0 activations or their Q8_0X
 * forms, Q4_1 and Q5_1 against Q8_1, and NB_ROUTE_BLOCK's kernels, AVX2 (the kernel bodies are units.h).
 */
#include "kernels/x86/avx2/tlanes.h"
#include "kernels/x86/avx2/units.h"

KERNEL(q4_0, avx2, TILE_U, q8_0x)
KERNEL(q5_0, avx2, TILE_U, q8_0x)
KERNEL(q8_0, avx2, TILE_S, q8_0)
ONE_PANELS(mxfp4, static void panels_mxfp4, dec_mxfp4, mx, q8_0x)
KERNEL_PANEL(mxfp4, avx2, TILE_MX, panels_mxfp4, INT64_MAX)
/* NVFP4's panels only where a row fits one chunk (PU units): its tiles decode a row pair into one
 * register pair cheaply, and on longer rows, whose chunks restart the lanes' chains and scale
 * products, they read as fast or faster (bench_gemm, 1 thread, a first-generation Zen core: the
 * panels 1.1-1.15x the tiles on rows of 640 and 1024 elements, 1.0x on 2048, 0.9x on 8192;
 * docs/BENCHMARKS.md, stop 42) */
LANE_PANELS(nvfp4, nv, q8_0x, NB_PANEL_TREE)
KERNEL_PANEL(nvfp4, avx2, TILE_NV, panels_nvfp4, PU)
ONE_PANELS(q4_0, static void panels_q4_0b, dec_q4_0u, q4_0b, q8_0x)
ONE_PANELS(q5_0, static void panels_q5_0b, dec_q5_0u, q5_0b, q8_0x)
static void panels_q8_0b(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                         float *y, size_t ldy) {
    wpanel p;
    nb_panel_gemm(wpanel_decode_q8_0, panel_tokens_q8_0w, &p, WPU, sizeof(nb_block_q8_0), NB_PANEL_ONE16, n / 32, w,
                  ws, a, as, nr, nt, y, ldy);
}
/* NVFP4's block order takes one fma per 16-element sub-block: the panels only, from NB_BLOCK_MIN tokens */
ONE_PANELS(nvfp4, void nb_mm_nvfp4_block_avx2, dec_nvfp4, nvfp4b, q8_0x)
TL_KERNEL(q4_0, avx2, TL_U, dec_q4_0u, 1, q4_0_nsh, panels_q4_0b)
/* Q4_0 matrices of a multiple of 8 rows (kernels.h, NB_KERNEL_Q4_0_X8) take the block order, which
 * NB_ACT_Q8_0X_MX also serves: MXFP4's tiles over Q4_0's units up to 7 tokens, then the block
 * order's token lanes (8 tokens 1.6-1.7x the tiles, 15 1.3-1.7x: docs/BENCHMARKS.md, stop 55) and
 * panels (nb_mm_q4_0_block_avx2). */
KERNEL_TILES_PANEL(q4_0x8, avx2, TILE_MX, panels_q4_0b, INT64_MAX)
void nb_mm_q4_0x8_small_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                             float *y, size_t ldy) {
    if (nt >= NB_BLOCK_MIN_SMALL)
        nb_mm_q4_0_block_avx2(n, w, ws, a, as, nr, nt, y, ldy);
    else
        nb_avx2_tile_loop_small(tiles_q4_0x8, TMAX, n / 32, w, ws, a, as, nr, nt, y, ldy);
}
TL_KERNEL(q5_0, avx2, TL_U, dec_q5_0u, 1, q5_0_nsh, panels_q5_0b)
TL_KERNEL(q8_0, avx2, TL_W, dec_q8_0, 0, 0, panels_q8_0b)
KERNEL_MIN(q4_1, avx2)
KERNEL_MIN(q5_1, avx2)
