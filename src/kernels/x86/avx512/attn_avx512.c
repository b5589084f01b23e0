/*
 * attn_avx512.c: nb_attn_pv and nb_attn_qk (api.h) with 512-bit registers for the fused attention.
 * The value sums of prefill (more than 4 rows, heads a multiple of 32): 32 elements of up to 128
 * value rows at a time decoded into f32 (nb_attn_decode_chunk_avx2), then tiles of up to 8 output
 * rows x those 32 elements held in 16 registers while the decoded rows go by: per row 2 loads, per
 * output row a broadcast and 2 fma. Those of decode (4 rows or fewer, heads a multiple of 64):
 * tiles that convert the rows in registers (dv_tile); other head sizes take the AVX2 set's path.
 * Each element gets one fma per row in row order. The scores: QK_KEYS keys at a time transposed
 * into f32 (nb_attn_qk_blocks_avx2), then per group of 8 packed query rows a tile of 8 rows x 32
 * keys in 16 registers over the elements: per element 2 loads, per row an fma-folded broadcast and
 * 2 fma, one fma per element in element order. All keep the reference's order and the AVX2 set's,
 * so the bits are the same (test_kv).
 */
#include "formats/blocks.h"
#include "formats/types.h"
#include "kernels/api.h"
#include "kernels/x86/avx512/avx512.h"

enum { PV_ROWS = 8 };

/* acc rows 0..R-1, elements 0..31 (rows D apart), += p * vf over the n decoded rows of a chunk. */
static inline __attribute__((always_inline)) void tile32(int R, const float *vf, int D, int n, const float *p,
                                                         size_t ldp, float *acc) {
    __m512 a[PV_ROWS][2];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        a[r][0] = _mm512_loadu_ps(acc + (size_t)r * D);
        a[r][1] = _mm512_loadu_ps(acc + (size_t)r * D + 16);
    }
    for (int j = 0; j < n; j++) {
        const __m512 v0 = _mm512_loadu_ps(vf + (size_t)j * NB_ATTN_CHUNK), v1 = _mm512_loadu_ps(vf + (size_t)j * NB_ATTN_CHUNK + 16);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const __m512 w = _mm512_set1_ps(p[(size_t)r * ldp + (size_t)j]);
            a[r][0] = _mm512_fmadd_ps(w, v0, a[r][0]);
            a[r][1] = _mm512_fmadd_ps(w, v1, a[r][1]);
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        _mm512_storeu_ps(acc + (size_t)r * D, a[r][0]);
        _mm512_storeu_ps(acc + (size_t)r * D + 16, a[r][1]);
    }
}

typedef void (*tile_fn)(const float *vf, int D, int n, const float *p, size_t ldp, float *acc);
#define TILE(R)                                                                                                  \
    static void tile32_##R(const float *vf, int D, int n, const float *p, size_t ldp, float *acc) {              \
        tile32(R, vf, D, n, p, ldp, acc);                                                                        \
    }
TILE(1) TILE(2) TILE(3) TILE(4) TILE(5) TILE(6) TILE(7) TILE(8)
static const tile_fn tiles[PV_ROWS] = {tile32_1, tile32_2, tile32_3, tile32_4, tile32_5, tile32_6, tile32_7, tile32_8};

/* Decode (rows <= 4: a kv head's query heads) over F16, F32, BF16, Q8_0 or Q4_0 cells: W elements
 * of the R rows (W = 64, or 128 for one or two rows: up to 16 registers) held over a group of
 * DV_KEYS value rows, each row's W elements converted in registers once for all R rows, each
 * element one fma per row in row order (the reference's). Per key and 64 elements 4 conversions, R
 * broadcasts and 4R fma, where the AVX2 set's 16- or 32-element tiles took a broadcast load per
 * fma pair (two rows over 64 elements ran 0.94x the AVX2 tiles in cache, over 128 1.05x). Each row
 * asks for the same part of the row DV_KEYS on, into L2 (_MM_HINT_T1): asked into L1, the requests
 * in flight were as many as L1 tracks, and values read from memory ran at half their in-cache rate
 * (bench_attn --decode, Zen 4). */
enum { DV_KEYS = 32, DV_W = 64 };

/* Elements d .. d+31 of a value row into x[0..1], exactly (d a multiple of 32): Q8_0 as q * d,
 * Q4_0 as (q - 8) * d (one fma, q * d - 8d: the exact value rounded once), elements 0-15 of its
 * block in the bytes' low nibbles and 16-31 in the high ones; the block's scale converted once.
 * Q4_0's 16 values are made once per block (the same fma per code) and looked up by vpermps: one
 * shuffle per 16 elements where a conversion and an fma took the fma pipes that the rows' sums
 * need (bench_attn --decode, Zen 4: Qwen3's two rows 1.12x, Gemma's four 1.03x). */
static inline __attribute__((always_inline)) void dv_load32(int vtype, const uint8_t *row, int d, __m512 x[2]) {
    if (vtype == NB_TYPE_F16) {
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) x[h] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * (size_t)(d + 16 * h))));
    } else if (vtype == NB_TYPE_F32) {
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) x[h] = _mm512_loadu_ps((const float *)row + d + 16 * h);
    } else if (vtype == NB_TYPE_BF16) {
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
            x[h] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(row + 2 * (size_t)(d + 16 * h)))), 16));
    } else if (vtype == NB_TYPE_Q8_0) {
        const nb_block_q8_0 *b = (const nb_block_q8_0 *)row + d / NB_QK8_0;
        const __m512 s = _mm512_cvtph_ps(_mm256_set1_epi16((short)b->d));
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
            x[h] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b->qs + 16 * h)))), s);
    } else {
        const nb_block_q4_0 *b = (const nb_block_q4_0 *)row + d / NB_QK4_0;
        const __m512 s = _mm512_cvtph_ps(_mm256_set1_epi16((short)b->d)), m8 = _mm512_mul_ps(s, _mm512_set1_ps(-8.0f));
        const __m512 tab = _mm512_fmadd_ps(_mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), s, m8);
        const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)b->qs));
        x[0] = _mm512_permutexvar_ps(q, tab); /* vpermps reads an index's low 4 bits: the low nibble */
        x[1] = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), tab);
    }
}

/* Where in a value row the W elements from d lie: bytes off .. off+len-1. */
static inline size_t dv_span(int vtype, int d, int W, size_t *len) {
    if (vtype == NB_TYPE_Q8_0 || vtype == NB_TYPE_Q4_0) {
        const size_t bb = vtype == NB_TYPE_Q8_0 ? sizeof(nb_block_q8_0) : sizeof(nb_block_q4_0);
        *len = (size_t)(W / 32) * bb;
        return (size_t)(d / 32) * bb;
    }
    const size_t esz = vtype == NB_TYPE_F32 ? 4 : 2;
    *len = (size_t)W * esz;
    return (size_t)d * esz;
}

static inline __attribute__((always_inline)) void dv_tile(int vtype, int R, int W, const uint8_t *v, size_t vs, int n,
                                                          int D, const float *p, size_t ldp, float *acc, int d) {
    size_t len;
    const size_t off = dv_span(vtype, d, W, &len), ahead = (size_t)DV_KEYS * vs + off;
    __m512 a[4][8];
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int k = 0; k < W / 16; k++) a[r][k] = _mm512_loadu_ps(acc + (size_t)r * D + d + 16 * k);
    for (int j = 0; j < n; j++) {
        const uint8_t *row = v + (size_t)j * vs;
        #pragma GCC unroll 8
        for (size_t o = 0; o < len; o += 64) _mm_prefetch((const char *)row + ahead + o, _MM_HINT_T1);
        __m512 x[8];
        #pragma GCC unroll 4
        for (int k = 0; k < W / 16; k += 2) dv_load32(vtype, row, d + 16 * k, x + k);
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m512 w = _mm512_set1_ps(p[(size_t)r * ldp + (size_t)j]);
            #pragma GCC unroll 8
            for (int k = 0; k < W / 16; k++) a[r][k] = _mm512_fmadd_ps(w, x[k], a[r][k]);
        }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int k = 0; k < W / 16; k++) _mm512_storeu_ps(acc + (size_t)r * D + d + 16 * k, a[r][k]);
}

static inline __attribute__((always_inline)) void dv_rows(int vtype, const uint8_t *v, size_t vs, int nk, int D,
                                                          const float *p, size_t ldp, int rows, float *acc) {
    for (int j0 = 0; j0 < nk; j0 += DV_KEYS) {
        const int n = nk - j0 < DV_KEYS ? nk - j0 : DV_KEYS;
        const uint8_t *vj = v + (size_t)j0 * vs;
        if (rows <= 2 && D % 128 == 0)
            for (int d = 0; d < D; d += 128)
                if (rows == 1) dv_tile(vtype, 1, 128, vj, vs, n, D, p + j0, ldp, acc, d);
                else dv_tile(vtype, 2, 128, vj, vs, n, D, p + j0, ldp, acc, d);
        else
            for (int d = 0; d < D; d += DV_W)
                switch (rows) {
                case 1: dv_tile(vtype, 1, DV_W, vj, vs, n, D, p + j0, ldp, acc, d); break;
                case 2: dv_tile(vtype, 2, DV_W, vj, vs, n, D, p + j0, ldp, acc, d); break;
                case 3: dv_tile(vtype, 3, DV_W, vj, vs, n, D, p + j0, ldp, acc, d); break;
                default: dv_tile(vtype, 4, DV_W, vj, vs, n, D, p + j0, ldp, acc, d);
                }
    }
}

void nb_attn_pv_avx512(int vtype, const void *v, size_t vs, int nk, int D, const float *p, size_t ldp, int rows,
                       float *acc) {
    if (rows <= 4 && D % DV_W == 0) {
        if (vtype == NB_TYPE_F16) dv_rows(NB_TYPE_F16, v, vs, nk, D, p, ldp, rows, acc);
        else if (vtype == NB_TYPE_F32) dv_rows(NB_TYPE_F32, v, vs, nk, D, p, ldp, rows, acc);
        else if (vtype == NB_TYPE_BF16) dv_rows(NB_TYPE_BF16, v, vs, nk, D, p, ldp, rows, acc);
        else if (vtype == NB_TYPE_Q8_0) dv_rows(NB_TYPE_Q8_0, v, vs, nk, D, p, ldp, rows, acc);
        else dv_rows(NB_TYPE_Q4_0, v, vs, nk, D, p, ldp, rows, acc);
        return;
    }
    if (rows <= 4 || D % 32) {
        nb_attn_pv_avx2(vtype, v, vs, nk, D, p, ldp, rows, acc);
        return;
    }
    float vf[NB_ATTN_CHUNK_KEYS * NB_ATTN_CHUNK];
    for (int j0 = 0; j0 < nk; j0 += NB_ATTN_CHUNK_KEYS) {
        const int n = nk - j0 < NB_ATTN_CHUNK_KEYS ? nk - j0 : NB_ATTN_CHUNK_KEYS;
        for (int d = 0; d < D; d += NB_ATTN_CHUNK) {
            nb_attn_decode_chunk_avx2(vtype, (const uint8_t *)v + (size_t)j0 * vs, vs, n, d, NB_ATTN_CHUNK, vf);
            for (int r0 = 0; r0 < rows; r0 += PV_ROWS) {
                const int R = rows - r0 < PV_ROWS ? rows - r0 : PV_ROWS;
                tiles[R - 1](vf, D, n, p + (size_t)r0 * ldp + (size_t)j0, ldp, acc + (size_t)r0 * D + d);
            }
        }
    }
}

enum { QK_KEYS = 32 };

/* Scores of the 8 rows of a packed query group q (the first R stored, lds apart) against the
 * n <= 32 keys packed at kt (nb_attn_qk_tile). */
static void qk_tile8(const float *kt, int D, const float *q, int R, int n, float *s, size_t lds) {
    __m512 a[8][2];
    #pragma GCC unroll 8
    for (int r = 0; r < 8; r++) a[r][0] = a[r][1] = _mm512_setzero_ps();
    for (int d = 0; d < D; d++) {
        const __m512 k0 = _mm512_loadu_ps(kt + (size_t)d * QK_KEYS), k1 = _mm512_loadu_ps(kt + (size_t)d * QK_KEYS + 16);
        #pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            const __m512 w = _mm512_set1_ps(q[8 * (size_t)d + (size_t)r]);
            a[r][0] = _mm512_fmadd_ps(w, k0, a[r][0]);
            a[r][1] = _mm512_fmadd_ps(w, k1, a[r][1]);
        }
    }
    const __mmask16 m0 = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1), m1 = (__mmask16)(n >= 32 ? 0xffff : n > 16 ? (1u << (n - 16)) - 1 : 0);
    #pragma GCC unroll 8
    for (int r = 0; r < 8; r++) /* a constant r: the tile stays in registers */
        if (r < R) {
            _mm512_mask_storeu_ps(s + (size_t)r * lds, m0, a[r][0]);
            _mm512_mask_storeu_ps(s + (size_t)r * lds + 16, m1, a[r][1]);
        }
}

void nb_attn_qk_avx512(int ktype, const void *k, size_t ks, int nk, int D, const float *qp, int rows, float *s,
                       size_t lds) {
    nb_attn_qk_blocks_avx2(qk_tile8, QK_KEYS, 8, ktype, k, ks, nk, D, qp, rows, s, lds);
}
