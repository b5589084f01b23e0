/*
 * attn_ref.c: the fused attention's weighted sum of values, the reference (api.h nb_attn_pv).
 * Each value row is decoded exactly (fp16, bf16 and the blocks' d * q are exact in f32), then
 * every output element takes one fma per row in row order; the SIMD twins keep that order, so
 * they give the same bits.
 */
#include <math.h>

#include "formats/types.h"
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
