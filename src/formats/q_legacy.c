/*
 * q_legacy.c: the 32-element block types Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1.
 *
 * Layouts (blocks.h): Q4_0 = fp16 d, qs[16] where byte j holds element j in its low nibble and
 * element j+16 in its high nibble, value (q-8)*d. Q5_0 = fp16 d, qh[4] (a little-endian u32 whose
 * bit j is the fifth bit of element j), qs[16] as Q4_0, value (q-16)*d. Q8_0 = fp16 d, int8
 * qs[32], value q*d. Q4_1 and Q5_1 = fp16 d, fp16 m, then Q4_0's or Q5_0's codes, value q*d + m.
 * Q8_1 = fp16 d, fp16 s = d*(sum of the codes), Q8_0's codes (ggml's activation type for Q4_1 and
 * Q5_1; ggml has no dequantizer for it: here q*d).
 *
 * Quantizers follow llama.cpp's quantize_row_*_ref:
 *  - Q4_0/Q5_0: d = m / -8 (or / -16), where m is the signed element of largest magnitude (the
 *    first one on a tie), so that m itself lands on code 0; code = trunc(x/d + 8.5) (+16.5),
 *    capped at 15 (31). The reciprocal 1/d is taken once and multiplied, as llama.cpp does.
 *  - Q4_1/Q5_1: d = (max - min) / 15 (31), m = min; code = trunc((x - min)/d + 0.5), Q4_1's capped
 *    at 15, Q5_1's not capped (llama.cpp keeps its low 5 bits).
 *  - Q8_0/Q8_1: d = amax/127; code = roundf(x/d) (ties away from zero); Q8_1's s = fp16(sum * d).
 * d is rounded to fp16 for storage, but the codes use the unrounded f32 d, as in llama.cpp.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "formats/blocks.h"
#include "nibble.h"

/*
 * llama.cpp turns a float into a code with a plain (int8_t) cast. On x86 the compiler truncates to
 * 32 bits (out-of-range and NaN give 0x80000000) and keeps the low byte. In range this is C's
 * truncation; it matters only when d is so small (|amax| below ~2^-120) that 1/d overflows or is
 * inexact, and reproducing it keeps such blocks byte-identical too.
 */
static inline int8_t trunc_to_i8(float v) {
    int32_t t = (v > -2147483648.0f && v < 2147483648.0f) ? (int32_t)v : INT32_MIN;
    return (int8_t)(uint8_t)((uint32_t)t & 0xFF);
}

/* The element of largest magnitude, with its sign; the first wins a tie. */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

/* The smallest and the largest element. */
static void min_max(const float *x, int n, float *mn, float *mx) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo, *mx = hi;
}

/* Q5_0's and Q5_1's qh field, a little-endian u32. */
static void store_qh(uint8_t qh[4], uint32_t v) {
    const uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    memcpy(qh, le, 4);
}

static uint32_t load_qh(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

/* The 32 five-bit codes of a Q5_0 or Q5_1 block, in element order. */
static void codes5(const uint8_t qs[16], uint32_t qh, int q[32]) {
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
        q[j + 16] = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
    }
}

void nb_q4_0_quantize_ref(const float *x, void *y, int64_t k) {
    nb_block_q4_0 *b = y;
    for (int64_t i = 0; i < k / NB_QK4_0; i++, x += NB_QK4_0) {
        const float d = signed_absmax(x, NB_QK4_0) / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = nb_fp32_to_fp16(d);
        for (int j = 0; j < NB_QK4_0 / 2; j++) {
            int lo = trunc_to_i8(x[j] * id + 8.5f), hi = trunc_to_i8(x[j + NB_QK4_0 / 2] * id + 8.5f);
            uint8_t q0 = (uint8_t)(lo < 15 ? lo : 15), q1 = (uint8_t)(hi < 15 ? hi : 15);
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void nb_q4_0_dequantize(const void *x, float *y, int64_t k) {
    const nb_block_q4_0 *b = x;
    for (int64_t i = 0; i < k / NB_QK4_0; i++, y += NB_QK4_0) {
        const float d = nb_fp16_to_fp32(b[i].d);
        for (int j = 0; j < NB_QK4_0 / 2; j++) {
            y[j] = ((b[i].qs[j] & 0xF) - 8) * d;
            y[j + NB_QK4_0 / 2] = ((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void nb_q5_0_quantize_ref(const float *x, void *y, int64_t k) {
    nb_block_q5_0 *b = y;
    for (int64_t i = 0; i < k / NB_QK5_0; i++, x += NB_QK5_0) {
        const float d = signed_absmax(x, NB_QK5_0) / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = nb_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < NB_QK5_0 / 2; j++) {
            int lo = trunc_to_i8(x[j] * id + 16.5f), hi = trunc_to_i8(x[j + NB_QK5_0 / 2] * id + 16.5f);
            uint8_t q0 = (uint8_t)(lo < 31 ? lo : 31), q1 = (uint8_t)(hi < 31 ? hi : 31);
            b[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)((q0 >> 4) & 1) << j;
            qh |= (uint32_t)((q1 >> 4) & 1) << (j + NB_QK5_0 / 2);
        }
        store_qh(b[i].qh, qh);
    }
}

void nb_q5_0_dequantize(const void *x, float *y, int64_t k) {
    const nb_block_q5_0 *b = x;
    for (int64_t i = 0; i < k / NB_QK5_0; i++, y += NB_QK5_0) {
        const float d = nb_fp16_to_fp32(b[i].d);
        int q[NB_QK5_0];
        codes5(b[i].qs, load_qh(b[i].qh), q);
        for (int j = 0; j < NB_QK5_0; j++) y[j] = (q[j] - 16) * d;
    }
}

void nb_q8_0_quantize_ref(const float *x, void *y, int64_t k) {
    nb_block_q8_0 *b = y;
    for (int64_t i = 0; i < k / NB_QK8_0; i++, x += NB_QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < NB_QK8_0; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = nb_fp32_to_fp16(d);
        for (int j = 0; j < NB_QK8_0; j++) b[i].qs[j] = trunc_to_i8(roundf(x[j] * id));
    }
}

void nb_q8_0_dequantize(const void *x, float *y, int64_t k) {
    const nb_block_q8_0 *b = x;
    for (int64_t i = 0; i < k / NB_QK8_0; i++, y += NB_QK8_0) {
        const float d = nb_fp16_to_fp32(b[i].d);
        for (int j = 0; j < NB_QK8_0; j++) y[j] = b[i].qs[j] * d;
    }
}

void nb_q4_1_quantize_ref(const float *x, void *y, int64_t k) {
    nb_block_q4_1 *b = y;
    for (int64_t i = 0; i < k / NB_QK4_1; i++, x += NB_QK4_1) {
        float min, max;
        min_max(x, NB_QK4_1, &min, &max);
        const float d = (max - min) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = nb_fp32_to_fp16(d);
        b[i].m = nb_fp32_to_fp16(min);
        for (int j = 0; j < NB_QK4_1 / 2; j++) {
            int lo = trunc_to_i8((x[j] - min) * id + 0.5f), hi = trunc_to_i8((x[j + NB_QK4_1 / 2] - min) * id + 0.5f);
            uint8_t q0 = (uint8_t)(lo < 15 ? lo : 15), q1 = (uint8_t)(hi < 15 ? hi : 15);
            b[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void nb_q4_1_dequantize(const void *x, float *y, int64_t k) {
    const nb_block_q4_1 *b = x;
    for (int64_t i = 0; i < k / NB_QK4_1; i++, y += NB_QK4_1) {
        const float d = nb_fp16_to_fp32(b[i].d), m = nb_fp16_to_fp32(b[i].m);
        for (int j = 0; j < NB_QK4_1 / 2; j++) {
            y[j] = (b[i].qs[j] & 0xF) * d + m;
            y[j + NB_QK4_1 / 2] = (b[i].qs[j] >> 4) * d + m;
        }
    }
}

void nb_q5_1_quantize_ref(const float *x, void *y, int64_t k) {
    nb_block_q5_1 *b = y;
    for (int64_t i = 0; i < k / NB_QK5_1; i++, x += NB_QK5_1) {
        float min, max;
        min_max(x, NB_QK5_1, &min, &max);
        const float d = (max - min) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = nb_fp32_to_fp16(d);
        b[i].m = nb_fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < NB_QK5_1 / 2; j++) {
            uint8_t q0 = (uint8_t)trunc_to_i8((x[j] - min) * id + 0.5f);
            uint8_t q1 = (uint8_t)trunc_to_i8((x[j + NB_QK5_1 / 2] - min) * id + 0.5f);
            b[i].qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)((q0 >> 4) & 1) << j;
            qh |= (uint32_t)((q1 >> 4) & 1) << (j + NB_QK5_1 / 2);
        }
        store_qh(b[i].qh, qh);
    }
}

void nb_q5_1_dequantize(const void *x, float *y, int64_t k) {
    const nb_block_q5_1 *b = x;
    for (int64_t i = 0; i < k / NB_QK5_1; i++, y += NB_QK5_1) {
        const float d = nb_fp16_to_fp32(b[i].d), m = nb_fp16_to_fp32(b[i].m);
        int q[NB_QK5_1];
        codes5(b[i].qs, load_qh(b[i].qh), q);
        for (int j = 0; j < NB_QK5_1; j++) y[j] = q[j] * d + m;
    }
}

void nb_q8_1_quantize_ref(const float *x, void *y, int64_t k) {
    nb_block_q8_1 *b = y;
    for (int64_t i = 0; i < k / NB_QK8_1; i++, x += NB_QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < NB_QK8_1; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        int sum = 0;
        for (int j = 0; j < NB_QK8_1; j++) sum += b[i].qs[j] = trunc_to_i8(roundf(x[j] * id));
        b[i].d = nb_fp32_to_fp16(d);
        b[i].s = nb_fp32_to_fp16((float)sum * d);
    }
}

void nb_q8_1_dequantize(const void *x, float *y, int64_t k) {
    const nb_block_q8_1 *b = x;
    for (int64_t i = 0; i < k / NB_QK8_1; i++, y += NB_QK8_1) {
        const float d = nb_fp16_to_fp32(b[i].d);
        for (int j = 0; j < NB_QK8_1; j++) y[j] = b[i].qs[j] * d;
    }
}
