/*
 * compare.c: nb_compare_formats, what each 4-to-8-bit format would do to one tensor. Rows are
 * dequantized from the file, requantized with each format's reference quantizer, decoded again
 * and compared with the file's values (weight error) and, through nb_matmul on both, on the
 * outputs for the given or sampled activations (output error).
 *
 * Memory stays bounded whatever the tensor: rows go through in chunks of CHUNK (token_embd is
 * 262144 rows). NVFP4 two-level needs the tensor's absolute maximum before any row is quantized,
 * so a first pass finds it. Rows are split over the pool by nb_pool_for, each row quantized on
 * its own, and the sums run in row order on the calling thread, so results do not depend on the
 * thread count.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "explain/explain.h"
#include "formats/fp4.h"

#define CHUNK 256

enum { Q_REF, Q_ROUNDUP, Q_2LEVEL };

static const struct fmt {
    const char *name;
    int type, how;
} fmts[NB_COMPARE_FORMATS] = {
    {"q8_0", NB_TYPE_Q8_0, Q_REF},   {"q6_K", NB_TYPE_Q6_K, Q_REF},           {"q5_0", NB_TYPE_Q5_0, Q_REF},
    {"q4_K", NB_TYPE_Q4_K, Q_REF},   {"q4_0", NB_TYPE_Q4_0, Q_REF},           {"mxfp4", NB_TYPE_MXFP4, Q_REF},
    {"mxfp4 round-up", NB_TYPE_MXFP4, Q_ROUNDUP}, {"nvfp4", NB_TYPE_NVFP4, Q_REF}, {"nvfp4 two-level", NB_TYPE_NVFP4, Q_2LEVEL},
};

typedef struct sums {
    double w_sq, e_sq, e_max;   /* weights */
    double y_sq, ye_sq, ye_max; /* outputs */
} sums;

typedef struct job {
    const struct fmt *f;
    int64_t n_in;
    const float *rows; /* CHUNK x n_in, the file's values */
    uint8_t *q;        /* requantized rows */
    float *deq;        /* their values */
    size_t row_bytes;
    float amax;        /* tensor |max| (two-level) */
    int failed;        /* set by any worker; only ever written as 1 */
} job;

/* Not the converter's loop (src/quant: nb_quant_row, then nb_quant_row_error's sum): compare runs
 * the public quantizers a caller would, the round-up option included, which nb_quant_row has no
 * mode for, and keeps every decoded row for the output error and the histogram. */
static void requant_rows(void *ctx, int64_t b, int64_t e) {
    job *j = ctx;
    for (int64_t r = b; r < e; r++) {
        const float *x = j->rows + r * j->n_in;
        uint8_t *q = j->q + (size_t)r * j->row_bytes;
        nb_status st;
        float ts;
        if (j->f->how == Q_REF) st = nb_quantize(j->f->type, x, q, j->n_in);
        else if (j->f->how == Q_ROUNDUP) st = nb_quantize_mxfp4_roundup(x, q, j->n_in);
        else st = nb_quantize_nvfp4_2level_amax(x, q, j->n_in, j->amax, &ts);
        if (st || nb_dequantize(j->f->type, q, j->deq + r * j->n_in, j->n_in)) j->failed = 1;
    }
}

static void hist_add(nb_error_hist *h, double err, double rms) {
    double a = fabs(err);
    if (a == 0) { h->zero++; return; }
    double l = log10(a / rms);
    if (l >= 0) h->over++;
    else if (l >= -6) h->bins[(int)((l + 6) * 10)]++;
    else h->zero++; /* below a millionth of rms(w): counted with the exact ones */
}

static double sqnr(double sig, double err) { return err > 0 ? 10 * log10(sig / err) : INFINITY; }

/* nb_fail with a format's name in front of the message already stored */
static nb_status fail_in(nb_status s, const char *name) {
    char why[256];
    snprintf(why, sizeof why, "%s", nb_last_error());
    return nb_fail(s, "%s: %s", name, why);
}

nb_status nb_compare_formats(const nb_gguf_tensor *t, const nb_compare_params *p, nb_compare_result *out) {
    if (!t || !p || !out) return nb_fail(NB_ERR_INVALID_ARG, "compare: NULL argument");
    if (p->n_tok < 1 || p->n_tok > 4096 || p->rows < 0)
        return nb_fail(NB_ERR_INVALID_ARG, "compare: %d vectors (1..4096), %lld rows", p->n_tok, (long long)p->rows);
    const int64_t n_in = t->ne[0], rows_all = nb_gguf_tensor_rows(t), n_tok = p->n_tok;
    const int64_t rows = p->rows && p->rows < rows_all ? p->rows : rows_all;
    memset(out, 0, sizeof *out);
    out->row_length = n_in, out->rows = rows, out->rows_total = rows_all, out->n_formats = NB_COMPARE_FORMATS;
    size_t in_row;
    nb_status s = nb_row_bytes(t->type, n_in, &in_row);
    if (s) return s;
    size_t qrow_max = 0;
    for (int f = 0; f < NB_COMPARE_FORMATS; f++) {
        nb_compare_format *r = &out->formats[f];
        r->name = fmts[f].name, r->type = fmts[f].type, r->tensor_scale = 1;
        size_t rb;
        if (nb_row_bytes(fmts[f].type, n_in, &rb)) {
            snprintf(r->why, sizeof r->why, "row length %lld is not a multiple of %d", (long long)n_in,
                     nb_type_get(fmts[f].type)->block_elems);
            continue;
        }
        r->applicable = 1;
        if (rb > qrow_max) qrow_max = rb;
    }
    nb_pool *pool = NULL;
    sums *sm = calloc(NB_COMPARE_FORMATS, sizeof *sm);
    float *drawn = NULL, *rowsbuf = malloc((size_t)CHUNK * (size_t)n_in * sizeof *rowsbuf);
    float *deq = malloc((size_t)CHUNK * (size_t)n_in * sizeof *deq);
    uint8_t *q = malloc((size_t)CHUNK * qrow_max + 1);
    float *yref = malloc((size_t)CHUNK * (size_t)n_tok * sizeof *yref);
    float *yq = malloc((size_t)CHUNK * (size_t)n_tok * sizeof *yq);
    if (!sm || !rowsbuf || !deq || !q || !yref || !yq) goto oom;
    if ((s = nb_pool_create(p->threads, &pool))) goto out;
    const float *x = p->x;
    if (!x) {
        /* standard normal draws by Box-Muller: the same inputs for the same seed */
        if (!(drawn = malloc((size_t)(n_in * n_tok) * sizeof *drawn))) goto oom;
        uint64_t rng = p->seed;
        for (int64_t i = 0; i < n_in * n_tok; i++) {
            const double u1 = nb_splitmix64_uniform(&rng), u2 = nb_splitmix64_uniform(&rng);
            drawn[i] = (float)(sqrt(-2 * log(1 - u1)) * cos(6.283185307179586 * u2));
        }
        x = drawn;
    }
    /* pass 1, for the two-level tensor scale: |max| of the rows compared */
    nb_compare_format *two = &out->formats[NB_COMPARE_FORMATS - 1];
    float amax = 0;
    for (int64_t r0 = 0; r0 < rows && two->applicable; r0 += CHUNK) {
        int64_t nr = rows - r0 < CHUNK ? rows - r0 : CHUNK;
        if ((s = nb_dequantize(t->type, (const uint8_t *)t->data + (size_t)r0 * in_row, rowsbuf, nr * n_in))) goto out;
        for (int64_t i = 0; i < nr * n_in; i++) amax = fmaxf(amax, fabsf(rowsbuf[i]));
    }
    float S;
    if (two->applicable && !(s = nb_nvfp4_2level_scale(amax, &S))) two->tensor_scale = 1.0f / S;
    if (s) goto out;
    double rms_w = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += CHUNK) {
        int64_t nr = rows - r0 < CHUNK ? rows - r0 : CHUNK;
        const uint8_t *src = (const uint8_t *)t->data + (size_t)r0 * in_row;
        if ((s = nb_dequantize(t->type, src, rowsbuf, nr * n_in)) ||
            (s = nb_matmul_route(pool, t->type, src, nr, n_in, x, n_tok, yref, p->route)))
            goto out;
        if (r0 == 0) { /* histogram unit: rms of the first chunk's weights */
            for (int64_t i = 0; i < nr * n_in; i++) rms_w += (double)rowsbuf[i] * rowsbuf[i];
            rms_w = sqrt(rms_w / (double)(nr * n_in));
            if (!(rms_w > 0)) rms_w = 1;
        }
        for (int f = 0; f < NB_COMPARE_FORMATS; f++) {
            nb_compare_format *r = &out->formats[f];
            sums *m = &sm[f];
            if (!r->applicable) continue;
            size_t rb;
            nb_row_bytes(fmts[f].type, n_in, &rb);
            job j = {&fmts[f], n_in, rowsbuf, q, deq, rb, amax, 0};
            if ((s = nb_pool_for(pool, nr, 1, requant_rows, &j)) ||
                (j.failed && (s = NB_ERR_RANGE)) ||
                (s = nb_matmul_route(pool, fmts[f].type, q, nr, n_in, x, n_tok, yq, p->route))) {
                s = fail_in(s, fmts[f].name);
                goto out;
            }
            const double ts = r->tensor_scale;
            for (int64_t i = 0; i < nr * n_in; i++) {
                const double w = rowsbuf[i], e = (double)deq[i] * ts - w;
                m->w_sq += w * w, m->e_sq += e * e;
                if (fabs(e) > m->e_max) m->e_max = fabs(e);
                if (p->hist) hist_add(&r->hist, e, rms_w);
            }
            for (int64_t tk = 0; tk < n_tok; tk++)
                for (int64_t o = 0; o < nr; o++) {
                    const double y0 = yref[tk * nr + o], e = (double)yq[tk * nr + o] * ts - y0;
                    m->y_sq += y0 * y0, m->ye_sq += e * e;
                    if (fabs(e) > m->ye_max) m->ye_max = fabs(e);
                }
        }
    }
    const double nw = (double)rows * (double)n_in, ny = (double)rows * (double)n_tok;
    for (int f = 0; f < NB_COMPARE_FORMATS; f++) {
        nb_compare_format *r = &out->formats[f];
        const sums *m = &sm[f];
        if (!r->applicable) continue;
        r->weight_rmse = sqrt(m->e_sq / nw), r->weight_max = m->e_max, r->weight_sqnr_db = sqnr(m->w_sq, m->e_sq);
        r->output_rmse = sqrt(m->ye_sq / ny), r->output_max = m->ye_max, r->output_sqnr_db = sqnr(m->y_sq, m->ye_sq);
    }
    goto out;
oom:
    s = nb_fail(NB_ERR_NOMEM, "compare: out of memory");
out:
    free(drawn), free(sm), free(rowsbuf), free(deq), free(q), free(yref), free(yq);
    nb_pool_destroy(pool);
    return s;
}
