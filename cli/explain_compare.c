/*
 * explain_compare.c: `nibble explain compare MODEL.gguf TENSOR`: what each 4-to-8-bit format would
 * do to one real tensor. Rows are dequantized from the file, requantized with each format's
 * reference quantizer (q8_0, q6_K, q5_0, q4_K, q4_0, mxfp4, mxfp4 round-up, nvfp4, nvfp4
 * two-level), decoded again and compared: weight error (RMSE, max, SQNR in dB) against the file's
 * own values, and output error of nb_matmul on the requantized rows against nb_matmul on the
 * file's rows, for inputs from -x FILE or seeded standard-normal activations.
 *
 * Memory stays bounded whatever the tensor: rows go through in chunks of CHUNK (token_embd is
 * 262144 rows). NVFP4 two-level needs the tensor's absolute maximum before any row is quantized,
 * so that format makes a first pass; each row is then quantized with one extra 64-element block
 * holding that maximum appended, so nb_quantize_nvfp4_2level sees the tensor's amax and derives
 * the tensor's scale, and the extra block is dropped. Results do not depend on the thread count.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/explain.h"

#define CHUNK 256

enum { Q_REF, Q_ROUNDUP, Q_2LEVEL };

static const struct fmt {
    const char *name;
    int type, how;
} fmts[] = {
    {"q8_0", NB_TYPE_Q8_0, Q_REF},   {"q6_K", NB_TYPE_Q6_K, Q_REF},           {"q5_0", NB_TYPE_Q5_0, Q_REF},
    {"q4_K", NB_TYPE_Q4_K, Q_REF},   {"q4_0", NB_TYPE_Q4_0, Q_REF},           {"mxfp4", NB_TYPE_MXFP4, Q_REF},
    {"mxfp4 round-up", NB_TYPE_MXFP4, Q_ROUNDUP}, {"nvfp4", NB_TYPE_NVFP4, Q_REF}, {"nvfp4 two-level", NB_TYPE_NVFP4, Q_2LEVEL},
};
#define N_FMTS (int)(sizeof fmts / sizeof fmts[0])

typedef struct stats {
    int ok;
    char why[96];
    double w_sq, e_sq, e_max;   /* weights */
    double y_sq, ye_sq, ye_max; /* outputs */
    float tscale;
    ex_hist hist;
} stats;

typedef struct job {
    const struct fmt *f;
    int64_t n_in;
    const float *rows;  /* CHUNK x n_in, the file's values */
    uint8_t *q;         /* requantized rows */
    float *deq;         /* their values */
    size_t row_bytes;
    float amax;         /* tensor |max| (two-level) */
    int failed;         /* set by any worker; only ever written as 1 */
} job;

static void requant_rows(void *ctx, int64_t b, int64_t e) {
    job *j = ctx;
    float *tmp = NULL;
    uint8_t *all = NULL;
    if (j->f->how == Q_2LEVEL) {
        tmp = calloc((size_t)j->n_in + 64, sizeof *tmp);
        all = malloc(j->row_bytes + 36); /* the row's blocks plus the extra one */
        if (!tmp || !all) b = e, j->failed = 1;
    }
    for (int64_t r = b; r < e; r++) {
        const float *x = j->rows + r * j->n_in;
        uint8_t *q = j->q + (size_t)r * j->row_bytes;
        nb_status st;
        if (j->f->how == Q_REF) st = nb_quantize(j->f->type, x, q, j->n_in);
        else if (j->f->how == Q_ROUNDUP) st = nb_quantize_mxfp4_roundup(x, q, j->n_in);
        else {
            /* the row plus one block whose maximum is the tensor's: the tensor's S for this row */
            memcpy(tmp, x, (size_t)j->n_in * sizeof *tmp);
            tmp[j->n_in] = j->amax;
            float ts;
            st = nb_quantize_nvfp4_2level(tmp, all, j->n_in + 64, &ts);
            if (!st) memcpy(q, all, j->row_bytes);
        }
        if (st || nb_dequantize(j->f->type, q, j->deq + r * j->n_in, j->n_in)) j->failed = 1;
    }
    free(tmp);
    free(all);
}

/* Standard normal draws from splitmix64 + Box-Muller: the same inputs for the same seed. */
static uint64_t rng;
static double uniform(void) {
    uint64_t z = (rng += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

static void hist_add(ex_hist *h, double err, double rms) {
    double a = fabs(err);
    if (a == 0) { h->zero++; return; }
    double l = log10(a / rms);
    if (l >= 0) h->over++;
    else if (l >= -6) h->bins[(int)((l + 6) * 10)]++;
    else h->zero++; /* below a millionth of rms(w): counted with the exact ones */
}

static double sqnr(double sig, double err) { return err > 0 ? 10 * log10(sig / err) : INFINITY; }

static const char USAGE[] =
    "usage: nibble explain compare MODEL.gguf TENSOR [--rows N] [-x FILE | --tokens T --seed S]\n"
    "                              [--route f32|quant] [-t N] [--json] [--svg FILE]\n"
    "  --rows N   the first N rows only (default: all)\n"
    "  -x FILE    activations: whitespace/comma separated numbers, a multiple of the row length\n"
    "  --tokens T sampled standard-normal activation vectors (default 4), --seed S (default 1)\n"
    "  --route    f32 (default: weights decoded, activations exact, so the error is the weights')\n"
    "             or quant (the engine's route: activations quantized to Q8_0/Q8_K)\n"
    "  --svg FILE histogram of each format's weight error ('-': standard output, instead of the text)\n"
    "The baseline is the tensor as the file holds it: for a quantized tensor that is its decoded\n"
    "values, not the original weights, so each format's error adds to the file's own.\n";

int explain_compare(int argc, char **argv) {
    const char *pos[2] = {0}, *xfile = NULL, *svg = NULL;
    int json = 0, rows_lim = 0, n_tok = 4, threads = 0, quant_route = 0;
    uint64_t seed = 1;
    arg_opt opts[] = {
        OPT_INT("--rows", &rows_lim, 1, 1 << 30), OPT_INT("--tokens", &n_tok, 1, 4096), OPT_THREADS(&threads),
        OPT_U64("--seed", &seed),                  OPT_STR("-x", &xfile),                 OPT_STR("--svg", &svg),
        OPT_CHOICE("--route", &quant_route, "f32|quant"), OPT_FLAG("--json", &json),
    };
    arg_spec spec = ARG_SPEC("explain compare", USAGE, opts, pos, 2);
    int rc = arg_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    const char *file = pos[0], *tensor = pos[1];
    if (!file || !tensor) return arg_usage_error(&spec, "give MODEL.gguf and a TENSOR of it");
    if (xfile && (arg_given(&spec, "--tokens") || arg_given(&spec, "--seed")))
        return arg_usage_error(&spec, "-x gives the activations: --tokens and --seed do nothing with it");
    const nb_route route = quant_route ? NB_ROUTE_QUANT : NB_ROUTE_F32;
    nb_gguf *g;
    nb_status gs = nb_gguf_open(file, &g);
    if (gs) return arg_status(gs);
    const nb_gguf_tensor *t = nb_gguf_find_tensor(g, tensor);
    if (!t) {
        arg_error("%s has no tensor '%s' (`nibble inspect --tensors` lists them)", file, arg_safe(0, tensor));
        nb_gguf_close(g);
        return CLI_USAGE;
    }
    if (t->type != NB_TYPE_F32 && t->type != NB_TYPE_F16 && t->type != NB_TYPE_BF16)
        arg_note("'%s' is %s in the file: the baseline is its decoded values, not the original weights", tensor,
                 nb_type_name(t->type));
    const int64_t n_in = t->ne[0], rows_all = t->ne[1] * t->ne[2] * t->ne[3];
    const int64_t rows = rows_lim && rows_lim < rows_all ? rows_lim : rows_all;
    size_t in_row;
    nb_row_bytes(t->type, n_in, &in_row);
    rc = 1;
    float *x = NULL, *rowsbuf = NULL, *deq = NULL, *yref = NULL, *yq = NULL;
    uint8_t *q = NULL;
    stats *st = calloc(N_FMTS, sizeof *st);
    nb_pool *pool = NULL;
    char *xtext = NULL;
    if (!st || nb_pool_create(threads, &pool)) goto oom;
    /* activations */
    if (xfile) {
        size_t len;
        if (!(xtext = arg_read_file(xfile, &len))) goto out;
        int64_t cnt = 0, cap = 0;
        for (char *p = xtext;;) {
            while (*p && strchr(" \t\r\n,", *p)) p++;
            if (!*p) break;
            char *end;
            double v = strtod(p, &end);
            if (end == p || !isfinite(v)) {
                arg_error("-x %s: number %lld is not a finite number", xfile, (long long)cnt);
                goto out;
            }
            if (cnt == cap) {
                float *nx = realloc(x, (size_t)(cap = cap ? 2 * cap : 4096) * sizeof *x);
                if (!nx) goto oom;
                x = nx;
            }
            x[cnt++] = (float)v;
            p = end;
        }
        if (!cnt || cnt % n_in || cnt / n_in > 4096) {
            arg_error("-x %s holds %lld number%s; need 1..4096 vectors of %lld", xfile, (long long)cnt, nb_plural(cnt),
                      (long long)n_in);
            goto out;
        }
        n_tok = (int)(cnt / n_in);
    } else {
        if (!(x = malloc((size_t)(n_in * n_tok) * sizeof *x))) goto oom;
        rng = seed;
        for (int64_t i = 0; i < n_in * n_tok; i++)
            x[i] = (float)(sqrt(-2 * log(1 - uniform())) * cos(6.283185307179586 * uniform()));
    }
    size_t qrow_max = 0;
    for (int f = 0; f < N_FMTS; f++) {
        size_t rb;
        if (nb_row_bytes(fmts[f].type, n_in, &rb)) {
            snprintf(st[f].why, sizeof st[f].why, "row length %lld is not a multiple of %d", (long long)n_in,
                     nb_type_get(fmts[f].type)->block_elems);
            continue;
        }
        st[f].ok = 1;
        st[f].tscale = 1;
        st[f].hist.name = fmts[f].name;
        if (rb > qrow_max) qrow_max = rb;
    }
    rowsbuf = malloc((size_t)CHUNK * (size_t)n_in * sizeof *rowsbuf);
    deq = malloc((size_t)CHUNK * (size_t)n_in * sizeof *deq);
    q = malloc((size_t)CHUNK * qrow_max + 1);
    yref = malloc((size_t)CHUNK * (size_t)n_tok * sizeof *yref);
    yq = malloc((size_t)CHUNK * (size_t)n_tok * sizeof *yq);
    if (!rowsbuf || !deq || !q || !yref || !yq) goto oom;
    /* pass 1, for the two-level tensor scale: |max| of the rows compared */
    float amax = 0;
    for (int64_t r0 = 0; r0 < rows && st[N_FMTS - 1].ok; r0 += CHUNK) {
        int64_t nr = rows - r0 < CHUNK ? rows - r0 : CHUNK;
        nb_dequantize(t->type, (const uint8_t *)t->data + (size_t)r0 * in_row, rowsbuf, nr * n_in);
        for (int64_t i = 0; i < nr * n_in; i++) amax = fmaxf(amax, fabsf(rowsbuf[i]));
    }
    /* the two-level factor 1/S depends on amax alone: one block holding amax gives it */
    float tscale2 = 1;
    if (st[N_FMTS - 1].ok) {
        float one[64] = {amax};
        uint8_t blk[36];
        nb_quantize_nvfp4_2level(one, blk, 64, &tscale2);
    }
    double rms_w = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += CHUNK) {
        int64_t nr = rows - r0 < CHUNK ? rows - r0 : CHUNK;
        const uint8_t *src = (const uint8_t *)t->data + (size_t)r0 * in_row;
        if (nb_dequantize(t->type, src, rowsbuf, nr * n_in) ||
            nb_matmul_route(pool, t->type, src, nr, n_in, x, n_tok, yref, route)) {
            arg_error("%s", nb_last_error());
            goto out;
        }
        if (r0 == 0) { /* histogram unit: rms of the first chunk's weights */
            for (int64_t i = 0; i < nr * n_in; i++) rms_w += (double)rowsbuf[i] * rowsbuf[i];
            rms_w = sqrt(rms_w / (double)(nr * n_in));
            if (!(rms_w > 0)) rms_w = 1;
        }
        for (int f = 0; f < N_FMTS; f++) {
            stats *s = &st[f];
            if (!s->ok) continue;
            size_t rb;
            nb_row_bytes(fmts[f].type, n_in, &rb);
            job j = {&fmts[f], n_in, rowsbuf, q, deq, rb, amax, 0};
            const float ts = fmts[f].how == Q_2LEVEL ? tscale2 : 1.0f;
            if (nb_pool_for(pool, nr, 1, requant_rows, &j) || j.failed ||
                nb_matmul_route(pool, fmts[f].type, q, nr, n_in, x, n_tok, yq, route)) {
                arg_error("%s: %s", fmts[f].name, nb_last_error());
                goto out;
            }
            s->tscale = ts;
            for (int64_t i = 0; i < nr * n_in; i++) {
                const double w = rowsbuf[i], e = (double)deq[i] * ts - w;
                s->w_sq += w * w, s->e_sq += e * e;
                if (fabs(e) > s->e_max) s->e_max = fabs(e);
                if (svg) hist_add(&s->hist, e, rms_w);
            }
            for (int tk = 0; tk < n_tok; tk++)
                for (int64_t o = 0; o < nr; o++) {
                    const double y0 = yref[tk * nr + o], e = (double)yq[tk * nr + o] * ts - y0;
                    s->y_sq += y0 * y0, s->ye_sq += e * e;
                    if (fabs(e) > s->ye_max) s->ye_max = fabs(e);
                }
        }
    }
    const double nw = (double)rows * (double)n_in, ny = (double)rows * n_tok;
    if (svg && !strcmp(svg, "-")) {
        /* the picture on standard output is the whole output */
    } else if (json) {
        printf("{\"file\": ");
        ex_json_str(stdout, file);
        printf(", \"tensor\": ");
        ex_json_str(stdout, tensor);
        printf(", \"type\": \"%s\", \"row_length\": %lld, \"rows\": %lld, \"rows_total\": %lld, \"tokens\": %d, \"input\": ",
               nb_type_name(t->type), (long long)n_in, (long long)rows, (long long)rows_all, n_tok);
        if (xfile) ex_json_str(stdout, xfile);
        else printf("{\"sampled\": \"standard normal\", \"seed\": %llu}", (unsigned long long)seed);
        printf(", \"route\": \"%s\",\n \"formats\": [", route == NB_ROUTE_F32 ? "f32" : "quant");
        for (int f = 0; f < N_FMTS; f++) {
            const stats *s = &st[f];
            const nb_type_info *in = nb_type_get(fmts[f].type);
            printf("%s\n  {\"name\": \"%s\", \"type\": \"%s\", \"bits_per_weight\": ", f ? "," : "", fmts[f].name, in->name);
            ex_json_num(stdout, 8.0 * in->block_bytes / in->block_elems);
            if (!s->ok) {
                printf(", \"applicable\": false, \"reason\": ");
                ex_json_str(stdout, s->why);
                printf("}");
                continue;
            }
            printf(", \"applicable\": true, \"weight\": {\"rmse\": ");
            ex_json_num(stdout, sqrt(s->e_sq / nw));
            printf(", \"max\": ");
            ex_json_num(stdout, s->e_max);
            printf(", \"sqnr_db\": ");
            ex_json_num(stdout, sqnr(s->w_sq, s->e_sq));
            printf("}, \"output\": {\"rmse\": ");
            ex_json_num(stdout, sqrt(s->ye_sq / ny));
            printf(", \"max\": ");
            ex_json_num(stdout, s->ye_max);
            printf(", \"sqnr_db\": ");
            ex_json_num(stdout, sqnr(s->y_sq, s->ye_sq));
            printf("}, \"tensor_scale\": ");
            ex_json_num(stdout, s->tscale);
            printf("}");
        }
        printf("]}\n");
    } else {
        printf("%s: %s (%s, %lld x %lld), %lld of %lld rows requantized; output over %d %s input vector%s, route %s\n\n",
               file, tensor, nb_type_name(t->type), (long long)n_in, (long long)rows_all, (long long)rows,
               (long long)rows_all, n_tok, xfile ? "given" : "sampled normal", n_tok > 1 ? "s" : "",
               route == NB_ROUTE_F32 ? "f32" : "quant");
        printf("%-16s %7s | %12s %12s %9s | %12s %12s %9s\n", "format", "bits/w", "weight RMSE", "max |err|", "SQNR dB",
               "output RMSE", "max |err|", "SQNR dB");
        for (int f = 0; f < N_FMTS; f++) {
            const stats *s = &st[f];
            const nb_type_info *in = nb_type_get(fmts[f].type);
            printf("%-16s %7.4g | ", fmts[f].name, 8.0 * in->block_bytes / in->block_elems);
            if (!s->ok) { printf("n/a: %s\n", s->why); continue; }
            printf("%12.4e %12.4e %9.2f | %12.4e %12.4e %9.2f\n", sqrt(s->e_sq / nw), s->e_max, sqnr(s->w_sq, s->e_sq),
                   sqrt(s->ye_sq / ny), s->ye_max, sqnr(s->y_sq, s->ye_sq));
        }
        printf("\nweight error: requantized vs the file's values; output error: nb_matmul of the requantized rows vs"
               " the file's rows\n");
    }
    rc = 0;
    if (svg) {
        ex_hist h[N_FMTS];
        int nh = 0;
        for (int f = 0; f < N_FMTS; f++)
            if (st[f].ok) h[nh] = st[f].hist, h[nh++].rmse = sqrt(st[f].e_sq / nw);
        char title[160];
        snprintf(title, sizeof title, "%s (%s): |weight error| / rms(w), %lld rows", tensor, nb_type_name(t->type),
                 (long long)rows);
        rc = ex_svg_hist(svg, h, nh, title);
    }
    goto out;
oom:
    arg_error("out of memory");
out:
    free(xtext), free(x), free(rowsbuf), free(deq), free(q), free(yref), free(yq), free(st);
    nb_pool_destroy(pool);
    nb_gguf_close(g);
    return rc;
}
