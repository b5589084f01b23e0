/*
 * kvcache.h: a context's KV cache, its cells and where each position lives.
 *
 * Per layer and kv head, K is a matrix of cells x head_dim in type_k, each row a position's key
 * that the kernel layer reads in place (nb_matmul over a run of rows scores a query). V is either
 * the same rows in type_v (v_rows: the fused attention reads them row by row) or, for llama.cpp's
 * unfused order, transposed: head_dim rows of cells in F16 or F32, so that the weighted sum of
 * values is a matrix product too.
 *
 * Global layers have one cell per position (n_ctx rounded up to 32: the unfused attention reads
 * whole 32s). Sliding-window layers see only the last `window` positions, so unless the caller
 * asks for every position (swa_full) they keep a ring of window + n_batch cells (rounded up to 32:
 * a batch's first token still sees its whole window after the batch's last token is stored),
 * position p in cell p % n_ring, and ring_pos says which position each cell holds (-1: none), as
 * llama.cpp's sliding-window cache keeps its cells' positions.
 */
#ifndef NB_MODEL_KVCACHE_H
#define NB_MODEL_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

typedef struct nb_kv {
    int type_k, type_v;
    int v_rows;             /* 1: V as rows in type_v; 0: transposed, F16 or F32 */
    int n_layer, n_head_kv, head_dim;
    int n_cells;            /* a global layer's cells */
    int n_ring;             /* a ring layer's cells; 0: no layer is a ring */
    size_t k_row, v_row;    /* bytes of one head's row of K, of V (v_rows) or of one element (transposed) */
    size_t k_bytes, v_bytes, bytes; /* K, V, and everything (K, V, ring_pos) */
    size_t cell0[NB_MAX_LAYERS];    /* cells of the layers before each layer, times n_head_kv */
    uint8_t ring[NB_MAX_LAYERS];    /* 1: the layer's cells are the ring */
    uint8_t *k, *v;
    int32_t *ring_pos;      /* n_ring entries */
} nb_kv;

/* Sizes a cache for a model; fails naming a cell type nibble cannot store for this head size. */
nb_status nb_kv_plan(nb_kv *kv, const nb_model *m, int n_ctx, int n_batch, int type_k, int type_v, int v_rows,
                     int swa_full);
/* Places the planned cache at mem (kv->bytes, zero-filled) and empties the ring. */
void nb_kv_place(nb_kv *kv, uint8_t *mem);

static inline int nb_kv_cells(const nb_kv *kv, int il) { return kv->ring[il] ? kv->n_ring : kv->n_cells; }
static inline int nb_kv_cell(const nb_kv *kv, int il, int pos) { return kv->ring[il] ? pos % kv->n_ring : pos; }
/* Layer il's K (cells rows of k_row bytes) and V (cells rows of v_row bytes, or head_dim rows of
 * cells elements) of kv head g. */
static inline uint8_t *nb_kv_k(const nb_kv *kv, int il, int g) {
    return kv->k + (kv->cell0[il] + (size_t)g * (size_t)nb_kv_cells(kv, il)) * kv->k_row;
}
static inline uint8_t *nb_kv_v(const nb_kv *kv, int il, int g) {
    const size_t head = kv->v_rows ? (size_t)nb_kv_cells(kv, il) : (size_t)nb_kv_cells(kv, il) * (size_t)kv->head_dim;
    return kv->v + (kv->v_rows ? kv->cell0[il] : kv->cell0[il] * (size_t)kv->head_dim) * kv->v_row + (size_t)g * head * kv->v_row;
}
/* 1 when layer il still holds position pos (global layers hold every position stored). */
static inline int nb_kv_holds(const nb_kv *kv, int il, int pos) {
    return !kv->ring[il] || kv->ring_pos[pos % kv->n_ring] == pos;
}

/* Stores kv head g's key and value (head_dim floats each) of position pos in layer il; K and V
 * rows in their types (F16 RNE, as llama.cpp's cache copy; BF16, Q8_0 and Q4_0 by the reference
 * quantizers). The ring's position record is nb_kv_mark's. */
void nb_kv_store(nb_kv *kv, int il, int g, int pos, const float *k, const float *v);
/* Reads back what a cell holds as floats (the stored values: for the block types the decoded
 * blocks, which store to the same bytes again). */
void nb_kv_load(const nb_kv *kv, int il, int g, int cell, float *k, float *v);
/* Records that the ring layers' cell of pos now holds it. */
static inline void nb_kv_mark(nb_kv *kv, int pos) {
    if (kv->n_ring) kv->ring_pos[pos % kv->n_ring] = pos;
}
/* How many of the first n positions a context holding `pos` can keep for the next token: n when
 * every ring still holds the window before position n, else 0 (the ring has overwritten it). */
int nb_kv_reusable(const nb_kv *kv, int window, int n);
#endif
