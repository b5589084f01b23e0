/*
 * auto.c: the auto:BPW recipe. Chooses a type per quantizable tensor so that the whole file stays
 * within BPW bits per weight while losing as little as measurement says it can.
 *
 * Sensitivity: for each tensor and candidate type, up to SAMPLE_ROWS rows spread over the tensor
 * are quantized (in the run's mode) and their relative squared error sum imp*e^2 / sum imp*x^2
 * measured (imp = the imatrix's mean x^2 per column when given, else 1: with it, this is the share
 * of the matrix product's output energy lost). A tensor's cost is that relative error times its
 * element count, so a large matrix weighs more than a small one at the same relative error.
 * Choice: a multiple-choice knapsack, one option per tensor, least total cost within the budget. A
 * tensor's options are its measured candidates less those that cost more bits without lowering the
 * error; the others all stay, on the lower convex hull of (bits, error) or not, since a step that is
 * poor value per bit can still be the one that fills the budget. The bits the budget leaves above
 * every tensor's cheapest option are cut into up to BUCKETS equal parts, each option's extra bits
 * rounded up to whole parts (so no choice can overspend), and a dynamic program over (tensor, parts
 * used) finds the least-error choice. Greedy upgrading, the steepest error per bit first, would be
 * simpler but can spend the budget on small tensors and leave no room for one large step (the
 * embedding of a small model, most of its weights). What the rounding left unspent then goes, one
 * step at a time, to the upgrade that removes the most error per extra bit and fits in exact bits.
 * Tensors whose type was fixed (--embed-type, --tensor-type, --pure) and tensors that are copied
 * count against the budget as they are.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "quant/quant.h"

#define SAMPLE_ROWS 32
#define N_CAND 6
#define BUCKETS 8192 /* the knapsack's resolution: its table has BUCKETS + 1 bytes per tensor */

static const int candidates[N_CAND] = {NB_TYPE_MXFP4, NB_TYPE_Q4_K, NB_TYPE_NVFP4, NB_TYPE_Q5_K, NB_TYPE_Q6_K,
                                       NB_TYPE_Q8_0};

typedef struct option {
    int type;
    int64_t bits; /* of the whole tensor */
    double err;
} option;

typedef struct choice {
    option opt[N_CAND];
    int n, cur;
} choice;

/* Relative error of `type` on a sample of t's rows; -1 when the row length does not fit the type. */
static nb_status measure(const nb_gguf_tensor *t, int type, const nb_quant_params *p, const float *imp, float *x,
                         float *y, void *q, double *rel) {
    const int64_t n = t->ne[0], rows = nb_gguf_tensor_rows(t);
    const int64_t step = rows > SAMPLE_ROWS ? rows / SAMPLE_ROWS : 1;
    double err = 0, sig = 0;
    for (int64_t r = 0; r < rows; r += step) {
        if (!nb_quant_read_row(t, r, x))
            return nb_fail(NB_ERR_NONFINITE, "tensor '%s': row %lld holds NaN or Inf", t->name, (long long)r);
        for (int64_t i = 0; i < n; i++) sig += (imp ? imp[i] : 1.0) * x[i] * x[i];
        nb_quant_row(type, p->mode, x, p->mode == NB_QMODE_BEST ? imp : NULL, q, n, 0);
        err += nb_quant_row_error(type, q, x, imp, 1.0f, y, n);
    }
    *rel = sig > 0 ? err / sig : 0;
    return NB_OK;
}

/* The options of one tensor: measured candidates that fit its rows, by bits, each with less error
 * than every cheaper one. */
static nb_status options_of(const nb_gguf_tensor *t, const nb_quant_params *p, choice *c) {
    const int64_t n = t->ne[0];
    const double elems = (double)n * (double)nb_gguf_tensor_rows(t);
    const float *imp = NULL;
    int64_t n_in = 0;
    if (p->imatrix && (imp = nb_imatrix_find(p->imatrix, t->name, &n_in)) && n_in != n) imp = NULL;
    float *x = malloc((size_t)n * 2 * sizeof *x);
    void *q = malloc((size_t)n * 2); /* no type takes more than 2 bytes per element here */
    if (!x || !q) {
        free(x);
        free(q);
        return nb_fail(NB_ERR_NOMEM, "auto: row buffers for '%s'", t->name);
    }
    option all[N_CAND];
    int na = 0;
    nb_status s = NB_OK;
    for (int k = 0; k < N_CAND && !s; k++) {
        size_t row;
        if (nb_row_bytes(candidates[k], n, &row)) continue;
        double rel = 0;
        if ((s = measure(t, candidates[k], p, imp, x, x + n, q, &rel))) break;
        all[na++] = (option){candidates[k], (int64_t)row * 8 * nb_gguf_tensor_rows(t), rel * elems};
    }
    free(x);
    free(q);
    if (s) return s;
    nb_clear_error();
    if (!na) return nb_fail(NB_ERR_UNSUPPORTED, "auto: tensor '%s' (row %lld) fits no candidate type",
                            t->name, (long long)n);
    /* sort by bits (insertion: six at most), the lower error first among equal sizes */
    for (int i = 1; i < na; i++)
        for (int j = i; j > 0 && (all[j].bits < all[j - 1].bits ||
                                  (all[j].bits == all[j - 1].bits && all[j].err < all[j - 1].err)); j--) {
            option tmp = all[j];
            all[j] = all[j - 1];
            all[j - 1] = tmp;
        }
    c->n = 0;
    for (int i = 0; i < na; i++)
        if (!c->n || all[i].err < c->opt[c->n - 1].err) c->opt[c->n++] = all[i];
    c->cur = 0;
    return NB_OK;
}

/* Option k's bits above the tensor's cheapest option, in whole buckets of `width` bits, rounded up. */
static int64_t buckets_of(const choice *c, int k, int64_t width) {
    return (c->opt[k].bits - c->opt[0].bits + width - 1) / width;
}

/* Sets every ch[i].cur to the least-error choice whose bits above the cheapest options stay within
 * `slack`, exact but for the rounding of each option's extra bits up to whole buckets. */
static nb_status knapsack(choice *ch, int64_t n, int64_t slack) {
    const int64_t width = slack > BUCKETS ? (slack + BUCKETS - 1) / BUCKETS : 1;
    const int64_t cap = slack / width; /* buckets to spend: cap * width <= slack */
    int64_t rows = 0;                  /* tensors with a choice to make */
    for (int64_t i = 0; i < n; i++) rows += ch[i].n > 1;
    /* best[b]: the least error of the tensors so far within b buckets; pick: each one's option there */
    double *best = calloc((size_t)cap + 1, sizeof *best);
    uint8_t *pick = malloc(rows ? (size_t)rows * (size_t)(cap + 1) : 1);
    if (!best || !pick) {
        free(best);
        free(pick);
        return nb_fail(NB_ERR_NOMEM, "auto: knapsack table of %lld x %lld", (long long)rows,
                       (long long)cap + 1);
    }
    int64_t r = 0;
    for (int64_t i = 0; i < n; i++) {
        const choice *c = &ch[i];
        if (c->n < 2) continue;
        int64_t cost[N_CAND];
        for (int k = 0; k < c->n; k++) cost[k] = buckets_of(c, k, width);
        uint8_t *pk = pick + (size_t)r++ * (size_t)(cap + 1);
        /* downwards, so that best[b - cost] still holds the tensors before this one; costs grow with k */
        for (int64_t b = cap; b >= 0; b--) {
            double e = best[b] + c->opt[0].err;
            int kb = 0;
            for (int k = 1; k < c->n && cost[k] <= b; k++)
                if (best[b - cost[k]] + c->opt[k].err < e) {
                    e = best[b - cost[k]] + c->opt[k].err;
                    kb = k;
                }
            best[b] = e;
            pk[b] = (uint8_t)kb;
        }
    }
    int64_t b = cap; /* walk back from the last tensor with the whole allowance */
    for (int64_t i = n - 1; i >= 0; i--) {
        if (ch[i].n < 2) continue;
        ch[i].cur = pick[(size_t)--r * (size_t)(cap + 1) + (size_t)b];
        b -= buckets_of(&ch[i], ch[i].cur, width);
    }
    free(best);
    free(pick);
    return NB_OK;
}

/* Spends what is left of the budget: repeatedly the upgrade, to any dearer option of one tensor,
 * that removes the most error per extra bit and still fits. */
static void spend_rest(choice *ch, int64_t n, int64_t bits, int64_t budget) {
    for (;;) {
        int64_t best = -1;
        int best_k = 0;
        double best_slope = 0;
        for (int64_t i = 0; i < n; i++) {
            const choice *c = &ch[i];
            if (!c->n) continue;
            const option *a = &c->opt[c->cur];
            for (int k = c->cur + 1; k < c->n && bits + (c->opt[k].bits - a->bits) <= budget; k++) {
                const double slope = (a->err - c->opt[k].err) / (double)(c->opt[k].bits - a->bits);
                if (best < 0 || slope > best_slope) {
                    best = i;
                    best_k = k;
                    best_slope = slope;
                }
            }
        }
        if (best < 0) return;
        bits += ch[best].opt[best_k].bits - ch[best].opt[ch[best].cur].bits;
        ch[best].cur = best_k;
    }
}

nb_status nb_quant_auto(const nb_gguf *g, const nb_quant_params *p, double bpw, nb_qplan *plan, int64_t n) {
    (void)g;
    choice *ch = calloc(n ? (size_t)n : 1, sizeof *ch);
    if (!ch) return nb_fail(NB_ERR_NOMEM, "auto: %lld tensors", (long long)n);
    double elems = 0;
    int64_t bits = 0; /* fixed and copied tensors as they are, the others at their cheapest option */
    nb_status s = NB_OK;
    for (int64_t i = 0; i < n && !s; i++) {
        const nb_gguf_tensor *t = plan[i].t;
        elems += (double)t->ne[0] * (double)nb_gguf_tensor_rows(t);
        if (plan[i].quantizable && !plan[i].fixed) {
            if (!(s = options_of(t, p, &ch[i]))) bits += ch[i].opt[0].bits;
        } else {
            size_t row = 0;
            if ((s = nb_row_bytes(plan[i].type, t->ne[0], &row))) break;
            bits += (int64_t)row * 8 * nb_gguf_tensor_rows(t);
        }
    }
    const int64_t budget = (int64_t)floor(bpw * elems);
    if (!s && bits > budget)
        s = nb_fail(NB_ERR_INVALID_ARG, "auto:%g is below the smallest this model allows (%.3f bits per weight)",
                    bpw, (double)bits / elems);
    if (!s) s = knapsack(ch, n, budget - bits);
    if (!s) {
        for (int64_t i = 0; i < n; i++)
            if (ch[i].n) bits += ch[i].opt[ch[i].cur].bits - ch[i].opt[0].bits;
        spend_rest(ch, n, bits, budget);
    }
    for (int64_t i = 0; i < n && !s; i++)
        if (ch[i].n) {
            plan[i].type = ch[i].opt[ch[i].cur].type;
            plan[i].two_level = 0;
        }
    free(ch);
    return s;
}
