/*
 * imatrix.c: `nibble imatrix -m MODEL -f TEXT -o FILE [-c N] [--chunks N] [-t N] [--process-output]`,
 * llama-imatrix in nibble's CLI. The text is tokenized with BOS and cut into chunks of -c tokens,
 * each starting with BOS (as llama-imatrix does); each chunk is evaluated from an empty context
 * while the runtime's observer (nb_ctx_set_observer) adds every matrix input's x^2 to the
 * statistics, which are saved in llama.cpp's GGUF imatrix format (nibble.h: nb_imatrix_save).
 * The output matrix is left out unless --process-output (llama-imatrix's flag and default): then
 * every position's logits are computed, NB_IMATRIX_OUTPUT_SLICE positions at a time, and
 * discarded. The loop is the library's (nb_imatrix_collect); this file reads the flags and the
 * text, and prints the progress and the summary. Exit 0; 1 when the work fails; 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "nibble.h"

static const char USAGE[] =
    "usage: nibble imatrix -m MODEL -f TEXT -o FILE [-c N] [--chunks N] [-t N] [--process-output]\n"
    "  -m, --model FILE   the GGUF model\n"
    "  -f, --file FILE    the text\n"
    "  -o, --output FILE  where the statistics go (llama.cpp's GGUF imatrix format)\n"
    "  -c, --ctx-size N   tokens per chunk (default 512)\n"
    "  --chunks N         chunks to evaluate (default: all the text holds)\n"
    "  -t, --threads N    threads (default: one per CPU)\n"
    "  --process-output   also collect the output matrix (the tied embedding of Gemma)\n"
    "  -ngl N             accepted and ignored (nibble runs on the CPU)\n";

/* Progress on a terminal: chunks done, time so far and left. */
typedef struct progress {
    int tty;
    double t0;
} progress;

static void on_chunk(void *user, int done, int n_chunks) {
    const progress *pr = user;
    const double el = arg_now() - pr->t0;
    if (pr->tty) fprintf(stderr, "\rchunk %d/%d  %.1fs  ETA %.1fs", done, n_chunks, el, el / done * (n_chunks - done));
}

int cmd_imatrix(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *out = NULL;
    int n_ctx = 512, n_chunks = 0, n_threads = 0, process_output = 0;
    arg_opt opts[] = {
        OPT_STR("-m|--model", &model),         OPT_STR("-f|--file", &file),
        OPT_STR("-o|--output", &out),          OPT_INT("-c|--ctx-size", &n_ctx, 8, 1 << 20),
        OPT_INT("--chunks", &n_chunks, 1, 1 << 24), OPT_THREADS(&n_threads),
        OPT_FLAG("--process-output", &process_output), OPT_NGL,
    };
    arg_spec spec = ARG_SPEC("imatrix", USAGE, opts, NULL, 0);
    int rc = arg_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    if (!model) return arg_usage_error(&spec, "-m MODEL is required");
    if (!file) return arg_usage_error(&spec, "-f TEXT is required: the text the statistics are collected over");
    if (!out) return arg_usage_error(&spec, "-o FILE is required: where the statistics go");
    nb_status s = nb_output_check(out, "imatrix"); /* refused now, not after the evaluation */
    if (s) return arg_status(s);
    size_t len = 0;
    char *text = arg_read_file(file, &len);
    if (!text) return 1;
    nb_model *m = NULL;
    nb_ctx *ctx = NULL;
    nb_imatrix *im = NULL;
    int32_t *ids = NULL;
    rc = 1;
    s = nb_model_load(model, &m);
    if (s) {
        rc = arg_status(s);
        goto done;
    }
    const nb_model_info *info = nb_model_get_info(m);
    if (n_ctx > info->n_ctx_train) {
        arg_error("-c %d exceeds the model's training context of %d tokens", n_ctx, info->n_ctx_train);
        rc = CLI_USAGE;
        goto done;
    }
    size_t n_ids = 0, cap = NB_TOKENIZE_MAX_IDS(len);
    const nb_tokenizer *tok = nb_model_tokenizer(m);
    if (!(ids = malloc(cap * sizeof *ids))) {
        rc = arg_error("out of memory for %zu token ids", cap);
        goto done;
    }
    if ((s = nb_tokenize(tok, text, len, 1, 0, ids, cap, &n_ids))) {
        rc = arg_status(s);
        goto done;
    }
    int avail = (int)(n_ids / (size_t)n_ctx);
    if (avail < 1) {
        arg_error("%s holds %zu token%s, fewer than one chunk of %d", file, n_ids, nb_plural((long long)n_ids), n_ctx);
        goto done;
    }
    if (!n_chunks || n_chunks > avail) n_chunks = avail;
    nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = n_threads;
    if ((s = nb_ctx_create(m, &cp, &ctx)) || (s = nb_imatrix_create(&im))) {
        rc = arg_status(s);
        goto done;
    }
    progress pr = {isatty(2), arg_now()};
    const nb_imatrix_params ip = {n_ctx, n_chunks, process_output, on_chunk, &pr};
    if ((s = nb_imatrix_collect(ctx, im, ids, (int64_t)n_ids, &ip))) {
        rc = arg_status(s);
        goto done;
    }
    if (pr.tty) fprintf(stderr, "\n");
    if (!nb_imatrix_count(im)) {
        arg_error("the runtime reported no matrix inputs to the observer");
        goto done;
    }
    if ((s = nb_imatrix_save(im, out, file, (uint32_t)n_ctx))) {
        rc = arg_status(s);
        goto done;
    }
    printf("%s: %lld matrices from %d chunk%s of %d tokens -> %s (%.1fs)\n", model, (long long)nb_imatrix_count(im),
           n_chunks, nb_plural(n_chunks), n_ctx, out, arg_now() - pr.t0);
    rc = 0;
done:
    nb_imatrix_free(im);
    nb_ctx_free(ctx);
    nb_model_free(m);
    free(ids);
    free(text);
    return rc;
}
