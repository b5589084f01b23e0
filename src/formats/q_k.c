/*
 * q_k.c: the 256-element "K" super-block types Q4_K, Q5_K, Q6_K and the activation type Q8_K.
 *
 * Layouts (blocks.h; byte diagrams in docs/FORMATS.md):
 *  - Q4_K: fp16 d, fp16 dmin, 12 bytes of eight packed (6-bit scale, 6-bit min) pairs, qs[128].
 *    Sub-block j (32 elements) decodes as d*sc[j]*q - dmin*m[j]. Byte qs[32c+l] holds element
 *    64c+l in its low nibble (sub-block 2c) and element 64c+32+l in its high nibble (2c+1).
 *  - Q5_K: as Q4_K plus qh[32]: bit 2c of qh[l] is the fifth bit of element 64c+l, bit 2c+1 that of
 *    element 64c+32+l.
 *  - Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16] (one per 16 elements), fp16 d
 *    last. Within 128-element half h, element l+32r (r = 0..3, l = 0..31) takes its low bits from
 *    ql[64h + l + 32(r&1)] (low nibble for r<2, high for r>=2) and its high bits from bits 2r..2r+1
 *    of qh[32h + l]; value d*scales[(128h + l + 32r)/16]*(q-32).
 *  - Q8_K: f32 d, int8 qs[256], int16 bsums[16] (sums of 16 codes each, for the dot kernels).
 *
 * Quantizers reproduce llama.cpp's quantize_row_*_ref byte for byte, so every float operation
 * below is done in llama.cpp's order and precision (f32, no fused multiply-add, left to right);
 * reordering a sum changes its rounding and, now and then, a code.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "formats/blocks.h"
#include "formats/codes.h"
#include "formats/q_k.h"
#include "nibble.h"

/* Below this magnitude llama.cpp treats a group as all zero (its GROUP_MAX_EPS). */
#define ZERO_GROUP_EPS 1e-15f

/*
 * llama.cpp's nearest_int: adding 1.5*2^23 leaves a float whose unit in the last place is 1, so the
 * FPU's round-to-nearest-even rounds the value to an integer that then sits in the low mantissa
 * bits. Valid for |f| < 2^22; outside that the result is garbage in the same way as llama.cpp's,
 * which is what byte-identical output needs.
 */
static inline int round_half_even(float f) {
    uint32_t bits = nb_f32_bits(f + 12582912.0f);
    return (int)(bits & 0x7FFFFF) - 0x400000;
}

static inline int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/*
 * Fit x ~ scale*L + min with L in 0..nmax and min <= 0, minimising sum w*(scale*L+min-x)^2
 * (llama.cpp's make_qkx2_quants without the absolute-error option). Starts from the plain
 * min/max grid, then tries nstep+1 stretched grids (inverse scale (nmax + rmin + rdelta*is)/range),
 * solving the weighted least-squares (scale, min) for each grid's codes and keeping the best.
 * Returns the scale; stores -min (a non-negative offset) in *neg_min and the codes in L.
 */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *neg_min,
                           float rmin, float rdelta, int nstep) {
    uint8_t trial[32];
    float lo = x[0], hi = x[0];
    float sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0; /* the offset only ever subtracts */
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *neg_min = -lo;
        return 0.0f;
    }
    float iscale = nmax / (hi - lo);
    float scale = 1 / iscale;
    float best_err = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clamp_int(round_half_even(iscale * (x[i] - lo)), 0, nmax);
        float diff = scale * L[i] + lo - x[i];
        best_err += w[i] * (diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(round_half_even(iscale * (x[i] - lo)), 0, nmax);
            trial[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float det = sum_w * sum_l2 - sum_l * sum_l;
        if (!(det > 0)) continue;
        float s = (sum_w * sum_xl - sum_x * sum_l) / det;
        float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (m > 0) { /* a positive offset is not representable: refit the scale alone */
            m = 0;
            s = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = s * trial[i] + m - x[i];
            err += w[i] * (diff * diff);
        }
        if (err < best_err) {
            memcpy(L, trial, (size_t)n);
            best_err = err;
            scale = s;
            lo = m;
        }
    }
    *neg_min = -lo;
    return scale;
}

/*
 * Symmetric fit for Q6_K (llama.cpp's make_qx_quants with weights x^2): codes in -nmax..nmax-1
 * stored as L+nmax. Starts from the grid that maps the largest-magnitude element to -nmax, then
 * tries inverse scales -(nmax + 0.1*is)/max for is = -9..9 and keeps the one with the highest
 * (sum w*x*l)^2 / (sum w*l^2), i.e. the least weighted squared error at its optimal scale.
 */
static float fit_scale_symmetric(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    if (amax < ZERO_GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clamp_int(round_half_even(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clamp_int(round_half_even(iscale * x[i]), -nmax, nmax - 1);
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clamp_int(round_half_even(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/*
 * Shared body of Q4_K and Q5_K: fit each 32-element sub-block (weights sqrt(mean x^2) + |x|, or the
 * caller's wts[256] when given),
 * quantize the eight scales and eight offsets to 6 bits against their maxima (d = max/63), pack them
 * into the 12 bytes, then recompute every code against the fp16-rounded d*sc and dmin*m that a
 * decoder will see. Codes of a sub-block whose scale rounds to 0 keep their fitted values.
 */
static void k_scales_and_codes(const float *x, const float *wts, int nmax, float rmin, float rdelta, int nstep,
                               uint16_t *d_out, uint16_t *dmin_out, uint8_t *packed, uint8_t *L) {
    float scales[8], mins[8], w[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        if (wts) {
            memcpy(w, wts + 32 * j, sizeof w);
        } else {
            float sum_x2 = 0;
            for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
            float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xs[l]);
        }
        scales[j] = fit_scale_min(32, nmax, xs, w, L + 32 * j, &mins[j], rmin, rdelta, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; j++) {
        /* llama.cpp stores the rounded value in a uint8_t before capping: keep that wrap. */
        uint8_t ls = (uint8_t)round_half_even(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)round_half_even(inv_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else { /* low 4 bits in byte j+4, top 2 bits in the spare bits 6-7 of bytes j-4 and j */
            packed[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            packed[j - 4] |= (uint8_t)((ls >> 4) << 6);
            packed[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = nb_fp32_to_fp16(max_scale / 63.f);
    *dmin_out = nb_fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        nb_k_scale_min(j, packed, &sc, &m);
        const float d = nb_fp16_to_fp32(*d_out) * sc;
        if (d == 0) continue;
        const float dm = nb_fp16_to_fp32(*dmin_out) * m;
        for (int i = 0; i < 32; i++) L[32 * j + i] = (uint8_t)clamp_int(round_half_even((x[32 * j + i] + dm) / d), 0, nmax);
    }
}

void nb_q4_k_quantize_block_w(const float *x, const float *w, void *block, float rmin, float rdelta, int nstep) {
    nb_block_q4_k *b = block;
    uint8_t L[NB_QK_K];
    k_scales_and_codes(x, w, 15, rmin, rdelta, nstep, &b->d, &b->dmin, b->scales, L);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) b->qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
}

void nb_q4_k_quantize_ref(const float *x, void *y, int64_t k) {
    nb_block_q4_k *b = y;
    for (int64_t i = 0; i < k / NB_QK_K; i++, x += NB_QK_K) nb_q4_k_quantize_block_w(x, NULL, &b[i], -1.0f, 0.1f, 20);
}

void nb_q4_k_dequantize(const void *x, float *y, int64_t k) {
    const nb_block_q4_k *b = x;
    for (int64_t i = 0; i < k / NB_QK_K; i++) {
        const float d = nb_fp16_to_fp32(b[i].d), dmin = nb_fp16_to_fp32(b[i].dmin);
        for (int c = 0; c < 4; c++) {
            uint8_t sc, m;
            nb_k_scale_min(2 * c, b[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            nb_k_scale_min(2 * c + 1, b[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            const uint8_t *q = b[i].qs + 32 * c;
            for (int l = 0; l < 32; l++) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

void nb_q5_k_quantize_ref(const float *x, void *y, int64_t k) {
    nb_block_q5_k *b = y;
    uint8_t L[NB_QK_K];
    for (int64_t i = 0; i < k / NB_QK_K; i++, x += NB_QK_K) {
        k_scales_and_codes(x, NULL, 31, -0.5f, 0.1f, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                uint8_t lo = L[64 * c + l], hi = L[64 * c + 32 + l];
                b[i].qs[32 * c + l] = (uint8_t)((lo & 0xF) | ((hi & 0xF) << 4));
                b[i].qh[l] |= (uint8_t)(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
            }
        }
    }
}

void nb_q5_k_dequantize(const void *x, float *y, int64_t k) {
    const nb_block_q5_k *b = x;
    for (int64_t i = 0; i < k / NB_QK_K; i++) {
        const float d = nb_fp16_to_fp32(b[i].d), dmin = nb_fp16_to_fp32(b[i].dmin);
        for (int c = 0; c < 4; c++) {
            uint8_t sc, m;
            nb_k_scale_min(2 * c, b[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            nb_k_scale_min(2 * c + 1, b[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = dmin * m;
            const uint8_t *q = b[i].qs + 32 * c;
            for (int l = 0; l < 32; l++) *y++ = d1 * ((q[l] & 0xF) | ((b[i].qh[l] >> (2 * c)) & 1) << 4) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((q[l] >> 4) | ((b[i].qh[l] >> (2 * c + 1)) & 1) << 4) - m2;
        }
    }
}

void nb_q6_k_quantize_ref(const float *x, void *y, int64_t k) {
    nb_block_q6_k *b = y;
    int8_t L[NB_QK_K];
    float scales[NB_QK_K / 16];
    for (int64_t i = 0; i < k / NB_QK_K; i++, x += NB_QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int s = 0; s < NB_QK_K / 16; s++) {
            scales[s] = fit_scale_symmetric(16, 32, x + 16 * s, L + 16 * s);
            if (fabsf(scales[s]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[s]);
                max_scale = scales[s];
            }
        }
        if (max_abs_scale < ZERO_GROUP_EPS) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        /* The largest scale maps to -128 so that its sign is absorbed and +127 never overflows. */
        const float iscale = -128.f / max_scale;
        b[i].d = nb_fp32_to_fp16(1 / iscale);
        for (int s = 0; s < NB_QK_K / 16; s++) {
            int q = round_half_even(iscale * scales[s]);
            b[i].scales[s] = (int8_t)(q < 127 ? q : 127);
        }
        for (int s = 0; s < NB_QK_K / 16; s++) {
            const float d = nb_fp16_to_fp32(b[i].d) * b[i].scales[s];
            if (d == 0) continue;
            for (int l = 0; l < 16; l++)
                L[16 * s + l] = (int8_t)(clamp_int(round_half_even(x[16 * s + l] / d), -32, 31) + 32);
        }
        for (int h = 0; h < 2; h++) {
            const int8_t *Lh = L + 128 * h;
            uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0xF) | (Lh[l + 64] & 0xF) << 4);
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | (Lh[l + 96] & 0xF) << 4);
                qh[l] = (uint8_t)((Lh[l] >> 4) | (Lh[l + 32] >> 4) << 2 | (Lh[l + 64] >> 4) << 4 | (Lh[l + 96] >> 4) << 6);
            }
        }
    }
}

void nb_q6_k_dequantize(const void *x, float *y, int64_t k) {
    const nb_block_q6_k *b = x;
    for (int64_t i = 0; i < k / NB_QK_K; i++) {
        const float d = nb_fp16_to_fp32(b[i].d);
        for (int h = 0; h < 2; h++, y += 128) {
            const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            const int8_t *sc = b[i].scales + 8 * h;
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

/*
 * Q8_K (activations): the signed element of largest magnitude maps to -127, codes are
 * round-half-even and capped at 127, d = 1/iscale kept in f32. An all-zero block gets d = 0 and
 * zero codes; llama.cpp leaves its bsums unwritten there, nibble writes zeros (their true value).
 */
void nb_q8_k_quantize_ref(const float *x, void *y, int64_t k) {
    nb_block_q8_k *b = y;
    for (int64_t i = 0; i < k / NB_QK_K; i++, x += NB_QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < NB_QK_K; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        if (amax == 0) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < NB_QK_K; j++) {
            int v = round_half_even(iscale * x[j]);
            b[i].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int s = 0; s < NB_QK_K / 16; s++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += b[i].qs[16 * s + l];
            b[i].bsums[s] = (int16_t)sum;
        }
        b[i].d = 1 / iscale;
    }
}

void nb_q8_k_dequantize(const void *x, float *y, int64_t k) {
    const nb_block_q8_k *b = x;
    for (int64_t i = 0; i < k / NB_QK_K; i++)
        for (int j = 0; j < NB_QK_K; j++) *y++ = b[i].d * b[i].qs[j];
}
