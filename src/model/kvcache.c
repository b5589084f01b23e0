/*
 * kvcache.c: the KV cache's geometry and stores (kvcache.h).
 */
#include <string.h>

#include "base/error.h"
#include "kernels/api.h"
#include "model/kvcache.h"

static int cell_type_ok(int t) {
    return t == NB_TYPE_F16 || t == NB_TYPE_F32 || t == NB_TYPE_BF16 || t == NB_TYPE_Q8_0 || t == NB_TYPE_Q4_0;
}

nb_status nb_kv_plan(nb_kv *kv, const nb_model *m, int n_ctx, int n_batch, int type_k, int type_v, int v_rows,
                     int swa_full) {
    const nb_model_info *in = &m->info;
    memset(kv, 0, sizeof *kv);
    const int t[2] = {type_k, type_v};
    for (int i = 0; i < 2; i++) {
        size_t row;
        if (!cell_type_ok(t[i]))
            return nb_fail(NB_ERR_UNSUPPORTED, "context: %s cells of type %s: the cache holds f16, f32, bf16, q8_0 or q4_0",
                           i ? "V" : "K", nb_type_name(t[i]));
        if (nb_row_bytes(t[i], in->head_dim, &row))
            return nb_fail(NB_ERR_UNSUPPORTED, "context: %s cells of type %s need heads of a multiple of 32 elements; this model's have %d",
                           i ? "V" : "K", nb_type_name(t[i]), in->head_dim);
    }
    if (!v_rows && type_v != NB_TYPE_F16 && type_v != NB_TYPE_F32)
        return nb_fail(NB_ERR_UNSUPPORTED, "context: V cells of type %s need the fused attention (-fa on); llama.cpp's unfused order takes f16 or f32",
                       nb_type_name(type_v));
    kv->type_k = type_k, kv->type_v = type_v, kv->v_rows = v_rows;
    kv->n_layer = in->n_layer, kv->n_head_kv = in->n_head_kv, kv->head_dim = in->head_dim;
    kv->n_cells = (n_ctx + 31) & ~31;
    const int ring = ((in->sliding_window + n_batch + 31) & ~31);
    if (!swa_full && in->n_sliding > 0 && ring < kv->n_cells) kv->n_ring = ring;
    nb_row_bytes(type_k, in->head_dim, &kv->k_row);
    if (v_rows) nb_row_bytes(type_v, in->head_dim, &kv->v_row);
    else kv->v_row = type_v == NB_TYPE_F32 ? 4 : 2;
    size_t cells = 0;
    for (int il = 0; il < in->n_layer; il++) {
        kv->ring[il] = kv->n_ring && m->layers[il].sliding;
        kv->cell0[il] = cells;
        cells += (size_t)in->n_head_kv * (size_t)nb_kv_cells(kv, il);
    }
    kv->k_bytes = (cells * kv->k_row + 63) & ~(size_t)63;
    kv->v_bytes = ((v_rows ? cells : cells * (size_t)in->head_dim) * kv->v_row + 63) & ~(size_t)63;
    kv->bytes = kv->k_bytes + kv->v_bytes + (((size_t)kv->n_ring * sizeof(int32_t) + 63) & ~(size_t)63);
    return NB_OK;
}

void nb_kv_place(nb_kv *kv, uint8_t *mem) {
    kv->k = mem;
    kv->v = mem + kv->k_bytes;
    kv->ring_pos = (int32_t *)(mem + kv->k_bytes + kv->v_bytes);
    for (int i = 0; i < kv->n_ring; i++) kv->ring_pos[i] = -1;
}

/* One row of n floats in a cell type: F16 as llama.cpp's cache copy rounds (RNE), the others by
 * the reference quantizers (finite input: the activations are). */
static void store_row(int type, const float *x, uint8_t *dst, int n) {
    if (type == NB_TYPE_F32) memcpy(dst, x, sizeof(float) * (size_t)n);
    else if (type == NB_TYPE_F16) nb_to_fp16(x, (uint16_t *)dst, n);
    else nb_quantize(type, x, dst, n);
}

void nb_kv_store(nb_kv *kv, int il, int g, int pos, const float *k, const float *v) {
    const int D = kv->head_dim, cell = nb_kv_cell(kv, il, pos);
    store_row(kv->type_k, k, nb_kv_k(kv, il, g) + (size_t)cell * kv->k_row, D);
    uint8_t *vh = nb_kv_v(kv, il, g);
    if (kv->v_rows) {
        store_row(kv->type_v, v, vh + (size_t)cell * kv->v_row, D);
        return;
    }
    const size_t stride = (size_t)nb_kv_cells(kv, il);
    if (kv->type_v == NB_TYPE_F16) {
        uint16_t h[NB_MAX_HEAD_DIM];
        nb_to_fp16(v, h, D);
        for (int d = 0; d < D; d++) ((uint16_t *)vh)[(size_t)d * stride + (size_t)cell] = h[d];
    } else {
        for (int d = 0; d < D; d++) ((float *)vh)[(size_t)d * stride + (size_t)cell] = v[d];
    }
}

int nb_kv_reusable(const nb_kv *kv, int window, int n) {
    if (!kv->n_ring) return n;
    for (int q = n - window + 1 > 0 ? n - window + 1 : 0; q < n; q++)
        if (kv->ring_pos[q % kv->n_ring] != q) return 0;
    return n;
}

void nb_kv_load(const nb_kv *kv, int il, int g, int cell, float *k, float *v) {
    const int D = kv->head_dim;
    nb_dequantize(kv->type_k, nb_kv_k(kv, il, g) + (size_t)cell * kv->k_row, k, D);
    const uint8_t *vh = nb_kv_v(kv, il, g);
    if (kv->v_rows) {
        nb_dequantize(kv->type_v, vh + (size_t)cell * kv->v_row, v, D);
        return;
    }
    const size_t stride = (size_t)nb_kv_cells(kv, il);
    for (int d = 0; d < D; d++)
        v[d] = kv->type_v == NB_TYPE_F16 ? nb_fp16_to_fp32(((const uint16_t *)vh)[(size_t)d * stride + (size_t)cell])
                                         : ((const float *)vh)[(size_t)d * stride + (size_t)cell];
}
