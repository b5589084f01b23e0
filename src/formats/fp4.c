/*
 * fp4.c: the E2M1 block types MXFP4 and NVFP4, and two optional quantizers for them.
 *
 * Layouts (blocks.h; byte diagrams in docs/FORMATS.md):
 *  - MXFP4, 32 elements, 17 bytes: E8M0 scale e, then qs[16]; byte j holds element j in its low
 *    nibble and element j+16 in its high nibble. Value = E2M1(code) * 2^(e-127).
 *  - NVFP4, 64 elements, 36 bytes: four UE4M3 scales d[s], one per 16 elements, then qs[32]; byte
 *    8s+j holds element 16s+j (low nibble) and element 16s+j+8 (high nibble), so each 16-element
 *    sub-block splits into two halves of 8. Value = E2M1(code) * UE4M3(d[s]) (times an optional
 *    per-tensor factor kept outside the block).
 * Decoding follows ggml: the E2M1 values are kept doubled (nb_e2m1_doubled) and the scale halved,
 * which gives the same products exactly; ggml decodes UE4M3 0x7F as 0, not NaN.
 *
 * Reference quantizers (llama.cpp's): MXFP4 takes e = floor(log2(amax)) - 2 + 127 (0 for an all-zero
 * block), NVFP4 takes d = ggml's UE4M3 encode of amax16/6; each element then takes the nearest of
 * the 16 codes, the lowest code index winning a tie.
 *
 * Options (not the reference rules; any MXFP4/NVFP4 decoder reads their output):
 *  - nb_quantize_mxfp4_roundup: the scale is rounded up so that the block maximum never clips.
 *  - nb_quantize_nvfp4_2level: NVIDIA's two-level recipe with a per-tensor factor (_amax: the
 *    tensor's maximum given, for a tensor quantized row by row; its scale and block encoder are
 *    fp4.h's, which the converter and explain's compare call as they go).
 */
#include <float.h>
#include <math.h>

#include "base/error.h"
#include "formats/blocks.h"
#include "formats/codes.h"
#include "formats/fp4.h"
#include "formats/types.h"

/* Index of the code whose value (doubled E2M1 times the halved scale d) is nearest to x; a tie
 * goes to the lower index, so -0 (index 8) is never chosen over +0. ggml's rule, kept apart from
 * nb_e2m1_round on purpose: it compares float differences |code*d - x| (which round) rather than
 * rounding the quotient x/d, and llama.cpp's files are reproduced byte for byte by exactly this. */
static uint8_t nearest_code(float x, float d) {
    int best = 0;
    float best_err = fabsf(nb_e2m1_doubled[0] * d - x);
    for (int i = 1; i < 16; i++) {
        float err = fabsf(nb_e2m1_doubled[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return (uint8_t)best;
}

static float block_absmax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) amax = fabsf(x[j]);
    return amax;
}

/* ---------------------------------------------------------------- MXFP4 */

void nb_mxfp4_quantize_ref(const float *x, void *y, int64_t k) {
    nb_block_mxfp4 *b = y;
    for (int64_t i = 0; i < k / NB_QK_MXFP4; i++, x += NB_QK_MXFP4) {
        const float amax = block_absmax(x, NB_QK_MXFP4);
        /* floor(log2(amax)) is in -149..127, so the int conversion is exact; below amax ~ 2^-125 the
         * exponent goes negative and llama.cpp's (uint8_t) cast wraps it, which the uint8_t
         * conversion of the int reproduces. */
        const uint8_t e = amax > 0.0f ? (uint8_t)(int)(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = nb_e8m0_to_fp32_half(e);
        b[i].e = e;
        for (int j = 0; j < NB_QK_MXFP4 / 2; j++)
            b[i].qs[j] = (uint8_t)(nearest_code(x[j], d) | nearest_code(x[j + NB_QK_MXFP4 / 2], d) << 4);
    }
}

void nb_mxfp4_dequantize(const void *x, float *y, int64_t k) {
    const nb_block_mxfp4 *b = x;
    for (int64_t i = 0; i < k / NB_QK_MXFP4; i++, y += NB_QK_MXFP4) {
        const float d = nb_e8m0_to_fp32_half(b[i].e);
        for (int j = 0; j < NB_QK_MXFP4 / 2; j++) {
            y[j] = nb_e2m1_doubled[b[i].qs[j] & 0xF] * d;
            y[j + NB_QK_MXFP4 / 2] = nb_e2m1_doubled[b[i].qs[j] >> 4] * d;
        }
    }
}

/*
 * Round-up rule: the smallest power of two 2^E with 6*2^E >= amax, so amax/2^E <= 6 and nothing is
 * clipped. With amax = m*2^ex (frexpf, m in [0.5,1)), 6*2^(ex-3) = 0.75*2^ex covers amax exactly
 * when m <= 0.75, otherwise 6*2^(ex-2) = 1.5*2^ex does; no log2f, so no rounding doubt. E + 127 is
 * clamped to 0..254 (255 is NaN); for finite input it never exceeds 253. Elements take the E2M1
 * code nearest to x/2^E, ties to even (nb_fp32_to_e2m1).
 */
static void mxfp4_roundup_block(const float *x, nb_block_mxfp4 *b) {
    const float amax = block_absmax(x, NB_QK_MXFP4);
    int e = 0;
    if (amax > 0.0f) {
        int ex;
        const float m = frexpf(amax, &ex);
        e = (m <= 0.75f ? ex - 3 : ex - 2) + 127;
        e = e < 0 ? 0 : e > 254 ? 254 : e;
    }
    b->e = (uint8_t)e;
    for (int j = 0; j < NB_QK_MXFP4 / 2; j++) {
        uint8_t lo = nb_fp32_to_e2m1(ldexpf(x[j], 127 - e));
        uint8_t hi = nb_fp32_to_e2m1(ldexpf(x[j + NB_QK_MXFP4 / 2], 127 - e));
        b->qs[j] = (uint8_t)(lo | hi << 4);
    }
}

nb_status nb_quantize_mxfp4_roundup(const float *x, void *dst, int64_t n) {
    nb_status s = nb_quantize_check("quantize (round-up)", NB_TYPE_MXFP4, x, dst, n, NULL);
    if (s) return s;
    nb_block_mxfp4 *b = dst;
    for (int64_t i = 0; i < n / NB_QK_MXFP4; i++) mxfp4_roundup_block(x + i * NB_QK_MXFP4, &b[i]);
    return NB_OK;
}

/* ---------------------------------------------------------------- NVFP4 */

void nb_nvfp4_quantize_ref(const float *x, void *y, int64_t k) {
    nb_block_nvfp4 *b = y;
    for (int64_t i = 0; i < k / NB_QK_NVFP4; i++) {
        for (int s = 0; s < NB_QK_NVFP4 / NB_QK_NVFP4_SUB; s++) {
            const float *xs = x + i * NB_QK_NVFP4 + s * NB_QK_NVFP4_SUB;
            const uint8_t code = nb_fp32_to_ue4m3_ggml(block_absmax(xs, NB_QK_NVFP4_SUB) / 6.0f);
            const float d = nb_ue4m3_to_fp32_half(code);
            b[i].d[s] = code;
            for (int j = 0; j < NB_QK_NVFP4_SUB / 2; j++)
                b[i].qs[8 * s + j] = (uint8_t)(nearest_code(xs[j], d) | nearest_code(xs[j + 8], d) << 4);
        }
    }
}

void nb_nvfp4_dequantize(const void *x, float *y, int64_t k) {
    const nb_block_nvfp4 *b = x;
    for (int64_t i = 0; i < k / NB_QK_NVFP4; i++) {
        for (int s = 0; s < NB_QK_NVFP4 / NB_QK_NVFP4_SUB; s++, y += NB_QK_NVFP4_SUB) {
            const float d = nb_ue4m3_to_fp32_half(b[i].d[s]);
            for (int j = 0; j < NB_QK_NVFP4_SUB / 2; j++) {
                y[j] = nb_e2m1_doubled[b[i].qs[8 * s + j] & 0xF] * d;
                y[j + 8] = nb_e2m1_doubled[b[i].qs[8 * s + j] >> 4] * d;
            }
        }
    }
}

/*
 * NVIDIA's two-level recipe: S = 448*6/amax(tensor) maps the tensor maximum to the largest
 * block scale (448) times the largest element (6), so every block scale amax16*S/6 lies in the
 * UE4M3 range and its 3 mantissa bits are spent on the block's size relative to the tensor, not
 * on its absolute size. Block scale = UE4M3 RNE (saturating) of amax16*S/6; elements = E2M1 RNE
 * (saturating at 6) of x/(scale/S). The caller multiplies decoded values by 1/S. S is capped at
 * FLT_MAX for tensors whose maximum is below ~8e-36, where 2688/amax would overflow.
 */
nb_status nb_quantize_nvfp4_2level(const float *x, void *dst, int64_t n, float *tensor_scale) {
    nb_status s = nb_quantize_check("quantize (two-level)", NB_TYPE_NVFP4, x, dst, n, NULL);
    if (s) return s;
    float amax = 0.0f;
    for (int64_t i = 0; i < n; i++)
        if (amax < fabsf(x[i])) amax = fabsf(x[i]);
    return nb_quantize_nvfp4_2level_amax(x, dst, n, amax, tensor_scale);
}

nb_status nb_quantize_nvfp4_2level_amax(const float *x, void *dst, int64_t n, float amax, float *tensor_scale) {
    nb_status s = nb_quantize_check("quantize (two-level)", NB_TYPE_NVFP4, x, dst, n, NULL);
    if (s) return s;
    if (!tensor_scale) return nb_fail(NB_ERR_INVALID_ARG, "quantize (two-level) nvfp4: tensor_scale is NULL");
    float S;
    if ((s = nb_nvfp4_2level_scale(amax, &S))) return s;
    for (int64_t i = 0; i < n; i++)
        if (fabsf(x[i]) > amax)
            return nb_fail(NB_ERR_INVALID_ARG, "quantize (two-level) nvfp4: |x[%lld]| = %g exceeds the tensor maximum %g",
                           (long long)i, fabsf(x[i]), amax);
    nb_nvfp4_2level_encode(x, dst, n, S);
    *tensor_scale = 1.0f / S;
    return NB_OK;
}

nb_status nb_nvfp4_2level_scale(float amax, float *S) {
    *S = amax > 0.0f ? 448.0f * 6.0f / amax : 1.0f;
    if (*S > FLT_MAX) *S = FLT_MAX;
    if (!(amax >= 0.0f) || !isfinite(amax))
        return nb_fail(NB_ERR_INVALID_ARG, "quantize (two-level) nvfp4: tensor maximum %g is not a finite |x|", amax);
    return NB_OK;
}

void nb_nvfp4_2level_encode(const float *x, void *dst, int64_t n, float S) {
    nb_block_nvfp4 *b = dst;
    for (int64_t i = 0; i < n / NB_QK_NVFP4; i++) {
        for (int sb = 0; sb < NB_QK_NVFP4 / NB_QK_NVFP4_SUB; sb++) {
            const float *xs = x + i * NB_QK_NVFP4 + sb * NB_QK_NVFP4_SUB;
            const uint8_t code = nb_fp32_to_ue4m3(block_absmax(xs, NB_QK_NVFP4_SUB) * S / 6.0f);
            const float step = nb_ue4m3_to_fp32(code) / S; /* the decoded size of one E2M1 unit */
            b[i].d[sb] = code;
            for (int j = 0; j < NB_QK_NVFP4_SUB / 2; j++) {
                uint8_t lo = step > 0.0f ? nb_fp32_to_e2m1(xs[j] / step) : 0;
                uint8_t hi = step > 0.0f ? nb_fp32_to_e2m1(xs[j + 8] / step) : 0;
                b[i].qs[8 * sb + j] = (uint8_t)(lo | hi << 4);
            }
        }
    }
}
