/*
 * dot.c: the articles' hand-sized dot product (contract: explain.h). A short row w is quantized at
 * one chosen scale, reconstructed, and dotted with x; every lane's term is kept so the signed
 * output error Δy = Σ (ŵᵢ − wᵢ)·xᵢ can be read term by term. This is a teaching model of one
 * scale group, not a block quantizer: the scale is the caller's, not fitted to the weights.
 */
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "explain/explain.h"
#include "formats/codes.h"

int nb_e2m1_nearest(double v, int ties_low, int *tie) {
    return nb_e2m1_round(v, ties_low ? NB_E2M1_TIES_LOW : 0, tie);
}

nb_status nb_dot_explain(const nb_dot_params *p, const double *w, const double *x, int n, nb_dot_trace *out) {
    if (!p || !w || !x || !out) return nb_fail(NB_ERR_INVALID_ARG, "explain dot: NULL argument");
    if (n < 1 || n > NB_DOT_MAX)
        return nb_fail(NB_ERR_RANGE, "explain dot: %d weights; between 1 and %d are accepted", n, NB_DOT_MAX);
    if (!(p->scale > 0) || !isfinite(p->scale))
        return nb_fail(NB_ERR_INVALID_ARG, "explain dot: scale %g must be a positive finite number", p->scale);
    for (int i = 0; i < n; i++)
        if (!isfinite(w[i]) || !isfinite(x[i]))
            return nb_fail(NB_ERR_NONFINITE, "explain dot: w[%d] or x[%d] is not finite", i, i);
    nb_dot_trace *t = out;
    memset(t, 0, sizeof *t);
    t->n = n;
    t->scale_code = -1;
    t->scale = p->scale;
    switch (p->format) {
    case NB_DOT_INT4: break;
    case NB_DOT_MXFP4:
        t->scale_code = nb_fp32_to_e8m0((float)p->scale);
        t->scale = nb_e8m0_to_fp32((uint8_t)t->scale_code);
        break;
    case NB_DOT_NVFP4: {
        if (!(p->tensor_scale > 0) || !isfinite(p->tensor_scale))
            return nb_fail(NB_ERR_INVALID_ARG, "explain dot: tensor scale %g must be positive and finite", p->tensor_scale);
        t->scale_code = nb_fp32_to_ue4m3((float)p->scale);
        const double block = nb_ue4m3_to_fp32((uint8_t)t->scale_code);
        if (!(block > 0))
            return nb_fail(NB_ERR_RANGE, "explain dot: scale %g rounds to UE4M3 0x%02X = 0 (smallest code 2^-9)", p->scale,
                           t->scale_code);
        t->scale = block * p->tensor_scale;
        break;
    }
    case NB_DOT_Q4_K:
        if (!(p->offset >= 0) || !isfinite(p->offset))
            return nb_fail(NB_ERR_INVALID_ARG, "explain dot: Q4_K offset %g must be >= 0 (the decoder subtracts it)", p->offset);
        t->offset = p->offset;
        break;
    default:
        return nb_fail(NB_ERR_INVALID_ARG, "explain dot: format %d is not int4, mxfp4, nvfp4 or q4_K", (int)p->format);
    }
    for (int i = 0; i < n; i++) {
        double q;
        switch (p->format) {
        case NB_DOT_INT4:
        case NB_DOT_Q4_K: {
            const double lo = p->format == NB_DOT_INT4 ? -8 : 0, hi = p->format == NB_DOT_INT4 ? 7 : 15;
            const double r = (w[i] + t->offset) / t->scale;
            q = round(r); /* half away from zero, as the second article rounds 3.5 to 4 */
            t->tie[i] = fabs(r - trunc(r)) == 0.5;
            t->clipped[i] = q < lo || q > hi;
            q = q < lo ? lo : q > hi ? hi : q;
            t->code[i] = (int)q;
            t->element[i] = q;
            t->w_hat[i] = t->scale * q - t->offset;
            break;
        }
        default: {
            const double r = w[i] / t->scale;
            t->code[i] = nb_e2m1_nearest(r, p->ties_low, &t->tie[i]);
            t->clipped[i] = fabs(r) > 6.0;
            t->element[i] = nb_e2m1_to_fp32((uint8_t)t->code[i]);
            t->w_hat[i] = t->element[i] * t->scale;
        }
        }
        t->term[i] = t->w_hat[i] * x[i];
        t->term_exact[i] = w[i] * x[i];
        t->y += t->term_exact[i];
        t->y_hat += t->term[i];
    }
    t->err = t->y_hat - t->y;
    return NB_OK;
}
