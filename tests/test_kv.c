/*
 * test_kv.c: the KV cache's cell types and its fused attention's kernel.
 *
 * nb_attn_pv (the weighted sum of value rows) and nb_attn_qk (prefill's scores) give the
 * reference's bits on every set the CPU runs (AVX2's and AVX-512's), for every cell type they
 * take, head sizes and row counts around the tiles' edges, without touching memory past their
 * outputs; and they are the exact sums within float rounding. On the
 * default model: what each cell type costs in memory and in quality against F16 cells (KL over
 * 256 positions of text, bounds with room over what was measured), a window-sized ring's memory
 * against keeping every position, prompt reuse (nb_ctx_truncate) on a ring that moved on, and bad
 * parameters refused by name.
 * The model tests skip (saying so) when it is absent; `make test` fetches it first.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cpu.h"
#include "kernels/api.h"
#include "kernels/kernels.h"
#include "nibble.h"
#include "test.h"

static const char *MODEL = "models/gemma-3-270m-q4_k_m.gguf";

static uint64_t rng = 7;
static float rnd(void) { /* xorshift64*, uniform in [-1, 1) */
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (float)((double)((rng * 0x2545F4914F6CDD1Dull) >> 11) / 4503599627370496.0 - 1.0);
}

TEST(attn_pv_matches_reference) {
    if (nb_isa_best() < NB_ISA_AVX2) SKIP("no AVX2");
    static const int types[] = {NB_TYPE_F32, NB_TYPE_F16, NB_TYPE_BF16, NB_TYPE_Q8_0, NB_TYPE_Q4_0};
    static const int dims[] = {32, 64, 96, 128, 256, 80, 40};
    static const int nks[] = {1, 7, 8, 9, 33, 130};
    static const int rows_of[] = {1, 2, 3, 4, 5, 9, 13, 64};
    enum { MAXD = 256, MAXK = 130, MAXR = 64 };
    static float x[MAXK * MAXD], p[MAXR * MAXK], a[MAXR * MAXD + 8], b[MAXR * MAXD + 8], init[MAXR * MAXD];
    static uint8_t v[MAXK * MAXD * 4];
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
            const int t = types[ti], D = dims[di];
            size_t row;
            if (nb_row_bytes(t, D, &row)) continue; /* the blocks' types take whole 32s */
            for (int i = 0; i < MAXK * D; i++) x[i] = 3 * rnd();
            for (int j = 0; j < MAXK; j++) CHECK(!nb_quantize(t, x + (size_t)j * D, v + (size_t)j * row, D), "quantize");
            for (size_t ki = 0; ki < sizeof nks / sizeof nks[0]; ki++)
                for (size_t ri = 0; ri < sizeof rows_of / sizeof rows_of[0]; ri++) {
                    const int nk = nks[ki], R = rows_of[ri];
                    for (int i = 0; i < R * nk; i++) p[i] = 0.5f * (rnd() + 1);
                    for (int i = 0; i < R * D; i++) init[i] = rnd();
                    memcpy(a, init, sizeof(float) * (size_t)R * D);
                    for (int i = 0; i < 8; i++) a[R * D + i] = NAN; /* past the output: untouched */
                    nb_attn_pv_ref(t, v, row, nk, D, p, (size_t)nk, R, a);
                    for (int isa = NB_ISA_AVX2; isa <= (int)nb_isa_best(); isa++) {
                        const nb_act_set *set = nb_act_get((nb_isa)isa);
                        memcpy(b, init, sizeof(float) * (size_t)R * D);
                        for (int i = 0; i < 8; i++) b[R * D + i] = NAN;
                        set->attn_pv(t, v, row, nk, D, p, (size_t)nk, R, b);
                        CHECK(!memcmp(a, b, sizeof(float) * (size_t)R * D), "%s D %d nk %d rows %d: %s differs from the reference",
                              nb_type_name(t), D, nk, R, set->name);
                        for (int i = 0; i < 8; i++) CHECK(isnan(b[R * D + i]), "%s D %d nk %d rows %d: %s wrote past the output",
                                                          nb_type_name(t), D, nk, R, set->name);
                    }
                    float dec[MAXD];
                    double worst = 0;
                    for (int r = 0; r < R; r++)
                        for (int d = 0; d < D; d++) {
                            double s = init[r * D + d];
                            for (int j = 0; j < nk; j++) {
                                nb_dequantize(t, v + (size_t)j * row, dec, D);
                                s += (double)p[r * nk + j] * dec[d];
                            }
                            worst = fmax(worst, fabs(s - a[r * D + d]) / (1 + fabs(s)));
                        }
                    CHECK(worst < 1e-5, "%s D %d nk %d rows %d: %g from the exact sum", nb_type_name(t), D, nk, R, worst);
                }
        }
}

/* nb_attn_qk against the reference on every set the CPU runs: every float cell type, head sizes
 * (one not a multiple of 8: the reference's loop), key counts and row counts around the tiles'
 * edges, the scores lds apart with the columns and rows past them untouched; and the exact dot
 * within float rounding. */
TEST(attn_qk_matches_reference) {
    if (nb_isa_best() < NB_ISA_AVX2) SKIP("no AVX2");
    static const int types[] = {NB_TYPE_F32, NB_TYPE_F16, NB_TYPE_BF16};
    static const int dims[] = {8, 64, 96, 128, 256, 40, 12};
    static const int nks[] = {1, 7, 16, 17, 31, 33, 130};
    static const int rows_of[] = {1, 3, 4, 5, 8, 9, 13, 64};
    enum { MAXD = 256, MAXK = 130, MAXR = 64, PAD = 3 };
    static float x[MAXK * MAXD], q[MAXR * MAXD], qp[MAXR * MAXD], a[(MAXR + 1) * (MAXK + PAD)], b[(MAXR + 1) * (MAXK + PAD)];
    static uint8_t k[MAXK * MAXD * 4];
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
            const int t = types[ti], D = dims[di];
            size_t row;
            CHECK(!nb_row_bytes(t, D, &row), "row bytes");
            for (int i = 0; i < MAXK * D; i++) x[i] = 3 * rnd();
            for (int j = 0; j < MAXK; j++) CHECK(!nb_quantize(t, x + (size_t)j * D, k + (size_t)j * row, D), "quantize");
            for (size_t ki = 0; ki < sizeof nks / sizeof nks[0]; ki++)
                for (size_t ri = 0; ri < sizeof rows_of / sizeof rows_of[0]; ri++) {
                    const int nk = nks[ki], R = rows_of[ri];
                    const size_t lds = (size_t)nk + PAD, n = (size_t)(R + 1) * lds;
                    for (int i = 0; i < R * D; i++) q[i] = rnd();
                    nb_attn_pack_q(q, R, D, qp);
                    for (size_t i = 0; i < n; i++) a[i] = NAN;
                    nb_attn_qk_ref(t, k, row, nk, D, qp, R, a, lds);
                    for (int isa = NB_ISA_AVX2; isa <= (int)nb_isa_best(); isa++) {
                        const nb_act_set *set = nb_act_get((nb_isa)isa);
                        for (size_t i = 0; i < n; i++) b[i] = NAN;
                        set->attn_qk(t, k, row, nk, D, qp, R, b, lds);
                        int same = 1, outside = 1;
                        for (size_t i = 0; i < n; i++) {
                            const int in = (int)(i / lds) < R && i % lds < (size_t)nk;
                            if (in) same &= !memcmp(&a[i], &b[i], sizeof(float));
                            else outside &= isnan(b[i]);
                        }
                        CHECK(same, "%s D %d nk %d rows %d: %s differs from the reference", nb_type_name(t), D, nk, R, set->name);
                        CHECK(outside, "%s D %d nk %d rows %d: %s wrote outside its scores", nb_type_name(t), D, nk, R, set->name);
                    }
                    float dec[MAXD];
                    double worst = 0;
                    for (int j = 0; j < nk; j++) {
                        nb_dequantize(t, k + (size_t)j * row, dec, D);
                        for (int r = 0; r < R; r++) {
                            double e = 0, mag = 0;
                            for (int d = 0; d < D; d++) e += (double)q[r * D + d] * dec[d], mag += fabs((double)q[r * D + d] * dec[d]);
                            worst = fmax(worst, fabs(e - a[(size_t)r * lds + j]) / (1 + mag));
                        }
                    }
                    CHECK(worst < 1e-5, "%s D %d nk %d rows %d: %g from the exact dot", nb_type_name(t), D, nk, R, worst);
                }
        }
}

static nb_model *model;

/* Logits of every position of n ids in a fresh context of p. */
static float *logits_of(nb_ctx_params p, const int32_t *ids, int n) {
    nb_ctx *c;
    if (nb_ctx_create(model, &p, &c)) {
        CHECK(0, "context: %s", nb_last_error());
        return NULL;
    }
    float *lg = malloc(sizeof(float) * (size_t)n * (size_t)nb_model_get_info(model)->n_vocab);
    const nb_status s = lg ? nb_ctx_eval(c, ids, n, lg, 1) : NB_ERR_NOMEM;
    CHECK(!s, "eval: %s", nb_last_error());
    nb_ctx_free(c);
    if (s) free(lg);
    return s ? NULL : lg;
}

/* Mean KL(p || q) over n rows of V logits, and how often the top tokens agree. */
static double mean_kl(const float *p, const float *q, int n, int V, double *same) {
    double kl = 0;
    int agree = 0;
    for (int t = 0; t < n; t++) {
        int same_top;
        kl += test_kl(p + (size_t)t * V, q + (size_t)t * V, V, &same_top), agree += same_top;
    }
    *same = (double)agree / n;
    return kl / n;
}

TEST(cell_types_memory_and_quality) {
    if (!model) SKIP("model %s absent", MODEL);
    enum { N = 256 };
    static const char text[] = "The hacker's dictionary collects the slang of programmers: a kludge is a clumsy but "
                               "working fix, a daemon is a program that runs unattended in the background, and to grok "
                               "is to understand something so thoroughly that it becomes part of you. ";
    int32_t ids[N];
    size_t n = 0;
    static int32_t buf[4096];
    CHECK(!nb_tokenize(nb_model_tokenizer(model), text, strlen(text), 1, 0, buf, 4096, &n) && n > 8, "tokenize");
    for (int i = 0; i < N; i++) ids[i] = i < (int)n ? buf[i] : buf[1 + (i - 1) % ((int)n - 1)];
    const int V = nb_model_get_info(model)->n_vocab;
    nb_ctx_params p = nb_ctx_default_params();
    p.n_ctx = 512, p.n_batch = 64, p.n_threads = 2, p.flash_attn = NB_FA_ON;
    size_t kv16 = 0;
    CHECK(!nb_ctx_estimate(model, &p, &kv16, NULL), "estimate: %s", nb_last_error());
    float *base = logits_of(p, ids, N);
    const struct { int k, v; double kl, same; } cells[] = {
        {NB_TYPE_F32, NB_TYPE_F32, 0.02, 0.9}, {NB_TYPE_BF16, NB_TYPE_BF16, 0.03, 0.9},
        {NB_TYPE_Q8_0, NB_TYPE_Q8_0, 0.03, 0.9}, {NB_TYPE_Q8_0, NB_TYPE_F16, 0.03, 0.9},
        {NB_TYPE_Q4_0, NB_TYPE_Q4_0, 0.5, 0.6},
    };
    for (size_t i = 0; base && i < sizeof cells / sizeof cells[0]; i++) {
        nb_ctx_params q = p;
        q.type_k = cells[i].k, q.type_v = cells[i].v;
        size_t kv = 0, rk, rv, r16;
        CHECK(!nb_ctx_estimate(model, &q, &kv, NULL), "estimate: %s", nb_last_error());
        nb_row_bytes(q.type_k, 256, &rk), nb_row_bytes(q.type_v, 256, &rv), nb_row_bytes(NB_TYPE_F16, 256, &r16);
        const double want = (double)kv16 * (double)(rk + rv) / (double)(2 * r16);
        CHECK(fabs((double)kv - want) < 256, "%s/%s cells: KV %zu bytes, want %.0f", nb_type_name(q.type_k),
              nb_type_name(q.type_v), kv, want);
        float *lg = logits_of(q, ids, N);
        double same = 0;
        const double kl = lg ? mean_kl(base, lg, N, V, &same) : INFINITY;
        printf("%s/%s cells: KV %.2f MiB, mean KL %.5f to f16/f16, same top %.1f %%\n", nb_type_name(q.type_k),
               nb_type_name(q.type_v), kv / 1048576.0, kl, 100 * same);
        CHECK(kl <= cells[i].kl && same >= cells[i].same, "%s/%s cells: KL %g, same top %.3f", nb_type_name(q.type_k),
              nb_type_name(q.type_v), kl, same);
        free(lg);
    }
    free(base);
}

/* -c 32768: the 15 sliding layers keep a window plus a batch, not 32768 positions. */
TEST(window_sized_rings) {
    if (!model) SKIP("model %s absent", MODEL);
    const nb_model_info *in = nb_model_get_info(model);
    nb_ctx_params p = nb_ctx_default_params();
    p.n_ctx = 32768;
    size_t ring = 0, full = 0;
    CHECK(!nb_ctx_estimate(model, &p, &ring, NULL), "estimate: %s", nb_last_error());
    p.swa_full = 1;
    CHECK(!nb_ctx_estimate(model, &p, &full, NULL), "estimate: %s", nb_last_error());
    const size_t per_cell = 2 * (size_t)in->n_head_kv * (size_t)in->head_dim * 2; /* K and V, f16 */
    const size_t cells = (size_t)(in->sliding_window + 512 + 31) / 32 * 32;
    const size_t want = per_cell * ((size_t)(in->n_layer - in->n_sliding) * 32768 + (size_t)in->n_sliding * cells);
    printf("-c 32768: KV %.1f MiB in rings, %.1f MiB keeping every position\n", ring / 1048576.0, full / 1048576.0);
    CHECK(full == per_cell * (size_t)in->n_layer * 32768, "full cache %zu bytes", full);
    CHECK(ring >= want && ring < want + 256, "ring cache %zu bytes, want %zu", ring, want);
}

/* Prompt reuse keeps what the cache still holds: all of it before a ring wraps, nothing after. */
TEST(truncate_on_a_ring) {
    if (!model) SKIP("model %s absent", MODEL);
    nb_ctx_params p = nb_ctx_default_params();
    p.n_ctx = 2048, p.n_batch = 64;
    nb_ctx *c;
    if (nb_ctx_create(model, &p, &c)) {
        CHECK(0, "context: %s", nb_last_error());
        return;
    }
    static int32_t ids[1024];
    for (int i = 0; i < 1024; i++) ids[i] = 2 + (i * 37) % 1000;
    CHECK(!nb_ctx_eval(c, ids, 300, NULL, 0) && !nb_ctx_truncate(c, 200) && nb_ctx_pos(c) == 200,
          "before the wrap: kept %d of 200", nb_ctx_pos(c));
    CHECK(!nb_ctx_eval(c, ids, 1000, NULL, 0) && !nb_ctx_truncate(c, 300) && nb_ctx_pos(c) == 0,
          "after the wrap: kept %d, want 0", nb_ctx_pos(c));
    CHECK(!nb_ctx_eval(c, ids, 1000, NULL, 0) && !nb_ctx_truncate(c, 1000) && nb_ctx_pos(c) == 1000,
          "keeping everything: kept %d", nb_ctx_pos(c));
    nb_ctx_free(c);
}

TEST(bad_cache_parameters_refused) {
    if (!model) SKIP("model %s absent", MODEL);
    const struct { int k, v, fa; nb_status want; const char *says; } bad[] = {
        {NB_TYPE_Q5_1, NB_TYPE_F16, NB_FA_AUTO, NB_ERR_UNSUPPORTED, "K cells of type q5_1"},
        {NB_TYPE_F16, NB_TYPE_Q4_K, NB_FA_AUTO, NB_ERR_UNSUPPORTED, "V cells of type q4_K"},
        {NB_TYPE_F16, NB_TYPE_Q8_0, NB_FA_OFF, NB_ERR_UNSUPPORTED, "need the fused attention"},
        {NB_TYPE_F16, NB_TYPE_F16, 7, NB_ERR_INVALID_ARG, "flash_attn 7"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nb_ctx_params p = nb_ctx_default_params();
        p.type_k = bad[i].k, p.type_v = bad[i].v, p.flash_attn = bad[i].fa;
        nb_ctx *c = NULL;
        const nb_status s = nb_ctx_create(model, &p, &c);
        CHECK(s == bad[i].want && !c && strstr(nb_last_error(), bad[i].says), "case %zu: status %d: %s", i, s,
              nb_last_error());
    }
}

int main(void) {
    RUN(attn_pv_matches_reference);
    RUN(attn_qk_matches_reference);
    if (access(MODEL, R_OK) == 0 && nb_model_load(MODEL, &model)) printf("load: %s\n", nb_last_error());
    RUN(cell_types_memory_and_quality);
    RUN(window_sized_rings);
    RUN(truncate_on_a_ring);
    RUN(bad_cache_parameters_refused);
    nb_model_free(model);
    return test_summary();
}
