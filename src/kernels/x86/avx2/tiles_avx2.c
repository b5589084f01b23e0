/*
 * tiles_avx2.c: the tile loop of every SIMD kernel family (contract in avx2.h).
 */
#include "kernels/x86/avx2/avx2.h"

void nb_avx2_tile_loop(const nb_avx2_tile_fn *tiles, int tmax, int64_t n, const void *w, size_t ws, const void *a,
                       size_t as, int64_t nr, int64_t nt, float *y, size_t ldy) {
    const uint8_t *wb = w, *ab = a;
    if (nt == 1 && nr >= 16) {
        const int64_t q = nr / 4;
        for (int64_t r = 0; r < q; r++) tiles[3 * tmax](n, wb + (size_t)r * ws, ws, (size_t)q, ab, as, y + r, ldy);
        wb += (size_t)(4 * q) * ws;
        y += 4 * q;
        nr -= 4 * q;
    }
    for (int64_t t = 0; t < nt; t += tmax) {
        const int tt = nt - t < tmax ? (int)(nt - t) : tmax;
        for (int64_t r = 0; r < nr; r += 4) {
            const int rr = nr - r < 4 ? (int)(nr - r) : 4;
            tiles[(rr - 1) * tmax + tt - 1](n, wb + (size_t)r * ws, ws, 1, ab + (size_t)t * as, as,
                                            y + (size_t)t * ldy + (size_t)r, ldy);
        }
    }
}
