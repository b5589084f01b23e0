/*
 * run.c: `nibble run`, text generation with llama.cpp's flags and defaults; `--chat` for an
 * interactive conversation on standard input in the model's chat template (-p or -f, if given, is
 * its first user turn, as llama-cli's; -st ends it after one reply). The generation loop
 * (nb_generate) and the conversation (nb_conv) are the library's; this file parses flags, reads
 * lines and prints. Timings and peak memory go to stderr.
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
    const char *model, *prompt, *file, *system, *system_file, *chat_template;
    int n_predict, n_threads, n_ctx, n_batch, chat, no_chat, single_turn, kv_f32, escape, no_escape, ignore_eos;
    int verbose_prompt, context_shift, keep;
    arg_strs stop;
    arg_cache cache;
    nb_sampler_params sp;
} run_opts;

typedef struct run_state {
    nb_model *m;
    nb_ctx *ctx;
    nb_sampler *smp;
    nb_gen *gen;
    const nb_tokenizer *tok;
    int32_t *ids; /* the prompt's */
    size_t ids_cap;
    int tmpl;     /* the chat template (--chat) */
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
    "  -m, --model FILE          the GGUF model (gemma3, gemma2, llama, qwen2, qwen3, phi3)\n"
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
    "  -r, --reverse-prompt TEXT stop generating (in --chat: the reply) at TEXT, which is not printed;\n"
    "                            repeatable, at most 16\n"
    "  -cnv, --chat              interactive chat on standard input in the model's chat template;\n"
    "                            one line a turn, at most 1 MiB; a full context drops the oldest turns;\n"
    "                            -p or -f is the first user turn (then the input's lines follow)\n"
    "  -st, --single-turn        --chat answers one turn (-p/-f, or the first line) and exits\n"
    "  -no-cnv                   no chat: the default here (llama-cli's flag, accepted)\n"
    "  --chat-template NAME      the template for --chat instead of the file's (llama.cpp's names:\n"
    "                            gemma, llama3, chatml, phi3, llama2, mistral-v7, ...; a bad name lists them)\n"
    "  -sys, --system TEXT       system text for --chat (placed as the template places it)\n"
    "  -sysf FILE                the system text from a file (its last line ending dropped)\n"
    ARG_CACHE_USAGE
    "  --kv-f32                  F32 KV cache (-ctk f32 -ctv f32)\n"
    "  --no-escape               take \\n, \\t, \\xHH ... in the prompt literally (-e, --escape: the default)\n"
    "  --ignore-eos              keep generating past end-of-turn/end-of-sequence (benchmarks)\n"
    "  --context-shift           a full context forgets half of what follows the kept tokens and goes on\n"
    "                            (keys rotated back), instead of stopping\n"
    "  --keep N                  tokens of the prompt a shift keeps, BOS not counted (default 0; -1: all)\n"
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
        OPT_STRS("-r|--reverse-prompt", &o->stop),
        OPT_STR("-sys|--system|--system-prompt", &o->system),
        OPT_STR("-sysf|--system-prompt-file", &o->system_file),
        OPT_FLAG("-cnv|--chat|--conversation", &o->chat),
        OPT_FLAG("-st|--single-turn", &o->single_turn),
        OPT_FLAG("-no-cnv|--no-conversation", &o->no_chat),
        OPT_STR("--chat-template", &o->chat_template),
        OPT_CACHE(&o->cache),
        OPT_FLAG("--kv-f32", &o->kv_f32),
        OPT_FLAG("--no-escape", &o->no_escape),
        OPT_FLAG("-e|--escape", &o->escape),
        OPT_FLAG("--ignore-eos", &o->ignore_eos),
        OPT_FLAG("--context-shift", &o->context_shift),
        OPT_INT("--keep", &o->keep, -1, 1 << 24),
        OPT_FLAG("--verbose-prompt", &o->verbose_prompt),
        OPT_NGL,
    };
    arg_spec spec = ARG_SPEC("run", USAGE, opts, NULL, 0);
    int rc = arg_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    if (!o->model) return arg_usage_error(&spec, "-m MODEL is required");
    if (o->chat && ((o->file && !strcmp(o->file, "-")) || (o->system_file && !strcmp(o->system_file, "-"))))
        return arg_usage_error(&spec, "--chat reads its turns from standard input: -f - and -sysf - cannot read it");
    if (o->escape && o->no_escape) return arg_usage_error(&spec, "-e and --no-escape contradict each other: drop one");
    if (o->chat && o->no_chat) return arg_usage_error(&spec, "--chat and -no-cnv contradict each other: drop one");
    if (!o->chat && o->single_turn)
        return arg_usage_error(&spec, "--single-turn ends --chat after one reply: add --chat");
    if (!o->chat && (o->system || o->system_file))
        return arg_usage_error(&spec, "--system is the system text of --chat: add --chat or drop it");
    if (o->system && o->system_file) return arg_usage_error(&spec, "-sys and -sysf are exclusive");
    if (!o->chat && o->chat_template)
        return arg_usage_error(&spec, "--chat-template is the template of --chat: add --chat or drop it");
    if (o->chat_template && nb_chat_template_find(o->chat_template) < 0)
        return arg_usage_error(&spec, "--chat-template '%s' is none of %s", arg_safe(0, o->chat_template),
                               nb_chat_template_list());
    for (int i = 0; i < o->stop.n; i++)
        if (!*o->stop.v[i] || strlen(o->stop.v[i]) > NB_GEN_MAX_STOP_BYTES)
            return arg_usage_error(&spec, "-r: a reverse prompt is 1 to %d bytes", NB_GEN_MAX_STOP_BYTES);
    if (o->stop.n > NB_GEN_MAX_STOPS) return arg_usage_error(&spec, "-r: at most %d reverse prompts", NB_GEN_MAX_STOPS);
    if (!o->chat && !o->prompt && !o->file) return arg_usage_error(&spec, "give a prompt with -p or -f, or use --chat");
    if (o->prompt && o->file) return arg_usage_error(&spec, "-p and -f are exclusive");
    if (o->chat && o->n_predict < 0) o->n_predict = CHAT_DEFAULT_N;
    return -1;
}

/* Tokenizes the prompt (BOS added, special tokens parsed), growing the id buffer as needed.
 * Returns 0, or the exit code after a message. */
static int tokenize(run_state *r, const char *text, size_t len, size_t *n) {
    for (;;) {
        nb_status s = nb_tokenize(r->tok, text, len, 1, 1, r->ids, r->ids_cap, n);
        if (s != NB_ERR_RANGE || *n <= r->ids_cap) return s ? arg_status(s) : 0;
        int32_t *grown = realloc(r->ids, sizeof(int32_t) * *n);
        if (!grown) return arg_error("out of memory for %zu token ids", *n);
        r->ids = grown;
        r->ids_cap = *n;
    }
}

static int print_text(void *user, const char *text, size_t len) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

static int stop_asked(void *user) {
    (void)user;
    return interrupted;
}

/* Feeds the n ids and generates the reply, streaming it. Returns 0, or the exit code
 * after a message. Stops at an end-of-generation token, n_predict, a reverse prompt, a full
 * context or Ctrl-C. */
static int generate(run_state *r, const run_opts *o, const int32_t *ids, size_t n, int chat) {
    if (o->verbose_prompt) {
        fprintf(stderr, "prompt tokens (%zu):", n);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fputc('\n', stderr);
    }
    const nb_gen_io io = {print_text, stop_asked, NULL};
    nb_status s = nb_generate(r->ctx, r->gen, ids, n, &io);
    if (s) return arg_status(s);
    if (nb_gen_stopped(r->gen) == NB_STOP_CONTEXT)
        fprintf(stderr, "\nnibble run: stopped: the context of %d tokens is full%s\n", nb_ctx_n_ctx(r->ctx),
                chat ? "; the oldest turns make room for the next one" : " (use a larger -c, or --context-shift)");
    return 0;
}

/* ------------------------------------------------------------------ chat */

/* Feeds the user's line to the conversation and generates its reply. A line of the input that
 * does not fit the context even alone is reported and skipped; the -p/-f turn (given) fails.
 * Returns 0, or the exit code of a failure. */
static int chat_turn(run_state *r, const run_opts *o, nb_conv *cv, const char *line, int given) {
    const int n_ctx = nb_ctx_n_ctx(r->ctx);
    const int32_t *ids;
    size_t n;
    int dropped;
    nb_status s = nb_conv_prompt(cv, r->ctx, line, o->n_predict < n_ctx / 4 ? o->n_predict : n_ctx / 4, &ids, &n,
                                 &dropped);
    if (s == NB_ERR_RANGE && !given) {
        fprintf(stderr, "nibble run: %s: the line was skipped\n", nb_last_error());
        return 0;
    }
    if (s) return arg_status(s);
    if (dropped)
        fprintf(stderr, "nibble run: the context was full: the %d oldest turn%s left it%s\n", dropped,
                nb_plural(dropped), o->system ? " (the system text stays)" : "");
    int rc = generate(r, o, ids, n, 1);
    size_t len;
    const char *reply = nb_gen_reply(r->gen, &len);
    s = nb_conv_add_reply(cv, reply, len);
    return rc ? rc : s ? arg_status(s) : 0;
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

/* The conversation: the first turn from -p/-f (first, or NULL), then a turn per input line, or
 * one turn in all with --single-turn. */
static int chat(run_state *r, const run_opts *o, const char *first) {
    char *line = malloc(CHAT_MAX_LINE + 1);
    nb_conv *cv = NULL;
    int rc = 0;
    const int tty = isatty(0);
    if (!line) return arg_error("out of memory for the input line");
    nb_status s = nb_conv_create(r->tok, r->tmpl, o->system, &cv);
    if (s) rc = arg_status(s);
    if (!rc && first) {
        rc = chat_turn(r, o, cv, first, 1);
        putchar('\n');
    }
    while (!rc && !(first && o->single_turn)) {
        if (tty) fprintf(stderr, "\n> ");
        interrupted = 0;
        long len = read_line(line);
        if (len == -1) break;
        if (len == -2) {
            rc = arg_error("an input line is longer than %d bytes, the --chat bound", CHAT_MAX_LINE);
            break;
        }
        if (!len) continue;
        if (strlen(line) != (size_t)len) {
            fprintf(stderr, "nibble run: an input line holds a NUL byte: the line was skipped\n");
            continue;
        }
        rc = chat_turn(r, o, cv, line, 0);
        putchar('\n');
        if (o->single_turn) break;
    }
    nb_conv_free(cv);
    free(line);
    return rc;
}

/* ------------------------------------------------------------------ main */

int cmd_run(int argc, char **argv) {
    run_opts o;
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    run_state r = {0};
    char *text = NULL, *sys = NULL;
    size_t len = 0;
    if (o.prompt || o.file) { /* read the prompt first: a missing file is reported before the model loads */
        if (o.file) {
            if (!(text = arg_read_file(o.file, &len))) return 1;
        } else {
            len = strlen(o.prompt);
            if (!(text = strdup(o.prompt))) return arg_error("out of memory");
        }
        if (!o.no_escape) len = arg_unescape(text, len);
        if (o.chat && o.file && len && text[len - 1] == '\n') len--; /* the last line ending, as llama-cli */
        text[len] = '\0';
        if (o.chat && memchr(text, '\0', len)) {
            free(text);
            return arg_error("the first --chat turn holds a NUL byte");
        }
    }
    if (o.system_file) { /* -sysf: as llama-cli reads it, without escapes, its last line ending dropped */
        size_t n;
        if (!(sys = arg_read_file(o.system_file, &n))) {
            free(text);
            return 1;
        }
        if (n && sys[n - 1] == '\n') sys[--n] = '\0';
        if (memchr(sys, '\0', n)) {
            arg_error("'%s': the system text holds a NUL byte", arg_safe(0, o.system_file));
            free(sys);
            free(text);
            return 1;
        }
        o.system = sys;
    }
    double t0 = arg_now();
    nb_status s = nb_model_load(o.model, &r.m);
    if (s) {
        free(sys);
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
    arg_cache_apply(&o.cache, &cp);
    if (o.kv_f32) cp.type_k = cp.type_v = NB_TYPE_F32;
    cp.n_threads = o.n_threads;
    if ((s = nb_ctx_create(r.m, &cp, &r.ctx)) || (s = nb_sampler_create(&o.sp, in->n_vocab, &r.smp))) {
        rc = arg_status(s);
        goto out;
    }
    r.tok = nb_model_tokenizer(r.m);
    nb_gen_params gp = nb_gen_default_params();
    gp.n_predict = o.n_predict;
    gp.ignore_eos = o.ignore_eos;
    gp.stop = o.stop.v;
    gp.n_stop = o.stop.n;
    gp.context_shift = o.context_shift;
    gp.n_keep = o.keep < 0 ? -1 : o.keep + nb_tokenizer_add_bos(r.tok);
    if ((s = nb_gen_create(r.tok, r.smp, &gp, &r.gen))) {
        rc = arg_status(s);
        goto out;
    }
    if (o.chat && o.chat_template) r.tmpl = nb_chat_template_find(o.chat_template);
    else if (o.chat && (s = nb_gguf_chat_template(nb_model_gguf(r.m), &r.tmpl))) { /* names the templates --chat-template takes */
        rc = arg_status(s);
        goto out;
    }
    const double t_load = arg_now() - t0;
    cli_catch(SIGINT, on_sigint); /* Ctrl-C at the chat prompt ends the read */
    if (o.chat) {
        rc = chat(&r, &o, text && *text ? text : NULL);
    } else {
        size_t n;
        if ((rc = tokenize(&r, text, len, &n))) goto out;
        if ((long)n > cp.n_ctx) {
            rc = arg_error("the prompt is %zu token%s but the context holds %d (-c %d); use a larger -c", n,
                           nb_plural((long long)n), cp.n_ctx, cp.n_ctx);
            goto out;
        }
        fwrite(text, 1, len, stdout);
        rc = generate(&r, &o, r.ids, n, 0);
        putchar('\n');
    }
    if (interrupted && !rc) rc = 128 + SIGINT;
    fflush(stdout);
    const int threads = cp.n_threads > 0 ? cp.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(stderr, "\n%s: %d layers, %d thread%s, K/V cells %s/%s, context %d, seed %llu\n",
            arg_safe(0, in->name[0] ? in->name : in->arch), in->n_layer, threads, nb_plural(threads),
            nb_type_name(cp.type_k), nb_type_name(cp.type_v), cp.n_ctx, (unsigned long long)o.sp.seed);
    fprintf(stderr, "load:          %8.1f ms\n", 1e3 * t_load);
    const nb_gen_stats *st = nb_gen_get_stats(r.gen);
    fprintf(stderr, "prompt:        %8lld tokens  %8.2f tokens/s\n", (long long)st->n_prompt,
            st->t_prompt > 0 ? st->n_prompt / st->t_prompt : 0);
    fprintf(stderr, "first token:   %8.1f ms\n", 1e3 * st->t_first);
    fprintf(stderr, "generation:    %8lld tokens  %8.2f tokens/s\n", (long long)st->n_gen,
            st->t_gen > 0 ? st->n_gen / st->t_gen : 0);
    if (st->n_shift) fprintf(stderr, "context shifts:%8lld\n", (long long)st->n_shift);
    /* reserved, not resident: the context's pages are touched as positions fill */
    fprintf(stderr, "peak memory:   %8.1f MiB resident; %.1f MiB reserved for the context (KV cache + activations)\n",
            arg_peak_rss() / 1048576.0, nb_ctx_memory(r.ctx) / 1048576.0);
    if (interrupted) fprintf(stderr, "nibble run: interrupted\n");
out:
    free(sys);
    free(text);
    free(r.ids);
    nb_gen_free(r.gen);
    nb_sampler_free(r.smp);
    nb_ctx_free(r.ctx);
    nb_model_free(r.m);
    return rc;
}
