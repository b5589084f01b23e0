/*
 * inspect.c: `nibble inspect MODEL.gguf [--tensors] [--json] [-c N]`: what a GGUF file holds,
 * read from its header only (the reader validates everything; no weight byte is touched):
 * architecture and hyperparameters, tokenizer, the census of tensor types (count, parameters,
 * bytes, share of the file, bits per weight, kernel) and of the tensors that fell back to another
 * type and why (nb_gguf_census), the hyperparameters nibble runs it with (nb_model_bind, or why it
 * cannot), and the memory a run at -c N reserves (nb_ctx_estimate). This file reads the flags and
 * prints what those calls give. Exit 0; 1 when the file is damaged or holds a type nibble cannot
 * run (named per tensor); 2 on bad usage.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "nibble.h"

/* Hyperparameters shown, as `<arch>.<suffix>` keys. */
static const char *const hparams[] = {
    "block_count",          "context_length",          "embedding_length",        "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.key_length",    "attention.value_length",
    "rope.freq_base",       "rope.dimension_count",    "attention.sliding_window", "attention.layer_norm_rms_epsilon",
    "expert_count",         "expert_used_count",
};
#define N_HPARAMS (int)(sizeof hparams / sizeof hparams[0])

/* Which kernels the file's weights of a type run on here, into buf: the type's own, or, where a
 * matrix's row count chooses another (Q4_0's 8-row order), each with its count of matrices. */
static const char *kernel_path(const nb_gguf *g, int type, char *buf, size_t cap) {
    const char *k[2] = {NULL, NULL};
    long long n[2] = {0, 0};
    for (int64_t i = 0; i < nb_gguf_tensor_count(g); i++) {
        const nb_gguf_tensor *t = nb_gguf_tensor_at(g, i);
        if (t->type != type || t->n_dims < 2) continue;
        const char *name = nb_matmul_matrix_kernel_name(type, t->ne[1], NB_ROUTE_QUANT); /* each matrix's rows */
        const int j = !k[0] || k[0] == name ? 0 : 1; /* names are the tables' own strings */
        k[j] = name;
        n[j]++;
    }
    if (!k[1]) {
        const char *own = k[0] ? k[0] : nb_matmul_kernel_name(type, NB_ROUTE_QUANT);
        return own ? own : "none";
    }
    snprintf(buf, cap, "%s (%lld matrices), %s (%lld)", k[0], n[0], k[1], n[1]);
    return buf;
}

typedef struct summary {
    const nb_gguf *g;
    const char *path, *arch, *name, *tokenizer;
    int has_ftype;
    uint32_t ftype;
    uint64_t vocab, n_ctx;
    nb_census census;
    /* the model as nibble binds it (NULL: it does not run; why in `why`) and what a context at
     * n_ctx reserves (nb_ctx_estimate; mem_ok = 0 when it cannot say) */
    nb_model *model;
    char why[256];
    int mem_ok;
    size_t kv_bytes, ctx_bytes;
} summary;

static void summarize(summary *s, const nb_gguf *g, const char *path, int64_t n_ctx) {
    memset(s, 0, sizeof *s);
    s->g = g;
    s->path = path;
    if (nb_gguf_get_string(g, "general.architecture", &s->arch)) s->arch = "";
    if (nb_gguf_get_string(g, "general.name", &s->name)) s->name = "";
    if (nb_gguf_get_string(g, "tokenizer.ggml.model", &s->tokenizer)) s->tokenizer = "";
    s->has_ftype = !nb_gguf_get_u32(g, "general.file_type", &s->ftype);
    nb_gguf_value v;
    if (!nb_gguf_kv_value(g, nb_gguf_find_key(g, "tokenizer.ggml.tokens"), &v) && v.type == NB_GGUF_ARRAY)
        s->vocab = v.v.arr.count;
    nb_gguf_census(g, &s->census);
    if (nb_model_bind(g, &s->model)) {
        snprintf(s->why, sizeof s->why, "%s", nb_last_error());
        return;
    }
    const nb_model_info *in = nb_model_get_info(s->model);
    nb_ctx_params p = nb_ctx_default_params();
    p.n_ctx = n_ctx > 0 ? (int)n_ctx : in->n_ctx_train;
    s->n_ctx = (uint64_t)p.n_ctx;
    s->mem_ok = nb_ctx_estimate(s->model, &p, &s->kv_bytes, &s->ctx_bytes) == NB_OK;
    if (!s->mem_ok) snprintf(s->why, sizeof s->why, "%s", nb_last_error());
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* ----------------------------------------------------------------- text */

/* A scalar value as text (strings as they are, numbers in full). */
static void print_value(FILE *f, const nb_gguf_value *v) {
    switch (v->type) {
    case NB_GGUF_U8: case NB_GGUF_U16: case NB_GGUF_U32: case NB_GGUF_U64:
        fprintf(f, "%llu", (unsigned long long)v->v.u);
        break;
    case NB_GGUF_I8: case NB_GGUF_I16: case NB_GGUF_I32: case NB_GGUF_I64:
        fprintf(f, "%lld", (long long)v->v.i);
        break;
    case NB_GGUF_F32: fprintf(f, "%.9g", v->v.f); break;
    case NB_GGUF_F64: fprintf(f, "%.17g", v->v.f); break;
    case NB_GGUF_BOOL: fputs(v->v.u ? "true" : "false", f); break;
    case NB_GGUF_STRING: arg_text(f, v->v.str.ptr, v->v.str.len); break;
    case NB_GGUF_ARRAY: fprintf(f, "[%llu elements]", (unsigned long long)v->v.arr.count); break;
    }
}

/* The hyperparameters nibble read and will run with (nb_model_info), not the raw keys above. */
static void print_read(const nb_model_info *in) {
    printf("runs:         yes, as %s: %d layers, width %d, FFN %d, %d heads (%d KV) of %d, vocabulary %d\n",
           arg_safe(0, in->arch), in->n_layer, in->n_embd, in->n_ff, in->n_head, in->n_head_kv, in->head_dim,
           in->n_vocab);
    printf("              context %d tokens (trained)\n", in->n_ctx_train);
    printf("              RoPE on %d dimensions, base %g", in->n_rot, in->rope_base);
    if (in->n_sliding) printf(" (local layers %g)", in->rope_base_local);
    printf(", scaling %s", in->rope_scaling);
    if (in->rope_freq_scale != 1.0f) printf(" (factor %g)", 1.0 / in->rope_freq_scale);
    printf("; RMS epsilon %g\n", in->rms_eps);
    if (in->n_sliding) printf("              sliding window %d on %d of %d layers\n", in->sliding_window, in->n_sliding, in->n_layer);
    if (in->attn_softcap || in->final_softcap)
        printf("              softcap: attention %g, final %g\n", in->attn_softcap, in->final_softcap);
}

/* One row of the census table. */
static void print_count(const nb_gguf *g, const char *label, const nb_census_count *c, const char *tail) {
    printf("%-8s %8llu %14llu %12.2f %6.2f%% %8.4f  %s\n", label, (unsigned long long)c->tensors,
           (unsigned long long)c->params, mib(c->bytes), 100.0 * (double)c->bytes / (double)nb_gguf_file_size(g),
           c->bits_per_weight, tail);
}

static void print_human(const summary *s, int tensors) {
    const nb_gguf *g = s->g;
    const nb_census *c = &s->census;
    printf("file:         %s\n", s->path);
    printf("              %.1f MiB, GGUF v%u, %lld tensors, %lld keys, alignment %u, data at %llu\n",
           mib(nb_gguf_file_size(g)), nb_gguf_version(g), (long long)nb_gguf_tensor_count(g),
           (long long)nb_gguf_kv_count(g), nb_gguf_alignment(g), (unsigned long long)nb_gguf_data_offset(g));
    printf("model:        %s (architecture %s)", *s->name ? arg_safe(0, s->name) : "?", *s->arch ? arg_safe(1, s->arch) : "?");
    if (s->has_ftype) printf(", file type %s (%u)", nb_ftype_name((int)s->ftype), s->ftype);
    printf("\n");
    for (int i = 0; i < N_HPARAMS && *s->arch; i++) {
        nb_gguf_value v;
        if (nb_gguf_kv_value(g, nb_gguf_find_arch_key(g, hparams[i], NULL, 0), &v)) continue;
        printf("  %-34s ", hparams[i]);
        print_value(stdout, &v);
        printf("\n");
    }
    printf("vocabulary:   %llu token%s, tokenizer %s\n", (unsigned long long)s->vocab, nb_plural((long long)s->vocab),
           *s->tokenizer ? arg_safe(0, s->tokenizer) : "?");
    if (s->model) print_read(nb_model_get_info(s->model));
    else printf("runs:         no: %s\n", arg_safe(0, s->why));
    printf("\n%-8s %8s %14s %12s %7s %8s  %s\n", "type", "tensors", "parameters", "MiB", "share", "bits/w", "kernel");
    for (int i = 0; i < c->n_types; i++) {
        char buf[160];
        print_count(g, nb_type_name(c->types[i].type), &c->types[i], kernel_path(g, c->types[i].type, buf, sizeof buf));
    }
    print_count(g, "total", &c->total, "(effective bits per weight of the file)");
    if (c->n_fallback) {
        printf("\nfallbacks: %llu weight tensors hold another type than the K-quant recipe wanted:\n",
               (unsigned long long)c->n_fallback);
        for (int k = 0; k < c->n_groups; k++)
            printf("  %llu in %s instead of %s: row length %lld is not a multiple of 256 (e.g. %s)\n",
                   (unsigned long long)c->groups[k].tensors, nb_type_name(c->groups[k].type),
                   nb_type_name(c->groups[k].wanted), (long long)c->groups[k].row_length, arg_safe(0, c->groups[k].first));
        if (c->ungrouped) printf("  %llu more (see --tensors)\n", (unsigned long long)c->ungrouped);
    }
    if (s->mem_ok)
        printf("\nmemory at -c %llu: weights %.1f MiB (mapped) + KV cache %.1f MiB (f16) + activations %.1f MiB "
               "(-b 512, default threads)\n              = %.1f MiB; `nibble run -c %llu` reserves the last two\n",
               (unsigned long long)s->n_ctx, mib(c->total.bytes), mib(s->kv_bytes), mib(s->ctx_bytes - s->kv_bytes),
               mib(c->total.bytes + s->ctx_bytes), (unsigned long long)s->n_ctx);
    else
        printf("\nmemory: weights %.1f MiB (mapped); the context unknown: %s\n", mib(c->total.bytes),
               s->model ? arg_safe(0, s->why) : "the model does not run");
    if (!tensors) return;
    printf("\n%-40s %-7s %-28s %12s %12s\n", "tensor", "type", "shape", "bytes", "offset");
    for (int64_t i = 0; i < nb_gguf_tensor_count(g); i++) {
        const nb_gguf_tensor *t = nb_gguf_tensor_at(g, i);
        char shape[96];
        int n = 0;
        for (int d = 0; d < t->n_dims; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, d ? " x %lld" : "%lld", (long long)t->ne[d]);
        const int wanted = nb_census_fallback_of(c, t);
        printf("%-40s %-7s %-28s %12llu %12llu%s%s%s\n", arg_safe(0, t->name), nb_type_name(t->type), shape,
               (unsigned long long)t->bytes, (unsigned long long)t->offset, wanted >= 0 ? "  fallback from " : "",
               wanted >= 0 ? nb_type_name(wanted) : "", t->supported ? "" : "  NOT SUPPORTED");
    }
}

/* ----------------------------------------------------------------- JSON */

static void json_value(FILE *f, const nb_gguf_value *v) {
    if (v->type == NB_GGUF_STRING) arg_json_str(f, v->v.str.ptr, v->v.str.len);
    else if (v->type == NB_GGUF_ARRAY) {
        fprintf(f, "{\"array\": \"%s\", \"count\": %llu}", nb_gguf_vtype_name(v->v.arr.type),
                (unsigned long long)v->v.arr.count);
    } else if ((v->type == NB_GGUF_F32 || v->type == NB_GGUF_F64) && !isfinite(v->v.f)) fputs("null", f);
    else print_value(f, v);
}

static void print_json(const summary *s) {
    const nb_gguf *g = s->g;
    const nb_census *c = &s->census;
    printf("{\n  \"file\": ");
    arg_json_str(stdout, s->path, strlen(s->path));
    printf(",\n  \"file_bytes\": %llu, \"version\": %u, \"alignment\": %u, \"data_offset\": %llu,\n",
           (unsigned long long)nb_gguf_file_size(g), nb_gguf_version(g), nb_gguf_alignment(g),
           (unsigned long long)nb_gguf_data_offset(g));
    printf("  \"architecture\": ");
    arg_json_str(stdout, s->arch, strlen(s->arch));
    printf(", \"name\": ");
    arg_json_str(stdout, s->name, strlen(s->name));
    printf(", \"file_type\": ");
    if (s->has_ftype) printf("{\"id\": %u, \"name\": \"%s\"}", s->ftype, nb_ftype_name((int)s->ftype));
    else printf("null");
    printf(",\n  \"vocab_size\": %llu, \"tokenizer\": ", (unsigned long long)s->vocab);
    arg_json_str(stdout, s->tokenizer, strlen(s->tokenizer));
    printf(",\n  \"metadata\": {");
    for (int64_t k = 0; k < nb_gguf_kv_count(g); k++) {
        nb_gguf_value v;
        nb_gguf_kv_value(g, k, &v);
        printf("%s\n    ", k ? "," : "");
        arg_json_str(stdout, nb_gguf_kv_key(g, k), strlen(nb_gguf_kv_key(g, k)));
        printf(": ");
        json_value(stdout, &v);
    }
    printf("\n  },\n  \"census\": [");
    for (int i = 0; i < c->n_types; i++) {
        const nb_census_count *n = &c->types[i];
        char buf[160];
        printf("%s\n    {\"type\": \"%s\", \"id\": %d, \"tensors\": %llu, \"parameters\": %llu, \"bytes\": %llu, "
               "\"share\": %.6f, \"bits_per_weight\": %.6f, \"kernel\": \"%s\"}",
               i ? "," : "", nb_type_name(n->type), n->type, (unsigned long long)n->tensors, (unsigned long long)n->params,
               (unsigned long long)n->bytes, (double)n->bytes / (double)nb_gguf_file_size(g), n->bits_per_weight,
               kernel_path(g, n->type, buf, sizeof buf));
    }
    printf("\n  ],\n  \"total\": {\"tensors\": %llu, \"parameters\": %llu, \"bytes\": %llu, \"bits_per_weight\": %.6f},\n",
           (unsigned long long)c->total.tensors, (unsigned long long)c->total.params, (unsigned long long)c->total.bytes,
           c->total.bits_per_weight);
    printf("  \"runs\": ");
    if (s->model) {
        const nb_model_info *in = nb_model_get_info(s->model);
        printf("{\"n_layer\": %d, \"n_embd\": %d, \"n_ff\": %d, \"n_head\": %d, \"n_head_kv\": %d, \"head_dim\": %d, "
               "\"n_rot\": %d, \"n_vocab\": %d, \"n_ctx_train\": %d, \"rope_base\": %.9g, \"rope_base_local\": %.9g, "
               "\"rope_scaling\": \"%s\", \"rope_freq_scale\": %.9g, \"sliding_window\": %d, \"n_sliding\": %d, "
               "\"rms_eps\": %.9g, \"attn_softcap\": %.9g, \"final_softcap\": %.9g},\n",
               in->n_layer, in->n_embd, in->n_ff, in->n_head, in->n_head_kv, in->head_dim, in->n_rot, in->n_vocab,
               in->n_ctx_train, in->rope_base, in->rope_base_local, in->rope_scaling, in->rope_freq_scale,
               in->sliding_window, in->n_sliding, in->rms_eps, in->attn_softcap, in->final_softcap);
    } else {
        printf("{\"error\": ");
        arg_json_str(stdout, s->why, strlen(s->why));
        printf("},\n");
    }
    printf("  \"memory\": {\"n_ctx\": %llu, \"weights_bytes\": %llu, ", (unsigned long long)s->n_ctx,
           (unsigned long long)c->total.bytes);
    if (s->mem_ok)
        printf("\"kv_cache_bytes\": %zu, \"context_bytes\": %zu, \"total_bytes\": %llu},\n", s->kv_bytes, s->ctx_bytes,
               (unsigned long long)(c->total.bytes + s->ctx_bytes));
    else
        printf("\"kv_cache_bytes\": null, \"context_bytes\": null, \"total_bytes\": null},\n");
    printf("  \"tensors\": [");
    for (int64_t i = 0; i < nb_gguf_tensor_count(g); i++) {
        const nb_gguf_tensor *t = nb_gguf_tensor_at(g, i);
        printf("%s\n    {\"name\": ", i ? "," : "");
        arg_json_str(stdout, t->name, strlen(t->name));
        printf(", \"type\": \"%s\", \"shape\": [", nb_type_name(t->type));
        for (int d = 0; d < t->n_dims; d++) printf("%s%lld", d ? ", " : "", (long long)t->ne[d]);
        printf("], \"bytes\": %llu, \"offset\": %llu, \"supported\": %s, \"fallback_from\": ",
               (unsigned long long)t->bytes, (unsigned long long)t->offset, t->supported ? "true" : "false");
        const int wanted = nb_census_fallback_of(c, t);
        if (wanted >= 0) printf("\"%s\"}", nb_type_name(wanted));
        else printf("null}");
    }
    printf("\n  ]\n}\n");
}

/* ----------------------------------------------------------------- main */

static const char USAGE[] =
    "usage: nibble inspect MODEL.gguf [--tensors] [--json] [-c N]\n"
    "  --tensors          list every tensor (name, type, shape, bytes, offset)\n"
    "  --json             print everything as JSON on stdout\n"
    "  -c, --ctx-size N   context length for the memory estimate (default: the model's)\n"
    "Text output shows control bytes of the file's strings as \\xHH; --json escapes them.\n";

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    int tensors = 0, json = 0, n_ctx = 0;
    arg_opt opts[] = {OPT_FLAG("--tensors", &tensors), OPT_FLAG("--json", &json),
                      OPT_INT("-c|--ctx-size", &n_ctx, 1, 1 << 30)};
    arg_spec spec = ARG_SPEC("inspect", USAGE, opts, &path, 1);
    int rc = arg_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    if (!path) return arg_usage_error(&spec, "which model? give MODEL.gguf");
    if (json && tensors) return arg_usage_error(&spec, "--json always lists the tensors: drop --tensors");
    nb_gguf *g;
    nb_status st = nb_gguf_open_ex(path, NB_GGUF_LIST_UNSUPPORTED, &g);
    if (st) return arg_status(st);
    summary *s = malloc(sizeof *s);
    if (!s) {
        nb_gguf_close(g);
        return arg_error("out of memory");
    }
    summarize(s, g, path, n_ctx);
    if (json) print_json(s);
    else print_human(s, tensors);
    int64_t bad = nb_gguf_unsupported_count(g), named = 0;
    for (int64_t i = 0; i < nb_gguf_tensor_count(g) && named < 8; i++) { /* the first few; --tensors lists all */
        const nb_gguf_tensor *t = nb_gguf_tensor_at(g, i);
        if (!t->supported && ++named)
            arg_error("tensor '%s' has type %s (id %d), which nibble cannot run", arg_safe(0, t->name),
                      nb_type_name(t->type), t->type);
    }
    if (bad) arg_error("%s: %lld tensor%s of types nibble cannot run", path, (long long)bad, nb_plural(bad));
    nb_model_free(s->model);
    free(s);
    nb_gguf_close(g);
    return bad ? 1 : 0;
}
