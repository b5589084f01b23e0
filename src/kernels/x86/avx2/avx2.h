/*
 * avx2.h: what the AVX2 kernel files share (compiled with -mavx2 -mfma -mf16c; only reached
 * through dispatch when the CPU has them).
 */
#ifndef NB_KERNELS_AVX2_H
#define NB_KERNELS_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"

/* Pins v in a register where it stands in a chain of integer adds: GCC reassociates such a
 * chain into a tree whose partial sums, one per term, outnumber the 16 registers and go through
 * the stack (the Q4_K panel's 8-term group sums did, for 4 tokens at once). */
#define NB_CHAIN(v) __asm__("" : "+x"(v))

/* acc + the pair sums of q's unsigned bytes times the 4 signed bytes at a4 repeated (vpmaddubsw),
 * as words: the GEMM panels' group sum of 4 weights for 8 rows and a token. The caller bounds
 * the word sums; the chain is pinned (NB_CHAIN). */
static inline __m256i nb_avx2_codes4(__m256i acc, __m256i q, const int8_t *a4) {
    int32_t v;
    memcpy(&v, a4, 4);
    __m256i r = _mm256_add_epi16(acc, _mm256_maddubs_epi16(q, _mm256_set1_epi32(v)));
    NB_CHAIN(r);
    return r;
}

/* Dword k (0..3) of each 128-bit lane of v in all of that lane's dwords: vpshufd, whose immediate
 * an unrolled loop's k only becomes when the optimizer folds it, so spelled out for any -O (one
 * cycle, where vpermd takes three and an index register). */
static inline __m256i nb_avx2_dword_lane(__m256i v, int k) {
    switch (k) {
    case 0: return _mm256_shuffle_epi32(v, 0x00);
    case 1: return _mm256_shuffle_epi32(v, 0x55);
    case 2: return _mm256_shuffle_epi32(v, 0xAA);
    default: return _mm256_shuffle_epi32(v, 0xFF);
    }
}

/* The contract's fixed reduction (kernels.h nb_lane_sum) on a register. */
static inline float nb_avx2_lane_sum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* s0..s3 */
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                      /* s0+s2, s1+s3 */
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

/* An fp16 value widened into all 8 lanes: one broadcast of the 16 bits from memory and one
 * conversion, where _mm256_set1_ps(_cvtsh_ss(h)) compiles to four instructions (zero, insert,
 * convert, broadcast). On a first-generation Zen core the decode value sums of Q8_0 and Q4_0 cells
 * ran 1.05-1.07x faster with it (one query row of Q4_0 3-5 % slower); the unit kernels' GEMV and
 * GEMM read the same (docs/BENCHMARKS.md, stop 46), and so do the K-quant token tiles, which take
 * it once per 256 elements (stop 47). */
static inline __m256 nb_avx2_fp16_bcast(uint16_t h) { return _mm256_cvtph_ps(_mm_set1_epi16((short)h)); }

/* The exact sum of the 8 dwords of v (an integer sum: any order gives the same value). */
static inline int32_t nb_avx2_hsum_epi32(__m256i v) {
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
    return _mm_cvtsi128_si32(_mm_add_epi32(h, _mm_shuffle_epi32(h, 1)));
}

/* The tile kernels of each file, for the tables nb_kernels_avx2 (float_avx2.c) and
 * nb_kernels_avx512 (x86/avx512/units_avx512.c). */
void nb_mm_q4_0_q8_0_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q5_0_q8_0_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q8_0_q8_0_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_mxfp4_q8_0_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q4_0x8_q8_0_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
/* their small batches (kernels.h, mm_small) */
void nb_mm_q4_0_small_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q5_0_small_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q8_0_small_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_mxfp4_small_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q4_0x8_small_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_nvfp4_small_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q4_1_small_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q5_1_small_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
/* NB_ROUTE_BLOCK's (kernels.h, mm_block) */
void nb_mm_q4_0_block_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q5_0_block_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q8_0_block_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_nvfp4_block_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q4_1_q8_1_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q5_1_q8_1_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_nvfp4_q8_0_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q4_k_q8_k_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q5_k_q8_k_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q6_k_q8_k_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q4_k_small_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q4_k_block_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q4_k_solo_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q6_k_small_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q4_k_batch_q8_k_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q5_k_batch_q8_k_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q6_k_batch_q8_k_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
/* The AVX-512 set's K-quant kernels (x86/avx512/kquants_avx512.c, same body). */
void nb_mm_q4_k_q8_k_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q5_k_q8_k_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q6_k_q8_k_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q6_k_small_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q4_k_small_kt_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q4_k_batch_q8_k_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q5_k_batch_q8_k_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q6_k_batch_q8_k_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q4_k_block_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
/* Its one-lane panels (x86/avx512/panels_avx512.c, on units.h's): NB_ROUTE_BLOCK's kernels, and
 * MXFP4's GEMM of many tokens. */
void nb_mm_q4_0_block_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q5_0_block_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q8_0_block_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_nvfp4_block_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_mxfp4_panel_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q4_0_panel_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q5_0_panel_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_q8_0_panel_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_nvfp4_panel_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_f32_f32_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_f16_f32_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_bf16_f32_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_f32_small_f32_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_f16_small_f32_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_bf16_small_f32_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_f16_vec_f32_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
/* The AVX-512 set's float kernels (x86/avx512/floats_avx512.c, same body as the three above). */
void nb_mm_f32_f32_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_f16_f32_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_bf16_f32_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_f32_small_f32_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_f16_small_f32_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_bf16_small_f32_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
void nb_mm_f16_vec_f32_avx512(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
/* A tile kernel of a family: R rows x T tokens, both fixed by its slot in the family's table. Its
 * rows are r*rs rows apart from w (outputs likewise): rs = 1 for neighbouring rows. n is the
 * family's count (units, blocks or elements). */
typedef void (*nb_avx2_tile_fn)(int64_t n, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, size_t as,
                                float *y, size_t ldy);
/* The tile loop every SIMD family shares: nr rows x nt tokens in tiles of at most 4 rows and tmax
 * tokens, tiles[(R-1)*tmax + T-1]. One token over 16 rows or more goes by quarters: a 4-row tile
 * takes rows r, r+q, r+2q, r+3q, so one core runs four memory streams (docs/KERNELS.md); each row
 * is computed by the same instructions either way. */
void nb_avx2_tile_loop(const nb_avx2_tile_fn *tiles, int tmax, int64_t n, const void *w, size_t ws, const void *a,
                       size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
/* The same with a family's GEMV tile of 8 rows (gemv8, rs = q): one token over 16 rows or more
 * goes by eighths of q rows, a tile taking row r of each (eight memory streams; two neighbouring
 * rows from each quarter read up to 1.6x slower on long rows), the rows left over (fewer than 8)
 * through the tile loop. */
void nb_avx2_gemv8_loop(nb_avx2_tile_fn gemv8, const nb_avx2_tile_fn *tiles, int tmax, int64_t n, const void *w,
                        size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
/* The same for a small batch (nt > 1, kernels.h's mm_small): rows by quarters from 16 rows
 * (tiles_avx2.c), and each tile of rows meets every token, its token tiles one after
 * another, so that the weights come from memory once and from L1 for the tiles after the first. */
void nb_avx2_tile_loop_small(const nb_avx2_tile_fn *tiles, int tmax, int64_t n, const void *w, size_t ws, const void *a,
                             size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);
/* The same for a kernel with a batch order (kernels.h), the first 8 * ng tokens in ng groups of
 * NB_ACT_Q8_KT (kernels.h, small_kt), gs bytes apart from kt, through grp: grp[R - 1] is R rows
 * against one group, its `a` the group's first block and its outputs the group's 8 tokens; the
 * other tokens below nbat through the tiles of that order (batch, up to bmax tokens each), the
 * rest through plain (pmax). */
void nb_avx2_tile_loop_small_kt(const nb_avx2_tile_fn *grp, const void *kt, size_t gs, int64_t ng,
                                const nb_avx2_tile_fn *batch, int bmax, const nb_avx2_tile_fn *plain, int pmax,
                                int64_t nbat, int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr,
                                int64_t nt, float *y, size_t ldy);
/* name[R - 1] (R = 1..4): tiles of R rows against a group of 8 tokens (NB_ACT_Q8_KT) by
 * body(R, nb, w, ws, rs, a, y, ldy), for nb_avx2_tile_loop_small_kt. */
#define NB_KT_TILE(body, R)                                                                                      \
    static void body##_##R(int64_t nb, const uint8_t *w, size_t ws, size_t rs, const uint8_t *a, size_t as,      \
                           float *y, size_t ldy) {                                                               \
        (void)as;                                                                                                \
        body(R, nb, w, ws, rs, a, y, ldy);                                                                       \
    }
#define NB_KT_TILES(name, body)                                                                                  \
    NB_KT_TILE(body, 1) NB_KT_TILE(body, 2) NB_KT_TILE(body, 3) NB_KT_TILE(body, 4)                              \
    static const nb_avx2_tile_fn name[4] = {body##_1, body##_2, body##_3, body##_4};
/* nb_attn_pv's value rows go to f32 a chunk at a time: elements d .. d+w-1 (d a multiple of
 * NB_ATTN_CHUNK, w <= NB_ATTN_CHUNK: at most one Q8_0 / Q4_0 block) of n rows (vs bytes apart,
 * n <= NB_ATTN_CHUNK_KEYS) decoded exactly to vf, row j's at vf + j * NB_ATTN_CHUNK; the same
 * bytes of the n rows after them (the caller's next group) are asked into L2 as they go by. A
 * chunk of 16 KiB stays in L1 while every row tile's accumulators, held in registers, take all n
 * rows. */
#define NB_ATTN_CHUNK 32
#define NB_ATTN_CHUNK_KEYS 128
void nb_attn_decode_chunk_avx2(int vtype, const uint8_t *v, size_t vs, int n, int d, int w, float *vf);
/* nb_attn_qk by blocks of `width` keys (a multiple of 8, at most NB_ATTN_QK_WIDTH): each block
 * transposed into f32 (kt[d * width + i] = key i's element d, zero past the last key), then
 * `tile` over the rows, tile_rows (4 or 8) at a time: the scores of rows q.. (the packing at the
 * tile's first row) against the block's n keys, the first R rows stored lds apart. Heads that
 * are not a multiple of 8 take the reference. */
#define NB_ATTN_QK_WIDTH 32
typedef void (*nb_attn_qk_tile)(const float *kt, int D, const float *q, int R, int n, float *s, size_t lds);
void nb_attn_qk_blocks_avx2(nb_attn_qk_tile tile, int width, int tile_rows, int ktype, const void *k, size_t ks,
                            int nk, int D, const float *qp, int rows, float *s, size_t lds);
/* Float route of a block type: decode a block per row to an L1 stack buffer, FMA with f32. */
void nb_mm_blocks_f32_avx2(int type, int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, float *y, size_t ldy);

#endif
