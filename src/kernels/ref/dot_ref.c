/*
 * dot_ref.c: scalar reference dot products and tiles: the definition of correct for every ISA.
 * The integer routes follow the lane contract of kernels.h step by step, so that SIMD variants
 * can reproduce them bit for bit; the float routes (f32 activations) accumulate sequentially.
 */
#include <math.h>
#include <string.h>

#include "formats/blocks.h"
#include "formats/codes.h"
#include "kernels/kernels.h"

/* ------------------------------------------------------------ 32-element units x Q8_0 */

/* One 32-element weight unit decoded to signed integers in element order, with the weight
 * scale of lanes 0-3 (elements 0..15) and of lanes 4-7 (elements 16..31), and (Q4_1, Q5_1) the
 * block's minimum, the codes being unsigned. */
typedef struct {
    int8_t q[32];
    float s_lo, s_hi, m;
} unit32;

/* 16 packed bytes (and a qh word for five-bit codes, else NULL) as 32 codes less off. */
static void codes_split(const uint8_t *qs, const uint8_t *qh4, int off, int8_t q[32]) {
    uint32_t qh = 0;
    if (qh4) memcpy(&qh, qh4, 4);
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)(((qs[j] & 15) | (((qh >> j) & 1) << 4)) - off);
        q[j + 16] = (int8_t)(((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - off);
    }
}

static void unit_q4_0(const void *row, int64_t u, unit32 *o) {
    const nb_block_q4_0 *b = (const nb_block_q4_0 *)row + u;
    codes_split(b->qs, NULL, 8, o->q);
    o->s_lo = o->s_hi = nb_fp16_to_fp32(b->d);
}

static void unit_q5_0(const void *row, int64_t u, unit32 *o) {
    const nb_block_q5_0 *b = (const nb_block_q5_0 *)row + u;
    codes_split(b->qs, b->qh, 16, o->q);
    o->s_lo = o->s_hi = nb_fp16_to_fp32(b->d);
}

static void unit_q4_1(const void *row, int64_t u, unit32 *o) {
    const nb_block_q4_1 *b = (const nb_block_q4_1 *)row + u;
    codes_split(b->qs, NULL, 0, o->q);
    o->s_lo = o->s_hi = nb_fp16_to_fp32(b->d);
    o->m = nb_fp16_to_fp32(b->m);
}

static void unit_q5_1(const void *row, int64_t u, unit32 *o) {
    const nb_block_q5_1 *b = (const nb_block_q5_1 *)row + u;
    codes_split(b->qs, b->qh, 0, o->q);
    o->s_lo = o->s_hi = nb_fp16_to_fp32(b->d);
    o->m = nb_fp16_to_fp32(b->m);
}

static void unit_q8_0(const void *row, int64_t u, unit32 *o) {
    const nb_block_q8_0 *b = (const nb_block_q8_0 *)row + u;
    memcpy(o->q, b->qs, 32);
    o->s_lo = o->s_hi = nb_fp16_to_fp32(b->d);
}

static void unit_mxfp4(const void *row, int64_t u, unit32 *o) {
    const nb_block_mxfp4 *b = (const nb_block_mxfp4 *)row + u;
    for (int j = 0; j < 16; j++) {
        o->q[j] = nb_e2m1_doubled[b->qs[j] & 15];
        o->q[j + 16] = nb_e2m1_doubled[b->qs[j] >> 4];
    }
    o->s_lo = o->s_hi = nb_e8m0_to_fp32_half(b->e);
}

/* Unit u is half h = u%2 of block u/2: sub-blocks 2h and 2h+1, bytes 16h..16h+15. */
static void unit_nvfp4(const void *row, int64_t u, unit32 *o) {
    const nb_block_nvfp4 *b = (const nb_block_nvfp4 *)row + u / 2;
    int h = (int)(u % 2);
    for (int s = 0; s < 2; s++) {
        const uint8_t *qs = b->qs + 16 * h + 8 * s;
        for (int j = 0; j < 8; j++) {
            o->q[16 * s + j] = nb_e2m1_doubled[qs[j] & 15];
            o->q[16 * s + j + 8] = nb_e2m1_doubled[qs[j] >> 4];
        }
    }
    o->s_lo = nb_ue4m3_to_fp32_half(b->d[2 * h]);
    o->s_hi = nb_ue4m3_to_fp32_half(b->d[2 * h + 1]);
}

typedef void (*unit_fn)(const void *row, int64_t u, unit32 *o);

/* Integer sum of w*a over the 4 elements of group g (elements 4g..4g+3) of a unit, aq the
 * activation unit's 32 codes. */
static int group_sum(const unit32 *un, const int8_t *aq, int g) {
    int p = 0;
    for (int e = 4 * g; e < 4 * g + 4; e++) p += un->q[e] * aq[e];
    return p;
}

/* Q4_0, Q5_0, Q8_0, NVFP4: 8 lanes, lane k = group k. */
static float dot_units(unit_fn dec, int64_t n, const void *w, const void *a) {
    const nb_block_q8_0 *ab = a;
    float acc[8] = {0};
    unit32 un;
    for (int64_t u = 0; u < n / 32; u++) {
        dec(w, u, &un);
        float da = nb_fp16_to_fp32(ab[u].d);
        for (int k = 0; k < 8; k++) {
            float d = (k < 4 ? un.s_lo : un.s_hi) * da;
            acc[k] = fmaf(d, (float)group_sum(&un, ab[u].qs, k), acc[k]);
        }
    }
    return nb_lane_sum(acc);
}

/* One lane (kernels.h): the exact integer sum of each unit, acc = fma(dw*da, (float)p, acc)
 * (MXFP4's order, and NB_ROUTE_BLOCK's); split: one fma per 16-element half, each with its own
 * scale (NVFP4's sub-blocks under NB_ROUTE_BLOCK). */
static float dot_units_one(unit_fn dec, int split, int64_t n, const void *w, const void *a) {
    const nb_block_q8_0 *ab = a;
    float acc = 0;
    unit32 un;
    for (int64_t u = 0; u < n / 32; u++) {
        dec(w, u, &un);
        const float da = nb_fp16_to_fp32(ab[u].d);
        int p[2] = {0, 0};
        for (int k = 0; k < 8; k++) p[k / 4] += group_sum(&un, ab[u].qs, k);
        if (split) {
            acc = fmaf(un.s_lo * da, (float)p[0], acc);
            acc = fmaf(un.s_hi * da, (float)p[1], acc);
        } else
            acc = fmaf(un.s_lo * da, (float)(p[0] + p[1]), acc);
    }
    return acc;
}

/* Q4_1, Q5_1 against Q8_1: the 8 lanes over the unsigned codes, plus the minimum's chain
 * macc = fma(m, s, macc) (kernels.h). */
static float dot_units_min(unit_fn dec, int64_t n, const void *w, const void *a) {
    const nb_block_q8_1 *ab = a;
    float acc[8] = {0}, macc = 0;
    unit32 un;
    for (int64_t u = 0; u < n / 32; u++) {
        dec(w, u, &un);
        const float d = un.s_lo * nb_fp16_to_fp32(ab[u].d);
        for (int k = 0; k < 8; k++) acc[k] = fmaf(d, (float)group_sum(&un, ab[u].qs, k), acc[k]);
        macc = fmaf(un.m, nb_fp16_to_fp32(ab[u].s), macc);
    }
    return nb_lane_sum(acc) + macc;
}

float nb_vec_dot_q4_1_q8_1_ref(int64_t n, const void *w, const void *a) { return dot_units_min(unit_q4_1, n, w, a); }
float nb_vec_dot_q5_1_q8_1_ref(int64_t n, const void *w, const void *a) { return dot_units_min(unit_q5_1, n, w, a); }
float nb_vec_dot_q4_0_q8_0_ref(int64_t n, const void *w, const void *a) { return dot_units(unit_q4_0, n, w, a); }
float nb_vec_dot_q5_0_q8_0_ref(int64_t n, const void *w, const void *a) { return dot_units(unit_q5_0, n, w, a); }
float nb_vec_dot_q8_0_q8_0_ref(int64_t n, const void *w, const void *a) { return dot_units(unit_q8_0, n, w, a); }
float nb_vec_dot_mxfp4_q8_0_ref(int64_t n, const void *w, const void *a) { return dot_units_one(unit_mxfp4, 0, n, w, a); }
float nb_vec_dot_nvfp4_q8_0_ref(int64_t n, const void *w, const void *a) { return dot_units(unit_nvfp4, n, w, a); }
/* NB_ROUTE_BLOCK's orders (kernels.h). */
static float dot_q4_0_block(int64_t n, const void *w, const void *a) { return dot_units_one(unit_q4_0, 0, n, w, a); }
static float dot_q5_0_block(int64_t n, const void *w, const void *a) { return dot_units_one(unit_q5_0, 0, n, w, a); }
static float dot_q8_0_block(int64_t n, const void *w, const void *a) { return dot_units_one(unit_q8_0, 0, n, w, a); }
static float dot_nvfp4_block(int64_t n, const void *w, const void *a) { return dot_units_one(unit_nvfp4, 1, n, w, a); }

/* ------------------------------------------------------------------ K-quants x Q8_K */

/* q[256] unsigned codes with their 8 sub-block scales and mins: Q4_K and Q5_K share the rest. */
static void kq_scales(const uint8_t *packed, uint8_t sc[8], uint8_t m[8]) {
    for (int j = 0; j < 8; j++) nb_k_scale_min(j, packed, &sc[j], &m[j]);
}

/* Q4_K and Q5_K, in one of four orders (kernels.h): 8 lanes (Q5_K), one lane per block (Q4_K),
 * one lane per 64 elements (Q4_K in a batch), or one lane per block whose sums take the weight's
 * d and dmin before the activation's d (Q5_K in a batch). */
enum { K_Q5, K_Q4, K_Q4_BATCH, K_Q5_BATCH };

static float dot_k_affine(int64_t n, const void *w, const void *a, int kind) {
    const nb_block_q8_k *ab = a;
    float acc[8] = {0}, macc = 0;
    for (int64_t i = 0; i < n / NB_QK_K; i++) {
        uint8_t q[NB_QK_K], sc[8], m[8];
        const uint8_t *qs, *scales;
        float d, dmin;
        if (kind == K_Q5 || kind == K_Q5_BATCH) {
            const nb_block_q5_k *b = (const nb_block_q5_k *)w + i;
            qs = b->qs, scales = b->scales;
            d = nb_fp16_to_fp32(b->d), dmin = nb_fp16_to_fp32(b->dmin);
            for (int c = 0; c < 4; c++)
                for (int l = 0; l < 32; l++) {
                    q[64 * c + l] = (uint8_t)((qs[32 * c + l] & 15) | (((b->qh[l] >> (2 * c)) & 1) << 4));
                    q[64 * c + 32 + l] = (uint8_t)((qs[32 * c + l] >> 4) | (((b->qh[l] >> (2 * c + 1)) & 1) << 4));
                }
        } else {
            const nb_block_q4_k *b = (const nb_block_q4_k *)w + i;
            qs = b->qs, scales = b->scales;
            d = nb_fp16_to_fp32(b->d), dmin = nb_fp16_to_fp32(b->dmin);
            for (int c = 0; c < 4; c++)
                for (int l = 0; l < 32; l++) {
                    q[64 * c + l] = qs[32 * c + l] & 15;
                    q[64 * c + 32 + l] = qs[32 * c + l] >> 4;
                }
        }
        kq_scales(scales, sc, m);
        const float da = ab[i].d;
        if (kind == K_Q4_BATCH) {
            for (int c = 0; c < 4; c++) {
                int isum = 0, msum = 0;
                for (int e = 64 * c; e < 64 * c + 64; e++) isum += sc[e / 32] * q[e] * ab[i].qs[e];
                for (int j = 2 * c; j < 2 * c + 2; j++) msum += m[j] * (ab[i].bsums[2 * j] + ab[i].bsums[2 * j + 1]);
                acc[0] = fmaf(d * da, (float)isum, acc[0]);
                macc = fmaf(dmin * da, (float)msum, macc);
            }
            continue;
        }
        int isum[8] = {0}, msum = 0;
        for (int e = 0; e < NB_QK_K; e++) isum[kind == K_Q5 ? (e % 32) / 4 : 0] += sc[e / 32] * q[e] * ab[i].qs[e];
        for (int j = 0; j < 8; j++) msum += m[j] * (ab[i].bsums[2 * j] + ab[i].bsums[2 * j + 1]);
        if (kind == K_Q5_BATCH) {
            acc[0] = fmaf(fmaf(-dmin, (float)msum, d * (float)isum[0]), da, acc[0]);
            continue;
        }
        for (int k = 0; k < 8; k++) acc[k] = fmaf(d * da, (float)isum[k], acc[k]);
        macc = fmaf(dmin * da, (float)msum, macc);
    }
    return (kind == K_Q5 ? nb_lane_sum(acc) : acc[0]) - macc;
}

float nb_vec_dot_q4_k_q8_k_ref(int64_t n, const void *w, const void *a) { return dot_k_affine(n, w, a, K_Q4); }
float nb_vec_dot_q4_k_q8_k_batch_ref(int64_t n, const void *w, const void *a) { return dot_k_affine(n, w, a, K_Q4_BATCH); }
float nb_vec_dot_q5_k_q8_k_ref(int64_t n, const void *w, const void *a) { return dot_k_affine(n, w, a, K_Q5); }
float nb_vec_dot_q5_k_q8_k_batch_ref(int64_t n, const void *w, const void *a) { return dot_k_affine(n, w, a, K_Q5_BATCH); }

/* Q6_K in its two orders (kernels.h): 8 lanes, or (batch) one lane per block scaled by the
 * weight's d before the activation's. */
static float dot_q6_k(int64_t n, const void *w, const void *a, int batch) {
    const nb_block_q6_k *wb = w;
    const nb_block_q8_k *ab = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / NB_QK_K; i++) {
        const nb_block_q6_k *b = &wb[i];
        int q[NB_QK_K];
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
            int *o = q + 128 * h;
            for (int l = 0; l < 32; l++) {
                o[l] = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
                o[l + 32] = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
                o[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                o[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            }
        }
        const float d = nb_fp16_to_fp32(b->d);
        if (batch) {
            int isum = 0;
            for (int e = 0; e < NB_QK_K; e++) isum += b->scales[e / 16] * q[e] * ab[i].qs[e];
            acc[0] = fmaf(d * (float)isum, ab[i].d, acc[0]);
            continue;
        }
        int isum[8] = {0};
        for (int e = 0; e < NB_QK_K; e++) isum[(e % 32) / 4] += b->scales[e / 16] * (q[e] + 32) * ab[i].qs[e];
        for (int e = 0; e < NB_QK_K; e++) isum[e / 32] -= 32 * b->scales[e / 16] * ab[i].qs[e];
        for (int k = 0; k < 8; k++) acc[k] = fmaf(d * ab[i].d, (float)isum[k], acc[k]);
    }
    return batch ? acc[0] : nb_lane_sum(acc);
}

float nb_vec_dot_q6_k_q8_k_ref(int64_t n, const void *w, const void *a) { return dot_q6_k(n, w, a, 0); }
float nb_vec_dot_q6_k_q8_k_batch_ref(int64_t n, const void *w, const void *a) { return dot_q6_k(n, w, a, 1); }

/* ----------------------------------------------------------------- f32 activations */

float nb_vec_dot_f32_f32_ref(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}

float nb_vec_dot_f16_f32_ref(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w;
    const float *y = a;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += nb_fp16_to_fp32(x[i]) * y[i];
    return s;
}

float nb_vec_dot_f16_vec_ref(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w;
    const float *y = a;
    float acc[4][8] = {{0}};
    const int64_t np = n & ~(int64_t)31;
    for (int64_t i = 0; i < np; i++) acc[(i % 32) / 8][i % 8] = fmaf(nb_fp16_to_fp32(x[i]), y[i], acc[(i % 32) / 8][i % 8]);
    float t[4];
    for (int m = 0; m < 4; m++)
        t[m] = ((acc[0][m] + acc[2][m]) + (acc[1][m] + acc[3][m])) + ((acc[0][m + 4] + acc[2][m + 4]) + (acc[1][m + 4] + acc[3][m + 4]));
    double s = (t[0] + t[1]) + (t[2] + t[3]);
    for (int64_t i = np; i < n; i++) s += (double)(nb_fp16_to_fp32(x[i]) * y[i]);
    return (float)s;
}

float nb_vec_dot_bf16_f32_ref(int64_t n, const void *w, const void *a) {
    const uint16_t *x = w;
    const float *y = a;
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += nb_bf16_to_fp32(x[i]) * y[i];
    return s;
}

/* Float route of a block type: decode one block at a time (the type's bit-exact dequantizer)
 * into a stack buffer, then accumulate sequentially. */
static float dot_blocks_f32(int type, int64_t n, const void *w, const void *a) {
    const nb_type_traits *tr = nb_type_traits_get(type);
    const float *y = a;
    const uint8_t *wb = w;
    int be = tr->info.block_elems;
    float buf[NB_QK_K], s = 0;
    for (int64_t i = 0; i < n / be; i++) {
        tr->dequantize(wb + i * tr->info.block_bytes, buf, be);
        for (int j = 0; j < be; j++) s += buf[j] * y[i * be + j];
    }
    return s;
}

/* ----------------------------------------------------------------------- tiles */

typedef float (*dot_fn)(int64_t n, const void *w, const void *a);

static void tile(dot_fn f, int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                 float *y, size_t ldy) {
    for (int64_t t = 0; t < nt; t++)
        for (int64_t r = 0; r < nr; r++)
            y[(size_t)t * ldy + (size_t)r] = f(n, (const uint8_t *)w + (size_t)r * ws, (const uint8_t *)a + (size_t)t * as);
}

#define REF_MM(name, fn)                                                                                    \
    static void name(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt, \
                     float *y, size_t ldy) {                                                                \
        tile(fn, n, w, ws, a, as, nr, nt, y, ldy);                                                          \
    }
#define REF_MM_F32(name, type)                                                                              \
    static float name##_dot(int64_t n, const void *w, const void *a) { return dot_blocks_f32(type, n, w, a); } \
    REF_MM(name, name##_dot)

REF_MM(mm_q4_0, nb_vec_dot_q4_0_q8_0_ref)
REF_MM(mm_q5_0, nb_vec_dot_q5_0_q8_0_ref)
REF_MM(mm_q8_0, nb_vec_dot_q8_0_q8_0_ref)
REF_MM(mm_q4_1, nb_vec_dot_q4_1_q8_1_ref)
REF_MM(mm_q5_1, nb_vec_dot_q5_1_q8_1_ref)
REF_MM(mm_mxfp4, nb_vec_dot_mxfp4_q8_0_ref)
REF_MM(mm_nvfp4, nb_vec_dot_nvfp4_q8_0_ref)
REF_MM(mm_q4_k, nb_vec_dot_q4_k_q8_k_ref)
REF_MM(mm_q5_k, nb_vec_dot_q5_k_q8_k_ref)
REF_MM(mm_q6_k, nb_vec_dot_q6_k_q8_k_ref)
REF_MM(mm_q4_k_batch, nb_vec_dot_q4_k_q8_k_batch_ref)
REF_MM(mm_q5_k_batch, nb_vec_dot_q5_k_q8_k_batch_ref)
REF_MM(mm_q6_k_batch, nb_vec_dot_q6_k_q8_k_batch_ref)
REF_MM(mm_f32, nb_vec_dot_f32_f32_ref)
REF_MM(mm_f16, nb_vec_dot_f16_f32_ref)
REF_MM(mm_bf16, nb_vec_dot_bf16_f32_ref)
REF_MM(mm_f16_vec, nb_vec_dot_f16_vec_ref)
REF_MM(mm_q4_0_block, dot_q4_0_block)
REF_MM(mm_q5_0_block, dot_q5_0_block)
REF_MM(mm_q8_0_block, dot_q8_0_block)
REF_MM(mm_nvfp4_block, dot_nvfp4_block)
REF_MM_F32(mmf_q4_0, NB_TYPE_Q4_0)
REF_MM_F32(mmf_q5_0, NB_TYPE_Q5_0)
REF_MM_F32(mmf_q8_0, NB_TYPE_Q8_0)
REF_MM_F32(mmf_q4_1, NB_TYPE_Q4_1)
REF_MM_F32(mmf_q5_1, NB_TYPE_Q5_1)
REF_MM_F32(mmf_mxfp4, NB_TYPE_MXFP4)
REF_MM_F32(mmf_nvfp4, NB_TYPE_NVFP4)
REF_MM_F32(mmf_q4_k, NB_TYPE_Q4_K)
REF_MM_F32(mmf_q5_k, NB_TYPE_Q5_K)
REF_MM_F32(mmf_q6_k, NB_TYPE_Q6_K)

/* Names use ggml's type spelling: "ref q4_K x q8_K". */
#define Q8(t, s, mmq, mmf) [NB_TYPE_##t] = {NB_TYPE_Q8_0, mmq, mmf, "ref " s " x q8_0", "ref " s " x f32", 1}
/* with NB_ROUTE_BLOCK's kernel, from as many tokens as the SIMD sets' (bmin, kernels.h) */
#define Q8B(t, s, mmq, mmf, mmb, bmin)                                                                  \
    [NB_TYPE_##t] = {NB_TYPE_Q8_0, mmq, mmf, "ref " s " x q8_0", "ref " s " x f32", 1, .mm_block = mmb, \
                     .block_min = bmin, .block_act = NB_TYPE_Q8_0, .name_block = "ref " s " x q8_0 (block)"}
#define Q81(t, s, mmq, mmf) [NB_TYPE_##t] = {NB_TYPE_Q8_1, mmq, mmf, "ref " s " x q8_1", "ref " s " x f32", 1}
#define FL(t, s, mm) [NB_TYPE_##t] = {NB_TYPE_F32, mm, mm, "ref " s " x f32", "ref " s " x f32", 1}

const nb_kernel nb_kernels_ref[NB_KERNEL_TYPES] = {
    Q8B(Q4_0, "q4_0", mm_q4_0, mmf_q4_0, mm_q4_0_block, NB_BLOCK_MIN_SMALL),
    Q8B(Q5_0, "q5_0", mm_q5_0, mmf_q5_0, mm_q5_0_block, NB_BLOCK_MIN_SMALL),
    Q8B(Q8_0, "q8_0", mm_q8_0, mmf_q8_0, mm_q8_0_block, NB_BLOCK_MIN_SMALL),
    Q81(Q4_1, "q4_1", mm_q4_1, mmf_q4_1),
    Q81(Q5_1, "q5_1", mm_q5_1, mmf_q5_1),
    Q8(MXFP4, "mxfp4", mm_mxfp4, mmf_mxfp4),
    /* Q4_0 matrices of a multiple of 8 rows: MXFP4's order, the block order's */
    [NB_KERNEL_Q4_0_X8] = {NB_TYPE_Q8_0, mm_q4_0_block, mmf_q4_0, "ref q4_0 x q8_0 (8-row order)", "ref q4_0 x f32", 1},
    Q8B(NVFP4, "nvfp4", mm_nvfp4, mmf_nvfp4, mm_nvfp4_block, NB_BLOCK_MIN),
    /* Q4_K's block order is its GEMV's (kernels.h) */
    [NB_TYPE_Q4_K] = {NB_TYPE_Q8_K, mm_q4_k, mmf_q4_k, "ref q4_K x q8_K", "ref q4_K x f32", 1, NULL, mm_q4_k_batch, 4, 4,
                      .mm_block = mm_q4_k, .block_min = NB_BLOCK_MIN, .block_act = NB_TYPE_Q8_K,
                      .name_block = "ref q4_K x q8_K (block)"},
    [NB_TYPE_Q5_K] = {NB_TYPE_Q8_K, mm_q5_k, mmf_q5_k, "ref q5_K x q8_K", "ref q5_K x f32", 1, NULL, mm_q5_k_batch, 8, 1},
    [NB_TYPE_Q6_K] = {NB_TYPE_Q8_K, mm_q6_k, mmf_q6_k, "ref q6_K x q8_K", "ref q6_K x f32", 1, NULL, mm_q6_k_batch, 8, 1},
    FL(F32, "f32", mm_f32),
    [NB_TYPE_F16] = {NB_TYPE_F32, mm_f16, mm_f16, "ref f16 x f32", "ref f16 x f32", 1, mm_f16_vec},
    FL(BF16, "bf16", mm_bf16),
};
