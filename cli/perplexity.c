/*
 * perplexity.c: `nibble perplexity`, llama-perplexity's measurement (windows of -c tokens, the
 * second half of each scored) with its flags; `--save-logits` keeps the base distributions and
 * `--kld` compares a model with them. Progress on stderr: a bar with the time left when stderr is a
 * terminal, otherwise a line every tenth of the work. Results on stdout (text, or --json).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "nibble.h"

typedef struct ppl_opts {
    const char *model, *file, *save, *base;
    int n_ctx, n_batch, n_threads, n_chunks, top_k, kv_f32, json;
    arg_cache cache;
} ppl_opts;

static const char USAGE[] =
    "usage: nibble perplexity -m MODEL (-f TEXT | --kld BASE) [options]\n"
    "  -m, --model FILE       the GGUF model\n"
    "  -f, --file FILE        text to score (tokenized with BOS, cut into windows of -c tokens)\n"
    "  -c, --ctx-size N       window (default 512); each window's second half is scored\n"
    "  -b, --batch-size N     tokens per evaluation step; logits of N positions are held at once,\n"
    "                         N x n_vocab x 4 bytes (default 64)\n"
    "  -t, --threads N        threads (default: all CPUs)\n"
    "  --chunks N             windows to score (default: all)\n"
    "  --save-logits FILE     keep the distributions (top K + rest) for a later --kld\n"
    "  --top-k K              probabilities kept per position by --save-logits (default 64, max 1024)\n"
    "  --kld FILE             compare with a --save-logits file: KL divergence, same top token, dp;\n"
    "                         scores the file's tokens and window (no -f)\n"
    ARG_CACHE_USAGE
    "  --kv-f32               F32 KV cache (-ctk f32 -ctv f32)\n"
    "  --json                 results as one JSON object on stdout\n"
    "  -ngl N                 accepted and ignored (nibble runs on the CPU)\n";

/* Returns -1 to go on, or the exit code. */
static int parse(int argc, char **argv, ppl_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_batch = 64;
    o->top_k = 64;
    arg_opt opts[] = {
        OPT_STR("-m|--model", &o->model),
        OPT_STR("-f|--file", &o->file),
        OPT_INT("-c|--ctx-size", &o->n_ctx, 4, 1 << 20),
        OPT_INT("-b|--batch-size", &o->n_batch, 1, 4096),
        OPT_THREADS(&o->n_threads),
        OPT_INT("--chunks", &o->n_chunks, 1, 1 << 24),
        OPT_STR("--save-logits", &o->save),
        OPT_INT("--top-k", &o->top_k, 1, 1024),
        OPT_STR("--kld", &o->base),
        OPT_CACHE(&o->cache),
        OPT_FLAG("--kv-f32", &o->kv_f32),
        OPT_FLAG("--json", &o->json),
        OPT_NGL,
    };
    arg_spec spec = ARG_SPEC("perplexity", USAGE, opts, NULL, 0);
    int rc = arg_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    const char *err = !o->model                                ? "-m MODEL is required"
                      : !o->file && !o->base                   ? "give a text with -f, or a base file with --kld"
                      : o->file && o->base                     ? "--kld scores the base file's own tokens: drop -f"
                      : arg_given(&spec, "--top-k") && !o->save ? "--top-k only applies to --save-logits"
                      : o->n_ctx && o->base                    ? "--kld uses the base file's window: drop -c"
                                                               : NULL;
    return err ? arg_usage_error(&spec, "%s", err) : -1;
}

/* --------------------------------------------------------------- progress */

typedef struct progress {
    double t0, last;     /* start, last line printed (non-terminal) */
    int tty, last_tenth;
} progress;

static void fmt_time(double s, char *buf, size_t cap) {
    const long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, t % 3600 / 60);
    else if (t >= 60) snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, cap, "%lds", t);
}

static void on_window(void *user, int done, int total, double ppl) {
    progress *p = user;
    const double now = arg_now(), el = now - p->t0;
    char left[32], spent[32];
    fmt_time(el / done * (total - done), left, sizeof left);
    fmt_time(el, spent, sizeof spent);
    if (p->tty) {
        enum { W = 30 };
        char bar[W + 1];
        const int fill = (int)((long)W * done / total);
        for (int i = 0; i < W; i++) bar[i] = i < fill ? '#' : '.';
        bar[W] = '\0';
        fprintf(stderr, "\r[%s] %d/%d windows  PPL %.4f  %s spent, %s left ", bar, done, total, ppl, spent, left);
        if (done == total) fputc('\n', stderr);
        return;
    }
    /* a log file gets a line per tenth of the work, and at least one a minute */
    const int tenth = (int)(10L * done / total);
    if (tenth != p->last_tenth || now - p->last >= 60 || done == total) {
        fprintf(stderr, "perplexity: %d/%d windows, PPL %.4f, %s spent, %s left\n", done, total, ppl, spent, left);
        p->last_tenth = tenth;
        p->last = now;
    }
}

/* ---------------------------------------------------------------- output */

static void print_text(const nb_ppl_result *r) {
    printf("Final estimate: PPL = %.4f +/- %.5f  (%d windows of %d, %lld positions)\n", r->ppl, r->ppl_err, r->n_chunks,
           r->n_ctx, (long long)r->count);
    if (!r->has_base) return;
    printf("\n====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f +/- %10.6f\n", r->ppl, r->ppl_err);
    printf("Mean PPL(base)                : %10.6f +/- %10.6f\n", r->ppl_base, r->ppl_base_err);
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f +/- %10.6f\n", r->ln_ratio, r->ln_ratio_err);
    printf("\n====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6f +/- %10.6f\n", r->kld, r->kld_err);
    printf("Maximum KLD: %10.6f\n", r->kld_max);
    printf("99.9%%   KLD: %10.6f\n", r->kld_p999);
    printf("99.0%%   KLD: %10.6f\n", r->kld_p99);
    printf("95.0%%   KLD: %10.6f\n", r->kld_p95);
    printf("90.0%%   KLD: %10.6f\n", r->kld_p90);
    printf("Median  KLD: %10.6f\n", r->kld_median);
    printf("Minimum KLD: %10.6f\n", r->kld_min);
    printf("\n====== Token probability statistics ======\n");
    printf("Mean    dp : %7.3f +/- %5.3f %%\n", 100 * r->dp_mean, 100 * r->dp_mean_err);
    printf("Maximum |dp|: %6.3f %%\n", 100 * r->dp_max);
    printf("RMS dp     : %7.3f +/- %5.3f %%\n", 100 * r->dp_rms, 100 * r->dp_rms_err);
    printf("Same top p : %7.3f +/- %5.3f %%\n", 100 * r->same_top, 100 * r->same_top_err);
}

static void print_json(const nb_ppl_result *r, long n_text, double secs, int threads, size_t ctx_bytes) {
    printf("{\"n_ctx\": %d, \"windows\": %d, \"positions\": %lld, \"text_tokens\": %ld, \"ppl\": %.6f, \"ppl_err\": %.6f",
           r->n_ctx, r->n_chunks, (long long)r->count, n_text, r->ppl, r->ppl_err);
    if (r->has_base)
        printf(", \"ppl_base\": %.6f, \"ppl_base_err\": %.6f, \"ln_ratio\": %.6f, \"ln_ratio_err\": %.6f, "
               "\"kld\": %.8f, \"kld_err\": %.8f, \"kld_max\": %.6f, \"kld_p999\": %.6f, \"kld_p99\": %.6f, "
               "\"kld_p95\": %.6f, \"kld_p90\": %.6f, \"kld_median\": %.8f, \"kld_min\": %.8f, "
               "\"same_top\": %.6f, \"same_top_err\": %.6f, \"dp_mean\": %.6f, \"dp_mean_err\": %.6f, "
               "\"dp_rms\": %.6f, \"dp_rms_err\": %.6f, \"dp_max\": %.6f",
               r->ppl_base, r->ppl_base_err, r->ln_ratio, r->ln_ratio_err, r->kld, r->kld_err, r->kld_max, r->kld_p999,
               r->kld_p99, r->kld_p95, r->kld_p90, r->kld_median, r->kld_min, r->same_top, r->same_top_err, r->dp_mean,
               r->dp_mean_err, r->dp_rms, r->dp_rms_err, r->dp_max);
    /* every window evaluates n_ctx - 1 tokens */
    const double evaluated = (double)r->n_chunks * (r->n_ctx - 1);
    printf(", \"seconds\": %.3f, \"tokens_per_s\": %.2f, \"threads\": %d, \"context_mib\": %.2f, \"peak_rss_mib\": %.1f}\n",
           secs, secs > 0 ? evaluated / secs : 0, threads, ctx_bytes / 1048576.0, arg_peak_rss() / 1048576.0);
}

/* --------------------------------------------------------------- command */

/* The whole file, tokenized with BOS as llama-perplexity does (special tokens are not parsed). */
static int tokenize_file(const nb_model *m, const char *path, int32_t **ids, size_t *n) {
    size_t len;
    char *text = arg_read_file(path, &len);
    if (!text) return 0;
    const nb_tokenizer *tok = nb_model_tokenizer(m);
    size_t cap = NB_TOKENIZE_MAX_IDS(len);
    nb_status s = NB_ERR_NOMEM;
    if ((*ids = malloc(sizeof(int32_t) * cap))) s = nb_tokenize(tok, text, len, 1, 0, *ids, cap, n);
    free(text);
    if (s) {
        arg_status(s);
        return 0;
    }
    return 1;
}

int cmd_perplexity(int argc, char **argv) {
    ppl_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    nb_model *m = NULL;
    nb_ctx *ctx = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    rc = 1;
    nb_status s = nb_model_load(o.model, &m);
    if (s) return arg_status(s);
    const nb_model_info *in = nb_model_get_info(m);
    nb_ppl_params pp = nb_ppl_default_params();
    pp.n_ctx = o.n_ctx ? o.n_ctx : o.base ? 0 : 512;
    pp.n_chunks = o.n_chunks;
    pp.n_rows = o.n_batch;
    pp.top_k = o.top_k;
    pp.save_path = o.save;
    pp.base_path = o.base;
    if (pp.n_ctx > in->n_ctx_train) {
        arg_error("-c %d exceeds the model's training context of %d tokens", pp.n_ctx, in->n_ctx_train);
        rc = CLI_USAGE;
        goto out;
    }
    if (o.file && !tokenize_file(m, o.file, &ids, &n_ids)) goto out;
    nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = pp.n_ctx;
    if (o.base && (s = nb_ppl_base_info(o.base, &cp.n_ctx, NULL))) {
        rc = arg_status(s);
        goto out;
    }
    cp.n_batch = o.n_batch;
    arg_cache_apply(&o.cache, &cp);
    if (o.kv_f32) cp.type_k = cp.type_v = NB_TYPE_F32;
    cp.n_threads = o.n_threads;
    if ((s = nb_ctx_create(m, &cp, &ctx))) {
        rc = arg_status(s);
        goto out;
    }
    const int threads = o.n_threads > 0 ? o.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (o.file)
        fprintf(stderr, "perplexity: %s: %zu token%s, window %d, %d thread%s, K/V cells %s/%s\n", o.file,
                n_ids, nb_plural((long long)n_ids), pp.n_ctx, threads, nb_plural(threads), nb_type_name(cp.type_k),
                nb_type_name(cp.type_v));
    progress pr = {arg_now(), arg_now(), isatty(2), 0};
    pp.progress = on_window;
    pp.user = &pr;
    nb_ppl_result r;
    if ((s = nb_perplexity(ctx, ids, (int64_t)n_ids, &pp, &r))) {
        if (pr.tty) fputc('\n', stderr);
        rc = arg_status(s);
        goto out;
    }
    const double secs = arg_now() - pr.t0;
    if (o.json) print_json(&r, (long)n_ids, secs, threads, nb_ctx_memory(ctx));
    else print_text(&r);
    if (o.save) fprintf(stderr, "perplexity: distributions saved to %s\n", o.save);
    fprintf(stderr, "perplexity: %.1f s, %.1f tokens/s, peak memory %.1f MiB resident\n", secs,
            (double)r.n_chunks * (r.n_ctx - 1) / secs, arg_peak_rss() / 1048576.0);
    rc = 0;
out:
    free(ids);
    nb_ctx_free(ctx);
    nb_model_free(m);
    return rc;
}
