/*
 * run.c: `nibble run`, text generation with llama.cpp's flags and defaults; `--chat` for an
 * interactive Gemma conversation on standard input. Timings and peak memory go to stderr.
 *
 * The prompt is tokenized and checked against the context before anything is printed. Ctrl-C
 * stops generation (in --chat: the current reply) and the statistics are printed; a second
 * Ctrl-C exits at once. In --chat a full context drops the oldest turns (the system text stays)
 * and the conversation goes on.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "nibble.h"

/* A --chat input line may hold this many bytes; a longer one is refused (exit 1). */
#define CHAT_MAX_LINE (1 << 20)
/* Tokens per reply in --chat when -n is not given. */
#define CHAT_DEFAULT_N 1024

typedef struct run_opts {
    const char *model, *prompt, *file, *system;
    int n_predict, n_threads, n_ctx, n_batch, chat, kv_f32, no_escape, ignore_eos, verbose_prompt;
    nb_sampler_params sp;
} run_opts;

/* One exchange of a --chat conversation, kept as text so that a full context can be rebuilt from
 * the most recent turns. */
typedef struct chat_turn {
    char *user, *reply;
    size_t reply_len, reply_cap;
} chat_turn;

typedef struct run_state {
    nb_model *m;
    nb_ctx *ctx;
    nb_sampler *smp;
    const nb_tokenizer *tok;
    float *logits;
    int32_t *ids;
    size_t ids_cap;
    chat_turn *reply_to; /* the turn whose reply is being generated (--chat), or NULL */
    /* statistics */
    double t_prompt, t_gen, t_first;
    long n_prompt, n_gen;
} run_state;

static volatile sig_atomic_t interrupted;

/* The first Ctrl-C asks generation to stop; a second one exits as every other command does. */
static void on_sigint(int sig) {
    static const char msg[] = "\nnibble run: interrupted\n";
    if (interrupted) {
        (void)!write(2, msg, sizeof msg - 1);
        _exit(128 + sig);
    }
    interrupted = 1;
}

static const char USAGE[] =
    "usage: nibble run -m MODEL (-p PROMPT | -f FILE | --chat) [options]\n"
    "  -m, --model FILE          the GGUF model (architectures: gemma3)\n"
    "  -p, --prompt TEXT         the prompt; -f, --file FILE reads it from a file ('-': standard input)\n"
    "  -n, --n-predict N         tokens to generate (-1: until end of turn or a full context; default -1,\n"
    "                            in --chat 1024 per reply)\n"
    "  -t, --threads N           threads (default: all CPUs; the text is the same for any N)\n"
    "  -c, --ctx-size N          context size (default 4096; 0: the model's training context, the limit)\n"
    "  -b, --batch-size N        prompt batch size (default 512)\n"
    "  --temp T                  temperature (0.8; 0 = greedy)\n"
    "  --top-k K (40)   --top-p P (0.95)   --min-p P (0.05)\n"
    "  --repeat-penalty R        (1.0 = off)   --repeat-last-n N (64)\n"
    "  -s, --seed S              sampling seed (default: random, printed)\n"
    "  -cnv, --chat              interactive chat on standard input with the model's turn template;\n"
    "                            one line a turn, at most 1 MiB; a full context drops the oldest turns\n"
    "  -sys, --system TEXT       system text for --chat (goes before the first user turn)\n"
    "  --kv-f32                  F32 KV cache (default F16)\n"
    "  --no-escape               take \\n, \\t, \\xHH ... in the prompt literally\n"
    "  --ignore-eos              keep generating past end-of-turn/end-of-sequence (benchmarks)\n"
    "  --verbose-prompt          print the token ids of every prompt (and chat turn) to stderr\n"
    "  -ngl N                    accepted and ignored (nibble runs on the CPU)\n"
    "Ctrl-C stops generation (in --chat: the reply) and prints the statistics; exit 130.\n";

static int parse(int argc, char **argv, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = -1;
    o->n_ctx = 4096;
    o->n_batch = 512;
    o->sp = nb_sampler_default_params();
    o->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    arg_opt opts[] = {
        OPT_STR("-m|--model", &o->model),
        OPT_STR("-p|--prompt", &o->prompt),
        OPT_STR("-f|--file", &o->file),
        OPT_INT("-n|--n-predict", &o->n_predict, -1, 1 << 24),
        OPT_THREADS(&o->n_threads),
        OPT_INT("-c|--ctx-size", &o->n_ctx, 0, 1 << 24),
        OPT_INT("-b|--batch-size", &o->n_batch, 1, 4096),
        OPT_FLOAT("--temp", &o->sp.temp, 0, 100),
        OPT_INT("--top-k", &o->sp.top_k, 0, 1 << 24),
        OPT_FLOAT("--top-p", &o->sp.top_p, 1e-6, 1),
        OPT_FLOAT("--min-p", &o->sp.min_p, 0, 1),
        OPT_FLOAT("--repeat-penalty", &o->sp.repeat_penalty, 0.001, 100),
        OPT_INT("--repeat-last-n", &o->sp.repeat_last_n, 0, 1 << 20),
        OPT_U64("-s|--seed", &o->sp.seed),
        OPT_STR("-sys|--system|--system-prompt", &o->system),
        OPT_FLAG("-cnv|--chat|--conversation", &o->chat),
        OPT_FLAG("--kv-f32", &o->kv_f32),
        OPT_FLAG("--no-escape", &o->no_escape),
        OPT_FLAG("--ignore-eos", &o->ignore_eos),
        OPT_FLAG("--verbose-prompt", &o->verbose_prompt),
        OPT_NGL,
    };
    arg_spec spec = ARG_SPEC("run", USAGE, opts, NULL, 0);
    int rc = arg_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    if (!o->model) return arg_usage_error(&spec, "-m MODEL is required");
    if (o->chat && (o->prompt || o->file))
        return arg_usage_error(&spec, "--chat reads the conversation from standard input: drop -p/-f");
    if (!o->chat && o->system) return arg_usage_error(&spec, "--system is the system text of --chat: add --chat or drop it");
    if (!o->chat && !o->prompt && !o->file) return arg_usage_error(&spec, "give a prompt with -p or -f, or use --chat");
    if (o->prompt && o->file) return arg_usage_error(&spec, "-p and -f are exclusive");
    if (o->chat && o->n_predict < 0) o->n_predict = CHAT_DEFAULT_N;
    return -1;
}

/* Tokenizes text (special tokens parsed when `special`), growing the id buffer as needed. Returns 0,
 * or the exit code after a message. */
static int tokenize(run_state *r, const char *text, size_t len, int add_bos, int special, size_t *n) {
    for (;;) {
        nb_status s = nb_tokenize(r->tok, text, len, add_bos, special, r->ids, r->ids_cap, n);
        if (s != NB_ERR_RANGE || *n <= r->ids_cap) return s ? arg_status(s) : 0;
        int32_t *grown = realloc(r->ids, sizeof(int32_t) * *n);
        if (!grown) return arg_error("out of memory for %zu token ids", *n);
        r->ids = grown;
        r->ids_cap = *n;
    }
}

/* Appends a generated piece to the reply of the turn being answered (--chat). */
static int keep_piece(chat_turn *t, const char *p, size_t n) {
    if (t->reply_len + n + 1 > t->reply_cap) {
        size_t cap = (t->reply_len + n + 1) * 2;
        char *grown = realloc(t->reply, cap);
        if (!grown) return 0;
        t->reply = grown;
        t->reply_cap = cap;
    }
    memcpy(t->reply + t->reply_len, p, n);
    t->reply_len += n;
    t->reply[t->reply_len] = '\0';
    return 1;
}

/* Evaluates the n ids in r->ids, then samples up to n_predict tokens, streaming them. Returns 0,
 * or 1 after a message. Stops at an end-of-generation token, a full context or Ctrl-C. */
static int generate(run_state *r, const run_opts *o, size_t n) {
    if (o->verbose_prompt) {
        fprintf(stderr, "prompt tokens (%zu):", n);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", r->ids[i]);
        fputc('\n', stderr);
    }
    for (size_t i = 0; i < n; i++) nb_sampler_accept(r->smp, r->ids[i]);
    double t0 = arg_now();
    nb_status s = nb_ctx_eval(r->ctx, r->ids, (int)n, r->logits, 0);
    if (s) return arg_status(s);
    double t1 = arg_now();
    r->t_prompt += t1 - t0;
    r->n_prompt += (long)n;
    for (int i = 0; (o->n_predict < 0 || i < o->n_predict) && !interrupted; i++) {
        int32_t id = nb_sampler_sample(r->smp, r->logits);
        if (!r->t_first) r->t_first = arg_now() - t0;
        if (!o->ignore_eos && nb_tokenizer_is_eog(r->tok, id)) break;
        char piece[256];
        size_t len;
        if (nb_token_to_piece(r->tok, id, piece, sizeof piece, &len, 0) == NB_OK) {
            fwrite(piece, 1, len, stdout);
            fflush(stdout);
            if (r->reply_to && !keep_piece(r->reply_to, piece, len)) return arg_error("out of memory for the reply");
        }
        nb_sampler_accept(r->smp, id);
        r->n_gen++;
        if (nb_ctx_pos(r->ctx) >= nb_ctx_n_ctx(r->ctx)) {
            fprintf(stderr, "\nnibble run: stopped: the context of %d tokens is full%s\n", nb_ctx_n_ctx(r->ctx),
                    r->reply_to ? "; the oldest turns make room for the next one" : " (use a larger -c)");
            break;
        }
        if ((s = nb_ctx_eval(r->ctx, &id, 1, r->logits, 0))) return arg_status(s);
    }
    r->t_gen += arg_now() - t1;
    return 0;
}

/* ------------------------------------------------------------------ chat */

/* Gemma's template for turns from..n-1 of the conversation, the last one awaiting its reply.
 * `fresh`: the text starts the context (BOS follows from tokenization, the system text goes into
 * the first user turn); otherwise it follows the previous reply, whose end-of-turn token was
 * sampled but not fed back, so it is written here. NULL when out of memory. */
static char *chat_text(const chat_turn *turns, int from, int n, const char *system, int fresh) {
    size_t cap = 128 + (system ? strlen(system) : 0);
    for (int i = from; i < n; i++) cap += strlen(turns[i].user) + turns[i].reply_len + 96;
    char *text = malloc(cap), *p = text;
    if (!text) return NULL;
    if (!fresh) p += sprintf(p, "<end_of_turn>\n");
    for (int i = from; i < n; i++) {
        const int sys = fresh && i == from && system;
        p += sprintf(p, "<start_of_turn>user\n%s%s%s<end_of_turn>\n<start_of_turn>model\n", sys ? system : "",
                     sys ? "\n\n" : "", turns[i].user);
        if (i + 1 < n) p += sprintf(p, "%s<end_of_turn>\n", turns[i].reply ? turns[i].reply : "");
    }
    return text;
}

/* Feeds turn n-1 (the user's new line) and generates its reply. When it does not fit in what is
 * left of the context with room for a reply, the context is rebuilt from the system text and the
 * most recent turns that fit; *first (the oldest turn still in the conversation) moves past the
 * dropped ones. Returns 0 (a turn that cannot fit even alone is reported and skipped), or the exit
 * code of a runtime failure. */
static int chat_turn_run(run_state *r, const run_opts *o, chat_turn *turns, int n, int *first) {
    const int n_ctx = nb_ctx_n_ctx(r->ctx);
    const int reserve = o->n_predict < n_ctx / 4 ? o->n_predict : n_ctx / 4;
    int fresh = nb_ctx_pos(r->ctx) == 0, from = fresh ? *first : n - 1;
    size_t n_ids;
    for (;;) {
        char *text = chat_text(turns, from, n, o->system, fresh);
        if (!text) return arg_error("out of memory for the conversation");
        int rc = tokenize(r, text, strlen(text), fresh, 1, &n_ids);
        free(text);
        if (rc) return rc;
        if ((long)n_ids + reserve <= n_ctx - nb_ctx_pos(r->ctx)) break;
        if (fresh && from == n - 1) {
            fprintf(stderr, "nibble run: this message is %zu token%s; with room for a reply the context (-c %d) holds "
                    "%d: it was skipped\n", n_ids, nb_plural((long long)n_ids), n_ctx, n_ctx - reserve);
            free(turns[n - 1].user);
            turns[n - 1].user = NULL;
            return 0;
        }
        if (!fresh) {
            nb_ctx_reset(r->ctx);
            fresh = 1;
            from = *first;
        } else from++;
    }
    if (fresh && from > *first)
        fprintf(stderr, "nibble run: the context was full: the %d oldest turn%s left it%s\n", from - *first,
                nb_plural(from - *first), o->system ? " (the system text stays)" : "");
    for (; fresh && *first < from; ++*first) { /* gone for good: the conversation goes on without them */
        free(turns[*first].user), free(turns[*first].reply);
        turns[*first] = (chat_turn){0};
    }
    r->reply_to = &turns[n - 1];
    return generate(r, o, n_ids);
}

/* One line of standard input without its line ending, at most CHAT_MAX_LINE bytes. Returns its
 * length, -1 at the end of input (or on Ctrl-C at the prompt), -2 for a line over the bound. */
static long read_line(char *buf) {
    long n = 0;
    int c;
    while ((c = getchar()) != EOF && c != '\n') {
        if (n == CHAT_MAX_LINE) return -2; /* not drained: the input may never end (/dev/zero) */
        buf[n++] = (char)c;
    }
    if (interrupted || (c == EOF && !n)) return -1; /* Ctrl-C drops a half-typed line */
    while (n > 0 && buf[n - 1] == '\r') n--;
    buf[n] = '\0';
    return n;
}

static int chat(run_state *r, const run_opts *o) {
    char *line = malloc(CHAT_MAX_LINE + 1);
    chat_turn *turns = NULL;
    int n = 0, cap = 0, first = 0, rc = 0;
    const int tty = isatty(0);
    if (!line) return arg_error("out of memory for the input line");
    while (!rc) {
        if (tty) fprintf(stderr, "\n> ");
        interrupted = 0;
        long len = read_line(line);
        if (len == -1) break;
        if (len == -2) {
            rc = arg_error("an input line is longer than %d bytes, the --chat bound", CHAT_MAX_LINE);
            break;
        }
        if (!len) continue;
        if (n == cap) {
            chat_turn *grown = realloc(turns, sizeof *turns * (size_t)(cap = cap ? 2 * cap : 16));
            if (!grown) {
                rc = arg_error("out of memory for the conversation");
                break;
            }
            turns = grown;
        }
        turns[n] = (chat_turn){0};
        if (!(turns[n].user = strdup(line))) {
            rc = arg_error("out of memory for the conversation");
            break;
        }
        n++;
        rc = chat_turn_run(r, o, turns, n, &first);
        if (!turns[n - 1].user) n--; /* skipped: too long for the context */
        putchar('\n');
    }
    for (int i = 0; i < n; i++) free(turns[i].user), free(turns[i].reply);
    free(turns);
    free(line);
    r->reply_to = NULL;
    return rc;
}

/* ------------------------------------------------------------------ main */

int cmd_run(int argc, char **argv) {
    run_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    run_state r = {0};
    char *text = NULL;
    size_t len = 0;
    if (!o.chat) { /* read the prompt first: a missing file is reported before the model loads */
        if (o.file) {
            if (!(text = arg_read_file(o.file, &len))) return 1;
        } else {
            len = strlen(o.prompt);
            if (!(text = strdup(o.prompt))) return arg_error("out of memory");
        }
        if (!o.no_escape) len = arg_unescape(text, len);
    }
    double t0 = arg_now();
    nb_status s = nb_model_load(o.model, &r.m);
    if (s) {
        free(text);
        return arg_status(s);
    }
    const nb_model_info *in = nb_model_get_info(r.m);
    nb_ctx_params cp = nb_ctx_default_params();
    rc = 1;
    if (o.n_ctx > in->n_ctx_train) {
        arg_error("-c %d exceeds the model's training context of %d tokens (-c 0 uses it)", o.n_ctx, in->n_ctx_train);
        rc = CLI_USAGE;
        goto out;
    }
    cp.n_ctx = o.n_ctx ? o.n_ctx : in->n_ctx_train;
    cp.n_batch = o.n_batch;
    cp.kv_f32 = o.kv_f32;
    cp.n_threads = o.n_threads;
    if ((s = nb_ctx_create(r.m, &cp, &r.ctx)) || (s = nb_sampler_create(&o.sp, in->n_vocab, &r.smp))) {
        rc = arg_status(s);
        goto out;
    }
    r.tok = nb_model_tokenizer(r.m);
    if (!(r.logits = malloc(sizeof(float) * (size_t)in->n_vocab))) {
        rc = arg_error("out of memory for the logits");
        goto out;
    }
    const double t_load = arg_now() - t0;
    cli_catch(SIGINT, on_sigint); /* Ctrl-C at the chat prompt ends the read */
    if (o.chat) {
        rc = chat(&r, &o);
    } else {
        size_t n;
        if ((rc = tokenize(&r, text, len, 1, 1, &n))) goto out;
        if ((long)n > cp.n_ctx) {
            rc = arg_error("the prompt is %zu token%s but the context holds %d (-c %d); use a larger -c", n,
                           nb_plural((long long)n), cp.n_ctx, cp.n_ctx);
            goto out;
        }
        fwrite(text, 1, len, stdout);
        rc = generate(&r, &o, n);
        putchar('\n');
    }
    if (interrupted && !rc) rc = 128 + SIGINT;
    fflush(stdout);
    const int threads = cp.n_threads > 0 ? cp.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(stderr, "\n%s: %d layers, %d thread%s, %s KV cache, context %d, seed %llu\n",
            arg_safe(0, in->name[0] ? in->name : in->arch), in->n_layer, threads, nb_plural(threads),
            o.kv_f32 ? "f32" : "f16", cp.n_ctx, (unsigned long long)o.sp.seed);
    fprintf(stderr, "load:          %8.1f ms\n", 1e3 * t_load);
    fprintf(stderr, "prompt:        %8ld tokens  %8.2f tokens/s\n", r.n_prompt, r.t_prompt > 0 ? r.n_prompt / r.t_prompt : 0);
    fprintf(stderr, "first token:   %8.1f ms\n", 1e3 * r.t_first);
    fprintf(stderr, "generation:    %8ld tokens  %8.2f tokens/s\n", r.n_gen, r.t_gen > 0 ? r.n_gen / r.t_gen : 0);
    /* reserved, not resident: the context's pages are touched as positions fill */
    fprintf(stderr, "peak memory:   %8.1f MiB resident; %.1f MiB reserved for the context (KV cache + activations)\n",
            arg_peak_rss() / 1048576.0, nb_ctx_memory(r.ctx) / 1048576.0);
    if (interrupted) fprintf(stderr, "nibble run: interrupted\n");
out:
    free(text);
    free(r.logits);
    free(r.ids);
    nb_sampler_free(r.smp);
    nb_ctx_free(r.ctx);
    nb_model_free(r.m);
    return rc;
}
