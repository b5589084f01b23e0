/*
 * bench_model.c: `nibble bench -m MODEL ...`, the model benchmark in llama-bench's dialect: its
 * flags (comma lists where it takes them), its tests (ppN, tgN, ppP+tgN, each at every depth),
 * their order (models, then -b, -ub, -ctk, -ctv, -fa, -t, -d, then the -p, -n and -pg tests), and
 * its output formats and field names, so that one script reads both tools. Each test is one
 * nb_bench_run (the library times it); this file parses, loops and prints. A test the library
 * refuses (a cache type or attention this build lacks, a context past the training one) is an
 * error line on stderr naming the combination, and the others go on; the exit code is then 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "build_commit.h" /* NB_BUILD_COMMIT, written by the Makefile */
#include "cli/args.h"
#include "cli/bench.h"
#include "cli/commands.h"
#include "nibble.h"

const char BENCH_USAGE_MODEL[] =
    "usage: nibble bench -m MODEL [-m MODEL ...] [-p 512] [-n 128] [-pg PP,TG] [-d 0] [-t N] [-b 2048]\n"
    "                    [-ub 512] [-ctk f16] [-ctv f16] [-fa auto] [-r 5] [-o md|csv|json|jsonl]\n"
    "  llama-bench's tests, flags and output. -p, -n, -d, -t, -b, -ub, -ctk, -ctv and -fa take\n"
    "  comma-separated lists; every combination is a test, after one warm-up run, timed -r times\n"
    "  -m, --model FILE          a GGUF model (repeat for more)\n"
    "  -p, --n-prompt N          ppN: a prefill of N tokens (default 512; 0: none)\n"
    "  -n, --n-gen N             tgN: N single-token decode steps (default 128; 0: none)\n"
    "  -pg PP,TG                 ppPP+tgTG: a prefill, then decode steps, timed together (repeatable)\n"
    "  -d, --n-depth N           tokens in the context before the timed part (default 0)\n"
    "  -t, --threads N           threads (default: one per CPU)\n"
    "  -b, --batch-size N        tokens per evaluation call of a prefill (default 2048)\n"
    "  -ub, --ubatch-size N      tokens per forward pass, 1..4096 (default 512)\n"
    "  -ctk, --cache-type-k T    K cache cells: f16 (default), f32, bf16, q8_0, q4_0\n"
    "  -ctv, --cache-type-v T    V cache cells, the same types\n"
    "  -fa, --flash-attn M       auto (default), 1|on (fused attention), 0|off (the unfused order)\n"
    "  -r, --repetitions N       timed runs per test, 1..100 (default 5)\n"
    "  --no-warmup               no warm-up run before a test\n"
    "  --fast-prefill            batches sum each weight block exactly, then round once (nb_ctx_params;\n"
    "                            the backend column says \"block\")\n"
    "  -o, --output F            md (default: a table, t/s as avg ± stddev), csv, json, jsonl\n"
    "                            (llama-bench's fields, median_ts besides)\n"
    "  -ngl N                    ignored: nibble runs on the CPU\n";

/* -fa's words, as llama.cpp reads them (is_autoy, is_truthy, is_falsey), and their values. */
#define FA_WORDS "auto|-1|on|1|true|enabled|off|0|false|disabled"
static const int fa_of_word[] = {NB_FA_AUTO, NB_FA_AUTO, NB_FA_ON, NB_FA_ON, NB_FA_ON,
                                 NB_FA_ON,   NB_FA_OFF,  NB_FA_OFF, NB_FA_OFF, NB_FA_OFF};

#define MAX_TESTS (2 * ARG_LIST_MAX + ARG_STRS_MAX)

typedef struct opts {
    arg_strs models, pg;
    arg_list prompt, gen, depth, threads, batch, ubatch, ctk, ctv, fa;
    int reps, no_warmup, format, fast_prefill;
    int test_p[MAX_TESTS], test_n[MAX_TESTS], n_tests; /* the -p tests, the -n tests, the -pg tests */
} opts;

enum { OUT_MD, OUT_CSV, OUT_JSON, OUT_JSONL };

/* What one row reports, llama-bench's test struct. */
typedef struct row {
    const char *model_filename;
    char model_type[160];
    uint64_t model_size, model_n_params;
    int n_batch, n_ubatch, n_threads, type_k, type_v, flash_attn, n_prompt, n_gen, n_depth;
    char test_time[32];
    nb_bench_result r;
} row;

/* llama-bench's fields (its get_fields) that mean something on nibble, in its order, plus
 * median_ts; samples_ns and samples_ts follow in JSON. */
typedef enum {
    F_BUILD_COMMIT, F_CPU_INFO, F_BACKENDS, F_MODEL_FILENAME, F_MODEL_TYPE, F_MODEL_SIZE, F_MODEL_N_PARAMS, F_N_BATCH,
    F_N_UBATCH, F_N_THREADS, F_CPU_MASK, F_CPU_STRICT, F_TYPE_K, F_TYPE_V, F_N_GPU_LAYERS, F_FLASH_ATTN, F_EMBEDDINGS,
    F_N_PROMPT, F_N_GEN, F_N_DEPTH, F_TEST_TIME, F_AVG_NS, F_STDDEV_NS, F_AVG_TS, F_STDDEV_TS, F_MEDIAN_TS, N_FIELDS
} field;
typedef enum { K_STR, K_INT, K_BOOL, K_FLOAT } kind;
static const struct {
    const char *name;
    kind k;
} FIELDS[N_FIELDS] = {
    {"build_commit", K_STR}, {"cpu_info", K_STR},    {"backends", K_STR},     {"model_filename", K_STR},
    {"model_type", K_STR},   {"model_size", K_INT},  {"model_n_params", K_INT}, {"n_batch", K_INT},
    {"n_ubatch", K_INT},     {"n_threads", K_INT},   {"cpu_mask", K_STR},     {"cpu_strict", K_BOOL},
    {"type_k", K_STR},       {"type_v", K_STR},      {"n_gpu_layers", K_INT}, {"flash_attn", K_INT},
    {"embeddings", K_BOOL},  {"n_prompt", K_INT},    {"n_gen", K_INT},        {"n_depth", K_INT},
    {"test_time", K_STR},    {"avg_ns", K_INT},      {"stddev_ns", K_INT},    {"avg_ts", K_FLOAT},
    {"stddev_ts", K_FLOAT},  {"median_ts", K_FLOAT},
};
enum { VAL_CAP = 1024 };

static char cpu_info[256], backend[32];

/* The CPU's name as llama.cpp's CPU backend gives it on Linux: /proc/cpuinfo's first "model name". */
static void read_cpu_info(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(cpu_info, sizeof cpu_info, "unknown");
    while (f && fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !colon) continue;
        colon += 1 + (colon[1] == ' ');
        snprintf(cpu_info, sizeof cpu_info, "%.*s", (int)strcspn(colon, "\n"), colon);
        break;
    }
    if (f) fclose(f);
}

/* Field f of a row as text (before quoting): nibble does not pin threads (cpu_mask 0x0, not
 * strict), offloads no layer and computes no embeddings. */
static void value(const row *w, field f, char *v) {
    const char *str = NULL;
    long long i = 0;
    double x = 0;
    switch (f) {
    case F_BUILD_COMMIT: str = NB_BUILD_COMMIT; break;
    case F_CPU_INFO: str = cpu_info; break;
    case F_BACKENDS: str = backend; break;
    case F_MODEL_FILENAME: str = w->model_filename; break;
    case F_MODEL_TYPE: str = w->model_type; break;
    case F_MODEL_SIZE: i = (long long)w->model_size; break;
    case F_MODEL_N_PARAMS: i = (long long)w->model_n_params; break;
    case F_N_BATCH: i = w->n_batch; break;
    case F_N_UBATCH: i = w->n_ubatch; break;
    case F_N_THREADS: i = w->n_threads; break;
    case F_CPU_MASK: str = "0x0"; break;
    case F_TYPE_K: str = nb_type_name(w->type_k); break;
    case F_TYPE_V: str = nb_type_name(w->type_v); break;
    case F_FLASH_ATTN: i = w->flash_attn; break;
    case F_N_PROMPT: i = w->n_prompt; break;
    case F_N_GEN: i = w->n_gen; break;
    case F_N_DEPTH: i = w->n_depth; break;
    case F_TEST_TIME: str = w->test_time; break;
    case F_AVG_NS: i = (long long)w->r.avg_ns; break;
    case F_STDDEV_NS: i = (long long)w->r.stddev_ns; break;
    case F_AVG_TS: x = w->r.avg_ts; break;
    case F_STDDEV_TS: x = w->r.stddev_ts; break;
    case F_MEDIAN_TS: x = w->r.median_ts; break;
    case F_CPU_STRICT: case F_N_GPU_LAYERS: case F_EMBEDDINGS: case N_FIELDS: break;
    }
    if (str) snprintf(v, VAL_CAP, "%s", str);
    else if (FIELDS[f].k == K_FLOAT) snprintf(v, VAL_CAP, "%f", x);
    else snprintf(v, VAL_CAP, "%lld", i);
}

static void csv_header(void) {
    for (field f = 0; f < N_FIELDS; f++) printf("%s%s", f ? "," : "", FIELDS[f].name);
    putchar('\n');
}

static void csv_row(const row *w) {
    char v[VAL_CAP];
    for (field f = 0; f < N_FIELDS; f++) { /* every value quoted, quotes doubled (llama-bench's escape_csv) */
        value(w, f, v);
        fputs(f ? ",\"" : "\"", stdout);
        for (const char *p = v; *p; p++) {
            if (*p == '"') putchar('"');
            putchar(*p);
        }
        putchar('"');
    }
    putchar('\n');
}

/* One JSON object: "  {\n    field: value,\n ... }" (json) or all on one line (jsonl). */
static void json_row(const row *w, int lines) {
    const char *open = lines ? "  {\n" : "{", *sep = lines ? ",\n" : ", ", *ind = lines ? "    " : "";
    char v[VAL_CAP];
    fputs(open, stdout);
    for (field f = 0; f < N_FIELDS; f++) {
        value(w, f, v);
        printf("%s\"%s\": ", ind, FIELDS[f].name);
        if (FIELDS[f].k == K_STR) arg_json_str(stdout, v, strlen(v));
        else if (FIELDS[f].k == K_BOOL) fputs(strcmp(v, "0") ? "true" : "false", stdout);
        else fputs(v, stdout);
        fputs(sep, stdout);
    }
    printf("%s\"samples_ns\": [ ", ind);
    for (int k = 0; k < w->r.n_reps; k++) printf("%s%llu", k ? ", " : "", (unsigned long long)w->r.samples_ns[k]);
    printf(" ]%s%s\"samples_ts\": [ ", sep, ind);
    for (int k = 0; k < w->r.n_reps; k++) printf("%s%f", k ? ", " : "", w->r.samples_ts[k]);
    printf(" ]%s", lines ? "\n  }" : "}\n");
}

/* ---------------------------------------------------------------- markdown */

/* The table's columns: llama-bench's, with type_k, type_v, fa, n_batch and n_ubatch only when
 * they were given a list or a value other than the default (its print_header rule). */
typedef enum { C_MODEL, C_SIZE, C_PARAMS, C_BACKEND, C_THREADS, C_BATCH, C_UBATCH, C_TYPE_K, C_TYPE_V, C_FA,
               C_TEST, C_TS } column;
static const struct {
    const char *title;
    int width; /* llama-bench's: negative left-aligned */
} COLS[] = {{"model", -30}, {"size", 10}, {"params", 10}, {"backend", -10}, {"threads", 7}, {"n_batch", 7},
            {"n_ubatch", 8}, {"type_k", 6}, {"type_v", 6}, {"fa", 3}, {"test", 15}, {"t/s", 20}};
static column cols[C_TS + 1];
static int n_cols;

/* A column's width; the backend's grows to fit nibble's "CPU (avx512)" (llama-bench's is "CPU"). */
static int width_of(column c) {
    const int len = (int)strlen(backend);
    return c == C_BACKEND && len > -COLS[c].width ? -len : COLS[c].width;
}

static int differs(const arg_list *l, int dflt) { return l->n > 1 || l->v[0] != dflt; }

static void md_header(const opts *o) {
    n_cols = 0;
    for (column c = C_MODEL; c <= C_TS; c++) {
        const int shown = c == C_BATCH    ? differs(&o->batch, 2048)
                          : c == C_UBATCH ? differs(&o->ubatch, 512)
                          : c == C_TYPE_K ? differs(&o->ctk, 0)
                          : c == C_TYPE_V ? differs(&o->ctv, 0)
                          : c == C_FA     ? o->fa.n > 1 || fa_of_word[o->fa.v[0]] != NB_FA_AUTO
                                          : 1;
        if (shown) cols[n_cols++] = c;
    }
    putchar('|');
    for (int i = 0; i < n_cols; i++) printf(" %*s |", width_of(cols[i]), COLS[cols[i]].title);
    printf("\n|");
    for (int i = 0; i < n_cols; i++) {
        const int w = width_of(cols[i]);
        printf(" %.*s%c |", abs(w) - 1, "------------------------------", w > 0 ? ':' : '-');
    }
    putchar('\n');
}

/* llama-bench's test names: pp512, tg128, pp512+tg128, then " @ d4096" at a depth. */
static void test_name(const row *w, char *buf, size_t cap) {
    int n = w->n_gen == 0    ? snprintf(buf, cap, "pp%d", w->n_prompt)
            : w->n_prompt == 0 ? snprintf(buf, cap, "tg%d", w->n_gen)
                               : snprintf(buf, cap, "pp%d+tg%d", w->n_prompt, w->n_gen);
    if (w->n_depth > 0 && n > 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, " @ d%d", w->n_depth);
}

static void md_row(const row *w) {
    putchar('|');
    for (int i = 0; i < n_cols; i++) {
        char v[VAL_CAP];
        const column c = cols[i];
        int width = width_of(c);
        switch (c) {
        case C_MODEL: snprintf(v, sizeof v, "%s", w->model_type); break;
        case C_SIZE:
            if (w->model_size < (1u << 30)) snprintf(v, sizeof v, "%.2f MiB", (double)w->model_size / (1 << 20));
            else snprintf(v, sizeof v, "%.2f GiB", (double)w->model_size / (1 << 30));
            break;
        case C_PARAMS:
            if (w->model_n_params < 1000000000u) snprintf(v, sizeof v, "%.2f M", (double)w->model_n_params / 1e6);
            else snprintf(v, sizeof v, "%.2f B", (double)w->model_n_params / 1e9);
            break;
        case C_BACKEND: snprintf(v, sizeof v, "%s", backend); break;
        case C_THREADS: snprintf(v, sizeof v, "%d", w->n_threads); break;
        case C_BATCH: snprintf(v, sizeof v, "%d", w->n_batch); break;
        case C_UBATCH: snprintf(v, sizeof v, "%d", w->n_ubatch); break;
        case C_TYPE_K: snprintf(v, sizeof v, "%s", nb_type_name(w->type_k)); break;
        case C_TYPE_V: snprintf(v, sizeof v, "%s", nb_type_name(w->type_v)); break;
        case C_FA: snprintf(v, sizeof v, "%d", w->flash_attn); break;
        case C_TEST: test_name(w, v, sizeof v); break;
        case C_TS:
            snprintf(v, sizeof v, "%.2f ± %.2f", w->r.avg_ts, w->r.stddev_ts);
            width += 1; /* '±' is two bytes */
            break;
        }
        printf(" %*s |", width, v);
    }
    putchar('\n');
}

/* ---------------------------------------------------------------- the tests */

static void print_row(const opts *o, const row *w, int *first) {
    switch (o->format) {
    case OUT_MD: md_row(w); break;
    case OUT_CSV: csv_row(w); break;
    case OUT_JSON: fputs(*first ? "" : ",\n", stdout), json_row(w, 1); break;
    case OUT_JSONL: json_row(w, 0); break;
    }
    *first = 0;
    fflush(stdout);
}

/* "qwen3 0.6B Q4_K_M": architecture, the file's size label (else one from the parameter count:
 * "36M", "0.6B", "1.2B") and file type, as llama-bench's model_type is architecture, size class
 * (from its table of known shapes, "?B" for others) and file type ("Q4_K - Medium"). */
static void model_type(const nb_model *m, uint64_t params, char *buf, size_t cap) {
    const nb_gguf *g = nb_model_gguf(m);
    const char *label;
    char own[32];
    uint32_t ftype;
    if (nb_gguf_get_string(g, "general.size_label", &label)) {
        if (params < 100000000u) snprintf(own, sizeof own, "%.0fM", (double)params / 1e6);
        else snprintf(own, sizeof own, "%.1fB", (double)params / 1e9);
        label = own;
    }
    snprintf(buf, cap, "%s %s %s", nb_model_get_info(m)->arch, arg_safe(0, label),
             nb_gguf_get_u32(g, "general.file_type", &ftype) ? "unknown" : nb_ftype_name((int)ftype));
}

/* Every test of one combination of a model, a pool and cache settings, at one depth. Returns
 * the number that failed. */
static int run_tests(const opts *o, const nb_model *m, row *w, nb_bench_params *bp, int *first) {
    int failed = 0;
    for (int t = 0; t < o->n_tests; t++) {
        w->n_prompt = o->test_p[t], w->n_gen = o->test_n[t];
        bp->n_prompt = w->n_prompt, bp->n_gen = w->n_gen;
        const time_t now = time(NULL);
        strftime(w->test_time, sizeof w->test_time, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        nb_status s = nb_bench_run(m, bp, &w->r);
        if (s) {
            char name[64];
            test_name(w, name, sizeof name);
            arg_error("%s %s (threads %d, n_batch %d, n_ubatch %d, type_k %s, type_v %s, fa %d): %s",
                      arg_safe(0, w->model_filename), name, w->n_threads, w->n_batch, w->n_ubatch, nb_type_name(w->type_k),
                      nb_type_name(w->type_v), w->flash_attn, arg_safe(1, nb_last_error()));
            failed++;
            continue;
        }
        print_row(o, w, first);
    }
    return failed;
}

/* The loops of llama-bench's get_cmd_params_instances, for one model. */
static int run_model(const opts *o, const char *path, int *first) {
    nb_model *m;
    nb_status s = nb_model_load(path, &m);
    if (s) {
        arg_status(s);
        return 1;
    }
    nb_census census;
    nb_gguf_census(nb_model_gguf(m), &census);
    row w = {.model_filename = path, .model_size = census.total.bytes, .model_n_params = census.total.params};
    model_type(m, census.total.params, w.model_type, sizeof w.model_type);
    int failed = 0;
    nb_bench_params bp = nb_bench_default_params();
    bp.reps = o->reps;
    bp.warmup = !o->no_warmup;
    bp.ctx.fast_prefill = o->fast_prefill;
    for (int b = 0; b < o->batch.n; b++)
        for (int ub = 0; ub < o->ubatch.n; ub++)
            for (int tk = 0; tk < o->ctk.n; tk++)
                for (int tv = 0; tv < o->ctv.n; tv++)
                    for (int fa = 0; fa < o->fa.n; fa++)
                        for (int t = 0; t < o->threads.n; t++) {
                            nb_pool *pool;
                            if ((s = nb_pool_create(o->threads.v[t], &pool))) {
                                arg_status(s);
                                failed++;
                                continue;
                            }
                            w.n_batch = bp.n_batch = o->batch.v[b];
                            w.n_ubatch = bp.ctx.n_batch = o->ubatch.v[ub];
                            w.type_k = bp.ctx.type_k = arg_cache_type(o->ctk.v[tk]);
                            w.type_v = bp.ctx.type_v = arg_cache_type(o->ctv.v[tv]);
                            w.flash_attn = bp.ctx.flash_attn = fa_of_word[o->fa.v[fa]];
                            w.n_threads = nb_pool_threads(pool);
                            bp.ctx.pool = pool;
                            for (int d = 0; d < o->depth.n; d++) {
                                w.n_depth = bp.n_depth = o->depth.v[d];
                                failed += run_tests(o, m, &w, &bp, first);
                            }
                            nb_pool_destroy(pool);
                        }
    nb_model_free(m);
    return failed;
}

int bench_model(int argc, char **argv) {
    opts o = {.prompt = {{512}, 1}, .gen = {{128}, 1}, .depth = {{0}, 1}, .threads = {{0}, 1}, .batch = {{2048}, 1},
              .ubatch = {{512}, 1}, .ctk = {{0}, 1}, .ctv = {{0}, 1}, .fa = {{0}, 1}, .reps = 5};
    arg_opt opts_[] = {
        OPT_STRS("-m|--model", &o.models),
        OPT_LIST("-p|--n-prompt", &o.prompt, 0, 1 << 24),
        OPT_LIST("-n|--n-gen", &o.gen, 0, 1 << 24),
        OPT_STRS("-pg", &o.pg),
        OPT_LIST("-d|--n-depth", &o.depth, 0, 1 << 24),
        OPT_LIST("-t|--threads", &o.threads, 1, NB_MAX_THREADS),
        OPT_LIST("-b|--batch-size", &o.batch, 1, 1 << 24),
        OPT_LIST("-ub|--ubatch-size", &o.ubatch, 1, 4096),
        OPT_CHOICES("-ctk|--cache-type-k", &o.ctk, ARG_CACHE_TYPES),
        OPT_CHOICES("-ctv|--cache-type-v", &o.ctv, ARG_CACHE_TYPES),
        OPT_CHOICES("-fa|--flash-attn", &o.fa, FA_WORDS),
        OPT_INT("-r|--repetitions", &o.reps, 1, NB_BENCH_MAX_REPS),
        OPT_FLAG("--no-warmup", &o.no_warmup),
        OPT_FLAG("--fast-prefill", &o.fast_prefill),
        OPT_CHOICE("-o|--output", &o.format, "md|csv|json|jsonl"),
        OPT_NGL,
    };
    arg_spec spec = ARG_SPEC("bench", BENCH_USAGE_MODEL, opts_, NULL, 0);
    int rc = arg_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    if (!o.models.n) return arg_usage_error(&spec, "-m MODEL is required");
    /* the tests in llama-bench's order; -p 0, -n 0 and -pg 0,0 are none */
    for (int i = 0; i < o.prompt.n; i++)
        if (o.prompt.v[i]) o.test_p[o.n_tests] = o.prompt.v[i], o.test_n[o.n_tests++] = 0;
    for (int i = 0; i < o.gen.n; i++)
        if (o.gen.v[i]) o.test_p[o.n_tests] = 0, o.test_n[o.n_tests++] = o.gen.v[i];
    for (int i = 0; i < o.pg.n; i++) {
        int p, n, end = 0;
        if (sscanf(o.pg.v[i], "%d,%d%n", &p, &n, &end) != 2 || o.pg.v[i][end] || p < 0 || n < 0 || p > (1 << 24) ||
            n > (1 << 24))
            return arg_usage_error(&spec, "-pg '%s': expected PP,TG (two integers in [0, %d])", o.pg.v[i], 1 << 24);
        if (p || n) o.test_p[o.n_tests] = p, o.test_n[o.n_tests++] = n;
    }
    if (!o.n_tests) return arg_usage_error(&spec, "no test to run: -p and -n are 0 and no -pg is given");
    read_cpu_info();
    snprintf(backend, sizeof backend, "CPU (%s%s)", nb_isa_name(nb_isa_active()), o.fast_prefill ? ", block" : "");
    if (o.format == OUT_MD) md_header(&o);
    else if (o.format == OUT_CSV) csv_header();
    else if (o.format == OUT_JSON) fputs("[\n", stdout);
    fflush(stdout);
    int failed = 0, first = 1;
    for (int i = 0; i < o.models.n; i++) failed += run_model(&o, o.models.v[i], &first);
    if (o.format == OUT_MD) printf("\nbuild: %s (nibble %s)\n", NB_BUILD_COMMIT, NB_VERSION);
    else if (o.format == OUT_JSON) fputs(first ? "]\n" : "\n]\n", stdout);
    if (failed) arg_error("%d test%s failed", failed, nb_plural(failed));
    return failed ? CLI_FAIL : CLI_OK;
}
