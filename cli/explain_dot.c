/*
 * explain_dot.c: `nibble explain dot --format mxfp4|nvfp4|q4_k|int4 --scale S -w "..." -x "..."`:
 * the articles' hand-sized dot product. Each weight is quantized at the given scale, reconstructed
 * and multiplied by its input; every lane's term is printed beside its exact term, and the output
 * error Δy = ŷ − y = Σ (ŵᵢ − wᵢ)·xᵢ closes the table. Results are printed to 12 significant digits
 * so decimal inputs (0.3, 0.9) do not show their binary residue.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/args.h"
#include "cli/explain.h"

/* A list of numbers: spaces, commas, brackets all separate; "−" (U+2212) reads as '-'. */
static int parse_list(const char *flag, const char *s, double *out, int cap, int *n) {
    char buf[4096];
    size_t k = 0;
    for (const char *p = s; *p && k + 1 < sizeof buf; p++) {
        if (!strncmp(p, "\xe2\x88\x92", 3)) buf[k++] = '-', p += 2;
        else buf[k++] = (*p == ',' || *p == '[' || *p == ']' || *p == ';') ? ' ' : *p;
    }
    buf[k] = '\0';
    *n = 0;
    for (char *p = buf;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        double v = strtod(p, &end);
        if (end == p || !isfinite(v) || (*end && *end != ' ' && *end != '\t' && *end != '\n')) {
            arg_error("%s: '%s' is not a list of finite numbers", flag, s);
            return 0;
        }
        if (*n == cap) {
            arg_error("%s: more than %d numbers", flag, cap);
            return 0;
        }
        out[(*n)++] = v;
        p = end;
    }
    if (!*n) arg_error("%s is empty", flag);
    return *n > 0;
}

/* A positive (or, with zero_ok, non-negative) finite number, read as a double: decimal scales
 * such as 0.3 must not pick up float rounding before the arithmetic. */
static int parse_pos(const char *flag, const char *s, int zero_ok, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || v < 0 || (!zero_ok && v == 0)) {
        arg_error("%s '%s': expected a %s finite number", flag, s, zero_ok ? "non-negative" : "positive");
        return 0;
    }
    *out = v;
    return 1;
}

/* s right-aligned in w columns, counting UTF-8 characters, not bytes (the minus sign is 3 bytes). */
static void cell(const char *s, int w) {
    int cols = 0;
    for (const char *p = s; *p; p++) cols += ((unsigned char)*p & 0xC0) != 0x80;
    printf(" %*s%s", w > cols ? w - cols : 0, "", s);
}

static double r12(double v) {
    char b[40];
    snprintf(b, sizeof b, "%.12g", v);
    return strtod(b, NULL);
}

static const char USAGE[] =
    "usage: nibble explain dot --format mxfp4|nvfp4|q4_k|int4 --scale S -w \"w0 w1 ...\" -x \"x0 x1 ...\"\n"
    "                          [--min M] [--tensor-scale T] [--ties even|low] [--json] [--svg FILE]\n"
    "  --scale S         int4 step; MXFP4 scale (rounded to E8M0); NVFP4 block scale (rounded to UE4M3);\n"
    "                    Q4_K gain d*s_j\n"
    "  --min M           Q4_K offset dmin*m_j, subtracted (default: max(0, -min w))\n"
    "  --tensor-scale T  NVFP4 per-tensor factor (default 1)\n"
    "  --ties            E2M1 ties: even (OCP, llama.cpp; default) or low (lowest code, article 1's lab)\n"
    "  --svg FILE        the weights on the format's ruler ('-': standard output, instead of the text)\n";

int explain_dot(int argc, char **argv) {
    nb_dot_params p = {.format = NB_DOT_MXFP4, .scale = 0, .tensor_scale = 1, .offset = -1};
    double w[NB_DOT_MAX], x[NB_DOT_MAX];
    int nw = 0, nx = 0, json = 0, format = 0, ties = 0;
    const char *svg = NULL, *scale = NULL, *tscale = NULL, *min = NULL, *ws = NULL, *xs = NULL;
    arg_opt opts[] = {
        OPT_CHOICE("--format", &format, "mxfp4|nvfp4|q4_k|int4"),
        OPT_STR("--scale", &scale), OPT_STR("--tensor-scale", &tscale), OPT_STR("--min", &min),
        OPT_CHOICE("--ties", &ties, "even|low"), OPT_STR("-w", &ws), OPT_STR("-x", &xs),
        OPT_FLAG("--json", &json), OPT_STR("--svg", &svg),
    };
    arg_spec spec = ARG_SPEC("explain dot", USAGE, opts, NULL, 0);
    int rc = arg_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    if (!arg_given(&spec, "--format") || !scale || !ws || !xs)
        return arg_usage_error(&spec, "--format, --scale, -w and -x are required");
    static const nb_dot_format formats[] = {NB_DOT_MXFP4, NB_DOT_NVFP4, NB_DOT_Q4_K, NB_DOT_INT4};
    p.format = formats[format];
    p.ties_low = ties == 1;
    if (!parse_pos("--scale", scale, 0, &p.scale) || (tscale && !parse_pos("--tensor-scale", tscale, 0, &p.tensor_scale)) ||
        (min && !parse_pos("--min", min, 1, &p.offset)) || !parse_list("-w", ws, w, NB_DOT_MAX, &nw) ||
        !parse_list("-x", xs, x, NB_DOT_MAX, &nx)) {
        fputs(USAGE, stderr);
        return CLI_USAGE;
    }
    if (nw != nx) return arg_usage_error(&spec, "%d weights but %d inputs; the lists must be the same length", nw, nx);
    if (p.format == NB_DOT_Q4_K && p.offset < 0) {
        p.offset = 0;
        for (int i = 0; i < nw; i++)
            if (-w[i] > p.offset) p.offset = -w[i];
    }
    nb_dot_trace t;
    nb_status st = nb_dot_explain(&p, w, x, nw, &t);
    if (st) return arg_status(st);
    static const char *const names[] = {"int4", "mxfp4", "nvfp4", "q4_K"};
    const int e2m1 = p.format == NB_DOT_MXFP4 || p.format == NB_DOT_NVFP4;
    if (svg && !strcmp(svg, "-")) {
        /* the picture on standard output is the whole output */
    } else if (json) {
        printf("{\"format\": \"%s\", \"scale\": ", names[p.format]);
        ex_json_num(stdout, r12(t.scale));
        printf(", \"scale_code\": ");
        if (t.scale_code >= 0) printf("%d", t.scale_code);
        else printf("null");
        printf(", \"tensor_scale\": ");
        ex_json_num(stdout, p.format == NB_DOT_NVFP4 ? p.tensor_scale : 1);
        printf(", \"offset\": ");
        ex_json_num(stdout, r12(t.offset));
        printf(", \"ties\": \"%s\", \"lanes\": [", e2m1 ? (p.ties_low ? "low" : "even") : "half away from zero");
        for (int i = 0; i < t.n; i++) {
            printf("%s\n  {\"i\": %d, \"w\": ", i ? "," : "", i);
            ex_json_num(stdout, w[i]);
            printf(", \"x\": ");
            ex_json_num(stdout, x[i]);
            printf(", \"code\": %d, \"element\": ", t.code[i]);
            ex_json_num(stdout, t.element[i]);
            printf(", \"w_hat\": ");
            ex_json_num(stdout, r12(t.w_hat[i]));
            printf(", \"term\": ");
            ex_json_num(stdout, r12(t.term[i]));
            printf(", \"term_exact\": ");
            ex_json_num(stdout, r12(t.term_exact[i]));
            printf(", \"error_term\": ");
            ex_json_num(stdout, r12(t.term[i] - t.term_exact[i]));
            printf(", \"clipped\": %s, \"tie\": %s}", t.clipped[i] ? "true" : "false", t.tie[i] ? "true" : "false");
        }
        printf("],\n \"y\": ");
        ex_json_num(stdout, r12(t.y));
        printf(", \"y_hat\": ");
        ex_json_num(stdout, r12(t.y_hat));
        printf(", \"error\": ");
        ex_json_num(stdout, r12(t.err));
        printf("}\n");
    } else {
        printf("dot product, %s at scale %s", names[p.format], ex_num(0, r12(t.scale)));
        if (p.format == NB_DOT_MXFP4) printf(" (E8M0 0x%02X = 2^(%d \xe2\x88\x92 127))", t.scale_code, t.scale_code);
        if (p.format == NB_DOT_NVFP4)
            printf(" = UE4M3 0x%02X (%s) \xc3\x97 tensor scale %s", t.scale_code,
                   ex_num(1, nb_ue4m3_to_fp32((uint8_t)t.scale_code)), ex_num(2, p.tensor_scale));
        if (r12(t.scale) != r12(p.scale)) printf("; %s asked, the scale code rounds it", ex_num(3, p.scale));
        printf("\n");
        if (e2m1)
            printf("  ŵ = scale \xc3\x97 E2M1(code), code = the E2M1 value nearest w/scale (ties: %s), reach \xc2\xb1%s\n",
                   p.ties_low ? "lowest code" : "even", ex_num(0, r12(6 * t.scale)));
        else if (p.format == NB_DOT_INT4)
            printf("  q = clip(round(w/s), \xe2\x88\x92" "8, 7), ŵ = s \xc3\x97 q, reach [%s, %s]\n", ex_num(0, r12(-8 * t.scale)),
                   ex_num(1, r12(7 * t.scale)));
        else
            printf("  q = clip(round((w + offset)/gain), 0, 15), ŵ = gain \xc3\x97 q \xe2\x88\x92 offset, gain %s, offset %s\n",
                   ex_num(0, r12(t.scale)), ex_num(1, r12(t.offset)));
        static const char *const head[9] = {"i", "w", "x", "code", "element", "ŵ", "ŵ·x", "w·x", "(ŵ\xe2\x88\x92w)·x"};
        printf("\n ");
        for (int c = 0; c < 9; c++) cell(head[c], c ? 10 : 3);
        printf("\n");
        for (int i = 0; i < t.n; i++) {
            char code[16], idx[16];
            if (e2m1) nb_code_bits((uint32_t)t.code[i], 4, code);
            else snprintf(code, sizeof code, "%d", t.code[i]);
            snprintf(idx, sizeof idx, "%d", i);
            printf(" ");
            cell(idx, 3), cell(ex_num(0, w[i]), 10), cell(ex_num(1, x[i]), 10), cell(code, 10);
            cell(ex_num(2, t.element[i]), 10), cell(ex_num(3, r12(t.w_hat[i])), 10), cell(ex_num(4, r12(t.term[i])), 10);
            cell(ex_num(5, r12(t.term_exact[i])), 10), cell(ex_num(6, r12(t.term[i] - t.term_exact[i])), 10);
            printf("%s%s\n", t.clipped[i] ? "  clipped" : "", t.tie[i] ? "  tie" : "");
        }
        printf("\n  y  = w\xc2\xb7x = %s\n  ŷ  = ŵ\xc2\xb7x = %s\n  Δy = ŷ \xe2\x88\x92 y = %s%s\n", ex_num(0, r12(t.y)),
               ex_num(1, r12(t.y_hat)), r12(t.err) > 0 ? "+" : "", ex_num(2, r12(t.err)));
        if (p.format == NB_DOT_INT4) {
            printf("  packed (earlier code in the low nibble):");
            for (int i = 0; i < t.n; i += 2)
                printf(" 0x%X%X", i + 1 < t.n ? t.code[i + 1] & 15 : 0, t.code[i] & 15);
            printf("\n");
        }
    }
    if (svg) {
        char title[160];
        snprintf(title, sizeof title, "%s at scale %s: weights (dots) and their reconstructions (arrows)", names[p.format],
                 ex_num(0, r12(t.scale)));
        st = nb_picture_ruler(svg, t.scale, w, nw, title);
        return st ? arg_status(st) : 0;
    }
    return 0;
}
