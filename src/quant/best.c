/*
 * best.c: the row quantizer of the converter: llama.cpp's reference codecs, and "best" searches
 * that spend the same bytes on less error.
 *
 * Every search works block by block (the blocks of a row are independent), builds the reference
 * block first and replaces it only with a candidate whose error sum imp_j*(decoded_j - x_j)^2 is
 * strictly lower, so a best row never has more (importance-weighted) squared error than the
 * reference row. imp is the imatrix's mean x^2 of the input column when given: that sum is then
 * the expected squared error the block adds to the matrix product's output.
 *  - MXFP4: the shared exponent rounded down (llama.cpp) or up (nothing clipped), per block.
 *  - NVFP4: for each 16-element sub-block, UE4M3 scale codes around the one mapping amax to 6 (+-2)
 *    and around the one mapping amax to 4 ("four over six": a finer grid near the maximum, +-1);
 *    elements take the nearest E2M1 value for each. Two-level NVFP4 searches the same way in its
 *    scaled domain.
 *  - Q4_K: llama.cpp's block fit re-run with other per-element weights (importance times
 *    sqrt(sigma^2 + x^2), as llama.cpp's imatrix path; importance times sqrt(mean x^2) + |x|) and
 *    a finer scale grid.
 */
#include <math.h>
#include <string.h>

#include "formats/blocks.h"
#include "formats/codes.h"
#include "formats/fp4.h"
#include "formats/q_k.h"
#include "formats/types.h"
#include "quant/quant.h"

static double wsse(const float *x, const float *y, const float *imp, int n, float scale) {
    double e = 0;
    for (int j = 0; j < n; j++) {
        double d = (double)y[j] * scale - x[j];
        e += (imp ? imp[j] : 1.0) * d * d;
    }
    return e;
}

double nb_quant_row_error(int type, const void *q, const float *x, const float *imp, float scale, float *y,
                          int64_t n) {
    nb_type_traits_get(type)->dequantize(q, y, n);
    double e = 0;
    for (int64_t j = 0; j < n; j += 4096) {
        int k = n - j < 4096 ? (int)(n - j) : 4096;
        e += wsse(x + j, y + j, imp ? imp + j : NULL, k, scale);
    }
    return e;
}

/* ---------------------------------------------------------------- MXFP4 */

static void mxfp4_best(const float *x, const float *imp, nb_block_mxfp4 *b, int64_t nb) {
    float y[NB_QK_MXFP4];
    for (int64_t i = 0; i < nb; i++, x += NB_QK_MXFP4) {
        const float *w = imp ? imp + i * NB_QK_MXFP4 : NULL;
        nb_block_mxfp4 up;
        nb_mxfp4_quantize_ref(x, &b[i], NB_QK_MXFP4);
        nb_mxfp4_dequantize(&b[i], y, NB_QK_MXFP4);
        double e_ref = wsse(x, y, w, NB_QK_MXFP4, 1.0f);
        if (nb_quantize_mxfp4_roundup(x, &up, NB_QK_MXFP4)) continue; /* x is finite: cannot fail */
        nb_mxfp4_dequantize(&up, y, NB_QK_MXFP4);
        if (wsse(x, y, w, NB_QK_MXFP4, 1.0f) < e_ref) b[i] = up;
    }
}

/* ---------------------------------------------------------------- NVFP4 */

/* Codes of 16 elements for block scale value d (decoded value = E2M1 * d * scale), packed as NVFP4
 * lays out a sub-block (byte j: element j low, j+8 high); returns the weighted error. */
static double nvfp4_sub_try(const float *x, const float *w, float d, float scale, uint8_t *qs) {
    const float step = d * scale, inv = 1.0f / step;
    double e = 0;
    for (int j = 0; j < NB_QK_NVFP4_SUB / 2; j++) {
        uint8_t c[2];
        for (int h = 0; h < 2; h++) {
            const float xv = x[j + 8 * h];
            c[h] = nb_e2m1_round(xv * inv, NB_E2M1_TIES_LOW, NULL); /* the rule this search always wrote */
            double diff = (double)(nb_e2m1_doubled[c[h]] * 0.5f * d) * scale - xv;
            e += (w ? w[j + 8 * h] : 1.0) * diff * diff;
        }
        qs[j] = (uint8_t)(c[0] | c[1] << 4);
    }
    return e;
}

/* Searches sub-block s of block b (whose reference encoding is already there) for a lower error.
 * unit: the decoded value of scale code c is nb_ue4m3_to_fp32(c) * scale; amax_unit = amax / scale. */
static void nvfp4_sub_search(const float *x, const float *w, nb_block_nvfp4 *b, int s, float scale) {
    float y[NB_QK_NVFP4_SUB];
    const float d0 = nb_ue4m3_to_fp32(b->d[s]);
    for (int j = 0; j < NB_QK_NVFP4_SUB / 2; j++) {
        y[j] = nb_e2m1_to_fp32(b->qs[8 * s + j] & 0xF) * (b->d[s] == 0x7F ? 0.0f : d0);
        y[j + 8] = nb_e2m1_to_fp32(b->qs[8 * s + j] >> 4) * (b->d[s] == 0x7F ? 0.0f : d0);
    }
    double best = wsse(x, y, w, NB_QK_NVFP4_SUB, scale);
    float amax = 0;
    for (int j = 0; j < NB_QK_NVFP4_SUB; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    if (amax == 0) return;
    const float a = amax / scale;
    const int c6 = nb_fp32_to_ue4m3(a / 6.0f), c4 = nb_fp32_to_ue4m3(a / 4.0f);
    const int cand[8] = {c6 - 2, c6 - 1, c6, c6 + 1, c6 + 2, c4 - 1, c4, c4 + 1};
    for (int k = 0; k < 8; k++) {
        const int c = cand[k];
        if (c < 1 || c > 0x7E) continue;
        uint8_t qs[NB_QK_NVFP4_SUB / 2];
        const double e = nvfp4_sub_try(x, w, nb_ue4m3_to_fp32((uint8_t)c), scale, qs);
        if (e < best) {
            best = e;
            b->d[s] = (uint8_t)c;
            memcpy(b->qs + 8 * s, qs, sizeof qs);
        }
    }
}

/* S > 0: two-level with encode scale S (decoded values times 1/S), else llama.cpp's one level. */
static void nvfp4_best(const float *x, const float *imp, nb_block_nvfp4 *b, int64_t nb, float S) {
    const float scale = S > 0 ? 1.0f / S : 1.0f;
    for (int64_t i = 0; i < nb; i++, x += NB_QK_NVFP4) {
        if (S > 0) nb_nvfp4_2level_encode(x, &b[i], NB_QK_NVFP4, S);
        else nb_nvfp4_quantize_ref(x, &b[i], NB_QK_NVFP4);
        for (int s = 0; s < NB_QK_NVFP4 / NB_QK_NVFP4_SUB; s++)
            nvfp4_sub_search(x + s * NB_QK_NVFP4_SUB, imp ? imp + i * NB_QK_NVFP4 + s * NB_QK_NVFP4_SUB : NULL, &b[i],
                             s, scale);
    }
}

/* ---------------------------------------------------------------- Q4_K */

static void q4_k_best(const float *x, const float *imp, nb_block_q4_k *b, int64_t nb) {
    float y[NB_QK_K], w[NB_QK_K];
    for (int64_t i = 0; i < nb; i++, x += NB_QK_K) {
        const float *im = imp ? imp + i * NB_QK_K : NULL;
        nb_q4_k_quantize_ref(x, &b[i], NB_QK_K);
        nb_q4_k_dequantize(&b[i], y, NB_QK_K);
        double best = wsse(x, y, im, NB_QK_K, 1.0f);
        float sum_x2 = 0;
        for (int j = 0; j < NB_QK_K; j++) sum_x2 += x[j] * x[j];
        const float sigma2 = 2 * sum_x2 / NB_QK_K;
        for (int cand = 0; cand < 2; cand++) {
            for (int s = 0; s < NB_QK_K / 32; s++) {
                float sub_x2 = 0;
                for (int l = 0; l < 32; l++) sub_x2 += x[32 * s + l] * x[32 * s + l];
                const float av_x = sqrtf(sub_x2 / 32);
                for (int l = 0; l < 32; l++) {
                    const int j = 32 * s + l;
                    const float base = cand == 0 ? sqrtf(sigma2 + x[j] * x[j]) : av_x + fabsf(x[j]);
                    w[j] = im ? im[j] * base : base;
                }
            }
            nb_block_q4_k c;
            nb_q4_k_quantize_block_w(x, w, &c, cand == 0 ? -0.9f : -1.0f, 0.05f, cand == 0 ? 36 : 40);
            nb_q4_k_dequantize(&c, y, NB_QK_K);
            const double e = wsse(x, y, im, NB_QK_K, 1.0f);
            if (e < best) {
                best = e;
                b[i] = c;
            }
        }
    }
}

void nb_quant_row(int type, nb_qmode mode, const float *x, const float *imp, void *dst, int64_t n, float S) {
    const int best = mode == NB_QMODE_BEST;
    if (type == NB_TYPE_NVFP4 && (best || S > 0)) {
        if (best) nvfp4_best(x, imp, dst, n / NB_QK_NVFP4, S);
        else nb_nvfp4_2level_encode(x, dst, n, S);
    } else if (best && type == NB_TYPE_MXFP4) {
        mxfp4_best(x, imp, dst, n / NB_QK_MXFP4);
    } else if (best && type == NB_TYPE_Q4_K) {
        q4_k_best(x, imp, dst, n / NB_QK_K);
    } else {
        nb_type_traits_get(type)->quantize_ref(x, dst, n);
    }
}
