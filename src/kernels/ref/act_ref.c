/*
 * act_ref.c: the scalar reference activation quantizers (the definition every ISA's version must
 * match byte for byte; rules in kernels.h and docs/KERNELS.md).
 *
 * Q8_0 follows llama.cpp's x86 runtime quantizer, not its file quantizer: d = amax/127 stored as
 * fp16 (nearest-even), codes = nearest-even(x * (127/amax)) with 127/amax formed once per block
 * (the file rule rounds half away from zero and multiplies by 1/d). The conversion to bytes
 * mirrors what vcvtps2dq + signed saturating packs do, so that even a block whose multiplier
 * overflows (amax below ~4e-37: x*id is inf or NaN, the "integer indefinite" 0x80000000 packs to
 * -128) gives the bytes the SIMD version gives. Q8_K is llama.cpp's quantize_row_q8_K_ref, which
 * nibble's file codec already reproduces (x86 llama.cpp uses the reference there too).
 * Q8_1 is the Q8_0 rule plus s (kernels.h); NB_ACT_Q8_0X is the Q8_0 rule plus its derived values.
 */
#include <math.h>
#include <string.h>

#include "formats/blocks.h"
#include "formats/codes.h"
#include "kernels/kernels.h"

/* v already rounded to an integer value (or not finite): the byte vcvtps2dq + packs would give. */
static int8_t to_i8_x86(float v) {
    if (!(v >= -2147483648.0f && v < 2147483648.0f)) return -128;
    return (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v);
}

void nb_act_q8_0_ref(const float *x, void *dst, int64_t n) {
    nb_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / NB_QK8_0; i++, x += NB_QK8_0) {
        float amax = 0;
        for (int j = 0; j < NB_QK8_0; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float id = amax != 0 ? 127.f / amax : 0;
        b[i].d = nb_fp32_to_fp16(amax / 127.f);
        for (int j = 0; j < NB_QK8_0; j++) b[i].qs[j] = to_i8_x86(rintf(x[j] * id)); /* rintf: nearest-even */
    }
}

/* Q8_1: Q8_0's codes and d, s = fp16(amax/127 * isum), isum the sum of vcvtps2dq's dwords: the
 * codes' sum (|x*id| <= 127 never saturates), but 0 when 127/amax overflows (every dword is then
 * INT32_MIN, and 32 of them wrap to 0). */
void nb_act_q8_1_ref(const float *x, void *dst, int64_t n) {
    nb_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / NB_QK8_1; i++, x += NB_QK8_1) {
        nb_block_q8_0 q;
        nb_act_q8_0_ref(x, &q, NB_QK8_1);
        float amax = 0;
        int sum = 0;
        for (int j = 0; j < NB_QK8_1; j++) amax = fmaxf(amax, fabsf(x[j]));
        for (int j = 0; j < NB_QK8_1; j++) sum += q.qs[j]; /* apart: GCC 12 for aarch64 crashes vectorizing both at once */
        if (isinf(127.f / amax)) sum = 0;
        memcpy(b[i].qs, q.qs, sizeof q.qs);
        b[i].d = q.d;
        b[i].s = nb_fp32_to_fp16(amax / 127.f * (float)sum);
    }
}

static void act_q8_0x_ref(const float *x, void *dst, int64_t n) {
    nb_block_q8_0x *o = dst;
    for (int64_t i = 0; i < n / NB_QK8_0; i++) {
        nb_block_q8_0 b;
        nb_act_q8_0_ref(x + i * NB_QK8_0, &b, NB_QK8_0);
        memcpy(o[i].qs, b.qs, sizeof b.qs);
        for (int k = 0; k < 8; k++) o[i].nc[k] = -128 * (b.qs[4 * k] + b.qs[4 * k + 1] + b.qs[4 * k + 2] + b.qs[4 * k + 3]);
        o[i].d = nb_fp16_to_fp32(b.d);
    }
}

static void round_f16_ref(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = nb_fp16_to_fp32(nb_fp32_to_fp16(x[i]));
}

static void to_f16_ref(const float *x, uint16_t *h, int64_t n) {
    for (int64_t i = 0; i < n; i++) h[i] = nb_fp32_to_fp16(x[i]);
}

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* e^x, one lane of ggml_v_expf: n = round(x*log2(e)) by the 1.5*2^23 shift, the remainder b = x -
 * n*ln2 in two parts, e^b - 1 ~ j(b), and the result (1 + j)*2^n, the power built in the exponent
 * bits; beyond |n| > 126 it is split in two factors so that it overflows or underflows as a
 * product would (|n| > 192: +inf or 0 outright). */
static float exp_ggml(float x) {
    if (x == -INFINITY) return 0.0f;
    const float r = 0x1.8p23f, z = fmaf(x, 0x1.715476p+0f, r), n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const uint32_t e = f32_bits(z) << 23;
    const float k = f32_from_bits(e + f32_bits(1.0f)), u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         0x1.ffffecp-1f * b);
    if (!(fabsf(n) > 126)) return fmaf(j, k, k);
    const uint32_t g = n <= 0 ? 0x82000000u : 0;
    const float s1 = f32_from_bits(g + 0x7f000000u), s2 = f32_from_bits(e - g);
    if (fabsf(n) > 192) return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

static double softmax_exp_ref(const float *x, float *y, int64_t n, float max) {
    double sum = 0;
    for (int64_t i = 0; i < n; i += 8) {
        float v[8] = {0};
        for (int l = 0; l < 8 && i + l < n; l++) y[i + l] = v[l] = exp_ggml(x[i + l] - max);
        sum += (double)nb_lane_sum(v);
    }
    return sum;
}

static float vec_max_ref(const float *x, int64_t n) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static void vec_scale_ref(float *x, int64_t n, float a) {
    for (int64_t i = 0; i < n; i++) x[i] *= a;
}

/* g = silu(g) * u as llama.cpp's x86 ggml_vec_swiglu_f32 (AVX2): x / (1 + e^-x), ggml's
 * exponential over whole 8s, libm's expf on the last n % 8. */
static void swiglu_ref(float *g, const float *u, int64_t n) {
    const int64_t n8 = n & ~(int64_t)7;
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i], e = i < n8 ? exp_ggml(0.0f - x) : expf(-x);
        g[i] = x / (1.0f + e) * u[i];
    }
}

static void rmsnorm_ref(float *y, const float *x, const float *w, int rows, int n, float eps) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * (size_t)n;
        float *yr = y + (size_t)r * (size_t)n;
        double sum = 0;
        for (int i = 0; i < n; i++) sum += (double)(xr[i] * xr[i]);
        const float scale = 1.0f / sqrtf((float)(sum / n) + eps);
        for (int i = 0; i < n; i++) yr[i] = (xr[i] * scale) * w[i];
    }
}

const nb_act_set nb_act_ref = {nb_act_q8_0_ref, nb_q8_k_quantize_ref, act_q8_0x_ref,  nb_act_q8_1_ref,
                               round_f16_ref,   to_f16_ref,           softmax_exp_ref, vec_max_ref,
                               vec_scale_ref,   swiglu_ref,           nb_geglu_ref,    rmsnorm_ref,
                               nb_attn_pv_ref,  nb_attn_qk_ref,       nb_rope_body,    "ref"};
