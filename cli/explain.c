/*
 * explain.c: `nibble explain`, opening one code, one byte or one dot product and doing the
 * arithmetic in the open (the seed articles' method, on their fixtures and on real tensors):
 *
 *   nibble explain e2m1|int4|uint4|e8m0|e4m3|ue4m3|fp16|bf16|fp32 CODE   one code: fields, rule, value
 *   nibble explain bits CODE                        the same bits read by every format, side by side
 *   nibble explain FORMAT [--fixture article] [--byte N|--lane L]   a block type (q4_K, mxfp4, ...)
 *   nibble explain MODEL.gguf TENSOR [--row R] [--block B] [--byte N|--lane L|--col C]
 *   nibble explain dot --format mxfp4|nvfp4|q4_k|int4 --scale S -w "..." -x "..."
 *   nibble explain compare MODEL.gguf TENSOR [--rows N] [-x FILE]
 *
 * Every form takes --json; most take --svg FILE. This file dispatches and explains codes; the other
 * forms live in explain_block.c, explain_dot.c and explain_compare.c, their shared output helpers in
 * explain_out.c, and the pictures in the library (src/explain/pictures.c). Guide: docs/EXPLAIN.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/explain.h"

/* ------------------------------------------------------------- codes */

/* The code's bits with '|' between sign, exponent and mantissa. */
static void split_bits(const nb_code_trace *t, char *out) {
    const nb_code_info *in = nb_code_info_get(t->kind);
    char bits[40];
    nb_code_bits(t->code, t->width, bits);
    int n = 0, sign = in->exp_bits ? in->sign_bits : 0;
    for (int i = 0; i < t->width; i++) {
        if (i && ((sign && i == 1) || (in->exp_bits && in->man_bits && i == sign + in->exp_bits))) out[n++] = '|';
        out[n++] = bits[i];
    }
    out[n] = '\0';
}

static void code_json(const nb_code_trace *t, int indent) {
    char bits[40];
    nb_code_bits(t->code, t->width, bits);
    printf("%*s{\"format\": \"%s\", \"code\": %u, \"hex\": \"0x%X\", \"bits\": \"%s\", \"width\": %d, \"sign\": %d, ", indent,
           "", nb_code_info_get(t->kind)->name, t->code, t->code, bits, t->width, t->sign);
    printf("\"exponent_field\": %u, \"exponent_bits\": %d, \"mantissa_field\": %u, \"mantissa_bits\": %d, \"bias\": %d, ",
           t->exp_field, t->exp_bits, t->man_field, t->man_bits, t->bias);
    printf("\"rule\": \"%s\", \"exponent\": %d, \"value\": ", t->rule, t->exponent);
    ex_json_num(stdout, t->value);
    printf(", \"arithmetic\": ");
    ex_json_str(stdout, t->arith);
    printf("}");
}

static void code_text(const nb_code_trace *t, int zero_extended) {
    const nb_code_info *in = nb_code_info_get(t->kind);
    char fields[48];
    split_bits(t, fields);
    printf("%s %s (0x%X)%s: %s\n", in->name, fields, t->code, zero_extended ? ", zero-extended" : "", in->about);
    if (in->exp_bits) {
        char e[40], m[40];
        nb_code_bits(t->exp_field, in->exp_bits, e);
        nb_code_bits(t->man_field, in->man_bits, m);
        printf("  fields: ");
        if (in->sign_bits) printf("sign %d | ", t->sign);
        printf("exponent %s = %u", e, t->exp_field);
        if (in->man_bits) printf(" | mantissa %s = %u", m, t->man_field);
        printf("   (bias %d)\n", in->bias);
    } else {
        printf("  fields: %d bits, place values %s\n", t->width,
               t->kind == NB_CODE_INT4 ? "\xe2\x88\x92" "8 4 2 1 (the top bit weighs \xe2\x88\x92" "8)" : "8 4 2 1");
    }
    printf("  rule:   %s\n  value:  %s\n", t->rule, t->arith);
}

static const char CODES_USAGE[] =
    "usage: nibble explain FORMAT CODE [--json] [--svg FILE] [--scale S]\n"
    "       nibble explain bits CODE [--json]\n"
    "  FORMAT  e2m1 int4 uint4 e8m0 e4m3 ue4m3 fp16 bf16 fp32\n"
    "  CODE    0101 (binary: 0b prefix, or 4+ digits of 0/1), 0x5 (hex) or 5 (decimal)\n"
    "  --svg   draw the E2M1 and INT4 codebooks as rulers at --scale S (default 1), the code marked\n"
    "          ('-': standard output, instead of the text)\n";

int explain_codes(int argc, char **argv) {
    const char *fmt = argv[0], *text = NULL, *svg = NULL;
    int json = 0;
    float scale = 1.0f;
    arg_opt opts[] = {OPT_FLAG("--json", &json), OPT_STR("--svg", &svg), OPT_FLOAT("--scale", &scale, 1e-30, 1e30)};
    arg_spec spec = ARG_SPEC("explain", CODES_USAGE, opts, &text, 1);
    int rc = arg_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    if (!text) return arg_usage_error(&spec, "which code? e.g. `nibble explain %s 0101`", fmt);
    int all = !strcasecmp(fmt, "bits");
    int kind = all ? -1 : nb_code_find(fmt);
    uint32_t code;
    int width;
    if (nb_code_parse(text, all ? 32 : nb_code_info_get(kind)->width, &code, &width))
        return arg_usage_error(&spec, "%s", nb_last_error());
    nb_code_trace tr[NB_CODE_COUNT];
    int n = 0;
    for (int k = 0; k < NB_CODE_COUNT; k++) {
        if (all ? nb_code_info_get(k)->width < width : k != kind) continue;
        nb_code_explain(k, code, &tr[n++]);
    }
    if (!all && !strcmp(tr[0].rule, "not a code")) return arg_usage_error(&spec, "%s", tr[0].arith);
    if (svg && !strcmp(svg, "-")) {
        /* the picture on standard output is the whole output */
    } else if (json) {
        if (all) {
            char bits[40];
            nb_code_bits(code, width, bits);
            printf("{\"bits\": \"%s\", \"width\": %d, \"code\": %u, \"readings\": [\n", bits, width, code);
            for (int i = 0; i < n; i++) {
                code_json(&tr[i], 2);
                printf("%s\n", i + 1 < n ? "," : "");
            }
            printf("]}\n");
        } else {
            code_json(&tr[0], 0);
            printf("\n");
        }
    } else if (all) {
        char bits[40];
        nb_code_bits(code, width, bits);
        printf("bits %s (%d bits, 0x%X) read by every format at least %d bits wide:\n\n", bits, width, code, width);
        for (int i = 0; i < n; i++) {
            code_text(&tr[i], tr[i].width > width);
            printf("\n");
        }
    } else code_text(&tr[0], 0);
    if (svg) {
        /* the code's own value on the rulers when it is a 4-bit element code */
        double v = tr[0].value * scale;
        int mark = !all && tr[0].width == 4;
        char title[128];
        snprintf(title, sizeof title, "codebooks at scale %s%s%s", ex_num(0, scale), mark ? ", marked: " : "",
                 mark ? text : "");
        nb_status st = nb_picture_ruler(svg, scale, mark ? &v : NULL, mark, title);
        return st ? arg_status(st) : 0;
    }
    return 0;
}

/* ------------------------------------------------------------ dispatch */

static int usage(FILE *f, int code) {
    fprintf(f, "usage: nibble explain e2m1|int4|uint4|e8m0|e4m3|ue4m3|fp16|bf16|fp32 CODE\n"
               "       nibble explain bits CODE                       every format's reading of the same bits\n"
               "       nibble explain FORMAT [--fixture article] [--byte N | --lane L] [--value V]\n"
               "              FORMAT: %s\n"
               "       nibble explain MODEL.gguf TENSOR [--row R] [--block B] [--byte N | --lane L | --col C]\n"
               "       nibble explain dot --format mxfp4|nvfp4|q4_k|int4 --scale S -w \"w0 w1 ...\" -x \"x0 x1 ...\"\n"
               "       nibble explain compare MODEL.gguf TENSOR [--rows N] [-x FILE] [--tokens T] [--seed S]\n"
               "  every form: --json (machine-readable); most: --svg FILE (a picture). Guide: docs/EXPLAIN.md\n",
            ex_block_formats());
    return code;
}

int cmd_explain(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "nibble explain: what? a format, a code's format, a GGUF file, 'dot' or 'compare'\n");
        return usage(stderr, 2);
    }
    const char *what = argv[1];
    if (!strcmp(what, "-h") || !strcmp(what, "--help") || !strcmp(what, "help")) return usage(stdout, 0);
    if (!strcmp(what, "dot")) return explain_dot(argc - 1, argv + 1);
    if (!strcmp(what, "compare")) return explain_compare(argc - 1, argv + 1);
    if (!strcasecmp(what, "bits") || nb_code_find(what) >= 0) return explain_codes(argc - 1, argv + 1);
    if (nb_type_from_name(what) >= 0) return explain_block(argc - 1, argv + 1);
    size_t len = strlen(what);
    struct stat st;
    if ((len > 5 && !strcmp(what + len - 5, ".gguf")) || !stat(what, &st)) return explain_block(argc - 1, argv + 1);
    fprintf(stderr, "nibble explain: '%s' is not a format, a GGUF file, 'bits', 'dot' or 'compare'\n", what);
    return usage(stderr, 2);
}
