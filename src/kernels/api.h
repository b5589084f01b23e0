/*
 * api.h: what the rest of the library may call in the kernel layer beyond nibble.h's nb_matmul*.
 * Everything here runs on the active kernel set; the tables, tile kernels and the exactness
 * contract stay behind kernels.h, which only the layer itself (and its tests) include.
 */
#ifndef NB_KERNELS_API_H
#define NB_KERNELS_API_H

#include <stddef.h>
#include <stdint.h>

#include "nibble.h"

/* Internal route of F16 weights, not in nibble.h's nb_route: f32 activations holding fp16 values,
 * each output summed in the order of llama.cpp's single-row ggml_vec_dot_f16 on x86 (AVX2):
 * element i into lane i % 8 of accumulator (i % 32) / 8, fma in element order; then accumulators
 * (0+2) + (1+3), lanes m + (m+4), and ((0+1) + (2+3)); elements beyond the last multiple of 32
 * added in double. llama.cpp takes this order when it multiplies one token by the F16 KV cache
 * (decode attention); nb_vec_dot_f16_vec_ref is its definition. */
#define NB_ROUTE_VEC ((nb_route)3)
/* Internal route of the KV cache's quantized cells: NB_ROUTE_QUANT's kernels of the cells' type
 * whatever the count of cells, since llama.cpp copies weight matrices into its 8-row layout and
 * never the cache (kernels.h: Q4_0 cells keep the 8 lanes of ggml_vec_dot_q4_0_q8_0). */
#define NB_ROUTE_CELLS ((nb_route)4)

/* nb_matmul_route with a row stride as nb_matmul_strided's (0: rows packed); the route may be
 * NB_ROUTE_VEC or NB_ROUTE_CELLS. */
nb_status nb_matmul_ex(nb_pool *pool, int wtype, const void *w, size_t w_stride, int64_t n_out, int64_t n_in,
                       const float *x, int64_t n_tok, float *y, nb_route route);

/* Rounds n floats to fp16 values in place with the active set: what llama.cpp's matrix products
 * do to activations that meet F16 weights (the model's queries and attention probabilities
 * against the F16 KV cache). */
void nb_round_fp16(float *x, int64_t n);
/* n floats to their nearest fp16 (RNE) bits with the active set (= nb_fp32_to_fp16 each). */
void nb_to_fp16(const float *x, uint16_t *h, int64_t n);
/* Softmax's exponentials as llama.cpp's x86 build takes them: y[i] = e^(x[i] - max) by ggml's
 * AVX2 polynomial (ggml_v_expf: 2^n by exponent bits, a degree-5 polynomial on the remainder,
 * not libm's expf), x[i] = -inf giving 0; returns their sum taken as ggml_vec_soft_max_f32 does:
 * each 8 in kernels.h's nb_lane_sum tree, those sums added in double. Elements beyond n count as 0 (a
 * chunk of 8 that n cuts), so a caller whose rows start at a multiple of 8 of llama.cpp's cache
 * cells gets its sums. Every set gives the same bits (tested). */
double nb_softmax_exp(const float *x, float *y, int64_t n, float max);
/* The largest of n floats (NaNs passed over; -inf when there is none), and x[i] *= a: the online
 * softmax's maximum and rescaling. Exact, so every set gives the same bits. */
float nb_vec_max(const float *x, int64_t n);
void nb_vec_scale(float *x, int64_t n, float a);

/* The gated FFN activations of one row of n elements, g = act(g) * u, as llama.cpp's x86 build
 * computes them. nb_swiglu: SiLU, x / (1 + e^-x) with ggml's exponential on whole 8s and libm's
 * on the rest (ggml_vec_swiglu_f32); every set gives the same bits (tested). nb_geglu: tanh GELU
 * looked up by the input's fp16 value in a table of fp16 results, inputs beyond +-10 bypassing
 * it (ggml's GELU table, built once, equal to libggml-cpu's in all 65536 entries); every set gives
 * the same bits (tested). */
void nb_swiglu(float *g, const float *u, int64_t n);
/* RMS norm of `rows` rows of n floats (row r at x + r * n) into y, which may be x: y = (x * scale)
 * * w, scale = 1 / sqrtf((float)(sum / n) + eps), sum the squares (each rounded to float) added in
 * double in element order, as llama.cpp's rms_norm and its product with the weight. Every set
 * gives the same bits (tested). */
void nb_rmsnorm(float *y, const float *x, const float *w, int rows, int n, float eps);
/* RoPE's rotation of the first n_rot elements of each of `heads` heads (D floats apart) at x, by
 * the angles of one position (cs[2i] = cos, cs[2i+1] = sin of pair i, any magnitude included):
 * element a pairs with b = a + n_rot/2 (neox) or a + 1, each rotated value with its first
 * product fused, as llama.cpp's x86 build compiles a*c - b*s (the queries' and keys' fp16
 * rounding shows a one-ulp difference at a few positions in a hundred otherwise). Every set
 * gives the same bits. */
void nb_rope(float *x, int heads, int D, int n_rot, const float *cs, int neox);
/* The fused attention's weighted sum of values with the active set: for r < rows, d < D,
 * acc[r*D + d] += sum over j < nk of p[r*ldp + j] * v_j[d], v_j the row of D elements of type
 * vtype (F32, F16, BF16, Q8_0, Q4_0; D <= 1024, whole blocks) at v + j*vs, decoded exactly, one
 * fma per row in row order: every set gives the same bits (tested). */
void nb_attn_pv(int vtype, const void *v, size_t vs, int nk, int D, const float *p, size_t ldp, int rows, float *acc);
/* The fused attention's scores of many query rows (prefill) with the active set: for r < rows,
 * j < nk, s[r*lds + j] = the sum over d < D of q_r[d] * k_j[d], k_j the row of D elements of type
 * ktype (F32, F16, BF16; D <= 1024) at k + j*ks, decoded exactly, one fma per element in element
 * order from +0: every set gives the same bits (tested). The queries come packed by
 * nb_attn_pack_q: q_r[d] = qp[(r / 8) * 8 * D + 8 * d + r % 8]. */
void nb_attn_qk(int ktype, const void *k, size_t ks, int nk, int D, const float *qp, int rows, float *s, size_t lds);
/* rows query rows of D floats (row r at q + r*D) into nb_attn_qk's packing at qp: groups of 8
 * rows, element-major within a group, the last group's missing rows zero. NB_ATTN_QK_PACKED floats. */
#define NB_ATTN_QK_PACKED(rows, D) ((size_t)(((rows) + 7) / 8 * 8) * (size_t)(D))
void nb_attn_pack_q(const float *q, int rows, int D, float *qp);
void nb_geglu(float *g, const float *u, int64_t n);

/* The median and range of n figures (v is sorted in place), n >= 1. */
nb_bench_stat nb_bench_stat_of(double *v, int n);
/* nb_bench_stream's 1 GiB buffer, touched (NULL with the error set; free() it), and the GB/s of
 * passes sums over it, for benchmarks that take the streaming rate between other figures. */
uint64_t *nb_stream_buffer(void);
nb_bench_stat nb_stream_passes(nb_pool *pool, const uint64_t *buf, int passes);

#endif
