/*
 * run.c: `nibble run`, text generation with llama.cpp's flags and defaults; `--chat` for an
 * interactive Gemma conversation on standard input. Timings and peak memory go to stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "nibble.h"

typedef struct run_opts {
    const char *model, *prompt, *file, *system;
    int n_predict, n_threads, n_ctx, n_batch, chat, kv_f32, no_escape, ignore_eos, verbose_prompt;
    nb_sampler_params sp;
} run_opts;

typedef struct run_state {
    nb_model *m;
    nb_ctx *ctx;
    nb_sampler *smp;
    const nb_tokenizer *tok;
    float *logits;
    int32_t *ids;
    size_t ids_cap;
    /* statistics */
    double t_prompt, t_gen, t_first;
    long n_prompt, n_gen;
} run_state;

static void usage(void) {
    fprintf(stderr,
            "usage: nibble run -m MODEL (-p PROMPT | -f FILE | --chat) [options]\n"
            "  -n N               tokens to generate (-1: until end of turn or a full context; default -1)\n"
            "  -t N               threads (default: all CPUs)\n"
            "  -c N               context size (default 4096)\n"
            "  -b N               prompt batch size (default 512)\n"
            "  --temp T           temperature (0.8; 0 = greedy)\n"
            "  --top-k K          (40)    --top-p P (0.95)    --min-p P (0.05)\n"
            "  --repeat-penalty R (1.0 = off)   --repeat-last-n N (64)\n"
            "  --seed S           sampling seed (default: random, printed)\n"
            "  --chat             interactive chat on stdin with the model's turn template\n"
            "  --system TEXT      system text for --chat (goes before the first user turn)\n"
            "  --kv-f32           F32 KV cache (default F16)\n"
            "  --no-escape        take \\n, \\t, \\xHH ... in the prompt literally\n"
            "  --ignore-eos       keep generating past end-of-turn/end-of-sequence (benchmarks)\n"
            "  --verbose-prompt   print the token ids of every prompt (and chat turn) to stderr\n");
}

static int parse(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = -1;
    o->n_ctx = 4096;
    o->n_batch = 512;
    o->sp = nb_sampler_default_params();
    o->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int ok = 1;
#define VAL() ((v = arg_value(argc, argv, &i)) != NULL)
        if (!strcmp(a, "-m")) ok = VAL() && (o->model = v);
        else if (!strcmp(a, "-p")) ok = VAL() && (o->prompt = v);
        else if (!strcmp(a, "-f")) ok = VAL() && (o->file = v);
        else if (!strcmp(a, "-n")) ok = VAL() && arg_int(a, v, -1, 1 << 24, &o->n_predict);
        else if (!strcmp(a, "-t")) ok = VAL() && arg_int(a, v, 1, 1024, &o->n_threads);
        else if (!strcmp(a, "-c")) ok = VAL() && arg_int(a, v, 1, 1 << 24, &o->n_ctx);
        else if (!strcmp(a, "-b")) ok = VAL() && arg_int(a, v, 1, 4096, &o->n_batch);
        else if (!strcmp(a, "--temp")) ok = VAL() && arg_float(a, v, 0, 100, &o->sp.temp);
        else if (!strcmp(a, "--top-k")) ok = VAL() && arg_int(a, v, 0, 1 << 24, &o->sp.top_k);
        else if (!strcmp(a, "--top-p")) ok = VAL() && arg_float(a, v, 0, 1, &o->sp.top_p);
        else if (!strcmp(a, "--min-p")) ok = VAL() && arg_float(a, v, 0, 1, &o->sp.min_p);
        else if (!strcmp(a, "--repeat-penalty")) ok = VAL() && arg_float(a, v, 0.001, 100, &o->sp.repeat_penalty);
        else if (!strcmp(a, "--repeat-last-n")) ok = VAL() && arg_int(a, v, 0, 1 << 20, &o->sp.repeat_last_n);
        else if (!strcmp(a, "--seed")) ok = VAL() && arg_u64(a, v, &o->sp.seed);
        else if (!strcmp(a, "--system")) ok = VAL() && (o->system = v);
        else if (!strcmp(a, "--chat")) o->chat = 1;
        else if (!strcmp(a, "--kv-f32")) o->kv_f32 = 1;
        else if (!strcmp(a, "--no-escape")) o->no_escape = 1;
        else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = 1;
        else if (!strcmp(a, "--verbose-prompt")) o->verbose_prompt = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        } else {
            fprintf(stderr, "nibble run: unknown option '%s'\n", a);
            ok = 0;
        }
#undef VAL
        if (!ok) return 0;
    }
    if (!o->model) {
        fprintf(stderr, "nibble run: -m MODEL is required\n");
        return 0;
    }
    if (!o->chat && !o->prompt && !o->file) {
        fprintf(stderr, "nibble run: give a prompt with -p or -f, or use --chat\n");
        return 0;
    }
    if (o->prompt && o->file) {
        fprintf(stderr, "nibble run: -p and -f are exclusive\n");
        return 0;
    }
    if (o->sp.top_p <= 0) {
        fprintf(stderr, "nibble run: --top-p must be > 0\n");
        return 0;
    }
    return 1;
}

static int fail(const char *what, nb_status s) {
    fprintf(stderr, "nibble run: %s: %s (%s)\n", what, nb_last_error(), nb_strerror(s));
    return 1;
}

/* Tokenizes text (special tokens parsed when `special`), growing the id buffer as needed. */
static nb_status tokenize(run_state *r, const char *text, size_t len, int add_bos, int special, size_t *n) {
    for (;;) {
        nb_status s = nb_tokenize(r->tok, text, len, add_bos, special, r->ids, r->ids_cap, n);
        if (s != NB_ERR_RANGE || *n <= r->ids_cap) return s;
        int32_t *grown = realloc(r->ids, sizeof(int32_t) * *n);
        if (!grown) return NB_ERR_NOMEM;
        r->ids = grown;
        r->ids_cap = *n;
    }
}

static void print_piece(const run_state *r, int32_t id) {
    char buf[256];
    size_t len;
    if (nb_token_to_piece(r->tok, id, buf, sizeof buf, &len, 0) == NB_OK) fwrite(buf, 1, len, stdout);
    fflush(stdout);
}

/* Feeds text to the model, then samples up to n_predict tokens, streaming them. Returns 0 ok,
 * 1 error. Stops at an end-of-generation token or a full context (with a message). */
static int turn(run_state *r, const run_opts *o, const char *text, size_t len, int add_bos) {
    size_t n;
    nb_status s = tokenize(r, text, len, add_bos, 1, &n);
    if (s) return fail("tokenize", s);
    const int room = nb_ctx_n_ctx(r->ctx) - nb_ctx_pos(r->ctx);
    if ((long)n > room) {
        fprintf(stderr, "nibble run: the prompt is %zu tokens but only %d of the context (-c %d) are left; use a larger -c\n",
                n, room, nb_ctx_n_ctx(r->ctx));
        return 1;
    }
    if (o->verbose_prompt) {
        fprintf(stderr, "prompt tokens (%zu):", n);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", r->ids[i]);
        fputc('\n', stderr);
    }
    for (size_t i = 0; i < n; i++) nb_sampler_accept(r->smp, r->ids[i]);
    double t0 = arg_now();
    if ((s = nb_ctx_eval(r->ctx, r->ids, (int)n, r->logits, 0))) return fail("prompt", s);
    double t1 = arg_now();
    r->t_prompt += t1 - t0;
    r->n_prompt += (long)n;
    for (int i = 0; o->n_predict < 0 || i < o->n_predict; i++) {
        int32_t id = nb_sampler_sample(r->smp, r->logits);
        if (!r->t_first) r->t_first = arg_now() - t0;
        if (!o->ignore_eos && nb_tokenizer_is_eog(r->tok, id)) break;
        print_piece(r, id);
        nb_sampler_accept(r->smp, id);
        r->n_gen++;
        if (nb_ctx_pos(r->ctx) >= nb_ctx_n_ctx(r->ctx)) {
            fprintf(stderr, "\nnibble run: stopped: the context of %d tokens is full (use a larger -c)\n",
                    nb_ctx_n_ctx(r->ctx));
            break;
        }
        if ((s = nb_ctx_eval(r->ctx, &id, 1, r->logits, 0))) return fail("decode", s);
    }
    r->t_gen += arg_now() - t1;
    return 0;
}

static int chat(run_state *r, const run_opts *o) {
    char *line = NULL;
    size_t cap = 0;
    int first = 1, rc = 0;
    int tty = isatty(0);
    for (;;) {
        if (tty) fprintf(stderr, "\n> ");
        ssize_t len = getline(&line, &cap, stdin);
        if (len < 0) break;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (!len) continue;
        /* Gemma turns; the previous model turn is closed here, since its end-of-turn token was
         * sampled but not fed back */
        size_t need = (size_t)len + (o->system ? strlen(o->system) : 0) + 128;
        char *text = malloc(need);
        if (!text) return fail("chat", NB_ERR_NOMEM);
        snprintf(text, need, "%s<start_of_turn>user\n%s%s%s<end_of_turn>\n<start_of_turn>model\n",
                 first ? "" : "<end_of_turn>\n", first && o->system ? o->system : "",
                 first && o->system ? "\n\n" : "", line);
        rc = turn(r, o, text, strlen(text), first);
        free(text);
        first = 0;
        putchar('\n');
        if (rc) break;
    }
    free(line);
    return rc;
}

int cmd_run(int argc, char **argv) {
    run_opts o;
    if (!parse(argc, argv, &o)) {
        usage();
        return 2;
    }
    run_state r = {0};
    double t0 = arg_now();
    nb_status s = nb_model_load(o.model, &r.m);
    if (s) return fail(o.model, s);
    const nb_model_info *in = nb_model_get_info(r.m);
    nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = o.n_ctx < in->n_ctx_train ? o.n_ctx : in->n_ctx_train;
    cp.n_batch = o.n_batch;
    cp.kv_f32 = o.kv_f32;
    cp.n_threads = o.n_threads;
    int rc = 1;
    char *file_text = NULL;
    if ((s = nb_ctx_create(r.m, &cp, &r.ctx))) {
        fail("context", s);
        goto out;
    }
    if ((s = nb_sampler_create(&o.sp, in->n_vocab, &r.smp))) {
        fail("sampler", s);
        goto out;
    }
    r.tok = nb_model_tokenizer(r.m);
    r.logits = malloc(sizeof(float) * (size_t)in->n_vocab);
    if (!r.logits) {
        fail("logits", NB_ERR_NOMEM);
        goto out;
    }
    double t_load = arg_now() - t0;
    if (o.chat) {
        rc = chat(&r, &o);
    } else {
        size_t len;
        if (o.file) {
            if (!(file_text = arg_read_file(o.file, &len))) goto out;
        } else if ((file_text = strdup(o.prompt))) {
            len = strlen(file_text);
        } else {
            fail("prompt", NB_ERR_NOMEM);
            goto out;
        }
        if (!o.no_escape) len = arg_unescape(file_text, len);
        fwrite(file_text, 1, len, stdout);
        rc = turn(&r, &o, file_text, len, 1);
        putchar('\n');
    }
    fprintf(stderr, "\n%s: %d layers, %d threads, %s KV cache, context %d, seed %llu\n", in->name[0] ? in->name : in->arch,
            in->n_layer, cp.n_threads > 0 ? cp.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN), o.kv_f32 ? "f32" : "f16",
            cp.n_ctx, (unsigned long long)o.sp.seed);
    fprintf(stderr, "load:          %8.1f ms\n", 1e3 * t_load);
    fprintf(stderr, "prompt:        %8ld tokens  %8.2f tokens/s\n", r.n_prompt, r.t_prompt > 0 ? r.n_prompt / r.t_prompt : 0);
    fprintf(stderr, "first token:   %8.1f ms\n", 1e3 * r.t_first);
    fprintf(stderr, "generation:    %8ld tokens  %8.2f tokens/s\n", r.n_gen, r.t_gen > 0 ? r.n_gen / r.t_gen : 0);
    fprintf(stderr, "peak memory:   %8.1f MiB resident (KV cache + activations %.1f MiB)\n",
            arg_peak_rss() / 1048576.0, nb_ctx_memory(r.ctx) / 1048576.0);
out:
    free(file_text);
    free(r.logits);
    free(r.ids);
    nb_sampler_free(r.smp);
    nb_ctx_free(r.ctx);
    nb_model_free(r.m);
    return rc;
}
