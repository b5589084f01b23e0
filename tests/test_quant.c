/*
 * test_quant.c: the model converter (nb_quantize_model, src/quant/) and imatrix statistics.
 *
 * A small synthetic Gemma-3-shaped GGUF is written with nibble's writer (8 layers, so llama.cpp's
 * "more bits" layers are 0, 3, 6, 7; rows of 256 and of 640, which no 256-block type takes) and
 * converted with each recipe; the tests check which tensor got which type, the metadata, the
 * order, general.file_type, that a failure leaves no temporary file and the old output intact, that
 * a bad recipe is refused (library and CLI exit 2), that best mode never has more error than the
 * reference on random data, that the thread count does not change a byte, imatrix collection and
 * its file, that auto:BPW keeps to its budget and spends it (on a second model, whose embedding
 * holds most of the weights, too) and the two-level .scale tensors.
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nibble.h"
#include "quant/quant.h"
#include "test.h"

#define N_LAYER 8
#define EMBD 256
#define FF 640
#define VOCAB 64

static char dir[256];
static char nibble_bin[512];

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* roughly normal: sum of uniforms, with an outlier now and then */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        s += (float)((rng >> 40) & 0xFFFFFF) / 16777216.0f - 0.5f;
    }
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((rng >> 33) % 97 == 0) ? s * 8 : s;
}

static float *fill(int64_t n) {
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = frand() * 0.05f;
    return x;
}

/* Tensors in a scrambled order (the converter must sort them as llama.cpp does). */
static int write_model(const char *path, int poison) {
    nb_gguf_writer *w;
    if (nb_gguf_writer_create(&w)) return 0;
    nb_gguf_writer_set_string(w, "general.architecture", "gemma3");
    nb_gguf_writer_set_u32(w, "general.file_type", 0);
    nb_gguf_writer_set_u32(w, "gemma3.block_count", N_LAYER);
    nb_gguf_writer_set_string(w, "test.note", "copied");
    const int32_t arr[3] = {7, -8, 9};
    nb_gguf_writer_set_array(w, "test.ints", NB_GGUF_I32, arr, 3);
    const char *strs[2] = {"a", "bc"};
    nb_gguf_writer_set_array(w, "test.strs", NB_GGUF_STRING, strs, 2);
    float *keep[64];
    int nk = 0;
    char name[64];
    for (int l = N_LAYER - 1; l >= 0; l--) {
        const struct { const char *n; int64_t ne0, ne1; } ts[] = {
            {"ffn_down", FF, EMBD}, {"attn_v", EMBD, 64}, {"attn_q", EMBD, 128}, {"attn_norm", EMBD, 1},
        };
        for (int k = 0; k < 4; k++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, ts[k].n);
            const int64_t ne[2] = {ts[k].ne0, ts[k].ne1};
            keep[nk] = fill(ne[0] * ne[1]);
            if (poison && l == 5 && k == 2) keep[nk][77] = NAN;
            nb_gguf_writer_add_tensor(w, name, NB_TYPE_F32, ts[k].ne1 > 1 ? 2 : 1, ne, keep[nk]);
            nk++;
        }
    }
    const int64_t ne_e[2] = {EMBD, VOCAB}, ne_n[1] = {EMBD};
    keep[nk] = fill(EMBD * VOCAB);
    nb_gguf_writer_add_tensor(w, "token_embd.weight", NB_TYPE_F32, 2, ne_e, keep[nk++]);
    keep[nk] = fill(EMBD);
    nb_gguf_writer_add_tensor(w, "output_norm.weight", NB_TYPE_F32, 1, ne_n, keep[nk++]);
    nb_status s = nb_gguf_writer_write(w, path);
    nb_gguf_writer_free(w);
    for (int i = 0; i < nk; i++) free(keep[i]);
    return s == NB_OK;
}

static char model_path[300], bad_path[300];

static int type_of(const nb_gguf *g, const char *fmt, int l) {
    char name[64];
    snprintf(name, sizeof name, fmt, l);
    const nb_gguf_tensor *t = nb_gguf_find_tensor(g, name);
    return t ? t->type : -1;
}

static int more_bits(int l) { return l < 1 || l >= 7 || (l - 1) % 3 == 2; }

static nb_gguf *convert(const char *recipe, nb_quant_params *pp, const char *out) {
    nb_quant_params p = pp ? *pp : nb_quant_default_params();
    p.recipe = recipe;
    if (p.n_threads == 0) p.n_threads = 2;
    nb_status s = nb_quantize_model(model_path, out, &p);
    CHECK(s == NB_OK, "%s: %s", recipe, nb_last_error());
    nb_gguf *g = NULL;
    if (!s) CHECK(nb_gguf_open(out, &g) == NB_OK, "open %s: %s", out, nb_last_error());
    return g;
}

TEST(q4_k_m_rules) {
    char out[300];
    snprintf(out, sizeof out, "%s/q4km.gguf", dir);
    nb_gguf *g = convert("q4_k_m", NULL, out);
    if (!g) return;
    CHECK(type_of(g, "token_embd.weight", 0) == NB_TYPE_Q6_K, "tied embedding -> q6_K");
    CHECK(type_of(g, "output_norm.weight", 0) == NB_TYPE_F32, "norm stays f32");
    for (int l = 0; l < N_LAYER; l++) {
        int v = type_of(g, "blk.%d.attn_v.weight", l), d = type_of(g, "blk.%d.ffn_down.weight", l);
        CHECK(v == (more_bits(l) ? NB_TYPE_Q6_K : NB_TYPE_Q4_K), "layer %d attn_v %s", l, nb_type_name(v));
        /* 640-wide rows: q6_K falls back to q8_0, q4_K to q5_0 */
        CHECK(d == (more_bits(l) ? NB_TYPE_Q8_0 : NB_TYPE_Q5_0), "layer %d ffn_down %s", l, nb_type_name(d));
        CHECK(type_of(g, "blk.%d.attn_q.weight", l) == NB_TYPE_Q4_K, "layer %d attn_q", l);
        CHECK(type_of(g, "blk.%d.attn_norm.weight", l) == NB_TYPE_F32, "layer %d norm", l);
    }
    uint32_t ft = 0, qv = 0;
    CHECK(!nb_gguf_get_u32(g, "general.file_type", &ft) && ft == 15, "file_type %u", ft);
    CHECK(!nb_gguf_get_u32(g, "general.quantization_version", &qv) && qv == 2, "quantization_version %u", qv);
    const char *note = NULL;
    CHECK(!nb_gguf_get_string(g, "test.note", &note) && !strcmp(note, "copied"), "string copied");
    int64_t kv;
    uint64_t n;
    int32_t v1 = 0;
    CHECK(!nb_gguf_get_array(g, "test.ints", NB_GGUF_I32, &kv, &n) && n == 3 && !nb_gguf_arr_i32(g, kv, 1, &v1) &&
              v1 == -8, "int array copied");
    const char *sp;
    size_t sl;
    CHECK(!nb_gguf_get_array(g, "test.strs", NB_GGUF_STRING, &kv, &n) && n == 2 && !nb_gguf_arr_str(g, kv, 1, &sp, &sl) &&
              sl == 2 && !memcmp(sp, "bc", 2), "string array copied");
    /* the two keys llama-quantize sets go last, in its order */
    int64_t nkv = nb_gguf_kv_count(g);
    CHECK(!strcmp(nb_gguf_kv_key(g, nkv - 2), "general.quantization_version") &&
              !strcmp(nb_gguf_kv_key(g, nkv - 1), "general.file_type"), "key order");
    /* llama.cpp's order: non-layer tensors by name, then layer 0, 1, ... by name */
    CHECK(!strcmp(nb_gguf_tensor_at(g, 0)->name, "output_norm.weight") &&
              !strcmp(nb_gguf_tensor_at(g, 1)->name, "token_embd.weight") &&
              !strcmp(nb_gguf_tensor_at(g, 2)->name, "blk.0.attn_norm.weight"), "tensor order");
    nb_gguf_close(g);
}

TEST(q8_0_q4_0_and_overrides) {
    char out[300];
    snprintf(out, sizeof out, "%s/q80.gguf", dir);
    nb_gguf *g = convert("q8_0", NULL, out);
    if (g) {
        CHECK(type_of(g, "token_embd.weight", 0) == NB_TYPE_Q8_0, "q8_0 embedding");
        CHECK(type_of(g, "blk.%d.ffn_down.weight", 3) == NB_TYPE_Q8_0, "q8_0 ffn_down");
        uint32_t ft = 0;
        CHECK(!nb_gguf_get_u32(g, "general.file_type", &ft) && ft == 7, "q8_0 file_type %u", ft);
        nb_gguf_close(g);
    }
    snprintf(out, sizeof out, "%s/q40.gguf", dir);
    if ((g = convert("Q4_0", NULL, out))) {
        CHECK(type_of(g, "token_embd.weight", 0) == NB_TYPE_Q6_K, "q4_0: tied embedding -> q6_K");
        CHECK(type_of(g, "blk.%d.attn_v.weight", 0) == NB_TYPE_Q4_0, "q4_0 attn_v");
        nb_gguf_close(g);
    }
    nb_quant_params p = nb_quant_default_params();
    const char *ov[2] = {"attn_q=q8_0", "blk\\.2\\..*=mxfp4"};
    p.overrides = ov;
    p.n_overrides = 2;
    p.embed_type = NB_TYPE_Q8_0;
    snprintf(out, sizeof out, "%s/ov.gguf", dir);
    if ((g = convert("nvfp4_m", &p, out))) {
        CHECK(type_of(g, "token_embd.weight", 0) == NB_TYPE_Q8_0, "--embed-type");
        CHECK(type_of(g, "blk.%d.attn_q.weight", 4) == NB_TYPE_Q8_0, "first override wins");
        CHECK(type_of(g, "blk.%d.attn_v.weight", 2) == NB_TYPE_MXFP4, "second override");
        CHECK(type_of(g, "blk.%d.attn_v.weight", 0) == NB_TYPE_Q6_K, "nvfp4_m keeps attn_v of layer 0 at q6_K");
        CHECK(type_of(g, "blk.%d.attn_v.weight", 1) == NB_TYPE_NVFP4, "nvfp4_m attn_v layer 1");
        CHECK(type_of(g, "blk.%d.ffn_down.weight", 1) == NB_TYPE_NVFP4, "nvfp4 on 640 rows (10 blocks)");
        CHECK(type_of(g, "blk.%d.attn_norm.weight", 1) == NB_TYPE_F32, "norm stays f32");
        nb_gguf_close(g);
    }
    p = nb_quant_default_params();
    p.pure_type = NB_TYPE_MXFP4;
    snprintf(out, sizeof out, "%s/pure.gguf", dir);
    if ((g = convert("q4_k_m", &p, out))) {
        CHECK(type_of(g, "token_embd.weight", 0) == NB_TYPE_MXFP4, "--pure embedding");
        CHECK(type_of(g, "blk.%d.ffn_down.weight", 0) == NB_TYPE_MXFP4, "--pure ffn_down (640 = 20 blocks)");
        nb_gguf_close(g);
    }
}

static int count_files(void) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    if (d) closedir(d);
    return n;
}

TEST(failure_leaves_nothing) {
    char out[300];
    snprintf(out, sizeof out, "%s/keep.gguf", dir);
    FILE *f = fopen(out, "wb");
    fputs("old", f);
    fclose(f);
    int before = count_files();
    nb_quant_params p = nb_quant_default_params();
    p.recipe = "q4_k_m";
    nb_status s = nb_quantize_model(bad_path, out, &p);
    CHECK(s == NB_ERR_NONFINITE, "NaN input refused: %d %s", s, nb_last_error());
    CHECK(strstr(nb_last_error(), "blk.5.attn_q.weight") != NULL, "names the tensor: %s", nb_last_error());
    CHECK(count_files() == before, "no temporary or scratch file left (%d vs %d)", count_files(), before);
    char buf[8] = {0};
    f = fopen(out, "rb");
    CHECK(f && fread(buf, 1, 7, f) == 3 && !strcmp(buf, "old"), "old output untouched");
    if (f) fclose(f);
    p.recipe = "q3_k_xl";
    CHECK(nb_quantize_model(model_path, out, &p) == NB_ERR_INVALID_ARG, "bad recipe refused");
    p.recipe = "auto:zero";
    CHECK(nb_quantize_model(model_path, out, &p) == NB_ERR_INVALID_ARG, "bad auto budget refused");
    CHECK(count_files() == before, "refusals leave nothing");
}

/* Runs the CLI next to this test program. */
TEST(cli_bad_recipe_exit_2) {
    const char *bin = nibble_bin;
    if (access(bin, X_OK)) SKIP("%s not built", bin);
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "%s quantize %s %s/x.gguf q9_z >/dev/null 2>&1", bin, model_path, dir);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "bad recipe: exit %d", WEXITSTATUS(st));
    snprintf(cmd, sizeof cmd, "%s quantize %s %s/x.gguf q8_0 --pure q7_7 >/dev/null 2>&1", bin, model_path, dir);
    st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "bad type: exit %d", WEXITSTATUS(st));
    snprintf(cmd, sizeof cmd, "%s quantize %s %s/x.gguf q8_0 >/dev/null 2>&1", bin, model_path, dir);
    st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "good run: exit %d", WEXITSTATUS(st));
}

/* best <= ref in (importance-weighted) squared error, per format, on random rows. */
TEST(best_not_worse_than_ref) {
    const int64_t n = 2048;
    float *x = fill(n), *imp = malloc(n * sizeof *imp), *y = malloc(n * sizeof *y);
    uint8_t *q = malloc(4 * n);
    for (int64_t i = 0; i < n; i++) imp[i] = 0.1f + (float)(i % 13) * (i % 5 == 0 ? 3.0f : 0.2f);
    const int types[3] = {NB_TYPE_MXFP4, NB_TYPE_NVFP4, NB_TYPE_Q4_K};
    for (int k = 0; k < 4; k++) {
        const int type = k < 3 ? types[k] : NB_TYPE_NVFP4;
        const float S = k == 3 ? 448.0f * 6.0f / 0.6f : 0; /* two-level with some encode scale */
        const float scale = S > 0 ? 1.0f / S : 1.0f;
        for (int w = 0; w < 2; w++) {
            const float *im = w ? imp : NULL;
            nb_quant_row(type, NB_QMODE_REF, x, NULL, q, n, S);
            double e_ref = nb_quant_row_error(type, q, x, im, scale, y, n);
            nb_quant_row(type, NB_QMODE_BEST, x, im, q, n, S);
            double e_best = nb_quant_row_error(type, q, x, im, scale, y, n);
            CHECK(e_best <= e_ref, "%s%s%s: best %g > ref %g", nb_type_name(type), S > 0 ? " two-level" : "",
                  w ? " weighted" : "", e_best, e_ref);
            CHECK(e_best < e_ref * 0.999, "%s%s%s: best %g does not improve on ref %g", nb_type_name(type),
                  S > 0 ? " two-level" : "", w ? " weighted" : "", e_best, e_ref);
        }
    }
    free(x);
    free(imp);
    free(y);
    free(q);
}

static int same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

TEST(threads_do_not_change_bytes) {
    const char *recipes[3] = {"q4_k_m", "nvfp4_2l", "mxfp4_m"};
    for (int r = 0; r < 3; r++) {
        char a[300], b[300];
        snprintf(a, sizeof a, "%s/t1.gguf", dir);
        snprintf(b, sizeof b, "%s/t3.gguf", dir);
        nb_quant_params p = nb_quant_default_params();
        p.recipe = recipes[r];
        p.mode = NB_QMODE_BEST;
        p.n_threads = 1;
        nb_status s1 = nb_quantize_model(model_path, a, &p);
        p.n_threads = 3;
        nb_status s3 = nb_quantize_model(model_path, b, &p);
        CHECK(!s1 && !s3 && same_file(a, b), "%s: 1 and 3 threads give different files", recipes[r]);
    }
}

typedef struct errsum {
    double sse, sx2;
} errsum;

static void add_err(void *user, const nb_quant_report *r) {
    errsum *e = user;
    if (r->measured) {
        e->sse += r->sse;
        e->sx2 += r->sum_x2;
    }
}

TEST(two_level_scale_tensors) {
    char out[300];
    snprintf(out, sizeof out, "%s/2l.gguf", dir);
    errsum e = {0, 0};
    nb_quant_params p = nb_quant_default_params();
    p.measure = 1;
    p.on_tensor = add_err;
    p.user = &e;
    nb_gguf *g = convert("nvfp4_2l", &p, out);
    if (!g) return;
    const nb_gguf_tensor *w = nb_gguf_find_tensor(g, "blk.3.attn_q.weight");
    const nb_gguf_tensor *s = nb_gguf_find_tensor(g, "blk.3.attn_q.scale");
    CHECK(w && w->type == NB_TYPE_NVFP4, "weight nvfp4");
    CHECK(s && s->type == NB_TYPE_F32 && s->n_dims == 1 && s->ne[0] == 1, "scale tensor f32 {1}");
    CHECK(!nb_gguf_find_tensor(g, "blk.3.attn_norm.scale"), "no scale for a norm");
    if (w && s) {
        float sc;
        memcpy(&sc, s->data, 4);
        float *y = malloc(EMBD * sizeof *y);
        nb_dequantize(NB_TYPE_NVFP4, w->data, y, EMBD);
        float m = 0; /* float: GCC 12 for aarch64 crashes vectorizing this reduction in double */
        for (int i = 0; i < EMBD; i++) m = fmaxf(m, fabsf(y[i] * sc));
        CHECK(sc > 0 && m > 0.01 && m < 2, "decoded * scale has the weights' size (max %g, scale %g)", m, sc);
        free(y);
    }
    CHECK(e.sx2 > 0 && sqrt(e.sse / e.sx2) < 0.2, "relative rmse %g", sqrt(e.sse / e.sx2));
    nb_gguf_close(g);
}

static double file_bpw(const nb_gguf *g) {
    double bytes = 0, elems = 0;
    for (int64_t i = 0; i < nb_gguf_tensor_count(g); i++) {
        const nb_gguf_tensor *t = nb_gguf_tensor_at(g, i);
        bytes += (double)t->bytes;
        elems += (double)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
    return 8 * bytes / elems;
}

/* A model shaped like the default model's hard case for auto: a 640-wide embedding (MXFP4, NVFP4 or
 * Q8_0 only) that holds 62.5 % of the weights, then four layers of small 256-wide matrices. */
static int write_wide_embedding_model(const char *path) {
    nb_gguf_writer *w;
    if (nb_gguf_writer_create(&w)) return 0;
    nb_gguf_writer_set_string(w, "general.architecture", "gemma3");
    nb_gguf_writer_set_u32(w, "gemma3.block_count", 4);
    float *keep[9] = {0}; /* the writer reads the data only when it writes */
    nb_status s = NB_OK;
    for (int k = 0; k < 9 && !s; k++) {
        char name[64] = "token_embd.weight";
        int64_t ne[2] = {640, 512};
        if (k) {
            snprintf(name, sizeof name, "blk.%d.attn_%c.weight", (k - 1) / 2, k % 2 ? 'q' : 'v');
            ne[0] = EMBD;
            ne[1] = k % 2 ? 128 : 64;
        }
        keep[k] = fill(ne[0] * ne[1]);
        s = nb_gguf_writer_add_tensor(w, name, NB_TYPE_F32, 2, ne, keep[k]);
    }
    if (!s) s = nb_gguf_writer_write(w, path);
    nb_gguf_writer_free(w);
    for (int k = 0; k < 9; k++) free(keep[k]);
    return s == NB_OK;
}

TEST(auto_budget) {
    double err_lo = 0, err_hi = 0;
    const char *budgets[2] = {"auto:4.8", "auto:6.5"};
    for (int b = 0; b < 2; b++) {
        char out[300];
        snprintf(out, sizeof out, "%s/auto%d.gguf", dir, b);
        errsum e = {0, 0};
        nb_quant_params p = nb_quant_default_params();
        p.measure = 1;
        p.on_tensor = add_err;
        p.user = &e;
        nb_gguf *g = convert(budgets[b], &p, out);
        if (!g) return;
        double bpw = file_bpw(g), want = b ? 6.5 : 4.8;
        CHECK(bpw <= want && bpw > want - 0.6, "%s: file has %.3f bits per weight", budgets[b], bpw);
        CHECK(nb_gguf_find_key(g, "general.file_type") < 0, "auto drops general.file_type");
        *(b ? &err_hi : &err_lo) = e.sse / e.sx2;
        nb_gguf_close(g);
    }
    CHECK(err_hi < err_lo, "more bits, less error (%g vs %g)", err_hi, err_lo);
    /* The budget is spent, not only respected. On the wide-embedding model the embedding's step from
     * NVFP4 to Q8_0 costs 2.5 bits per weight of the file at once: a choice that first upgrades the
     * small matrices (steeper per bit) has no room left for it and stops far below the budget. The
     * files this model allows lie between 4.25 and 6.0 bits per weight (embedding at FP4) and between
     * 6.9 and 8.5 (at Q8_0); every budget here lies in one of them, where the small matrices' steps
     * let it be met to within 2 %. */
    char wide[300], out_w[300];
    snprintf(wide, sizeof wide, "%s/wide.gguf", dir);
    snprintf(out_w, sizeof out_w, "%s/wide_auto.gguf", dir);
    CHECK(write_wide_embedding_model(wide), "write %s: %s", wide, nb_last_error());
    const double sweep[] = {4.6, 5.5, 7.0, 7.3, 7.6, 8.3};
    for (size_t b = 0; b < sizeof sweep / sizeof *sweep; b++) {
        char recipe[32];
        snprintf(recipe, sizeof recipe, "auto:%g", sweep[b]);
        nb_quant_params pw = nb_quant_default_params();
        pw.recipe = recipe;
        nb_gguf *g = NULL;
        CHECK(nb_quantize_model(wide, out_w, &pw) == NB_OK && nb_gguf_open(out_w, &g) == NB_OK, "%s: %s", recipe,
              nb_last_error());
        if (!g) return;
        const double bpw = file_bpw(g);
        CHECK(bpw <= sweep[b] && bpw > sweep[b] * 0.98, "%s: file has %.3f bits per weight", recipe, bpw);
        nb_gguf_close(g);
    }
    nb_quant_params p = nb_quant_default_params();
    p.recipe = "auto:2.0";
    char out[300];
    snprintf(out, sizeof out, "%s/auto_low.gguf", dir);
    CHECK(nb_quantize_model(model_path, out, &p) == NB_ERR_INVALID_ARG, "budget below the smallest type refused");
}

TEST(imatrix_collect_and_file) {
    nb_imatrix *im;
    CHECK(nb_imatrix_create(&im) == NB_OK, "create");
    float x[2 * 4] = {1, 2, 3, 4, 3, 0, -1, 2};
    /* what the runtime's observer calls look like: two matrices, several calls */
    nb_imatrix_observe(im, "blk.0.attn_q.weight", x, 2, 4);
    nb_imatrix_observe(im, "blk.0.ffn_down.weight", x, 1, 8);
    nb_imatrix_observe(im, "blk.0.attn_q.weight", x + 4, 1, 4);
    nb_imatrix_end_chunk(im);
    int64_t n = 0;
    const float *m = nb_imatrix_find(im, "blk.0.attn_q.weight", &n);
    CHECK(m && n == 4, "found");
    if (m) {
        const float want[4] = {(1 + 9 + 9) / 3.0f, (4 + 0 + 0) / 3.0f, (9 + 1 + 1) / 3.0f, (16 + 4 + 4) / 3.0f};
        for (int i = 0; i < 4; i++) CHECK(fabsf(m[i] - want[i]) < 1e-6f, "mean[%d] %g want %g", i, m[i], want[i]);
    }
    CHECK(nb_imatrix_count(im) == 2 && nb_imatrix_status(im) == NB_OK, "two matrices, no error");
    char path[300];
    snprintf(path, sizeof path, "%s/im.gguf", dir);
    CHECK(nb_imatrix_save(im, path, "text.txt", 512) == NB_OK, "save: %s", nb_last_error());
    nb_imatrix *back = NULL;
    CHECK(nb_imatrix_load(path, &back) == NB_OK, "load: %s", nb_last_error());
    if (back && m) {
        const float *mb = nb_imatrix_find(back, "blk.0.attn_q.weight", &n);
        CHECK(mb && n == 4 && !memcmp(mb, m, 4 * sizeof *m), "round trip");
    }
    nb_gguf *g = NULL;
    if (!nb_gguf_open(path, &g)) {
        const nb_gguf_tensor *s = nb_gguf_find_tensor(g, "blk.0.attn_q.weight.in_sum2");
        const nb_gguf_tensor *c = nb_gguf_find_tensor(g, "blk.0.attn_q.weight.counts");
        float v0 = 0, c0 = 0;
        if (s) memcpy(&v0, s->data, 4);
        if (c) memcpy(&c0, c->data, 4);
        CHECK(s && c && v0 == 19 && c0 == 3, "llama.cpp layout: in_sum2 %g counts %g", v0, c0);
        uint32_t cc = 0;
        CHECK(!nb_gguf_get_u32(g, "imatrix.chunk_count", &cc) && cc == 1, "chunk_count");
        nb_gguf_close(g);
    }
    /* a width that changes is an error the status reports */
    nb_imatrix_observe(im, "blk.0.attn_q.weight", x, 1, 8);
    CHECK(nb_imatrix_status(im) == NB_ERR_FORMAT, "width change reported");
    nb_imatrix_free(back);
    nb_imatrix_free(im);
}

/* --imatrix weights best mode: with importance on a few columns, their error drops. */
TEST(imatrix_weights_best_mode) {
    nb_imatrix *im;
    if (nb_imatrix_create(&im)) return;
    float *x = calloc(EMBD, sizeof *x);
    for (int i = 0; i < EMBD; i += 16) x[i] = 4; /* columns 0, 16, 32, ... matter */
    char name[64];
    for (int l = 0; l < N_LAYER; l++) {
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", l);
        nb_imatrix_observe(im, name, x, 1, EMBD);
    }
    nb_imatrix_end_chunk(im);
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/im_a.gguf", dir);
    snprintf(b, sizeof b, "%s/im_b.gguf", dir);
    nb_quant_params p = nb_quant_default_params();
    p.recipe = "q4_k_m";
    p.mode = NB_QMODE_BEST;
    nb_status s = nb_quantize_model(model_path, a, &p);
    p.imatrix = im;
    s = s ? s : nb_quantize_model(model_path, b, &p);
    CHECK(!s, "%s", nb_last_error());
    nb_gguf *ga = NULL, *gb = NULL, *src = NULL;
    if (!s && !nb_gguf_open(a, &ga) && !nb_gguf_open(b, &gb) && !nb_gguf_open(model_path, &src)) {
        const nb_gguf_tensor *t0 = nb_gguf_find_tensor(src, "blk.4.attn_q.weight");
        const nb_gguf_tensor *ta = nb_gguf_find_tensor(ga, "blk.4.attn_q.weight");
        const nb_gguf_tensor *tb = nb_gguf_find_tensor(gb, "blk.4.attn_q.weight");
        const int64_t n = EMBD * 128;
        float *ya = malloc(n * sizeof *ya), *yb = malloc(n * sizeof *yb);
        const float *x0 = t0->data;
        nb_dequantize(NB_TYPE_Q4_K, ta->data, ya, n);
        nb_dequantize(NB_TYPE_Q4_K, tb->data, yb, n);
        double ea = 0, eb = 0;
        for (int64_t i = 0; i < n; i += 16) {
            ea += (ya[i] - x0[i]) * (ya[i] - x0[i]);
            eb += (yb[i] - x0[i]) * (yb[i] - x0[i]);
        }
        CHECK(eb < ea, "important columns: error %g with imatrix, %g without", eb, ea);
        free(ya);
        free(yb);
    }
    nb_gguf_close(ga);
    nb_gguf_close(gb);
    nb_gguf_close(src);
    free(x);
    nb_imatrix_free(im);
}

int main(int argc, char **argv) {
    (void)argc;
    test_nibble_bin(argv[0], nibble_bin, sizeof nibble_bin);
    snprintf(dir, sizeof dir, "/tmp/nb_test_quant.XXXXXX");
    if (!mkdtemp(dir)) {
        printf("cannot make a temporary directory\n");
        return 1;
    }
    snprintf(model_path, sizeof model_path, "%s/model.gguf", dir);
    snprintf(bad_path, sizeof bad_path, "%s/bad.gguf", dir);
    if (!write_model(model_path, 0) || !write_model(bad_path, 1)) {
        printf("cannot write the synthetic model: %s\n", nb_last_error());
        return 1;
    }
    RUN(q4_k_m_rules);
    RUN(q8_0_q4_0_and_overrides);
    RUN(failure_leaves_nothing);
    RUN(cli_bad_recipe_exit_2);
    RUN(best_not_worse_than_ref);
    RUN(threads_do_not_change_bytes);
    RUN(two_level_scale_tensors);
    RUN(auto_budget);
    RUN(imatrix_collect_and_file);
    RUN(imatrix_weights_best_mode);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) printf("note: could not remove %s\n", dir);
    return test_summary();
}
