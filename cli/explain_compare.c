/*
 * explain_compare.c: `nibble explain compare MODEL.gguf TENSOR`: what each 4-to-8-bit format would
 * do to one real tensor. The work is the library's nb_compare_formats (src/explain/compare.c); this
 * file reads the flags and the -x activations and prints the table, its JSON or the histograms.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/explain.h"

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

/* "what": {"rmse": .., "max": .., "sqnr_db": ..} */
static void json_error(const char *what, double rmse, double max, double sqnr_db) {
    printf("\"%s\": {\"rmse\": ", what);
    ex_json_num(stdout, rmse);
    printf(", \"max\": ");
    ex_json_num(stdout, max);
    printf(", \"sqnr_db\": ");
    ex_json_num(stdout, sqnr_db);
    printf("}");
}

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
    const int64_t n_in = t->ne[0];
    rc = 1;
    float *x = NULL;
    char *xtext = NULL;
    nb_compare_result *res = malloc(sizeof *res);
    if (!res) goto oom;
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
    }
    const nb_compare_params cp = {rows_lim, x, n_tok, seed, route, threads, svg != NULL};
    nb_status cs = nb_compare_formats(t, &cp, res);
    if (cs == NB_ERR_NOMEM) goto oom;
    if (cs) {
        arg_error("%s", nb_last_error());
        goto out;
    }
    const int64_t rows = res->rows, rows_all = res->rows_total;
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
        for (int f = 0; f < res->n_formats; f++) {
            const nb_compare_format *s = &res->formats[f];
            const nb_type_info *in = nb_type_get(s->type);
            printf("%s\n  {\"name\": \"%s\", \"type\": \"%s\", \"bits_per_weight\": ", f ? "," : "", s->name, in->name);
            ex_json_num(stdout, 8.0 * in->block_bytes / in->block_elems);
            if (!s->applicable) {
                printf(", \"applicable\": false, \"reason\": ");
                ex_json_str(stdout, s->why);
                printf("}");
                continue;
            }
            printf(", \"applicable\": true, ");
            json_error("weight", s->weight_rmse, s->weight_max, s->weight_sqnr_db);
            printf(", ");
            json_error("output", s->output_rmse, s->output_max, s->output_sqnr_db);
            printf(", \"tensor_scale\": ");
            ex_json_num(stdout, s->tensor_scale);
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
        for (int f = 0; f < res->n_formats; f++) {
            const nb_compare_format *s = &res->formats[f];
            const nb_type_info *in = nb_type_get(s->type);
            printf("%-16s %7.4g | ", s->name, 8.0 * in->block_bytes / in->block_elems);
            if (!s->applicable) { printf("n/a: %s\n", s->why); continue; }
            printf("%12.4e %12.4e %9.2f | %12.4e %12.4e %9.2f\n", s->weight_rmse, s->weight_max,
                   s->weight_sqnr_db, s->output_rmse, s->output_max, s->output_sqnr_db);
        }
        printf("\nweight error: requantized vs the file's values; output error: nb_matmul of the requantized rows vs"
               " the file's rows\n");
    }
    rc = 0;
    if (svg) {
        char title[160];
        snprintf(title, sizeof title, "%s (%s): |weight error| / rms(w), %lld rows", tensor, nb_type_name(t->type),
                 (long long)rows);
        nb_status st = nb_picture_errors(svg, res, title);
        if (st) rc = arg_status(st);
    }
    goto out;
oom:
    arg_error("out of memory");
out:
    free(xtext), free(x), free(res);
    nb_gguf_close(g);
    return rc;
}
