/*
 * tensors.c: the geometry of a source tensor, for the converter (convert.c) and for auto.c, which
 * the planner calls: kept apart so that no file below convert.c has to reach back up into it.
 */
#include "quant/quant.h"

size_t nb_quant_src_row_bytes(const nb_gguf_tensor *t) {
    size_t b = 0;
    return nb_row_bytes(t->type, t->ne[0], &b) ? 0 : b;
}

int64_t nb_quant_rows(const nb_gguf_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }
