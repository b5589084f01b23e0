/*
 * imatrix.c: `nibble imatrix -m MODEL -f TEXT -o FILE [-c N] [--chunks N] [-t N] [--process-output]`,
 * llama-imatrix in nibble's CLI. The text is tokenized with BOS and cut into chunks of -c tokens,
 * each starting with BOS (as llama-imatrix does); each chunk is evaluated from an empty context
 * while the runtime's observer (nb_ctx_set_observer) adds every matrix input's x^2 to the
 * statistics, which are saved in llama.cpp's GGUF imatrix format (nibble.h: nb_imatrix_save).
 * The output matrix is left out unless --process-output (llama-imatrix's flag and default): then
 * every position's logits are computed, OUTPUT_SLICE positions at a time, and discarded. Exit 0;
 * 1 when the work fails; 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "nibble.h"

/* Positions per evaluation with --process-output: a logits row of a 262144-token vocabulary is 1 MiB. */
#define OUTPUT_SLICE 64

static int usage(FILE *f, int code) {
    fprintf(f, "usage: nibble imatrix -m MODEL -f TEXT -o FILE [-c N] [--chunks N] [-t N] [--process-output]\n"
               "  -c N              tokens per chunk (default 512)\n"
               "  --chunks N        chunks to evaluate (default: all the text holds)\n"
               "  -t N              threads (default: one per CPU)\n"
               "  --process-output  also collect the output matrix (the tied embedding of Gemma)\n");
    return code;
}

static int fail(const char *what) {
    fprintf(stderr, "nibble imatrix: %s: %s\n", what, nb_last_error());
    return 1;
}

int cmd_imatrix(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *out = NULL;
    int n_ctx = 512, n_chunks = 0, n_threads = 0, process_output = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int ok = 1;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout, 0);
        if (!strcmp(a, "-m")) ok = (model = arg_value(argc, argv, &i)) != NULL;
        else if (!strcmp(a, "-f")) ok = (file = arg_value(argc, argv, &i)) != NULL;
        else if (!strcmp(a, "-o")) ok = (out = arg_value(argc, argv, &i)) != NULL;
        else if (!strcmp(a, "-c")) ok = (v = arg_value(argc, argv, &i)) && arg_int(a, v, 8, 1 << 20, &n_ctx);
        else if (!strcmp(a, "--chunks")) ok = (v = arg_value(argc, argv, &i)) && arg_int(a, v, 1, 1 << 24, &n_chunks);
        else if (!strcmp(a, "-t")) ok = (v = arg_value(argc, argv, &i)) && arg_int(a, v, 1, 1024, &n_threads);
        else if (!strcmp(a, "--process-output")) process_output = 1;
        else {
            fprintf(stderr, "nibble imatrix: unknown argument '%s'\n", a);
            return usage(stderr, 2);
        }
        if (!ok) return 2;
    }
    if (!model || !file || !out) return usage(stderr, 2);
    size_t len = 0;
    char *text = arg_read_file(file, &len);
    if (!text) return 1;
    nb_model *m = NULL;
    nb_ctx *ctx = NULL;
    nb_imatrix *im = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;
    int rc = 1;
    if (nb_model_load(model, &m)) {
        rc = fail(model);
        goto done;
    }
    const nb_model_info *info = nb_model_get_info(m);
    if (n_ctx > info->n_ctx_train) {
        fprintf(stderr, "nibble imatrix: -c %d exceeds the model's training context of %d\n", n_ctx, info->n_ctx_train);
        rc = 2;
        goto done;
    }
    size_t n_ids = 0, cap = len + 2;
    const nb_tokenizer *tok = nb_model_tokenizer(m);
    if (!(ids = malloc(cap * sizeof *ids)) || nb_tokenize(tok, text, len, 1, 0, ids, cap, &n_ids)) {
        rc = fail("tokenize");
        goto done;
    }
    int avail = (int)(n_ids / (size_t)n_ctx);
    if (avail < 1) {
        fprintf(stderr, "nibble imatrix: %s holds %zu tokens, fewer than one chunk of %d\n", file, n_ids, n_ctx);
        goto done;
    }
    if (!n_chunks || n_chunks > avail) n_chunks = avail;
    nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = n_threads;
    if (nb_ctx_create(m, &cp, &ctx) || nb_imatrix_create(&im)) {
        rc = fail("context");
        goto done;
    }
    if (process_output && !(logits = malloc((size_t)OUTPUT_SLICE * (size_t)info->n_vocab * sizeof *logits))) {
        fprintf(stderr, "nibble imatrix: no memory for %d logits rows\n", OUTPUT_SLICE);
        goto done;
    }
    nb_ctx_set_observer(ctx, nb_imatrix_observe, im);
    const int32_t bos = nb_tokenizer_bos(tok);
    const double t0 = arg_now();
    const int tty = isatty(2);
    for (int c = 0; c < n_chunks; c++) {
        int32_t *chunk = ids + (size_t)c * (size_t)n_ctx;
        if (bos >= 0 && nb_tokenizer_add_bos(tok)) chunk[0] = bos;
        nb_ctx_reset(ctx);
        const int slice = process_output ? OUTPUT_SLICE : n_ctx;
        for (int p = 0; p < n_ctx; p += slice) {
            const int n = n_ctx - p < slice ? n_ctx - p : slice;
            if (nb_ctx_eval(ctx, chunk + p, n, logits, logits != NULL)) {
                rc = fail("eval");
                goto done;
            }
        }
        nb_imatrix_end_chunk(im);
        const double el = arg_now() - t0;
        if (tty) fprintf(stderr, "\rchunk %d/%d  %.1fs  ETA %.1fs", c + 1, n_chunks, el, el / (c + 1) * (n_chunks - c - 1));
    }
    if (tty) fprintf(stderr, "\n");
    if (!nb_imatrix_count(im)) {
        fprintf(stderr, "nibble imatrix: the runtime reported no matrix inputs to the observer\n");
        goto done;
    }
    if (nb_imatrix_save(im, out, file, (uint32_t)n_ctx)) {
        rc = fail(out);
        goto done;
    }
    printf("%s: %lld matrices from %d chunks of %d tokens -> %s (%.1fs)\n", model, (long long)nb_imatrix_count(im),
           n_chunks, n_ctx, out, arg_now() - t0);
    rc = 0;
done:
    nb_imatrix_free(im);
    free(logits);
    nb_ctx_free(ctx);
    nb_model_free(m);
    free(ids);
    free(text);
    return rc;
}
