/*
 * test_families.c: every family's loader and graph on tiny random-weight files (tiny_family.h:
 * nibble's own GGUF writer, F32 weights, an 8-token SentencePiece vocabulary), so that `make asan`
 * runs each feature's code: q/k head norms, post norms, sliding layers, softcaps (gemma2/gemma3),
 * RoPE factors and untied output (llama), YaRN, q/k/v biases (qwen2), head_dim * heads != width
 * (qwen3), fused q|k|v and gate|up with LongRoPE's short and long factors (phi3).
 *
 * Per family: it loads with the hyperparameters written; logits are finite and identical for 1
 * and 2 threads; nb_ctx_estimate equals what the context reserves; and broken copies are refused
 * naming what is wrong (a missing tensor, a mis-shaped one, an absurd head count, an unknown
 * architecture). Agreement with llama.cpp is tests/parity/test_families.py's.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nibble.h"
#include "test.h"
#include "tiny_family.h"

static char tmpdir[] = "/tmp/nb_test_families_XXXXXX";

static const char *tmp_path(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

/* Logits of tokens 0..n-1 of a fixed sequence, every position, in a context made from p; NULL
 * after a failed CHECK. n_batch 1 evaluates token by token (decode). */
static float *logits_with(const nb_model *m, nb_ctx_params p) {
    nb_ctx *c;
    nb_status s = nb_ctx_create(m, &p, &c);
    CHECK(!s, "context: %s", nb_last_error());
    if (s) return NULL;
    size_t est = 0;
    CHECK(!nb_ctx_estimate(m, &p, NULL, &est) && est == nb_ctx_memory(c), "estimate %zu, reserved %zu", est,
          nb_ctx_memory(c));
    enum { N = 40 }; /* past the sliding window and across three prefill batches */
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((i * 5 + 1) % VOCAB);
    float *lg = malloc(sizeof(float) * N * VOCAB);
    s = lg ? NB_OK : NB_ERR_NOMEM;
    for (int i = 0; !s && i < N; i += p.n_batch)
        s = nb_ctx_eval(c, ids + i, N - i < p.n_batch ? N - i : p.n_batch, lg + (size_t)i * VOCAB, 1);
    CHECK(!s, "eval: %s", nb_last_error());
    nb_ctx_free(c);
    if (s) {
        free(lg);
        return NULL;
    }
    for (int i = 0; i < N * VOCAB; i++) CHECK(isfinite(lg[i]), "logit %d is %g", i, lg[i]);
    return lg;
}

static float *logits_of(const nb_model *m, int n_threads, int n_ctx) {
    nb_ctx_params p = nb_ctx_default_params();
    p.n_ctx = n_ctx, p.n_threads = n_threads, p.n_batch = 16;
    return logits_with(m, p);
}

TEST(every_family_runs) {
    for (int k = 0; k < N_FAMILIES; k++) {
        const family *f = &FAMILIES[k];
        const char *path = tmp_path("family.gguf");
        CHECK(!write_family(path, f, WHOLE), "%s: write: %s", f->arch, nb_last_error());
        nb_model *m;
        nb_status s = nb_model_load(path, &m);
        CHECK(!s, "%s: load: %s", f->arch, nb_last_error());
        if (s) continue;
        const nb_model_info *in = nb_model_get_info(m);
        CHECK(!strcmp(in->arch, f->arch) && in->n_layer == LAYERS && in->head_dim == f->head_dim &&
                  in->n_vocab == VOCAB && in->n_sliding == (f->sliding ? (!strcmp(f->arch, "gemma2") ? 1 : LAYERS) : 0),
              "%s: hyperparameters read", f->arch);
        CHECK(!strcmp(in->rope_scaling, f->yarn ? "yarn" : f->longrope ? "longrope" : f->rope_freqs ? "freqs" : "none"),
              "%s: RoPE scaling '%s'", f->arch, in->rope_scaling);
        float *one = logits_of(m, 1, CTX), *two = logits_of(m, 2, CTX);
        CHECK(one && two && !memcmp(one, two, sizeof(float) * 40 * VOCAB), "%s: 1 and 2 threads differ", f->arch);
        if (f->softcap && one)
            for (int i = 0; i < 40 * VOCAB; i++) CHECK(fabsf(one[i]) < 3.0f, "%s: logit %g past the softcap", f->arch, one[i]);
        if (f->longrope && one) { /* a context past the original one takes the long factors */
            float *lng = logits_of(m, 1, 2 * CTX);
            CHECK(lng && memcmp(one, lng, sizeof(float) * 40 * VOCAB), "%s: the long factors change nothing", f->arch);
            free(lng);
        }
        free(one), free(two);
        nb_model_free(m);
    }
}

/* A family's whole file, written and loaded; NULL after a failed CHECK. */
static nb_model *family_model(const family *f) {
    const char *path = tmp_path("family.gguf");
    nb_model *m = NULL;
    CHECK(!write_family(path, f, WHOLE), "%s: write: %s", f->arch, nb_last_error());
    if (nb_model_load(path, &m)) {
        CHECK(0, "%s: load: %s", f->arch, nb_last_error());
        return NULL;
    }
    return m;
}

/* The KV cache's routes against llama.cpp's unfused order with F32 cells and every position kept:
 * the fused attention (online softmax, V rows), sliding layers' rings, token-by-token decode
 * (whose fused keys split into parts) and F16 cells give the same logits within float rounding
 * (the weights are F32, so no quantized activation amplifies it; gemma's GELU goes through an
 * fp16 table, which can), and the thread count changes no bit of any route. BF16 cells run on any
 * head, Q8_0 and Q4_0 cells on heads of a multiple of 32 elements (qwen3's here), finite and close
 * to F32 cells; on other heads they are refused naming the head size. */
TEST(cache_routes_agree) {
    for (int k = 0; k < N_FAMILIES; k++) {
        const family *f = &FAMILIES[k];
        nb_model *m = family_model(f);
        if (!m) continue;
        nb_ctx_params p = nb_ctx_default_params();
        p.n_ctx = CTX, p.n_threads = 2, p.n_batch = 16, p.type_k = p.type_v = NB_TYPE_F32, p.flash_attn = NB_FA_OFF;
        p.swa_full = 1;
        float *base = logits_with(m, p);
        const float tol = f->sliding ? 2e-2f : 1e-4f;
        const struct { int fa, swa_full, n_batch, type; } v[] = {
            {NB_FA_ON, 1, 16, NB_TYPE_F32}, {NB_FA_OFF, 0, 16, NB_TYPE_F32}, {NB_FA_ON, 0, 16, NB_TYPE_F32},
            {NB_FA_ON, 0, 1, NB_TYPE_F32},  {NB_FA_OFF, 0, 1, NB_TYPE_F32},  {NB_FA_ON, 0, 16, NB_TYPE_F16},
        };
        for (size_t i = 0; base && i < sizeof v / sizeof v[0]; i++) {
            nb_ctx_params q = p;
            q.flash_attn = v[i].fa, q.swa_full = v[i].swa_full, q.n_batch = v[i].n_batch, q.type_k = q.type_v = v[i].type;
            float *lg = logits_with(m, q);
            q.n_threads = 1;
            float *one = logits_with(m, q);
            float worst = 0;
            for (int j = 0; lg && j < 40 * VOCAB; j++) worst = fmaxf(worst, fabsf(lg[j] - base[j]));
            const float bound = v[i].type == NB_TYPE_F16 ? 50 * tol : tol;
            CHECK(lg && worst <= bound, "%s: fa %d, swa_full %d, batch %d, %s cells: logits %g from the base's (bound %g)",
                  f->arch, v[i].fa, v[i].swa_full, v[i].n_batch, nb_type_name(v[i].type), worst, bound);
            CHECK(lg && one && !memcmp(lg, one, sizeof(float) * 40 * VOCAB), "%s: variant %zu: 1 and 2 threads differ",
                  f->arch, i);
            free(lg), free(one);
        }
        const int quant[] = {NB_TYPE_Q8_0, NB_TYPE_Q4_0, NB_TYPE_BF16};
        for (int i = 0; base && i < 3; i++) {
            nb_ctx_params q = p;
            q.type_k = q.type_v = quant[i], q.flash_attn = NB_FA_AUTO;
            nb_ctx *c = NULL;
            const nb_status s = nb_ctx_create(m, &q, &c);
            nb_ctx_free(c);
            if (f->head_dim % 32 && quant[i] != NB_TYPE_BF16) {
                CHECK(s == NB_ERR_UNSUPPORTED && strstr(nb_last_error(), "multiple of 32"), "%s: %s cells on heads of %d: %s",
                      f->arch, nb_type_name(quant[i]), f->head_dim, s ? nb_last_error() : "accepted");
                continue;
            }
            float *lg = logits_with(m, q), worst = 0;
            for (int j = 0; lg && j < 40 * VOCAB; j++) worst = fmaxf(worst, fabsf(lg[j] - base[j]));
            CHECK(lg && worst < 0.5f, "%s: %s cells: logits %g from the F32 cells'", f->arch, nb_type_name(quant[i]), worst);
            if (getenv("NB_TEST_VERBOSE")) printf("%s: %s cells: max |dlogit| %g\n", f->arch, nb_type_name(quant[i]), worst);
            free(lg);
        }
        free(base);
        nb_model_free(m);
    }
}

/* Logits of the n tokens ids after what c holds, all rows; NULL after a failed CHECK. */
static float *eval_rows(nb_ctx *c, const int32_t *ids, int n) {
    float *lg = malloc(sizeof(float) * (size_t)n * VOCAB);
    const nb_status s = lg ? nb_ctx_eval(c, ids, n, lg, 1) : NB_ERR_NOMEM;
    CHECK(!s, "eval: %s", nb_last_error());
    if (s) free(lg);
    return s ? NULL : lg;
}

/* Context shifts. Dropping the last 12 of 40 positions moves nothing: the next tokens see what a
 * fresh context of the first 28 gives them. Dropping 12 after the first 4 of a model whose layers
 * all slide (gemma3 here, window 8) leaves the next tokens' windows as they were, the same keys
 * at the same distances: the same logits as without the shift, within the rounding of rotating
 * the keys back. Bad shifts change nothing. */
TEST(context_shifts) {
    enum { N = 40, DROP = 12, MORE = 4 };
    int32_t ids[N + MORE], tail[N - DROP + MORE];
    for (int i = 0; i < N + MORE; i++) ids[i] = (int32_t)((i * 5 + 1) % VOCAB);
    memcpy(tail, ids, sizeof(int32_t) * (N - DROP));
    memcpy(tail + N - DROP, ids + N, sizeof(int32_t) * MORE);
    for (int k = 0; k < N_FAMILIES; k++) {
        const family *f = &FAMILIES[k];
        nb_model *m = family_model(f);
        if (!m) continue;
        const int all_slide = nb_model_get_info(m)->n_sliding == LAYERS;
        for (int fa = 0; fa < 2; fa++) {
            nb_ctx_params p = nb_ctx_default_params();
            p.n_ctx = CTX, p.n_threads = 2, p.n_batch = 16, p.type_k = p.type_v = NB_TYPE_F32, p.flash_attn = fa;
            nb_ctx *c[3] = {NULL, NULL, NULL};
            for (int i = 0; i < 3; i++) CHECK(!nb_ctx_create(m, &p, &c[i]), "%s: context: %s", f->arch, nb_last_error());
            if (!c[0] || !c[1] || !c[2]) {
                for (int i = 0; i < 3; i++) nb_ctx_free(c[i]);
                continue;
            }
            free(eval_rows(c[0], ids, N));
            free(eval_rows(c[2], ids, N));
            CHECK(nb_ctx_shift(c[0], N - 3, 4) == NB_ERR_RANGE && nb_ctx_shift(c[0], -1, 4) == NB_ERR_RANGE &&
                      nb_ctx_shift(c[0], 0, 0) == NB_ERR_RANGE && nb_ctx_pos(c[0]) == N,
                  "%s: bad shifts refused, nothing changed (pos %d)", f->arch, nb_ctx_pos(c[0]));
            CHECK(!nb_ctx_shift(c[0], N - DROP, DROP) && nb_ctx_pos(c[0]) == N - DROP, "%s: shift: %s", f->arch, nb_last_error());
            float *a = eval_rows(c[0], ids + N, MORE), *b = eval_rows(c[1], tail, N - DROP + MORE), worst = 0;
            for (int i = 0; a && b && i < MORE * VOCAB; i++) worst = fmaxf(worst, fabsf(a[i] - b[(N - DROP) * VOCAB + i]));
            CHECK(a && b && worst <= 1e-4f, "%s: fa %d: the tail dropped, logits %g from a fresh context's", f->arch, fa, worst);
            free(a), free(b);
            if (all_slide) {
                CHECK(!nb_ctx_shift(c[2], 4, DROP), "%s: shift: %s", f->arch, nb_last_error());
                float *s = eval_rows(c[2], ids + N, MORE), *u = NULL;
                nb_ctx_reset(c[1]);
                free(eval_rows(c[1], ids, N));
                u = eval_rows(c[1], ids + N, MORE);
                worst = 0;
                for (int i = 0; s && u && i < MORE * VOCAB; i++) worst = fmaxf(worst, fabsf(s[i] - u[i]));
                CHECK(s && u && worst <= 1e-3f, "%s: fa %d: keys rotated back, logits %g from the unshifted context's", f->arch,
                      fa, worst);
                free(s), free(u);
            }
            for (int i = 0; i < 3; i++) nb_ctx_free(c[i]);
        }
        nb_model_free(m);
    }
}

/* A broken copy of each family is refused, the message naming `want`. */
static void expect_refusal(enum breakage b, const char *want) {
    for (int k = 0; k < N_FAMILIES; k++) {
        const family *f = &FAMILIES[k];
        if (b == SHORT_OUTPUT && !f->untied) continue;
        const char *path = tmp_path("broken.gguf");
        CHECK(!write_family(path, f, b), "%s: write: %s", f->arch, nb_last_error());
        nb_model *m;
        nb_status s = nb_model_load(path, &m);
        char name[64];
        snprintf(name, sizeof name, want, f->arch);
        CHECK(s && !m && strstr(nb_last_error(), name), "%s, breakage %d: status %d, '%s' lacks '%s'", f->arch, (int)b, s,
              nb_last_error(), name);
        nb_model_free(m);
    }
}

TEST(broken_files_are_refused_by_name) {
    expect_refusal(NO_FFN_DOWN, "tensor 'blk.1.ffn_down.weight' is missing");
    expect_refusal(SHORT_OUTPUT, "tensor 'output.weight' has shape [32, 7], expected [32, 8]");
    expect_refusal(HEADS_4097, "metadata '%s.attention.head_count' = 4097 is outside");
    expect_refusal(ARCH_BERT, "architecture 'bert' is not supported (nibble runs: gemma3, gemma2, llama, qwen2, qwen3, phi3)");
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(every_family_runs);
    RUN(cache_routes_agree);
    RUN(context_shifts);
    RUN(broken_files_are_refused_by_name);
    unlink(tmp_path("family.gguf"));
    unlink(tmp_path("broken.gguf"));
    rmdir(tmpdir);
    return test_summary();
}
