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

/* One tile of rows (rr of them, rs rows apart) against tokens t0..t1-1, tmax at a time. */
static void rows_tokens(const nb_avx2_tile_fn *tiles, int tmax, int rr, int64_t n, const uint8_t *w, size_t ws,
                        size_t rs, const uint8_t *a, size_t as, int64_t t0, int64_t t1, float *y, size_t ldy) {
    for (int64_t t = t0; t < t1; t += tmax) {
        const int tt = t1 - t < tmax ? (int)(t1 - t) : tmax;
        tiles[(rr - 1) * tmax + tt - 1](n, w, ws, rs, a + (size_t)t * as, as, y + (size_t)t * ldy, ldy);
    }
}

/* A tile of rows against every token: the first nbat through the batch tiles, the rest through
 * the plain ones. */
static void rows_all_tokens(const nb_avx2_tile_fn *batch, int bmax, const nb_avx2_tile_fn *plain, int pmax,
                            int64_t nbat, int rr, int64_t n, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a,
                            size_t as, int64_t nt, float *y, size_t ldy) {
    rows_tokens(batch, bmax, rr, n, w, ws, rs, a, as, 0, nbat, y, ldy);
    rows_tokens(plain, pmax, rr, n, w, ws, rs, a, as, nbat, nt, y, ldy);
}

void nb_avx2_tile_loop_small2(const nb_avx2_tile_fn *batch, int bmax, const nb_avx2_tile_fn *plain, int pmax,
                              int64_t nbat, int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,
                              int64_t nt, float *y, size_t ldy) {
    const uint8_t *wb = w;
    if (nr >= 16) {
        const int64_t q = nr / 4;
        for (int64_t r = 0; r < q; r++)
            rows_all_tokens(batch, bmax, plain, pmax, nbat, 4, n, wb + (size_t)r * ws, ws, (size_t)q, a, as, nt, y + r, ldy);
        wb += (size_t)(4 * q) * ws;
        y += 4 * q;
        nr -= 4 * q;
    }
    for (int64_t r = 0; r < nr; r += 4)
        rows_all_tokens(batch, bmax, plain, pmax, nbat, nr - r < 4 ? (int)(nr - r) : 4, n, wb + (size_t)r * ws, ws, 1, a, as,
                        nt, y + r, ldy);
}

void nb_avx2_tile_loop_small(const nb_avx2_tile_fn *tiles, int tmax, int64_t n, const void *w, size_t ws, const void *a,
                             size_t as, int64_t nr, int64_t nt, float *y, size_t ldy) {
    nb_avx2_tile_loop_small2(tiles, tmax, tiles, tmax, 0, n, w, ws, a, as, nr, nt, y, ldy);
}
