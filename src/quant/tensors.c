/*
 * tensors.c: a source tensor's rows, for the converter (convert.c) and for auto.c, which the
 * planner calls: their size, and one row decoded and checked, the first step of both requantize
 * passes (convert.c's maximum and conversion, auto.c's sample), which then quantize the row with
 * nb_quant_row and measure it with nb_quant_row_error. Kept apart so that no file below convert.c
 * has to reach back up into it. explain's compare requantizes through the public quantizers
 * instead (src/explain/compare.c, requant_rows, says why).
 */
#include <math.h>

#include "quant/quant.h"

size_t nb_quant_src_row_bytes(const nb_gguf_tensor *t) {
    size_t b = 0;
    return nb_row_bytes(t->type, t->ne[0], &b) ? 0 : b;
}

int nb_quant_read_row(const nb_gguf_tensor *t, int64_t r, float *x) {
    const int64_t n = t->ne[0];
    nb_dequantize(t->type, (const uint8_t *)t->data + (size_t)r * nb_quant_src_row_bytes(t), x, n);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}
