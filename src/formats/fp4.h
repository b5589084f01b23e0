/*
 * fp4.h: the block encoder of fp4.c's two-level NVFP4 recipe exposed for the model converter
 * (src/quant/), which quantizes a tensor row by row but needs one encode scale for the whole tensor.
 *
 * nb_nvfp4_2level_encode: n elements (a multiple of 64, finite) to NVFP4 blocks given the tensor's
 * encode scale S (nb_quantize_nvfp4_2level's rule: S = 448*6/amax(tensor), 1 for an all-zero
 * tensor, capped at FLT_MAX); decoded values times 1/S approximate x.
 */
#ifndef NB_FORMATS_FP4_H
#define NB_FORMATS_FP4_H

#include <stdint.h>

void nb_nvfp4_2level_encode(const float *x, void *dst, int64_t n, float S);

#endif
