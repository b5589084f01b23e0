/*
 * quant.h: internals of the model converter (public API in nibble.h: nb_quantize_model).
 *
 * Which tensors are quantized (llama.cpp's tensor_allows_quantization): tensors with at least two
 * dimensions larger than 1 whose name ends in "weight", except norms ("_norm.weight"), MoE routers
 * ("ffn_gate_inp.weight") and the small or positional tensors llama.cpp keeps (list in recipe.c).
 * Everything else is copied byte for byte, and so is a tensor whose chosen type is its own type.
 *
 * Recipes (the type each quantizable tensor gets; "more bits" layers = llama.cpp's use_more_bits:
 * i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2, counted over attn_v tensors in file order and over
 * layers for ffn_down):
 *  - q8_0, q4_0: that type; the tied embedding / output takes Q6_K unless the type is Q8_0
 *    (llama.cpp's rule for the output tensor).            general.file_type 7 / 2
 *  - q4_k_m: Q4_K; output and tied embedding Q6_K (Q8_0 when the row is not a multiple of 256);
 *    attn_v and ffn_down of "more bits" layers Q6_K; attn_qkv Q5_K; with 8 experts attn_v/attn_k
 *    Q8_0 and attn_output Q5_K; falcon's ffn_down rule.     general.file_type 15
 *  - mxfp4, nvfp4: every quantizable weight in that format, the embedding / output too unless
 *    --embed-type says otherwise.                          general.file_type 38 / 39
 *  - mxfp4_m, nvfp4_m: as above, but the embedding / output and attn_v, ffn_down of the "more bits"
 *    layers take Q6_K (as q4_k_m keeps its sensitive tensors at more bits). file_type 38 / 39
 *  - nvfp4_2l: nvfp4 with NVIDIA's two-level scales and a "<name>.scale" tensor per weight.
 *  - auto:BPW: a type per tensor from {mxfp4, q4_K, nvfp4, q5_K, q6_K, q8_0} chosen from measured
 *    error (auto.c) so that the file's bits per weight stay within BPW. general.file_type dropped.
 * Then, in llama.cpp's order: --embed-type for token_embd/output, else the first matching
 * --tensor-type override, else --pure's type, else the recipe; finally a row length that is not a
 * multiple of the type's block falls back: Q4_K -> Q5_0, Q5_K -> Q5_0 (llama.cpp: Q5_1, which nibble
 * does not write), Q6_K -> Q8_0, NVFP4 -> Q8_0, and F16 when even that does not fit.
 */
#ifndef NB_QUANT_QUANT_H
#define NB_QUANT_QUANT_H

#include "nibble.h"

/* One tensor of the output, in output order. */
typedef struct nb_qplan {
    const nb_gguf_tensor *t;
    int quantizable;   /* llama.cpp would quantize it (else it is copied as it is) */
    int fixed;         /* the type came from --embed-type, --tensor-type or --pure (auto leaves it) */
    int type;          /* output type */
    int two_level;     /* NVFP4 with a per-tensor ".scale" tensor */
} nb_qplan;

/* The output plan of an opened file: *plan (n_tensor entries, free() it) in llama.cpp's order and
 * *ftype, the general.file_type to write (-1: drop the key). */
nb_status nb_quant_plan(const nb_gguf *g, const nb_quant_params *p, nb_qplan **plan, int *ftype);

/* auto:BPW: measures each quantizable tensor's error per candidate type on a sample of rows and
 * picks the types with the least total error that fit the budget (a knapsack solved by dynamic
 * programming, auto.c). Rewrites plan[i].type of quantizable tensors that were not fixed. */
nb_status nb_quant_auto(const nb_gguf *g, const nb_quant_params *p, double bpw, nb_qplan *plan, int64_t n);

/* Quantizes n finite elements (whole blocks) to `type`. S > 0: NVFP4 two-level with encode scale S.
 * imp: n importance weights (best mode only; NULL = all 1). Best mode keeps, block by block, the
 * candidate with the least sum imp*(decoded - x)^2, the reference block among them. */
void nb_quant_row(int type, nb_qmode mode, const float *x, const float *imp, void *dst, int64_t n, float S);

/* Decodes a row and returns sum imp*(decoded*scale - x)^2 (imp NULL = 1); y: n floats of scratch. */
double nb_quant_row_error(int type, const void *q, const float *x, const float *imp, float scale, float *y,
                          int64_t n);

/* Bytes of one source row of t, 0 on a type the table lacks (tensors.c, below the planner and the
 * converter so both can use it; rows: nb_gguf_tensor_rows). */
size_t nb_quant_src_row_bytes(const nb_gguf_tensor *t);

/* Decodes row r of t into x (ne[0] floats); 0 when it holds NaN or Inf. The caller names the tensor
 * and the row: on the pool's threads a message would not reach it. t is a tensor of an opened
 * file, whose type the reader found runnable and whose rows it sized, so every row decodes. */
int nb_quant_read_row(const nb_gguf_tensor *t, int64_t r, float *x);

#endif
