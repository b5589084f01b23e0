/*
 * q_legacy.c: the 32-element block types Q4_0, Q5_0 and Q8_0.
 *
 * Layouts (blocks.h): Q4_0 = fp16 d, qs[16] where byte j holds element j in its low nibble and
 * element j+16 in its high nibble, value (q-8)*d. Q5_0 = fp16 d, qh[4] (a little-endian u32 whose
 * bit j is the fifth bit of element j), qs[16] as Q4_0, value (q-16)*d. Q8_0 = fp16 d, int8
 * qs[32], value q*d.
 *
 * Quantizers follow llama.cpp's quantize_row_*_ref:
 *  - Q4_0/Q5_0: d = m / -8 (or / -16), where m is the signed element of largest magnitude (the
 *    first one on a tie), so that m itself lands on code 0; code = trunc(x/d + 8.5) (+16.5),
 *    capped at 15 (31). The reciprocal 1/d is taken once and multiplied, as llama.cpp does.
 *  - Q8_0: d = amax/127; code = roundf(x/d) (ties away from zero).
 * d is rounded to fp16 for storage, but the codes use the unrounded f32 d, as in llama.cpp.
 */
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
        uint8_t le[4] = {(uint8_t)qh, (uint8_t)(qh >> 8), (uint8_t)(qh >> 16), (uint8_t)(qh >> 24)};
        memcpy(b[i].qh, le, 4);
    }
}

void nb_q5_0_dequantize(const void *x, float *y, int64_t k) {
    const nb_block_q5_0 *b = x;
    for (int64_t i = 0; i < k / NB_QK5_0; i++, y += NB_QK5_0) {
        const float d = nb_fp16_to_fp32(b[i].d);
        const uint32_t qh = (uint32_t)b[i].qh[0] | (uint32_t)b[i].qh[1] << 8 | (uint32_t)b[i].qh[2] << 16 |
                            (uint32_t)b[i].qh[3] << 24;
        for (int j = 0; j < NB_QK5_0 / 2; j++) {
            int q0 = (b[i].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            int q1 = (b[i].qs[j] >> 4) | (int)((qh >> (j + NB_QK5_0 / 2)) & 1) << 4;
            y[j] = (q0 - 16) * d;
            y[j + NB_QK5_0 / 2] = (q1 - 16) * d;
        }
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
