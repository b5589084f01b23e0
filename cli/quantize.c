/*
 * quantize.c: `nibble quantize IN.gguf OUT.gguf RECIPE [flags]`, llama-quantize in nibble's CLI
 * (library: nb_quantize_model; rules per recipe in src/quant/quant.h). Prints a progress bar with
 * an ETA when stderr is a terminal, then a summary (size, bits per weight, time). With --stats it
 * also prints each converted tensor's weight RMSE and a per-type summary. Exit 0; 1 when the
 * conversion fails (the old OUT is left as it was); 2 on bad usage, an unknown recipe or type, or an
 * OUT that is not a regular file; 130/143 when interrupted (the temporary file is removed).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "nibble.h"

#define MAX_TYPE 64

static const char USAGE[] =
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
    "  --allow-requantize       no note when IN is already quantized (llama-quantize's flag)\n"
    "  -t, --threads N          threads (default: one per CPU; output identical for any N)\n"
    "  --stats                  print the weight RMSE of every converted tensor\n"
    "OUT is written beside itself under a temporary name and renamed when complete; an OUT that is\n"
    "not a regular file is refused, a symbolic link is followed (docs/SECURITY.md).\n";

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

static int parse_type(const arg_spec *spec, const char *flag, const char *v, int *out) {
    *out = nb_type_from_name(v);
    if (*out >= 0) return 1;
    char names[256] = "";
    const nb_type_info *t;
    for (int i = 0; (t = nb_type_at(i)); i++)
        if (t->weight_type) snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", *names ? " " : "", t->name);
    arg_usage_error(spec, "%s: unknown type '%s' (%s)", flag, v, names);
    return 0;
}

/* Says so when IN already holds quantized weights: they are decoded and quantized again, and the
 * errors of both conversions add up (llama-quantize refuses without --allow-requantize). */
static void note_requantize(const char *path) {
    nb_gguf *g;
    if (nb_gguf_open_ex(path, NB_GGUF_LIST_UNSUPPORTED, &g)) return; /* nb_quantize_model reports it */
    int64_t n = 0;
    int type = -1;
    for (int64_t i = 0; i < nb_gguf_tensor_count(g); i++) {
        const nb_gguf_tensor *t = nb_gguf_tensor_at(g, i);
        if (t->n_dims < 2 || (t->supported && nb_type_get(t->type)->block_elems == 1)) continue; /* floats */
        if (!n++) type = t->type;
    }
    if (n)
        arg_note("%s is already quantized (%lld weight tensor%s, e.g. %s): they are decoded and quantized again, "
                 "and the errors of both add up; quantize from the F16/BF16/F32 file where there is one",
                 path, (long long)n, nb_plural(n), nb_type_name(type));
    nb_gguf_close(g);
}

int cmd_quantize(int argc, char **argv) {
    nb_quant_params p = nb_quant_default_params();
    const char *pos[3] = {0}, *imatrix_path = NULL, *pure = NULL, *embed = NULL;
    arg_strs overrides = {.n = 0};
    int mode = 0, allow_requantize = 0;
    ui u;
    memset(&u, 0, sizeof u);
    p.recipe = NULL;
    arg_opt opts[] = {
        OPT_FLAG("--two-level", &p.two_level),    OPT_FLAG("--stats", &u.stats),
        OPT_CHOICE("--mode", &mode, "ref|best"),  OPT_STR("--imatrix", &imatrix_path),
        OPT_STR("--pure", &pure),                 OPT_STR("--embed-type", &embed),
        OPT_STRS("--tensor-type", &overrides),
        OPT_FLAG("--allow-requantize", &allow_requantize), OPT_THREADS(&p.n_threads),
    };
    arg_spec spec = ARG_SPEC("quantize", USAGE, opts, pos, 3);
    int rc = arg_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    if (spec.n_pos != 3)
        return arg_usage_error(&spec, "give IN.gguf, OUT.gguf and a RECIPE (%d of the 3 given)", spec.n_pos);
    if ((pure && !parse_type(&spec, "--pure", pure, &p.pure_type)) ||
        (embed && !parse_type(&spec, "--embed-type", embed, &p.embed_type)))
        return CLI_USAGE;
    p.mode = mode ? NB_QMODE_BEST : NB_QMODE_REF;
    p.recipe = pos[2];
    p.overrides = overrides.v;
    p.n_overrides = overrides.n;
    p.measure = u.stats;
    p.progress = progress;
    p.on_tensor = on_tensor;
    p.user = &u;
    nb_imatrix *im = NULL;
    if (imatrix_path) {
        nb_status s = nb_imatrix_load(imatrix_path, &im);
        if (s) return arg_status(s);
        p.imatrix = im;
        if (p.mode == NB_QMODE_REF && strncmp(p.recipe, "auto:", 5))
            arg_note("--imatrix only weights --mode best and auto: recipes");
    }
    if (!allow_requantize) note_requantize(pos[0]);
    u.tty = isatty(2);
    u.t0 = u.last = arg_now();
    nb_status s = nb_quantize_model(pos[0], pos[1], &p);
    if (u.tty) fprintf(stderr, "\r%70s\r", "");
    nb_imatrix_free(im);
    if (s) return arg_status(s); /* a recipe, type, override or output the library refused is usage: 2 */
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
