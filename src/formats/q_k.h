/*
 * q_k.h: the Q4_K block fit of q_k.c exposed for search-based quantizers (src/quant/), so they
 * reuse llama.cpp's fit instead of copying it.
 *
 * nb_q4_k_quantize_block_w: one 256-element Q4_K block from x. Each 32-element sub-block's
 * (scale, min) is fitted minimising sum w*(decoded - x)^2 over nstep+1 stretched grids (inverse
 * scale (15 + rmin + rdelta*is)/range); the 6-bit scales are then quantized and the codes recomputed
 * against the fp16-rounded scales a decoder sees. w = NULL gives llama.cpp's weights
 * (sqrt(mean x^2) + |x|); with w NULL, rmin -1, rdelta 0.1, nstep 20 it is quantize_row_q4_K_ref.
 */
#ifndef NB_FORMATS_Q_K_H
#define NB_FORMATS_Q_K_H

void nb_q4_k_quantize_block_w(const float *x, const float *w, void *block, float rmin, float rdelta, int nstep);

#endif
