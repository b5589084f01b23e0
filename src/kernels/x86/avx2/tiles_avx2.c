/*
 * tiles_avx2.c: the tile loop of every SIMD kernel family (contract in avx2.h).
 */
#include "kernels/x86/avx2/avx2.h"

/* The tile loop, one token over 16 rows or more going through gemv, a tile of grows rows spread
 * over the matrix: rows r, r+q, ..., r+(grows-1)q for q = nb_stream_stride(nr, grows) (kernels.h,
 * odd), the rows left over (fewer than 2 grows) through the tiles. */
static void tile_loop(nb_avx2_tile_fn gemv, int grows, const nb_avx2_tile_fn *tiles, int tmax, int64_t n,
                      const uint8_t *w, size_t ws, const uint8_t *a, size_t as, int64_t nr, int64_t nt, float *y,
                      size_t ldy) {
    if (nt == 1 && nr >= 16) {
        const int64_t q = nb_stream_stride(nr, grows);
        for (int64_t r = 0; r < q; r++) gemv(n, w + (size_t)r * ws, ws, (size_t)q, a, as, y + r, ldy);
        w += (size_t)(grows * q) * ws;
        y += grows * q;
        nr -= grows * q;
    }
    for (int64_t t = 0; t < nt; t += tmax) {
        const int tt = nt - t < tmax ? (int)(nt - t) : tmax;
        for (int64_t r = 0; r < nr; r += 4) {
            const int rr = nr - r < 4 ? (int)(nr - r) : 4;
            tiles[(rr - 1) * tmax + tt - 1](n, w + (size_t)r * ws, ws, 1, a + (size_t)t * as, as,
                                            y + (size_t)t * ldy + (size_t)r, ldy);
        }
    }
}

void nb_avx2_tile_loop(const nb_avx2_tile_fn *tiles, int tmax, int64_t n, const void *w, size_t ws, const void *a,
                       size_t as, int64_t nr, int64_t nt, float *y, size_t ldy) {
    tile_loop(tiles[3 * tmax], 4, tiles, tmax, n, w, ws, a, as, nr, nt, y, ldy);
}

void nb_avx2_gemv8_loop(nb_avx2_tile_fn gemv8, const nb_avx2_tile_fn *tiles, int tmax, int64_t n, const void *w,
                        size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy) {
    tile_loop(gemv8, 8, tiles, tmax, n, w, ws, a, as, nr, nt, y, ldy);
}

/* One tile of rows (rr of them, rs rows apart) against tokens t0..t1-1, tmax at a time. */
static void rows_tokens(const nb_avx2_tile_fn *tiles, int tmax, int rr, int64_t n, const uint8_t *w, size_t ws,
                        size_t rs, const uint8_t *a, size_t as, int64_t t0, int64_t t1, float *y, size_t ldy) {
    for (int64_t t = t0; t < t1; t += tmax) {
        const int tt = t1 - t < tmax ? (int)(t1 - t) : tmax;
        tiles[(rr - 1) * tmax + tt - 1](n, w, ws, rs, a + (size_t)t * as, as, y + (size_t)t * ldy, ldy);
    }
}

typedef struct {
    const nb_avx2_tile_fn *grp, *batch, *plain;
    int bmax, pmax;
    const uint8_t *kt;         /* groups of 8 tokens (kernels.h, NB_ACT_Q8_KT), gs bytes apart */
    size_t gs;
    int64_t ng, nbat, n, nt;   /* tokens: 8 * ng by groups, then to nbat by batch, then plain */
    const uint8_t *a;
    size_t as, ldy;
} small_job;

/* A tile of rows (rr of them, rs rows apart) against every token. */
static void rows_all_tokens(const small_job *j, int rr, const uint8_t *w, size_t ws, size_t rs, float *y) {
    for (int64_t g = 0; g < j->ng; g++)
        j->grp[rr - 1](j->n, w, ws, rs, j->kt + (size_t)g * j->gs, j->gs, y + (size_t)(8 * g) * j->ldy, j->ldy);
    rows_tokens(j->batch, j->bmax, rr, j->n, w, ws, rs, j->a, j->as, 8 * j->ng, j->nbat, y, j->ldy);
    rows_tokens(j->plain, j->pmax, rr, j->n, w, ws, rs, j->a, j->as, j->nbat, j->nt, y, j->ldy);
}

/* A small batch takes the rows by quarters, as a GEMV does (4 memory streams): against
 * neighbouring rows (one stream) 1.1-1.8x at 9 to 15 tokens for Q4_K (AVX-512) and Q8_0 (both sets),
 * about even for Q6_K and Q5_0, at worst 0.93x (Q5_0, 262144 x 640); docs/BENCHMARKS.md, "Small
 * batches by quarters". */
static void small_loop(const small_job *j, const uint8_t *w, size_t ws, int64_t nr, float *y) {
    if (nr >= 16) {
        const int64_t q = nb_stream_stride(nr, 4);
        for (int64_t r = 0; r < q; r++) rows_all_tokens(j, 4, w + (size_t)r * ws, ws, (size_t)q, y + r);
        w += (size_t)(4 * q) * ws;
        y += 4 * q;
        nr -= 4 * q;
    }
    for (int64_t r = 0; r < nr; r += 4) rows_all_tokens(j, nr - r < 4 ? (int)(nr - r) : 4, w + (size_t)r * ws, ws, 1, y + r);
}

void nb_avx2_tile_loop_small_kt(const nb_avx2_tile_fn *grp, const void *kt, size_t gs, int64_t ng,
                                const nb_avx2_tile_fn *batch, int bmax, const nb_avx2_tile_fn *plain, int pmax,
                                int64_t nbat, int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,
                                int64_t nt, float *y, size_t ldy) {
    const small_job j = {grp, batch, plain, bmax, pmax, kt, gs, ng, nbat, n, nt, a, as, ldy};
    small_loop(&j, w, ws, nr, y);
}

void nb_avx2_tile_loop_small(const nb_avx2_tile_fn *tiles, int tmax, int64_t n, const void *w, size_t ws, const void *a,
                             size_t as, int64_t nr, int64_t nt, float *y, size_t ldy) {
    nb_avx2_tile_loop_small_kt(NULL, NULL, 0, 0, tiles, tmax, tiles, tmax, 0, n, w, ws, a, as, nr, nt, y, ldy);
}
