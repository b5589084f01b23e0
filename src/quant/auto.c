/*
 * auto.c: the auto:BPW recipe. Chooses a type per quantizable tensor so that the whole file stays
 * within BPW bits per weight while losing as little as measurement says it can.
 *
 * Sensitivity: for each tensor and candidate type, up to SAMPLE_ROWS rows spread over the tensor
 * are quantized (in the run's mode) and their relative squared error sum imp*e^2 / sum imp*x^2
 * measured (imp = the imatrix's mean x^2 per column when given, else 1: with it, this is the share
 * of the matrix product's output energy lost). A tensor's cost is that relative error times its
 * element count, so a large matrix weighs more than a small one at the same relative error.
 * Choice: every tensor starts at its cheapest candidate; candidates that cost more bits without
 * lowering the error are dropped (the lower convex hull of (bits, error)); then, repeatedly, the
 * upgrade that removes the most error per extra bit and still fits the budget is taken. Tensors
 * whose type was fixed (--embed-type, --tensor-type, --pure) and tensors that are copied count
 * against the budget as they are.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "quant/quant.h"

#define SAMPLE_ROWS 32
#define N_CAND 6

static const int candidates[N_CAND] = {NB_TYPE_MXFP4, NB_TYPE_Q4_K, NB_TYPE_NVFP4, NB_TYPE_Q5_K, NB_TYPE_Q6_K,
                                       NB_TYPE_Q8_0};

typedef struct option {
    int type;
    double bits, err;
} option;

typedef struct choice {
    option opt[N_CAND];
    int n, cur;
} choice;

/* Relative error of `type` on a sample of t's rows; -1 when the row length does not fit the type. */
static nb_status measure(const nb_gguf_tensor *t, int type, const nb_quant_params *p, const float *imp, float *x,
                         float *y, void *q, double *rel) {
    const int64_t n = t->ne[0], rows = nb_quant_rows(t);
    const size_t src_row = nb_quant_src_row_bytes(t);
    const int64_t step = rows > SAMPLE_ROWS ? rows / SAMPLE_ROWS : 1;
    double err = 0, sig = 0;
    for (int64_t r = 0; r < rows; r += step) {
        nb_status s = nb_dequantize(t->type, (const uint8_t *)t->data + (size_t)r * src_row, x, n);
        if (s) return s;
        for (int64_t i = 0; i < n; i++) {
            if (!isfinite(x[i]))
                return nb_fail(NB_ERR_NONFINITE, "quantize: tensor '%s': row %lld holds NaN or Inf", t->name,
                               (long long)r);
            sig += (imp ? imp[i] : 1.0) * x[i] * x[i];
        }
        nb_quant_row(type, p->mode, x, p->mode == NB_QMODE_BEST ? imp : NULL, q, n, 0);
        err += nb_quant_row_error(type, q, x, imp, 1.0f, y, n);
    }
    *rel = sig > 0 ? err / sig : 0;
    return NB_OK;
}

/* The options of one tensor: measured candidates that fit its rows, reduced to the convex hull. */
static nb_status options_of(const nb_gguf_tensor *t, const nb_quant_params *p, choice *c) {
    const int64_t n = t->ne[0];
    const double elems = (double)n * (double)nb_quant_rows(t);
    const float *imp = NULL;
    int64_t n_in = 0;
    if (p->imatrix && (imp = nb_imatrix_find(p->imatrix, t->name, &n_in)) && n_in != n) imp = NULL;
    float *x = malloc((size_t)n * 2 * sizeof *x);
    void *q = malloc((size_t)n * 2); /* no type takes more than 2 bytes per element here */
    if (!x || !q) {
        free(x);
        free(q);
        return nb_fail(NB_ERR_NOMEM, "quantize: auto: row buffers for '%s'", t->name);
    }
    option all[N_CAND];
    int na = 0;
    nb_status s = NB_OK;
    for (int k = 0; k < N_CAND && !s; k++) {
        size_t row;
        if (nb_row_bytes(candidates[k], n, &row)) continue;
        double rel = 0;
        if ((s = measure(t, candidates[k], p, imp, x, x + n, q, &rel))) break;
        all[na++] = (option){candidates[k], (double)row * 8.0 * (double)nb_quant_rows(t), rel * elems};
    }
    free(x);
    free(q);
    if (s) return s;
    nb_clear_error();
    if (!na) return nb_fail(NB_ERR_UNSUPPORTED, "quantize: auto: tensor '%s' (row %lld) fits no candidate type",
                            t->name, (long long)n);
    /* sort by bits (insertion: six at most), keep the lower error of equal sizes */
    for (int i = 1; i < na; i++)
        for (int j = i; j > 0 && (all[j].bits < all[j - 1].bits ||
                                  (all[j].bits == all[j - 1].bits && all[j].err < all[j - 1].err)); j--) {
            option tmp = all[j];
            all[j] = all[j - 1];
            all[j - 1] = tmp;
        }
    c->n = 0;
    for (int i = 0; i < na; i++) {
        if (c->n && (all[i].bits == c->opt[c->n - 1].bits || all[i].err >= c->opt[c->n - 1].err)) continue;
        /* drop points above the segment from the one before to this one (not convex) */
        while (c->n >= 2) {
            const option *a = &c->opt[c->n - 2], *b = &c->opt[c->n - 1];
            if ((a->err - b->err) / (b->bits - a->bits) <= (b->err - all[i].err) / (all[i].bits - b->bits)) c->n--;
            else break;
        }
        c->opt[c->n++] = all[i];
    }
    c->cur = 0;
    return NB_OK;
}

nb_status nb_quant_auto(const nb_gguf *g, const nb_quant_params *p, double bpw, nb_qplan *plan, int64_t n) {
    (void)g;
    choice *ch = calloc(n ? (size_t)n : 1, sizeof *ch);
    if (!ch) return nb_fail(NB_ERR_NOMEM, "quantize: auto: %lld tensors", (long long)n);
    double elems = 0, bits = 0;
    nb_status s = NB_OK;
    for (int64_t i = 0; i < n && !s; i++) {
        const nb_gguf_tensor *t = plan[i].t;
        elems += (double)t->ne[0] * (double)nb_quant_rows(t);
        if (plan[i].quantizable && !plan[i].fixed) {
            if (!(s = options_of(t, p, &ch[i]))) bits += ch[i].opt[0].bits;
        } else {
            size_t row = 0;
            if ((s = nb_row_bytes(plan[i].type, t->ne[0], &row))) break;
            bits += (double)row * 8.0 * (double)nb_quant_rows(t);
        }
    }
    const double budget = bpw * elems;
    if (!s && bits > budget)
        s = nb_fail(NB_ERR_INVALID_ARG, "quantize: auto:%g is below the smallest this model allows (%.3f bits per weight)",
                    bpw, bits / elems);
    while (!s) { /* take the steepest upgrade that fits */
        int64_t best = -1;
        double best_slope = 0;
        for (int64_t i = 0; i < n; i++) {
            const choice *c = &ch[i];
            if (c->cur + 1 >= c->n) continue;
            const option *a = &c->opt[c->cur], *b = &c->opt[c->cur + 1];
            if (bits + (b->bits - a->bits) > budget) continue;
            const double slope = (a->err - b->err) / (b->bits - a->bits);
            if (best < 0 || slope > best_slope) {
                best = i;
                best_slope = slope;
            }
        }
        if (best < 0) break;
        bits += ch[best].opt[ch[best].cur + 1].bits - ch[best].opt[ch[best].cur].bits;
        ch[best].cur++;
    }
    for (int64_t i = 0; i < n && !s; i++)
        if (ch[i].n) {
            plan[i].type = ch[i].opt[ch[i].cur].type;
            plan[i].two_level = 0;
        }
    free(ch);
    return s;
}
