/*
 * attn_avx2.c: nb_attn_pv and nb_attn_qk (api.h) on AVX2. The value sums: 32 elements of up to
 * 128 value rows at a time decoded into f32 (nb_attn_decode_chunk_avx2), then tiles of 4 output
 * rows x 16 of those elements held in registers while the decoded rows go by, one fma per row in
 * row order as the reference (attn_ref.c) takes them; decode (4 rows or fewer) decodes each row
 * in registers instead. The scores:
 * 16 keys at a time transposed into f32 (element-major, nb_attn_qk_blocks_avx2), then tiles of 4
 * query rows x 16 keys in registers over the elements, each query element broadcast from its
 * packing, one fma per element in element order as the reference. So the bits are the same.
 */
#include <math.h>
#include <string.h>

#include "formats/blocks.h"
#include "formats/types.h"
#include "kernels/api.h"
#include "kernels/x86/avx2/avx2.h"
#include "kernels/x86/avx2/panel.h"

enum { PV_KEYS = 16 };

/* acc rows 0..R-1 (R = 4, 2 or 1: named registers, which the compiler keeps; rows D apart),
 * elements d..d+15, += p * vf over n decoded rows of a chunk (NB_ATTN_CHUNK floats apart). */
#define PV_ROW_LOAD(r) __m256 a##r##0 = _mm256_loadu_ps(acc + (r) * (size_t)D + d), a##r##1 = _mm256_loadu_ps(acc + (r) * (size_t)D + d + 8)
#define PV_ROW_FMA(r)                                                                                                  \
    do {                                                                                                               \
        const __m256 w = _mm256_broadcast_ss(p + (r) * ldp + (size_t)j);                                               \
        a##r##0 = _mm256_fmadd_ps(w, v0, a##r##0);                                                                     \
        a##r##1 = _mm256_fmadd_ps(w, v1, a##r##1);                                                                     \
    } while (0)
#define PV_ROW_STORE(r) _mm256_storeu_ps(acc + (r) * (size_t)D + d, a##r##0), _mm256_storeu_ps(acc + (r) * (size_t)D + d + 8, a##r##1)
#define PV_V()                                                                                                         \
    const __m256 v0 = _mm256_loadu_ps(vf + (size_t)j * NB_ATTN_CHUNK + (d & 31)),                                      \
                 v1 = _mm256_loadu_ps(vf + (size_t)j * NB_ATTN_CHUNK + (d & 31) + 8)

static void tile16_4(const float *vf, int D, int n, const float *p, size_t ldp, float *acc, int d) {
    PV_ROW_LOAD(0); PV_ROW_LOAD(1); PV_ROW_LOAD(2); PV_ROW_LOAD(3);
    for (int j = 0; j < n; j++) {
        PV_V();
        PV_ROW_FMA(0); PV_ROW_FMA(1); PV_ROW_FMA(2); PV_ROW_FMA(3);
    }
    PV_ROW_STORE(0); PV_ROW_STORE(1); PV_ROW_STORE(2); PV_ROW_STORE(3);
}

static void tile16_2(const float *vf, int D, int n, const float *p, size_t ldp, float *acc, int d) {
    PV_ROW_LOAD(0); PV_ROW_LOAD(1);
    for (int j = 0; j < n; j++) {
        PV_V();
        PV_ROW_FMA(0); PV_ROW_FMA(1);
    }
    PV_ROW_STORE(0); PV_ROW_STORE(1);
}

static void tile16_1(const float *vf, int D, int n, const float *p, size_t ldp, float *acc, int d) {
    PV_ROW_LOAD(0);
    for (int j = 0; j < n; j++) {
        PV_V();
        PV_ROW_FMA(0);
    }
    PV_ROW_STORE(0);
}

/* Elements d..d+7 of an F16, F32 or BF16 row, exactly. */
static inline __attribute__((always_inline)) __m256 load8(int type, const uint8_t *row, int d) {
    if (type == NB_TYPE_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * (size_t)d)));
    if (type == NB_TYPE_F32) return _mm256_loadu_ps((const float *)row + d);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * (size_t)d))), 16));
}

/* Elements d..d+W-1 of a value row into W/8 registers (W 16 or 32, d a multiple of W), decoded in
 * place: W = 32 is one Q8_0 / Q4_0 block, W = 16 half of one (Q8_0 and the float types: decode's
 * tiles take Q4_0 in the nibbles' order instead, q4_0_eight). */
static inline __attribute__((always_inline)) void loadw(int vtype, const uint8_t *row, int d, int W, __m256 x[4]) {
    if (vtype == NB_TYPE_F16 || vtype == NB_TYPE_F32 || vtype == NB_TYPE_BF16) {
        #pragma GCC unroll 4
        for (int k = 0; k < W / 8; k++) x[k] = load8(vtype, row, d + 8 * k);
    } else if (vtype == NB_TYPE_Q8_0) {
        const nb_block_q8_0 *b = (const nb_block_q8_0 *)row + d / NB_QK8_0;
        const __m256 s = nb_avx2_fp16_bcast(b->d);
        #pragma GCC unroll 4
        for (int k = 0; k < W / 8; k++)
            x[k] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b->qs + (W == 32 ? 0 : d % NB_QK8_0) + 8 * k)))), s);
    } else { /* Q4_0, a whole block: elements 0..15 in the low nibbles, 16..31 in the high ones */
        const nb_block_q4_0 *b = (const nb_block_q4_0 *)row + d / NB_QK4_0;
        const __m256 s = nb_avx2_fp16_bcast(b->d);
        const __m128i bytes = _mm_loadu_si128((const __m128i *)b->qs), m = _mm_set1_epi8(15), e = _mm_set1_epi8(8);
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(bytes, m), e);
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), m), e);
        const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) x[k] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part[k])), s);
    }
}

void nb_attn_decode_chunk_avx2(int vtype, const uint8_t *v, size_t vs, int n, int d, int w, float *vf) {
    const nb_type_traits *tt = nb_type_traits_get(vtype);
    const nb_type_info *ti = &tt->info;
    const size_t off = (size_t)(d / ti->block_elems) * (size_t)ti->block_bytes;
    const size_t last = off + (size_t)((w + ti->block_elems - 1) / ti->block_elems) * (size_t)ti->block_bytes - 1;
    for (int j = 0; j < n; j++) {
        const uint8_t *row = v + (size_t)j * vs, *next = row + (size_t)n * vs;
        _mm_prefetch((const char *)next + off, _MM_HINT_T1);
        _mm_prefetch((const char *)next + last, _MM_HINT_T1);
        if (w == NB_ATTN_CHUNK) {
            __m256 x[4];
            loadw(vtype, row, d, NB_ATTN_CHUNK, x);
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++) _mm256_storeu_ps(vf + (size_t)j * NB_ATTN_CHUNK + 8 * k, x[k]);
        } else { /* a row's last, partial chunk (F32, F16, BF16: quantized rows are whole chunks) */
            tt->dequantize(row + off, vf + (size_t)j * NB_ATTN_CHUNK, w);
        }
    }
}

/* Eight elements of a Q4_0 value row in the nibbles' order: the low and high nibbles of bytes
 * i..i+3 of block b (elements i..i+3 and i+16..i+19), (q - 8) * s as one fma (q * s - 8s: the
 * exact value rounded once, as the product of q - 8). A broadcast load, a variable shift and a mask
 * per 8 elements, where the bytes in the elements' order took, per 16, two shifts, a mask, a
 * subtraction and two sign extensions, mostly on the shuffle pipes: decode's Q4_0 value sums
 * 1.08-1.13x (Zen 3, stop 52). */
static inline __m256 q4_0_eight(const nb_block_q4_0 *b, int i, __m256 s, __m256 m8) {
    int32_t q;
    memcpy(&q, b->qs + i, 4);
    const __m256i c = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(q), _mm256_setr_epi32(0, 8, 16, 24, 4, 12, 20, 28)),
                                       _mm256_set1_epi32(15));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(c), s, m8);
}

/* Register k of a tile at element d (W wide): elements d + 8k .. d + 8k + 7, or for Q4_0 (nib) the
 * nibbles' order of q4_0_eight, bytes o/2 + 4k .. o/2 + 4k + 3 of the block at d - o (o = d % 32):
 * the tiles at d and d + 16 (W 16), or the one at d (W 32), cover the block between them. */
static inline const float *reg_lo(int nib, const float *a, int d, int k) {
    return nib ? a + (d - d % 32) + (d % 32) / 2 + 4 * k : a + d + 8 * k;
}
static inline __m256 reg_load(int nib, const float *a, int d, int k) {
    const float *lo = reg_lo(nib, a, d, k);
    return nib ? _mm256_loadu2_m128(lo + 16, lo) : _mm256_loadu_ps(lo);
}
static inline void reg_store(int nib, float *a, int d, int k, __m256 x) {
    float *lo = (float *)reg_lo(nib, a, d, k);
    if (nib) _mm256_storeu2_m128(lo + 16, lo, x);
    else _mm256_storeu_ps(lo, x);
}

/* Few rows (decode: a kv head's query heads): elements d..d+W-1 of R rows (R * W / 8 <= 8
 * accumulators) held in registers over n value rows (a group of PV_KEYS, in L1 after the first
 * elements), each decoded in registers once for all R rows as it goes by. Three or four rows
 * take their weights broadcast already (pb[4 * j + r], a plain load: on a first-generation Zen
 * core vbroadcastss from memory slows the conversions beside it, docs/BENCHMARKS.md); one or
 * two broadcast them from p as they go (pre-broadcast, they measured no faster). */
static inline __attribute__((always_inline)) void direct_tile(int vtype, int R, int W, const uint8_t *v, size_t vs, int n,
                                                              int D, const __m256 *pb, const float *p, size_t ldp, float *acc, int d) {
    const int nib = vtype == NB_TYPE_Q4_0;
    __m256 a[4][4];
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 4
        for (int k = 0; k < W / 8; k++) a[r][k] = reg_load(nib, acc + (size_t)r * D, d, k);
    for (int j = 0; j < n; j++) {
        __m256 x[4];
        /* the group after this one, the part of its rows this tile will read there */
        _mm_prefetch((const char *)v + (size_t)(j + PV_KEYS) * vs + (size_t)d * vs / (size_t)D, _MM_HINT_T0);
        if (nib) {
            const nb_block_q4_0 *b = (const nb_block_q4_0 *)(v + (size_t)j * vs) + d / NB_QK4_0;
            const __m256 s = nb_avx2_fp16_bcast(b->d), m8 = _mm256_mul_ps(s, _mm256_set1_ps(-8.0f));
            #pragma GCC unroll 4
            for (int k = 0; k < W / 8; k++) x[k] = q4_0_eight(b, (d % 32) / 2 + 4 * k, s, m8);
        } else
            loadw(vtype, v + (size_t)j * vs, d, W, x);
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256 w = R > 2 ? pb[4 * j + r] : _mm256_broadcast_ss(p + (size_t)r * ldp + (size_t)j);
            #pragma GCC unroll 4
            for (int k = 0; k < W / 8; k++) a[r][k] = _mm256_fmadd_ps(w, x[k], a[r][k]);
        }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 4
        for (int k = 0; k < W / 8; k++) reg_store(nib, acc + (size_t)r * D, d, k, a[r][k]);
}

/* rows <= 4 over nk value rows, PV_KEYS at a time: one or two rows 32 elements a tile, three or
 * four 16. */
static inline __attribute__((always_inline)) void direct(int vtype, const uint8_t *v, size_t vs, int nk, int D,
                                                         const float *p, size_t ldp, int rows, float *acc) {
    __m256 pb[4 * PV_KEYS];
    for (int j0 = 0; j0 < nk; j0 += PV_KEYS) {
        const int n = nk - j0 < PV_KEYS ? nk - j0 : PV_KEYS;
        const uint8_t *vj = v + (size_t)j0 * vs;
        for (int j = 0; j < n && rows > 2; j++)
            for (int r = 0; r < rows; r++) pb[4 * j + r] = _mm256_set1_ps(p[(size_t)r * ldp + (size_t)(j0 + j)]);
        for (int d = 0; d < D; d += rows > 2 ? 16 : 32)
            if (rows == 4) direct_tile(vtype, 4, 16, vj, vs, n, D, pb, p + j0, ldp, acc, d);
            else if (rows == 3) direct_tile(vtype, 3, 16, vj, vs, n, D, pb, p + j0, ldp, acc, d);
            else if (rows == 2) direct_tile(vtype, 2, 32, vj, vs, n, D, pb, p + j0, ldp, acc, d);
            else direct_tile(vtype, 1, 32, vj, vs, n, D, pb, p + j0, ldp, acc, d);
    }
}

#define PV_DIRECT(name, T)                                                                                         \
    static void direct_##name(const uint8_t *v, size_t vs, int nk, int D, const float *p, size_t ldp, int rows, float *acc) { \
        direct(T, v, vs, nk, D, p, ldp, rows, acc);                                                                \
    }
PV_DIRECT(f16, NB_TYPE_F16)
PV_DIRECT(f32, NB_TYPE_F32)
PV_DIRECT(bf16, NB_TYPE_BF16)
PV_DIRECT(q8_0, NB_TYPE_Q8_0)
PV_DIRECT(q4_0, NB_TYPE_Q4_0)

void nb_attn_pv_avx2(int vtype, const void *v, size_t vs, int nk, int D, const float *p, size_t ldp, int rows,
                     float *acc) {
    if (rows <= 4 && D % 32 == 0) { /* decode: no pass through a decoded copy */
        void (*fn)(const uint8_t *, size_t, int, int, const float *, size_t, int, float *) =
            vtype == NB_TYPE_F16 ? direct_f16 : vtype == NB_TYPE_F32 ? direct_f32 : vtype == NB_TYPE_BF16 ? direct_bf16
            : vtype == NB_TYPE_Q8_0 ? direct_q8_0 : direct_q4_0;
        fn(v, vs, nk, D, p, ldp, rows, acc);
        return;
    }
    float vf[NB_ATTN_CHUNK_KEYS * NB_ATTN_CHUNK];
    for (int j0 = 0; j0 < nk; j0 += NB_ATTN_CHUNK_KEYS) {
        const int n = nk - j0 < NB_ATTN_CHUNK_KEYS ? nk - j0 : NB_ATTN_CHUNK_KEYS;
        for (int c = 0; c < D; c += NB_ATTN_CHUNK) {
            const int w = D - c < NB_ATTN_CHUNK ? D - c : NB_ATTN_CHUNK;
            nb_attn_decode_chunk_avx2(vtype, (const uint8_t *)v + (size_t)j0 * vs, vs, n, c, w, vf);
            for (int r0 = 0; r0 < rows; r0 += 4) {
                const int R = rows - r0 < 4 ? rows - r0 : 4;
                const float *pr = p + (size_t)r0 * ldp + (size_t)j0;
                float *ar = acc + (size_t)r0 * D;
                int d = c;
                for (; d + 16 <= c + w; d += 16)
                    if (R == 4) tile16_4(vf, D, n, pr, ldp, ar, d);
                    else if (R >= 2) {
                        tile16_2(vf, D, n, pr, ldp, ar, d);
                        if (R == 3) tile16_1(vf, D, n, pr + 2 * ldp, ldp, ar + 2 * (size_t)D, d);
                    } else tile16_1(vf, D, n, pr, ldp, ar, d);
                for (; d < c + w; d++) /* chunks not a multiple of 16: the reference's steps */
                    for (int r = 0; r < R; r++)
                        for (int j = 0; j < n; j++)
                            ar[(size_t)r * D + d] = fmaf(pr[(size_t)r * ldp + j], vf[(size_t)j * NB_ATTN_CHUNK + (d - c)], ar[(size_t)r * D + d]);
            }
        }
    }
}

/* ------------------------------------------------------------ scores */

enum { QK_KEYS = 16 };

/* Keys 0 .. n-1 (rows ks bytes apart, n <= width, width a multiple of 8) transposed into f32 at
 * kt: kt[d * width + i] = key i's element d, zero for i >= n; 8 keys by 8 elements at a time
 * (nb_transpose8), unrolled so that the 8 rows stay in registers. D a multiple of 8. The rows
 * `width` keys on (the next call's: cached keys lie in a run of cells) are asked into L2 as
 * these are read: a block's products give them the time to arrive from memory. */
static inline __attribute__((always_inline)) void pack_k(int ktype, const uint8_t *k, size_t ks, int n, int D,
                                                         int width, float *kt) {
    const size_t esz = ktype == NB_TYPE_F32 ? 4 : 2;
    for (int i0 = 0; i0 < width; i0 += 8) {
        const uint8_t *k0 = k + (size_t)i0 * ks;
        const int m = n - i0; /* keys of this 8 that exist */
        for (int d = 0; d < D; d += 8) {
            __m256i v[8];
            if (m >= 8) {
                if ((size_t)d * esz % 64 == 0)
                    #pragma GCC unroll 8
                    for (int i = 0; i < 8; i++)
                        _mm_prefetch((const char *)k0 + (size_t)(i + width) * ks + (size_t)d * esz, _MM_HINT_T1);
                #pragma GCC unroll 8
                for (int i = 0; i < 8; i++) v[i] = _mm256_castps_si256(load8(ktype, k0 + (size_t)i * ks, d));
            } else {
                for (int i = 0; i < 8; i++)
                    v[i] = i < m ? _mm256_castps_si256(load8(ktype, k0 + (size_t)i * ks, d)) : _mm256_setzero_si256();
            }
            nb_transpose8(v); /* v[e]: element d + e of the 8 keys */
            #pragma GCC unroll 8
            for (int e = 0; e < 8; e++) _mm256_storeu_si256((__m256i *)(kt + (size_t)(d + e) * width + i0), v[e]);
        }
    }
}

static void pack_keys(int ktype, const uint8_t *k, size_t ks, int n, int D, int width, float *kt) {
    if (ktype == NB_TYPE_F16) pack_k(NB_TYPE_F16, k, ks, n, D, width, kt);
    else if (ktype == NB_TYPE_F32) pack_k(NB_TYPE_F32, k, ks, n, D, width, kt);
    else pack_k(NB_TYPE_BF16, k, ks, n, D, width, kt);
}

/* (avx2.h) */
void nb_attn_qk_blocks_avx2(nb_attn_qk_tile tile, int width, int tile_rows, int ktype, const void *k, size_t ks,
                            int nk, int D, const float *qp, int rows, float *s, size_t lds) {
    if (D % 8) {
        nb_attn_qk_ref(ktype, k, ks, nk, D, qp, rows, s, lds);
        return;
    }
    float kt[NB_ATTN_QK_WIDTH * NB_ATTN_MAX_D];
    for (int j0 = 0; j0 < nk; j0 += width) {
        const int n = nk - j0 < width ? nk - j0 : width;
        pack_keys(ktype, (const uint8_t *)k + (size_t)j0 * ks, ks, n, D, width, kt);
        for (int r0 = 0; r0 < rows; r0 += tile_rows)
            tile(kt, D, qp + (size_t)(r0 / 8) * 8 * (size_t)D + (size_t)(r0 % 8), rows - r0 < tile_rows ? rows - r0 : tile_rows,
                 n, s + (size_t)r0 * lds + (size_t)j0, lds);
    }
}

/* Scores of query rows 0..3 of q (a packing's group at its row offset; the first R stored, lds
 * apart) against the n <= 16 keys packed at kt (nb_attn_qk_tile). */
static void qk_tile4(const float *kt, int D, const float *q, int R, int n, float *s, size_t lds) {
    __m256 a[4][2];
    #pragma GCC unroll 4
    for (int r = 0; r < 4; r++) a[r][0] = a[r][1] = _mm256_setzero_ps();
    for (int d = 0; d < D; d++) {
        const __m256 k0 = _mm256_loadu_ps(kt + (size_t)d * QK_KEYS), k1 = _mm256_loadu_ps(kt + (size_t)d * QK_KEYS + 8);
        #pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const __m256 w = _mm256_broadcast_ss(q + 8 * (size_t)d + r);
            a[r][0] = _mm256_fmadd_ps(w, k0, a[r][0]);
            a[r][1] = _mm256_fmadd_ps(w, k1, a[r][1]);
        }
    }
    float t[4][QK_KEYS]; /* every row through constant indices, so that a[][] stays in registers */
    #pragma GCC unroll 4
    for (int r = 0; r < 4; r++) _mm256_storeu_ps(t[r], a[r][0]), _mm256_storeu_ps(t[r] + 8, a[r][1]);
    for (int r = 0; r < R; r++) memcpy(s + (size_t)r * lds, t[r], sizeof(float) * (size_t)n);
}

void nb_attn_qk_avx2(int ktype, const void *k, size_t ks, int nk, int D, const float *qp, int rows, float *s, size_t lds) {
    nb_attn_qk_blocks_avx2(qk_tile4, QK_KEYS, 4, ktype, k, ks, nk, D, qp, rows, s, lds);
}
