/*
 * quantize.c: `nibble quantize IN.gguf OUT.gguf RECIPE [flags]`, llama-quantize in nibble's CLI
 * (library: nb_quantize_model; rules per recipe in src/quant/quant.h). Prints a progress bar with
 * an ETA when stderr is a terminal, then a summary (size, bits per weight, time). With --stats it
 * also prints each converted tensor's weight RMSE and a per-type summary. Exit 0; 1 when the
 * conversion fails (the old OUT is left as it was); 2 on bad usage or an unknown recipe or type.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "nibble.h"

#define MAX_OVERRIDES 64
#define MAX_TYPE 64

static int usage(FILE *f, int code) {
    fprintf(f,
            "usage: nibble quantize IN.gguf OUT.gguf RECIPE [flags]\n"
            "recipes: q8_0 q4_0 q4_k_m (llama.cpp's rules; byte-identical in --mode ref)\n"
            "         mxfp4 nvfp4 (every weight), mxfp4_m nvfp4_m (sensitive tensors at Q6_K),\n"
            "         nvfp4_2l (two-level NVFP4 with a per-tensor .scale), auto:BPW (e.g. auto:5.0)\n"
            "  --mode ref|best          reference quantizers (default) or error-lowering searches\n"
            "  --two-level              NVFP4 tensors take the two-level recipe (+ <name>.scale)\n"
            "  --imatrix FILE           importance (nibble/llama.cpp imatrix) for best mode and auto\n"
            "  --pure TYPE              every quantizable weight in TYPE (recipe rules off)\n"
            "  --embed-type TYPE        type of token_embd / output (e.g. q8_0)\n"
            "  --tensor-type REGEX=TYPE override by tensor name (repeatable; first match wins)\n"
            "  -t N                     threads (default: one per CPU; output identical for any N)\n"
            "  --stats                  print the weight RMSE of every converted tensor\n");
    return code;
}

typedef struct ui {
    int tty, stats;
    double t0, last;
    /* per output type: converted elements, squared error, squared signal */
    double n[MAX_TYPE], sse[MAX_TYPE], sx2[MAX_TYPE];
    uint64_t bytes, elems;
} ui;

static void progress(void *user, uint64_t done, uint64_t total) {
    ui *u = user;
    if (!u->tty) return;
    double now = arg_now();
    if (now - u->last < 0.1 && done < total) return;
    u->last = now;
    double frac = total ? (double)done / (double)total : 1.0, el = now - u->t0;
    int filled = (int)(frac * 30);
    char bar[31];
    for (int i = 0; i < 30; i++) bar[i] = i < filled ? '#' : '.';
    bar[30] = 0;
    double eta = frac > 0 ? el * (1 - frac) / frac : 0;
    fprintf(stderr, "\r[%s] %5.1f%%  %6.1fs  ETA %6.1fs", bar, 100 * frac, el, eta);
    fflush(stderr);
}

static void on_tensor(void *user, const nb_quant_report *r) {
    ui *u = user;
    u->bytes += r->bytes;
    u->elems += (uint64_t)r->n_elem;
    if (!r->measured) return;
    if (r->dst_type >= 0 && r->dst_type < MAX_TYPE) {
        u->n[r->dst_type] += (double)r->n_elem;
        u->sse[r->dst_type] += r->sse;
        u->sx2[r->dst_type] += r->sum_x2;
    }
    if (u->stats) {
        if (u->tty) fprintf(stderr, "\r%70s\r", "");
        printf("%-36s %6s -> %-6s rmse %.4e  rel %.4e\n", r->name, nb_type_name(r->src_type), nb_type_name(r->dst_type),
               sqrt(r->sse / (double)r->n_elem), r->sum_x2 > 0 ? sqrt(r->sse / r->sum_x2) : 0.0);
    }
}

static int parse_type(const char *flag, const char *v, int *out) {
    *out = nb_type_from_name(v);
    if (*out < 0 || *out == NB_TYPE_Q8_K) {
        fprintf(stderr, "nibble quantize: %s: unknown type '%s' (f32 f16 bf16 q4_0 q5_0 q8_0 q4_K q5_K q6_K mxfp4 nvfp4)\n",
                flag, v);
        return 0;
    }
    return 1;
}

int cmd_quantize(int argc, char **argv) {
    nb_quant_params p = nb_quant_default_params();
    const char *pos[3] = {0}, *imatrix_path = NULL, *overrides[MAX_OVERRIDES];
    int n_pos = 0, n_over = 0;
    ui u;
    memset(&u, 0, sizeof u);
    p.recipe = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout, 0);
        if (!strcmp(a, "--two-level")) {
            p.two_level = 1;
        } else if (!strcmp(a, "--stats")) {
            u.stats = 1;
        } else if (!strcmp(a, "--mode")) {
            if (!(v = arg_value(argc, argv, &i))) return 2;
            if (!strcmp(v, "ref")) p.mode = NB_QMODE_REF;
            else if (!strcmp(v, "best")) p.mode = NB_QMODE_BEST;
            else {
                fprintf(stderr, "nibble quantize: --mode: '%s' (ref or best)\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--imatrix")) {
            if (!(imatrix_path = arg_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--pure")) {
            if (!(v = arg_value(argc, argv, &i)) || !parse_type(a, v, &p.pure_type)) return 2;
        } else if (!strcmp(a, "--embed-type")) {
            if (!(v = arg_value(argc, argv, &i)) || !parse_type(a, v, &p.embed_type)) return 2;
        } else if (!strcmp(a, "--tensor-type")) {
            if (!(v = arg_value(argc, argv, &i))) return 2;
            if (n_over == MAX_OVERRIDES) {
                fprintf(stderr, "nibble quantize: at most %d --tensor-type overrides\n", MAX_OVERRIDES);
                return 2;
            }
            overrides[n_over++] = v;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(v = arg_value(argc, argv, &i)) || !arg_int(a, v, 1, 1024, &p.n_threads)) return 2;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "nibble quantize: unknown flag '%s'\n", a);
            return usage(stderr, 2);
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            fprintf(stderr, "nibble quantize: unexpected argument '%s'\n", a);
            return usage(stderr, 2);
        }
    }
    if (n_pos != 3) return usage(stderr, 2);
    p.recipe = pos[2];
    p.overrides = overrides;
    p.n_overrides = n_over;
    p.measure = u.stats;
    p.progress = progress;
    p.on_tensor = on_tensor;
    p.user = &u;
    nb_imatrix *im = NULL;
    if (imatrix_path) {
        if (nb_imatrix_load(imatrix_path, &im)) {
            fprintf(stderr, "nibble quantize: %s\n", nb_last_error());
            return 1;
        }
        p.imatrix = im;
        if (p.mode == NB_QMODE_REF && strncmp(p.recipe, "auto:", 5))
            fprintf(stderr, "nibble quantize: note: --imatrix only weights --mode best and auto: recipes\n");
    }
    u.tty = isatty(2);
    u.t0 = u.last = arg_now();
    nb_status s = nb_quantize_model(pos[0], pos[1], &p);
    if (u.tty) fprintf(stderr, "\r%70s\r", "");
    nb_imatrix_free(im);
    if (s) {
        fprintf(stderr, "nibble quantize: %s\n", nb_last_error());
        /* a recipe, type or override the library refused is a usage error */
        return s == NB_ERR_INVALID_ARG ? 2 : 1;
    }
    double el = arg_now() - u.t0;
    printf("%s -> %s (%s%s): %.2f MiB, %.3f bits per weight, %.2f s\n", pos[0], pos[1], p.recipe,
           p.mode == NB_QMODE_BEST ? ", best" : "", (double)u.bytes / 1048576.0,
           u.elems ? 8.0 * (double)u.bytes / (double)u.elems : 0.0, el);
    if (u.stats)
        for (int t = 0; t < MAX_TYPE; t++)
            if (u.n[t] > 0)
                printf("  %-6s %12.0f weights  rmse %.4e  rel rmse %.4e\n", nb_type_name(t), u.n[t],
                       sqrt(u.sse[t] / u.n[t]), u.sx2[t] > 0 ? sqrt(u.sse[t] / u.sx2[t]) : 0.0);
    return 0;
}
