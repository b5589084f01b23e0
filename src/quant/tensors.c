/*
 * tensors.c: the row size of a source tensor, for the converter (convert.c) and for auto.c, which
 * the planner calls: kept apart so that no file below convert.c has to reach back up into it.
 */
#include "quant/quant.h"

size_t nb_quant_src_row_bytes(const nb_gguf_tensor *t) {
    size_t b = 0;
    return nb_row_bytes(t->type, t->ne[0], &b) ? 0 : b;
}
