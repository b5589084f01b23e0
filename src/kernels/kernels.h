/*
 * kernels.h: the kernel layer's internals: the tile kernel interface, the exactness contract between
 * the scalar reference and the SIMD variants, and the per-ISA tables (dispatch.c). Other layers
 * include kernels/api.h instead.
 *
 * One kernel shape serves GEMV and GEMM: an nb_mm_fn computes a tile of dot products
 *   y[t*ldy + r] = dot(weight row r, activation row t),   r < nr, t < nt,
 * with weight row r at w + r*ws bytes and activation row t at a + t*as bytes, n elements each.
 * SIMD variants keep several weight rows and activation rows in registers, decode each weight
 * block once per tile and never write decoded weights to memory.
 *
 * Exactness contract of the integer routes (so SIMD results equal the reference bit for bit):
 *  - Each dot keeps 8 float lane accumulators, starting at +0.
 *  - 32-element units (Q4_0, Q5_0, Q8_0 blocks, NVFP4 half-blocks) against Q8_0 blocks: lane k of
 *    unit u gets the exact integer p = sum of w*a over group k (elements 4k..4k+3) of the unit,
 *    then acc[k] = fma(dw*da, (float)p, acc[k]) (llama.cpp's order, so logits can match it bit for
 *    bit); NVFP4's dw is the scale of the group's 16-element sub-block (lanes 0-3, 4-7).
 *  - Q4_1, Q5_1 (unsigned codes q, element q*dw + m) against Q8_1 blocks: the same 8 lanes over
 *    q*a, plus a scalar chain macc = fma(m, s, macc) with the activation's fp16 s (d * sum of its
 *    codes); the result is nb_lane_sum(acc) + macc (llama.cpp's AVX2 vec_dot, whose `summs += m*s`
 *    the compiler contracts to that fma). Every token of a batch takes this order.
 *  - MXFP4 blocks against Q8_0 blocks keep one lane, the exact integer sum p of the whole unit:
 *    acc = fma(e*da, (float)p, acc), e the block's halved E8M0 scale.
 *  - K-quants against Q8_K, per 256-block (llama.cpp's x86 orders, see below):
 *    Q5_K: lane k gets the exact integer sum over 32-element groups g of sc(e)*q*a over the
 *    elements e = 32g+4k..32g+4k+3, then acc[k] = fma(d*da, (float)isum[k], acc[k]).
 *    Q6_K: the same with the unsigned codes q (0..63), less the offset's share 32*sc*a taken by
 *    32-element group instead: lane k also gets -32 * sum of sc(e)*a over e = 32k..32k+31.
 *    Q4_K: one lane, the block's whole integer sum: acc = fma(d*da, (float)isum, acc).
 *    Q4_K/Q5_K also keep a scalar macc = fma(dmin*da, (float)msum, macc),
 *    msum = sum_j m_j*(bsums[2j]+bsums[2j+1]).
 *  - The result is nb_lane_sum(acc) (Q4_K, MXFP4: acc) (- macc): the fixed tree the AVX2 horizontal
 *    sum uses.
 *  - In a batch (nb_kernel.mm_batch): Q4_K keeps one lane but takes one fma per 64 elements, for
 *    the sums and for the minimum (msum over the two 32-element groups); Q6_K one lane per
 *    block, the weight's scale first: acc = fma(d * (float)isum, da, acc); Q5_K (from 8 tokens)
 *    one lane per block, the weight's d and dmin first and no separate minimum's chain:
 *    acc = fma(fma(-dmin, (float)msum, d * (float)isum), da, acc).
 *  - NB_ROUTE_BLOCK (not llama.cpp's bits; nb_kernel.mm_block, for products of block_min or more
 *    tokens): Q4_0, Q5_0, Q8_0 take MXFP4's order above, one lane and the unit's exact integer
 *    sum, acc = fma(dw*da, (float)p, acc); NVFP4 one lane with one fma per 16-element sub-block,
 *    in element order, acc = fma(ds*da, (float)p_s, acc). One rounding per block where the 8
 *    lanes take 8, and no tree: a little more exact, and about half the instructions of a batch.
 *    Q4_K takes its GEMV order above (one fma per block for the sums and one for the minimum,
 *    where its batch order takes one per 64 elements for each). Types whose orders are already
 *    per block (MXFP4, Q6_K's batch order) have no mm_block and run their NB_ROUTE_QUANT order.
 *  - A Q4_0 weight matrix with a multiple of 8 rows (NB_KERNEL_Q4_0_X8) takes MXFP4's order on
 *    both routes and at every token count: that of the 8-row copy llama.cpp makes of it (below).
 *    The KV cache's Q4_0 cells keep the 8 lanes (NB_ROUTE_CELLS, api.h: llama.cpp copies weights
 *    only).
 *  These are the orders of the llama.cpp build the parity tests compare with (AVX2): its
 *  vec_dot for Q4_0/Q5_0/Q8_0/NVFP4/Q5_K/Q6_K (tinyBLAS, for batches of Q4_0/Q5_0/Q8_0, has the
 *  same lanes; NVFP4 has neither tinyBLAS nor a repack there, so ggml_vec_dot_nvfp4_q8_0 serves
 *  every batch), for Q4_K and MXFP4 the GEMV and GEMM of the 8-row interleaved copy it makes of
 *  every such matrix whose row count is a multiple of 8 ("repack": ggml_gemv/gemm_mxfp4_8x8_q8_0,
 *  one fma per block in both; the tied output head is repacked too, being loaded as the output
 *  layer's own copy), and for Q4_0 matrices of a multiple of 8 rows the same template's
 *  q4_0_8x8_q8_0, for Q5_K and Q6_K batches of 8 tokens or more its tiled K-quant kernel
 *  (ggml-cpu/tiled: per block d * isum, then the minimum's fnmadd, then an fma with the token's
 *  d); so nibble's products match it bit for bit. Not followed: an MXFP4 matrix with rows not a
 *  multiple of 8, which llama.cpp leaves to ggml_vec_dot_mxfp4_q8_0 (8 lanes, even and odd
 *  blocks in two accumulators); a Q4_K matrix with rows not a multiple of 8, which it leaves to
 *  vec_dot's 8 lanes for one token and to the tiled kernel from 8.
 *  Integer sums are exact in any order, fma is correctly rounded, so any ISA that follows these
 *  steps reproduces the reference exactly. Float routes (f32 activations) only promise a
 *  tolerance (docs/KERNELS.md).
 */
#ifndef NB_KERNELS_KERNELS_H
#define NB_KERNELS_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/types.h"
#include "kernels/api.h"

typedef void (*nb_mm_fn)(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,
                         int64_t nt, float *y, size_t ldy);

/* How one weight type runs on one ISA. */
typedef struct nb_kernel {
    int act_type;           /* activation type of the quantized route: Q8_0, Q8_1, Q8_K, a Q8_0X form, or F32 */
    nb_mm_fn mm;            /* quantized route (the f32 route for F32/F16/BF16 weights) */
    nb_mm_fn mm_f32;        /* float route: weights decoded in registers, f32 activations */
    const char *name;       /* "avx2 q8_0 x q8_0" */
    const char *name_f32;   /* "avx2 q8_0 x f32" */
    int rows_per_tile;      /* preferred row multiple when splitting work */
    nb_mm_fn mm_vec;        /* F16 only: NB_ROUTE_VEC */
    /* Q4_K and Q6_K: the quantized route's order for tokens of a batch (kernels.h contract,
     * "in a batch"), taken when a product has at least batch_min tokens, for its first tokens in
     * whole groups of batch_group; the others go through mm. NULL: mm serves every batch. */
    nb_mm_fn mm_batch;
    int batch_min, batch_group;
    /* Small batches, 2..small_max tokens of the quantized route (NULL: mm and mm_batch serve them):
     * all of a product's tokens in one call, each in the order mm or mm_batch would give it (the batch
     * order on the tokens mm_batch would take), so that every weight block is read from memory once
     * for all of them; matmul.c hands it a thread's rows in one piece, as a GEMV. Bound to mm: a set
     * that overrides mm without one falls back to mm, never to a lower set's mm_small. */
    nb_mm_fn mm_small;
    int small_max;
    /* Q8_K kernels: mm_small also reads NB_ACT_Q8_KT groups of the first 8 * (n / 8) tokens, which
     * matmul.c appends to the rows (nb_act_kt_groups). */
    int small_kt;
    /* NB_ROUTE_BLOCK's order (contract above) for products of block_min or more tokens, against
     * block_act activations; NULL: NB_ROUTE_QUANT's kernels serve that route. */
    nb_mm_fn mm_block;
    int block_min, block_act;
    const char *name_block; /* "avx2 q5_0 x q8_0 (block)" */
    /* One token of the quantized route on a pool of one thread (NULL: mm): a tile that reads more
     * memory streams a core than mm's, which pays while one core reads and not when every core
     * does (docs/BENCHMARKS.md, "An 8-row Q4_K GEMV for one core"). Bound to mm's bits: the same
     * order, so a product's results do not depend on which of the two ran. */
    nb_mm_fn mm_solo;
} nb_kernel;
/* block_min of every set (the reference's block order must start where the SIMD sets' does, for
 * the sets to agree): NVFP4 from the tokens where the AVX2 panels run; Q4_0, Q5_0 and Q8_0 from 8
 * tokens, their batches below NB_BLOCK_MIN taking AVX-512's row lanes (x86/avx512/panels_avx512.c,
 * which also run groups of such batches up to its RL_MAX) or AVX2's token lanes (x86/avx2/tlanes.h),
 * whose cost per row and unit does not shrink with fewer tokens: below 8 the 8-lane tiles are
 * faster */
#define NB_BLOCK_MIN 16
#define NB_BLOCK_MIN_SMALL 8

/* Kernel of a weight type for an ISA (falls back to the best lower ISA that has one), or NULL
 * when the type has no kernel. */
const nb_kernel *nb_kernel_get(nb_isa isa, int wtype);
/* The same for a weight matrix of n_out rows: a Q4_0 matrix with a multiple of 8 rows takes
 * NB_KERNEL_Q4_0_X8's kernels (the contract above). */
const nb_kernel *nb_kernel_matrix(nb_isa isa, int wtype, int64_t n_out);

/* nb_matmul_ex with an explicit kernel set (tests compare sets within one process). */
nb_status nb_matmul_isa(nb_isa isa, nb_pool *pool, int wtype, const void *w, size_t w_stride, int64_t n_out,
                        int64_t n_in, const float *x, int64_t n_tok, float *y, nb_route route);

/* Bytes of one quantized activation row of n elements (n valid for the type). */
size_t nb_act_row_bytes(int act_type, int64_t n);

/*
 * Activation quantizers: llama.cpp's x86 runtime rules, so that products (and logits) match it.
 *  - Q8_0 (as ggml's AVX2 quantize_row_q8_0, not the file quantizer nb_q8_0_quantize_ref): per
 *    32 elements amax = max|x|, d = fp16(amax/127) nearest-even, id = amax != 0 ? 127/amax : 0,
 *    q = nearest-even(x*id) (not 1/d, not round-half-away), narrowed as vcvtps2dq + saturating packs.
 *  - Q8_1 (ggml's AVX2 quantize_row_q8_1): Q8_0's codes and d, and s = fp16(amax/127 * isum),
 *    the f32 d before rounding, isum the wrapping int32 sum of the 32 vcvtps2dq results.
 *  - Q8_K: llama.cpp's quantize_row_q8_K_ref (x86 uses it at run time), = nb_q8_k_quantize_ref.
 * Every ISA's set produces the same bytes as the reference set (tested with memcmp).
 */
typedef void (*nb_act_fn)(const float *x, void *dst, int64_t n);
typedef struct nb_act_set {
    nb_act_fn q8_0, q8_k, q8_0x, q8_1;
    void (*round_f16)(float *x, int64_t n); /* each value to the nearest fp16 (RNE), in place */
    void (*to_f16)(const float *x, uint16_t *h, int64_t n); /* the same fp16 values' bits */
    double (*softmax_exp)(const float *x, float *y, int64_t n, float max); /* nb_softmax_exp */
    float (*vec_max)(const float *x, int64_t n);                          /* nb_vec_max */
    void (*vec_scale)(float *x, int64_t n, float a);                      /* nb_vec_scale */
    void (*swiglu)(float *g, const float *u, int64_t n);                  /* nb_swiglu */
    void (*geglu)(float *g, const float *u, int64_t n);                   /* nb_geglu */
    void (*rmsnorm)(float *y, const float *x, const float *w, int rows, int n, float eps); /* nb_rmsnorm */
    void (*attn_pv)(int vtype, const void *v, size_t vs, int nk, int D, const float *p, size_t ldp, int rows,
                    float *acc);                                          /* nb_attn_pv */
    void (*attn_qk)(int ktype, const void *k, size_t ks, int nk, int D, const float *qp, int rows, float *s,
                    size_t lds);                                          /* nb_attn_qk */
    void (*rope)(float *x, int heads, int D, int n_rot, const float *cs, int neox); /* nb_rope */
    const char *name;
} nb_act_set;

/* nb_rope's one body for every set (each compiles it: the reference with libm's fmaf, the AVX2
 * set with the fma instruction inline; both round each fma once, so they give the same bits). */
static inline void nb_rope_body(float *x, int heads, int D, int n_rot, const float *cs, int neox) {
    const int step = neox ? 1 : 2, off = neox ? n_rot / 2 : 1;
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < n_rot / 2; i++) {
            float *p = x + (size_t)h * (size_t)D + (size_t)(i * step);
            const float c = cs[2 * i], s = cs[2 * i + 1], a = p[0], b = p[off];
            p[0] = fmaf(a, c, -(b * s));
            p[off] = fmaf(a, s, b * c);
        }
}
extern const nb_act_set nb_act_ref, nb_act_avx2, nb_act_avx512;
void nb_act_q8_0_ref(const float *x, void *dst, int64_t n);
/* GELU's table by fp16 input (glu.c, built on first use), the prefetch of the lines that n inputs'
 * fp16 bits h look up, and nb_geglu's reference. nb_gelu_at: GELU of x (fp16 bits h) as ggml's
 * takes it: the table, x itself from 10 up, 0 from -10 down (NaN: the table). */
static inline float nb_gelu_at(const float *t, float x, uint16_t h) {
    return x <= -10.0f ? 0.0f : x >= 10.0f ? x : t[h];
}
const float *nb_gelu_table(void);
void nb_gelu_prefetch(const float *t, const uint16_t *h, int64_t n);
void nb_geglu_ref(float *g, const float *u, int64_t n);
/* nb_attn_pv and nb_attn_qk: the references (ref/attn_ref.c), AVX2's (x86/avx2/attn_avx2.c) and
 * AVX-512's (x86/avx512/attn_avx512.c; nb_act_avx512 is AVX2's set with them and its own softmax
 * exponentials). */
#define NB_ATTN_MAX_D 1024 /* the longest head nb_attn_pv and nb_attn_qk take (model.h's NB_MAX_HEAD_DIM) */
void nb_attn_pv_ref(int vtype, const void *v, size_t vs, int nk, int D, const float *p, size_t ldp, int rows, float *acc);
void nb_attn_pv_avx2(int vtype, const void *v, size_t vs, int nk, int D, const float *p, size_t ldp, int rows, float *acc);
void nb_attn_pv_avx512(int vtype, const void *v, size_t vs, int nk, int D, const float *p, size_t ldp, int rows,
                       float *acc);
void nb_attn_qk_ref(int ktype, const void *k, size_t ks, int nk, int D, const float *qp, int rows, float *s, size_t lds);
void nb_attn_qk_avx2(int ktype, const void *k, size_t ks, int nk, int D, const float *qp, int rows, float *s, size_t lds);
void nb_attn_qk_avx512(int ktype, const void *k, size_t ks, int nk, int D, const float *qp, int rows, float *s,
                       size_t lds);
/* softmax's exponentials on 16 lanes, the AVX-512 set's (x86/avx512/act_avx512.c) */
double nb_softmax_exp_avx512(const float *x, float *y, int64_t n, float max);
void nb_act_q8_1_ref(const float *x, void *dst, int64_t n);

/* NB_ACT_Q8_0X (not a GGUF type): the Q8_0 activation codes above plus two exact values derived
 * from them that every weight row would otherwise recompute: the scale as f32 and, per group of
 * 4 codes, -128 * their sum (the bias correction of unsigned weight codes: the AVX-512 unit
 * kernels, and AVX2's except Q8_0). */
#define NB_ACT_Q8_0X 1000
typedef struct {
    int8_t qs[32];
    int32_t nc[8]; /* nc[k] = -128 * (qs[4k] + ... + qs[4k+3]) */
    int32_t ns[2]; /* ns[h] = -128 * (sum of the codes of elements 16h..16h+15): the halves' (NVFP4's
                    * sub-blocks') corrections, in element order in every variant (one-lane panels) */
    float d;       /* the fp16 scale, widened */
} nb_block_q8_0x;
/* The FP4 kernels' variants (AVX-512, AVX2): NB_ACT_Q8_0X_MX's nc[k] for k < 4 holds the sum of
 * the corrections of groups k and k+4 (the codes MXFP4's nibble split pairs), nc[4] and nc[5]
 * -16 times the sums of groups 0, 1, 4, 5 and of 2, 3, 6, 7 (AVX2's MXFP4 GEMV tile takes them as
 * one 8-byte broadcast), nc[6..7] zero,
 * and NB_ACT_Q8_0X_NV puts each unit's codes, and the corrections with them, in the order
 * NVFP4's nibbles take them (elements 0-7, 16-23, 8-15, 24-31). */
#define NB_ACT_Q8_0X_MX 1001
#define NB_ACT_Q8_0X_NV 1002

/* NB_ACT_Q8_KT (not a GGUF type): 8 tokens' Q8_K blocks side by side ("token-major"), so that one
 * 256-bit register holds the same 4 codes of 8 tokens, a dword each (lane t: token t), and a
 * kernel with several tokens needs no horizontal sums: a vpdpbusd of a row's 4 codes (broadcast)
 * by such a register gives each token's product in its lane. Block i of a group of 8 tokens: */
typedef struct {
    int8_t qs[8][8][32]; /* [32-element group g][k][4t + j]: token t's code 32g + 4k + j */
    int32_t bp[8][8];    /* [m][t]: token t's bsums[2m] | bsums[2m + 1] << 16 (as uint16) */
    float d[8];          /* [t] */
} nb_block_q8_kt;
/* The groups of the first 8 * (nt / 8) of nt Q8_K rows (as bytes apart, nb blocks each), group G
 * (tokens 8G..8G+7) at kt + G * nb, as matmul.c lays them out for a small_kt kernel: the rows'
 * bytes rounded up to 64, then the groups. */
static inline const nb_block_q8_kt *nb_act_kt_groups(const void *a, size_t as, int64_t nt) {
    return (const nb_block_q8_kt *)((const uint8_t *)a + ((size_t)nt * as + 63) / 64 * 64);
}
/* The set for a kernel set (AVX-512 uses AVX2's; lowered to what the CPU runs). */
const nb_act_set *nb_act_get(nb_isa isa);
/* Quantizes one activation row to act_type (Q8_0, Q8_1, Q8_K, NB_ACT_Q8_0X, _MX or _NV) with an ISA's set. */
void nb_quantize_act(nb_isa isa, int act_type, const float *x, void *dst, int64_t n);

/* Software prefetch distance of the SIMD tiles: each weight row is touched this many bytes ahead
 * of the block being decoded. Decode is memory bound and a tile streams 4 rows at once; with the
 * hardware prefetcher alone one core keeps too few misses in flight. Q8_0 (34-byte units, the
 * most bytes per instruction) streams best at half that distance; the other types lose at it.
 * Measurements: docs/BENCHMARKS.md, "Prefetch distance". */
#define NB_PREFETCH_BYTES 1024
static inline size_t nb_prefetch_bytes(int unit_bytes) { return unit_bytes == 34 ? 512 : NB_PREFETCH_BYTES; }

/* The distance, in rows (or lines), between `parts` streams read at once over n of them: about
 * n / parts, odd (0 below parts). Weights lie in 2 MiB pages, where streams a power of two apart
 * share every address bit below 21 and read slower together: a one-token F32 product over 16384 x
 * 16384 read 16 GB/s on a Zen 3 core with quarters 4096 rows apart, 25 with 4095
 * (docs/BENCHMARKS.md, "Streams a power of two apart"). */
static inline int64_t nb_stream_stride(int64_t n, int parts) {
    const int64_t q = n / parts;
    return q - (q > 0 && !(q & 1));
}

/* The fixed 8-lane reduction order of the contract above. */
static inline float nb_lane_sum(const float a[8]) {
    float s0 = a[0] + a[4], s1 = a[1] + a[5], s2 = a[2] + a[6], s3 = a[3] + a[7];
    return (s0 + s2) + (s1 + s3);
}

/* Decode tables shared by the SIMD variants, filled once by dispatch (same values as codes.h). */
extern float nb_e8m0_half_table[256];
extern float nb_ue4m3_half_table[256][2]; /* each value twice: one 8-byte load fills a lane pair */
void nb_kernel_tables_init(void);

/* Per-ISA tables, indexed by GGUF type id (NULL mm = no kernel), then by the rows' orders that
 * are not a type of their own: NB_KERNEL_Q4_0_X8, a Q4_0 matrix with a multiple of 8 rows
 * (nb_kernel_matrix; the contract above). The x86 sets exist in x86 builds only (NB_X86_SETS; the
 * Makefile compiles src/kernels/x86/ for x86 targets alone). */
#define NB_KERNEL_GGUF_TYPES 41
#define NB_KERNEL_Q4_0_X8 41
#define NB_KERNEL_TYPES 42
#if defined(__x86_64__) || defined(__i386__)
#define NB_X86_SETS 1
#else
#define NB_X86_SETS 0
#endif
extern const nb_kernel nb_kernels_ref[NB_KERNEL_TYPES];
extern const nb_kernel nb_kernels_avx2[NB_KERNEL_TYPES];
extern const nb_kernel nb_kernels_avx512[NB_KERNEL_TYPES];

/* Reference dot products (one weight row against one activation row). */
float nb_vec_dot_q4_0_q8_0_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_q5_0_q8_0_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_q8_0_q8_0_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_q4_1_q8_1_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_q5_1_q8_1_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_mxfp4_q8_0_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_nvfp4_q8_0_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_q4_k_q8_k_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_q4_k_q8_k_batch_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_q5_k_q8_k_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_q6_k_q8_k_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_q5_k_q8_k_batch_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_q6_k_q8_k_batch_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_f32_f32_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_f16_f32_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_f16_vec_ref(int64_t n, const void *w, const void *a);
float nb_vec_dot_bf16_f32_ref(int64_t n, const void *w, const void *a);

#endif
