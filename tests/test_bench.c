/*
 * test_bench.c: the model benchmark, `nibble bench -m` in llama-bench's dialect and the library's
 * nb_bench_run / nb_decode_step_bytes under it, and the machine benchmarks' library calls. The command's JSON is parsed (cJSON) and its rows,
 * fields and values checked; a bad flag is a usage error naming it; a combination the library
 * refuses is an error line and exit 1 while the others still run. Nothing here times anything:
 * figures are only required to be positive and consistent with each other.
 *
 * The model: the small random-weight Llama 3 of tests/parity/make_family_models.py when the
 * parity tier has written it, else the default model; without either the tests skip.
 */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nibble.h"
#include "test.h"

static char MODEL[PATH_MAX], BIN[PATH_MAX], TMPD[64];
static char OUT[1 << 18], ERR[1 << 16];

/* `nibble bench ARGS` with stdout and stderr into OUT and ERR; its exit status. */
static int bench(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bench(const char *fmt, ...) {
    char args[PATH_MAX + 256], cmd[2 * PATH_MAX + 1024], out[128], err[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(out, sizeof out, "%s/stdout", TMPD);
    snprintf(err, sizeof err, "%s/stderr", TMPD);
    snprintf(cmd, sizeof cmd, "%s bench %s </dev/null >%s 2>%s", BIN, args, out, err);
    int st = system(cmd);
    test_slurp(out, OUT, sizeof OUT);
    test_slurp(err, ERR, sizeof ERR);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* -p 16 -n 4 -d 0,8 -r 2: pp16, tg4, pp16 @ d8, tg4 @ d8, in that order (llama-bench's: the
 * depths outside, the tests inside), each with llama-bench's fields and two samples. */
TEST(json_rows_and_fields) {
    if (!MODEL[0]) SKIP("no model (build/families/llama3-small-q4_k_m.gguf or models/gemma-3-270m-q4_k_m.gguf)");
    int rc = bench("-m %s -p 16 -n 4 -d 0,8 -r 2 -t 1 -o json", MODEL);
    CHECK(rc == 0, "exit %d: %s", rc, ERR);
    cJSON *root = cJSON_Parse(OUT);
    CHECK(cJSON_IsArray(root), "not a JSON array:\n%s", OUT);
    if (!cJSON_IsArray(root)) return;
    CHECK(cJSON_GetArraySize(root) == 4, "%d rows, want 4", cJSON_GetArraySize(root));
    static const char *const fields[] = {"build_commit", "cpu_info", "backends", "model_filename", "model_type",
                                         "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads", "type_k",
                                         "type_v", "flash_attn", "n_prompt", "n_gen", "n_depth", "test_time", "avg_ns",
                                         "stddev_ns", "avg_ts", "stddev_ts", "median_ts", "samples_ns", "samples_ts"};
    const int want[4][3] = {{16, 0, 0}, {0, 4, 0}, {16, 0, 8}, {0, 4, 8}}; /* n_prompt, n_gen, n_depth */
    nb_gguf *g = NULL;
    nb_census census = {0};
    CHECK(nb_gguf_open(MODEL, &g) == NB_OK && nb_gguf_census(g, &census) == NB_OK, "census: %s", nb_last_error());
    nb_gguf_close(g);
    int i = 0;
    for (const cJSON *row = root->child; row && i < 4; row = row->next, i++) {
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
            CHECK(cJSON_GetObjectItemCaseSensitive(row, fields[f]), "row %d lacks %s", i, fields[f]);
        CHECK(num(row, "n_prompt") == want[i][0] && num(row, "n_gen") == want[i][1] && num(row, "n_depth") == want[i][2],
              "row %d is pp%.0f tg%.0f at depth %.0f", i, num(row, "n_prompt"), num(row, "n_gen"), num(row, "n_depth"));
        CHECK(num(row, "avg_ts") > 0 && num(row, "median_ts") > 0 && num(row, "avg_ns") > 0 && num(row, "stddev_ts") >= 0,
              "row %d: avg_ts %g median_ts %g avg_ns %g stddev_ts %g", i, num(row, "avg_ts"), num(row, "median_ts"),
              num(row, "avg_ns"), num(row, "stddev_ts"));
        CHECK(num(row, "n_threads") == 1 && num(row, "n_batch") == 2048 && num(row, "n_ubatch") == 512 &&
                  num(row, "flash_attn") == -1,
              "row %d: threads %g, batch %g / %g, fa %g (defaults 2048 / 512, fa auto = -1)", i, num(row, "n_threads"),
              num(row, "n_batch"), num(row, "n_ubatch"), num(row, "flash_attn"));
        CHECK(str(row, "type_k") && !strcmp(str(row, "type_k"), "f16") && str(row, "type_v") &&
                  !strcmp(str(row, "type_v"), "f16"),
              "row %d: cache types", i);
        CHECK(str(row, "model_filename") && !strcmp(str(row, "model_filename"), MODEL), "row %d: model_filename", i);
        CHECK(str(row, "backends") && !strncmp(str(row, "backends"), "CPU (", 5), "row %d: backends %s", i,
              str(row, "backends"));
        CHECK(num(row, "model_size") == (double)census.total.bytes && num(row, "model_n_params") == (double)census.total.params,
              "row %d: size %g params %g, the file's tensors %llu bytes %llu elements", i, num(row, "model_size"),
              num(row, "model_n_params"), (unsigned long long)census.total.bytes,
              (unsigned long long)census.total.params);
        const cJSON *ns = cJSON_GetObjectItemCaseSensitive(row, "samples_ns");
        const cJSON *ts = cJSON_GetObjectItemCaseSensitive(row, "samples_ts");
        CHECK(cJSON_GetArraySize(ns) == 2 && cJSON_GetArraySize(ts) == 2, "row %d: %d / %d samples, want 2", i,
              cJSON_GetArraySize(ns), cJSON_GetArraySize(ts));
        if (cJSON_GetArraySize(ts) == 2) {
            const double a = cJSON_GetArrayItem(ts, 0)->valuedouble, b = cJSON_GetArrayItem(ts, 1)->valuedouble;
            CHECK(fabs(num(row, "avg_ts") - (a + b) / 2) <= 1e-3 * num(row, "avg_ts"), "row %d: avg_ts %g of %g, %g", i,
                  num(row, "avg_ts"), a, b);
        }
    }
    cJSON_Delete(root);
    /* jsonl: one object a line, the same rows */
    rc = bench("-m %s -p 16 -n 0 -d 0,8 -r 1 -t 1 -o jsonl", MODEL);
    int lines = 0;
    for (char *line = strtok(OUT, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        cJSON *o = cJSON_Parse(line);
        CHECK(cJSON_IsObject(o) && num(o, "n_depth") == 8 * lines, "jsonl line %d: %s", lines, line);
        cJSON_Delete(o);
    }
    CHECK(rc == 0 && lines == 2, "jsonl: exit %d, %d lines", rc, lines);
}

/* The table and csv: llama-bench's header, test names, columns shown only off their defaults. */
TEST(md_and_csv) {
    if (!MODEL[0]) SKIP("no model");
    int rc = bench("-m %s -p 8 -n 2 -pg 8,2 -d 0,4 -r 1 -t 1", MODEL);
    CHECK(rc == 0, "md: exit %d %s", rc, ERR);
    CHECK(strstr(OUT, "| model ") && strstr(OUT, "| threads |") && strstr(OUT, "t/s |") && !strstr(OUT, "type_k") &&
              !strstr(OUT, "| fa |") && !strstr(OUT, "n_batch"),
          "md header:\n%s", OUT);
    static const char *const names[] = {" pp8 |", " tg2 |", " pp8+tg2 |", " pp8 @ d4 |", " tg2 @ d4 |", " pp8+tg2 @ d4 |"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) CHECK(strstr(OUT, names[i]), "no test '%s':\n%s", names[i], OUT);
    CHECK(strstr(OUT, " ± ") && strstr(OUT, "\nbuild: "), "t/s as avg ± stddev, then the build line:\n%s", OUT);
    rc = bench("-m %s -p 8 -n 0 -r 1 -t 1 -ctk f16,f32 -ctv f16,f32 -fa 0 -ub 256", MODEL);
    CHECK(strstr(OUT, "| type_k | type_v |  fa |") && strstr(OUT, "n_ubatch") && !strstr(OUT, "n_batch |"),
          "columns off their defaults:\n%s", OUT);
    (void)rc; /* the mixed f16/f32 pairs may or may not run in this build */
    rc = bench("-m %s -p 8 -n 0 -r 1 -t 1 -o csv", MODEL);
    CHECK(rc == 0 && !strncmp(OUT, "build_commit,cpu_info,backends,model_filename,", 46) && strstr(OUT, "\n\"") &&
              strstr(OUT, ",\"8\",\"0\",\"0\","),
          "csv: exit %d\n%s", rc, OUT);
}

/* A bad flag value is a usage error (exit 2) naming it; a refused combination is an error line
 * naming it and the library's reason, the other combinations still run, and the exit is 1. */
TEST(usage_errors_and_refused_rows) {
    static const char *const bad[][2] = { /* the flags, what the message quotes */
        {"-m M.gguf -ctk q9", "-ctk 'q9'"},   {"-m M.gguf -ctv f16,q9", "-ctv 'f16,q9'"},
        {"-m M.gguf -fa maybe", "-fa 'maybe'"}, {"-m M.gguf -pg 5", "-pg '5'"},
        {"-m M.gguf -o sql", "-o 'sql'"},     {"-m M.gguf -r 0", "-r '0'"},
        {"-m M.gguf -ub 5000", "-ub '5000'"}, {"-m M.gguf -p 0 -n 0", "no test"},
        {"-p 16", "-m MODEL is required"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = bench("%s", bad[i][0]);
        const char *msg = strstr(ERR, bad[i][1]), *use = strstr(ERR, "usage:");
        CHECK(rc == 2 && msg && use && msg < use && !OUT[0], "'%s': exit %d, want 2 with \"%s\" before the usage:\n%s",
              bad[i][0], rc, bad[i][1], ERR);
    }
    if (!MODEL[0]) SKIP("no model");
    /* quantized V cells with the unfused order: refused (nb_ctx_params: F16 and F32 cells only) */
    int rc = bench("-m %s -p 8 -n 0 -r 1 -t 1 -ctk q8_0,f16 -ctv q8_0,f16 -fa 0 -o json", MODEL);
    CHECK(rc == 1, "a refused combination: exit %d, want 1", rc);
    CHECK(strstr(ERR, "pp8 (threads 1, n_batch 2048, n_ubatch 512, type_k q8_0, type_v q8_0, fa 0): ") &&
              strstr(ERR, "failed"),
          "no error line naming q8_0/q8_0:\n%s", ERR);
    cJSON *root = cJSON_Parse(OUT);
    int f16_rows = 0;
    for (const cJSON *row = root ? root->child : NULL; row; row = row->next) {
        CHECK(strcmp(str(row, "type_k"), "q8_0") || strcmp(str(row, "type_v"), "q8_0"), "a row for the refused pair");
        f16_rows += !strcmp(str(row, "type_k"), "f16") && !strcmp(str(row, "type_v"), "f16");
    }
    CHECK(cJSON_IsArray(root) && f16_rows == 1, "the f16/f16 row should still run (%d):\n%s", f16_rows, OUT);
    cJSON_Delete(root);
    /* a depth past the training context: the context is refused, with the limit */
    rc = bench("-m %s -p 8 -n 0 -d 0,1000000 -r 1 -t 1", MODEL);
    CHECK(rc == 1 && strstr(ERR, "pp8 @ d1000000 (") && strstr(ERR, "training context") && strstr(OUT, " pp8 |"),
          "depth past the training context: exit %d\n%s\n%s", rc, OUT, ERR);
}

/* The library: repetitions, statistics, the truncation back to the depth between them (each
 * repetition fills the context exactly), and the errors. */
TEST(api_run) {
    if (!MODEL[0]) SKIP("no model");
    nb_model *m;
    CHECK(nb_model_load(MODEL, &m) == NB_OK, "load: %s", nb_last_error());
    nb_bench_params p = nb_bench_default_params();
    CHECK(p.n_prompt == 512 && p.n_batch == 2048 && p.reps == 5 && p.warmup == 1 && p.ctx.n_batch == 512,
          "defaults (llama-bench's)");
    p.n_prompt = 6, p.n_gen = 3, p.n_depth = 5, p.reps = 3, p.n_batch = 4, p.ctx.n_threads = 1;
    nb_bench_result r;
    CHECK(nb_bench_run(m, &p, &r) == NB_OK, "pp6+tg3 @ d5: %s", nb_last_error());
    CHECK(r.n_reps == 3 && r.n_threads == 1, "%d repetitions on %d threads", r.n_reps, r.n_threads);
    double lo = INFINITY, hi = 0, sum = 0;
    for (int i = 0; i < r.n_reps; i++) {
        CHECK(r.samples_ns[i] > 0 && fabs(r.samples_ts[i] - 9e9 / (double)r.samples_ns[i]) < 1e-6 * r.samples_ts[i],
              "sample %d: %llu ns, %g t/s", i, (unsigned long long)r.samples_ns[i], r.samples_ts[i]);
        lo = fmin(lo, r.samples_ts[i]), hi = fmax(hi, r.samples_ts[i]), sum += r.samples_ts[i];
    }
    CHECK(fabs(r.avg_ts - sum / 3) < 1e-9 * sum && r.median_ts >= lo && r.median_ts <= hi && r.stddev_ts >= 0 &&
              r.stddev_ts <= hi - lo,
          "avg %g median %g stddev %g of [%g, %g]", r.avg_ts, r.median_ts, r.stddev_ts, lo, hi);
    double want = 0, b;
    for (int pos = 11; pos < 14; pos++) {
        CHECK(nb_decode_step_bytes(m, NB_TYPE_F16, NB_TYPE_F16, pos, &b) == NB_OK, "step bytes: %s", nb_last_error());
        want += b / 3;
    }
    CHECK(fabs(r.step_bytes - want) < 1e-6 * want, "step_bytes %g, the mean at positions 11..13 %g", r.step_bytes, want);
    p.reps = 1, p.warmup = 0, p.n_gen = 0;
    CHECK(nb_bench_run(m, &p, &r) == NB_OK && r.n_reps == 1 && r.stddev_ts == 0 && r.median_ts == r.avg_ts &&
              r.step_bytes == 0,
          "one prefill repetition: %s", nb_last_error());
    p.reps = 0;
    CHECK(nb_bench_run(m, &p, &r) == NB_ERR_INVALID_ARG && strstr(nb_last_error(), "0 repetitions") && r.n_reps == 0,
          "0 repetitions: %s", nb_last_error());
    p.reps = 1, p.n_prompt = 0;
    CHECK(nb_bench_run(m, &p, &r) == NB_ERR_INVALID_ARG, "no tokens: %s", nb_last_error());
    p.n_prompt = 4, p.ctx.type_k = p.ctx.type_v = NB_TYPE_Q4_0, p.ctx.flash_attn = NB_FA_OFF;
    CHECK(nb_bench_run(m, &p, &r) != NB_OK && nb_last_error()[0], "q4_0 cells, unfused: %s", nb_last_error());
    nb_model_free(m);
}

/* Bytes of a decode step: the file's tensors, plus K and V rows of every cached position on
 * global layers and of at most the window on sliding ones. */
TEST(api_step_bytes) {
    if (!MODEL[0]) SKIP("no model");
    nb_model *m;
    CHECK(nb_model_load(MODEL, &m) == NB_OK, "load: %s", nb_last_error());
    const nb_model_info *in = nb_model_get_info(m);
    const double row = 2.0 * in->head_dim * in->n_head_kv; /* one position's f16 keys (or values) of a layer */
    double b0, b1, bq;
    CHECK(nb_decode_step_bytes(m, NB_TYPE_F16, NB_TYPE_F16, 0, &b0) == NB_OK, "%s", nb_last_error());
    CHECK(fabs(b0 - ((double)in->weight_bytes + 2 * row * in->n_layer)) < 1, "position 0: %g", b0);
    const int far = in->sliding_window > 0 ? in->sliding_window + 10 : 1000;
    CHECK(nb_decode_step_bytes(m, NB_TYPE_F16, NB_TYPE_F16, far, &b1) == NB_OK, "%s", nb_last_error());
    const double local = in->sliding_window > 0 ? in->sliding_window : far + 1;
    const double want = (double)in->weight_bytes + 2 * row * ((in->n_layer - in->n_sliding) * (far + 1.0) + in->n_sliding * local);
    CHECK(fabs(b1 - want) < 1, "position %d: %g, want %g", far, b1, want);
    /* q8_0 keys: 34 bytes per 32 elements instead of 64 */
    CHECK(nb_decode_step_bytes(m, NB_TYPE_Q8_0, NB_TYPE_F16, 0, &bq) == NB_OK && fabs(b0 - bq - row * in->n_layer * 30.0 / 64) < 1,
          "q8_0 keys: %g against %g", bq, b0);
    CHECK(nb_decode_step_bytes(m, NB_TYPE_F16, NB_TYPE_F16, -1, &b1) == NB_ERR_INVALID_ARG, "position -1");
    nb_model_free(m);
}

/* The machine benchmarks' pieces: the matrix (a quantized slab repeated, seeded), the stream and
 * the roofline's figures (positive, consistent), and the arguments they refuse. */
TEST(api_machine) {
    void *w, *w2;
    size_t bytes, rb;
    CHECK(nb_row_bytes(NB_TYPE_Q4_0, 64, &rb) == NB_OK, "q4_0 row");
    CHECK(nb_bench_matrix(NB_TYPE_Q4_0, 100, 64, 7, &w, &bytes) == NB_OK && bytes == 100 * rb, "matrix: %s",
          nb_last_error());
    const uint8_t *b = w;
    CHECK(!memcmp(b + 64 * rb, b, 36 * rb) && memcmp(b + rb, b, rb), "rows 64..99 repeat rows 0..35, rows differ");
    float x[64];
    CHECK(nb_dequantize(NB_TYPE_Q4_0, b, x, 64) == NB_OK, "dequantize");
    int in_range = 1;
    for (int i = 0; i < 64; i++) in_range &= x[i] >= -1.0f && x[i] <= 1.0f;
    CHECK(in_range, "values in [-1, 1]");
    CHECK(nb_bench_matrix(NB_TYPE_Q4_0, 100, 64, 8, &w2, &bytes) == NB_OK && memcmp(w2, w, bytes), "another seed");
    free(w), free(w2);
    CHECK(nb_bench_matrix(NB_TYPE_Q4_0, 4, 48, 7, &w, &bytes) == NB_ERR_INVALID_ARG && !w, "48 elements of q4_0");
    CHECK(nb_bench_matrix(NB_TYPE_Q4_0, 0, 64, 7, &w, &bytes) == NB_ERR_INVALID_ARG && !w, "0 rows");
    nb_pool *pool;
    CHECK(nb_pool_create(1, &pool) == NB_OK, "pool");
    nb_bench_stat st;
    CHECK(nb_bench_stream(pool, 1, &st) == NB_OK && st.median > 0 && st.min == st.median && st.max == st.median,
          "one pass: %g GB/s", st.median);
    CHECK(nb_bench_stream(pool, 0, &st) == NB_ERR_INVALID_ARG, "0 passes");
    nb_bench_kernel_result kr;
    CHECK(nb_bench_kernel(pool, NB_TYPE_Q4_0, 0, &kr) == NB_ERR_INVALID_ARG && strstr(nb_last_error(), "0 repetitions"),
          "0 repetitions: %s", nb_last_error());
    CHECK(nb_bench_kernel(NULL, NB_TYPE_Q4_0, 1, &kr) == NB_ERR_INVALID_ARG, "no pool");
    CHECK(nb_bench_kernel(pool, NB_TYPE_Q8_K, 1, &kr) == NB_ERR_INVALID_ARG && strstr(nb_last_error(), "weight type"),
          "q8_K: %s", nb_last_error());
    if (MODEL[0]) {
        nb_model *m;
        CHECK(nb_model_load(MODEL, &m) == NB_OK, "load: %s", nb_last_error());
        nb_bench_roofline_result r;
        CHECK(nb_bench_roofline(m, pool, 2, 0, &r) == NB_ERR_INVALID_ARG && r.step_bytes == 0, "0 rounds");
        CHECK(nb_bench_roofline(m, pool, 2, 2, &r) == NB_OK, "roofline: %s", nb_last_error());
        double want;
        CHECK(nb_decode_step_bytes(m, NB_TYPE_F16, NB_TYPE_F16, 1, &want) == NB_OK, "%s", nb_last_error());
        CHECK(r.step_bytes > want && r.step_bytes < want * 1.01, "step bytes %g (position 1: %g)", r.step_bytes, want);
        const nb_bench_stat *f[] = {&r.stream_gbs, &r.decode_ts, &r.ceiling_ts, &r.share};
        for (int i = 0; i < 4; i++)
            CHECK(f[i]->min > 0 && f[i]->min <= f[i]->median && f[i]->median <= f[i]->max, "figure %d: %g (%g..%g)", i,
                  f[i]->median, f[i]->min, f[i]->max);
        CHECK(fabs(r.ceiling_ts.min - r.stream_gbs.min * 1e9 / r.step_bytes) < 1e-6 * r.ceiling_ts.min,
              "ceiling = stream / step bytes");
        nb_model_free(m);
    }
    nb_pool_destroy(pool);
}

int main(int argc, char **argv) {
    (void)argc;
    char path[PATH_MAX];
    test_nibble_bin(argv[0], path, sizeof path);
    if (!realpath(path, BIN)) snprintf(BIN, sizeof BIN, "%s", path);
    static const char *const models[] = {"build/families/llama3-small-q4_k_m.gguf", "models/gemma-3-270m-q4_k_m.gguf"};
    for (size_t i = 0; i < sizeof models / sizeof models[0] && !MODEL[0]; i++)
        if (access(models[i], R_OK) == 0) snprintf(MODEL, sizeof MODEL, "%s", models[i]);
    snprintf(TMPD, sizeof TMPD, "/tmp/nb_bench_XXXXXX");
    if (!mkdtemp(TMPD)) return 1;
    RUN(json_rows_and_fields);
    RUN(md_and_csv);
    RUN(usage_errors_and_refused_rows);
    RUN(api_run);
    RUN(api_step_bytes);
    RUN(api_machine);
    for (const char *const *f = (const char *const[]){"stdout", "stderr", NULL}; *f; f++) {
        char file[128];
        snprintf(file, sizeof file, "%s/%s", TMPD, *f);
        unlink(file);
    }
    if (rmdir(TMPD)) printf("could not remove %s\n", TMPD);
    return test_summary();
}
