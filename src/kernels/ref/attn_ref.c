/*
 * attn_ref.c: the fused attention's weighted sum of values and its prefill scores, the references
 * (api.h nb_attn_pv, nb_attn_qk), and the queries' packing for the scores. Each value or key row
 * is decoded exactly (fp16, bf16 and the blocks' d * q are exact in f32); every output element of
 * the sum takes one fma per row in row order, every score one fma per element in element order
 * from +0; the SIMD twins keep those orders, so they give the same bits.
 */
#include <math.h>
#include <string.h>

#include "formats/types.h"
#include "kernels/api.h"
#include "kernels/kernels.h"

void nb_attn_pv_ref(int vtype, const void *v, size_t vs, int nk, int D, const float *p, size_t ldp, int rows,
                    float *acc) {
    const nb_type_traits *tr = nb_type_traits_get(vtype);
    float row[NB_ATTN_MAX_D];
    for (int j = 0; j < nk; j++) {
        tr->dequantize((const uint8_t *)v + (size_t)j * vs, row, D);
        for (int r = 0; r < rows; r++) {
            const float w = p[(size_t)r * ldp + (size_t)j];
            float *a = acc + (size_t)r * (size_t)D;
            for (int d = 0; d < D; d++) a[d] = fmaf(w, row[d], a[d]);
        }
    }
}

void nb_attn_pack_q(const float *q, int rows, int D, float *qp) {
    memset(qp, 0, sizeof(float) * NB_ATTN_QK_PACKED(rows, D));
    for (int r = 0; r < rows; r++)
        for (int d = 0; d < D; d++) qp[(size_t)(r / 8) * 8 * (size_t)D + 8 * (size_t)d + (size_t)(r % 8)] = q[(size_t)r * D + d];
}

void nb_attn_qk_ref(int ktype, const void *k, size_t ks, int nk, int D, const float *qp, int rows, float *s, size_t lds) {
    const nb_type_traits *tr = nb_type_traits_get(ktype);
    float row[NB_ATTN_MAX_D];
    for (int j = 0; j < nk; j++) {
        tr->dequantize((const uint8_t *)k + (size_t)j * ks, row, D);
        for (int r = 0; r < rows; r++) {
            const float *q = qp + (size_t)(r / 8) * 8 * (size_t)D + (size_t)(r % 8);
            float a = 0;
            for (int d = 0; d < D; d++) a = fmaf(q[8 * (size_t)d], row[d], a);
            s[(size_t)r * lds + (size_t)j] = a;
        }
    }
}
