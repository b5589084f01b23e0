/*
 * fp4.h: the two halves of fp4.c's two-level NVFP4 recipe, for the model converter (src/quant/)
 * and explain's compare (src/explain/), which quantize a tensor a few rows at a time but need one
 * encode scale for the whole tensor.
 *
 * nb_nvfp4_2level_scale: the tensor's encode scale S from its |max| (S = 448*6/amax, 1 for an
 * all-zero tensor, capped at FLT_MAX; the factor a file stores is 1/S); NB_ERR_INVALID_ARG when
 * amax is negative or not finite, *S then meaningless.
 * nb_nvfp4_2level_encode: n elements (a multiple of 64, finite) to NVFP4 blocks given S; decoded
 * values times 1/S approximate x.
 */
#ifndef NB_FORMATS_FP4_H
#define NB_FORMATS_FP4_H

#include <stdint.h>

#include "nibble.h"

nb_status nb_nvfp4_2level_scale(float amax, float *S);
void nb_nvfp4_2level_encode(const float *x, void *dst, int64_t n, float S);

#endif
