/*
 * test_batch.c: continuous batching (nb_batch_eval) on the default model: a batch of one
 * sequence is nb_ctx_eval bit for bit, several sequences in one pass give each its own
 * distributions at its own positions, results do not depend on the thread count, and bad batches
 * are refused before anything changes. Skips (saying so) when the model is absent.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nibble.h"
#include "test.h"

static const char *MODEL = "models/gemma-3-270m-q4_k_m.gguf";
static nb_model *model;
static int n_vocab;

/* Three prompts of different lengths (Gemma ids: BOS, then text). */
static const int32_t P0[] = {2, 818, 5279, 529, 7001, 563, 506};
static const int32_t P1[] = {2, 9259, 236764, 1217};
static const int32_t P2[] = {2, 818, 1217, 236764, 5279, 529, 7001, 563, 506, 9259, 818};
static const int32_t *const PROMPTS[3] = {P0, P1, P2};
static const int N_PROMPT[3] = {7, 4, 11};

static nb_ctx *ctx_on(nb_pool *pool, int n_ctx, int n_batch) {
    nb_ctx_params p = nb_ctx_default_params();
    p.n_ctx = n_ctx;
    p.n_batch = n_batch;
    p.pool = pool;
    nb_ctx *c = NULL;
    CHECK(nb_ctx_create(model, &p, &c) == NB_OK, "ctx: %s", nb_last_error());
    return c;
}

static int argmax(const float *x) {
    int best = 0;
    for (int v = 1; v < n_vocab; v++)
        if (x[v] > x[best]) best = v;
    return best;
}

/* A prompt then 6 greedy tokens, through nb_batch_eval of one sequence and through nb_ctx_eval:
 * the same logits, bit for bit, at every step. */
TEST(one_sequence_is_ctx_eval) {
    if (!model) SKIP("model %s absent", MODEL);
    nb_pool *pool;
    CHECK(nb_pool_create(2, &pool) == NB_OK, "pool: %s", nb_last_error());
    nb_ctx *a = ctx_on(pool, 64, 16), *b = ctx_on(pool, 64, 16);
    float *la = malloc(sizeof(float) * (size_t)n_vocab), *lb = malloc(sizeof(float) * (size_t)n_vocab);
    CHECK(nb_ctx_eval(a, P2, N_PROMPT[2], la, 0) == NB_OK, "eval: %s", nb_last_error());
    const int32_t *t = P2;
    int n = N_PROMPT[2];
    CHECK(nb_batch_eval(&b, &t, &n, 1, lb) == NB_OK, "batch: %s", nb_last_error());
    for (int step = 0; step < 7; step++) {
        CHECK(!memcmp(la, lb, sizeof(float) * (size_t)n_vocab), "step %d: logits differ", step);
        int32_t next = argmax(la);
        n = 1, t = &next;
        CHECK(nb_ctx_eval(a, &next, 1, la, 0) == NB_OK, "eval: %s", nb_last_error());
        CHECK(nb_batch_eval(&b, &t, &n, 1, lb) == NB_OK, "batch: %s", nb_last_error());
    }
    CHECK(nb_ctx_pos(a) == nb_ctx_pos(b) && nb_ctx_pos(b) == N_PROMPT[2] + 7, "positions %d, %d", nb_ctx_pos(a),
          nb_ctx_pos(b));
    free(la), free(lb);
    nb_ctx_free(a), nb_ctx_free(b);
    nb_pool_destroy(pool);
}

/* Three prompts prefilled in one pass, then decode steps of one token each: every sequence's
 * logits are its own (KL from alone at batch-order noise), and
 * the whole run is bit-identical on 1 and 2 threads. out: 3 sequences x 5 steps of logit rows. */
static void three_at_once(int n_threads, float *out) {
    nb_pool *pool;
    CHECK(nb_pool_create(n_threads, &pool) == NB_OK, "pool: %s", nb_last_error());
    nb_ctx *c[3];
    for (int i = 0; i < 3; i++) c[i] = ctx_on(pool, 64, 32);
    const int32_t *tok[3] = {P0, P1, P2};
    int n[3] = {N_PROMPT[0], N_PROMPT[1], N_PROMPT[2]};
    int32_t next[3];
    float *rows = malloc(sizeof(float) * (size_t)n_vocab * 3);
    for (int step = 0; step < 5; step++) {
        CHECK(nb_batch_eval(c, tok, n, 3, rows) == NB_OK, "batch: %s", nb_last_error());
        for (int i = 0; i < 3; i++) {
            memcpy(out + ((size_t)i * 5 + step) * n_vocab, rows + (size_t)i * n_vocab, sizeof(float) * (size_t)n_vocab);
            next[i] = argmax(rows + (size_t)i * n_vocab);
            tok[i] = &next[i], n[i] = 1;
        }
    }
    for (int i = 0; i < 3; i++) CHECK(nb_ctx_pos(c[i]) == N_PROMPT[i] + 4, "sequence %d at %d", i, nb_ctx_pos(c[i]));
    free(rows);
    for (int i = 0; i < 3; i++) nb_ctx_free(c[i]);
    nb_pool_destroy(pool);
}

TEST(sequences_share_a_pass) {
    if (!model) SKIP("model %s absent", MODEL);
    const size_t rows = (size_t)3 * 5 * n_vocab;
    float *t1 = malloc(sizeof(float) * rows), *t2 = malloc(sizeof(float) * rows);
    three_at_once(1, t1);
    three_at_once(2, t2);
    CHECK(!memcmp(t1, t2, sizeof(float) * rows), "1 and 2 threads give different logits");
    float *alone = malloc(sizeof(float) * (size_t)n_vocab);
    for (int i = 0; i < 3; i++) { /* each sequence alone, fed the batch's greedy tokens */
        nb_ctx_params p = nb_ctx_default_params();
        p.n_ctx = 64, p.n_threads = 2;
        nb_ctx *c;
        CHECK(nb_ctx_create(model, &p, &c) == NB_OK, "ctx: %s", nb_last_error());
        CHECK(nb_ctx_eval(c, PROMPTS[i], N_PROMPT[i], alone, 0) == NB_OK, "eval: %s", nb_last_error());
        for (int step = 0; step < 5; step++) {
            const float *bat = t1 + ((size_t)i * 5 + step) * n_vocab;
            /* a near tie may flip (batch orders): the batch's top token is within 0.1 of alone's top */
            const double d = test_kl(bat, alone, n_vocab, NULL), gap = alone[argmax(alone)] - alone[argmax(bat)];
            CHECK(gap < 0.1 && d < 0.02, "sequence %d step %d: top %d vs %d alone (%g below), KL %g", i, step,
                  argmax(bat), argmax(alone), gap, d);
            int32_t next = argmax(bat);
            CHECK(nb_ctx_eval(c, &next, 1, alone, 0) == NB_OK, "eval: %s", nb_last_error());
        }
        nb_ctx_free(c);
    }
    free(alone), free(t1), free(t2);
}

/* A prompt that begins with what a context holds, after nb_ctx_truncate to the common part,
 * needs only its new tokens: the logits equal a fresh evaluation's when the batches match. */
TEST(truncate_reuses_a_prefix) {
    if (!model) SKIP("model %s absent", MODEL);
    nb_pool *pool;
    CHECK(nb_pool_create(2, &pool) == NB_OK, "pool: %s", nb_last_error());
    nb_ctx *c = ctx_on(pool, 64, 16), *ref = ctx_on(pool, 64, 16);
    float *a = malloc(sizeof(float) * (size_t)n_vocab), *b = malloc(sizeof(float) * (size_t)n_vocab);
    /* P2 begins with P0's first two tokens: keep them, evaluate the rest as one batch */
    CHECK(nb_ctx_eval(c, P0, N_PROMPT[0], a, 0) == NB_OK, "eval: %s", nb_last_error());
    CHECK(nb_ctx_truncate(c, 8) == NB_ERR_RANGE && nb_ctx_pos(c) == N_PROMPT[0], "truncating past the end");
    CHECK(nb_ctx_truncate(c, 2) == NB_OK && nb_ctx_pos(c) == 2, "truncate: %s", nb_last_error());
    CHECK(nb_ctx_eval(c, P2 + 2, N_PROMPT[2] - 2, a, 0) == NB_OK, "eval: %s", nb_last_error());
    CHECK(nb_ctx_eval(ref, P2, 2, NULL, 0) == NB_OK && nb_ctx_eval(ref, P2 + 2, N_PROMPT[2] - 2, b, 0) == NB_OK,
          "eval: %s", nb_last_error());
    CHECK(!memcmp(a, b, sizeof(float) * (size_t)n_vocab), "the reused prefix gives other logits");
    free(a), free(b);
    nb_ctx_free(c), nb_ctx_free(ref);
    nb_pool_destroy(pool);
}

static nb_ctx *ctx_routed(nb_pool *pool, int fast_prefill, int fast_batch) {
    nb_ctx_params p = nb_ctx_default_params();
    p.n_ctx = 32, p.n_batch = 32, p.pool = pool, p.fast_prefill = fast_prefill, p.fast_batch = fast_batch;
    nb_ctx *c = NULL;
    CHECK(nb_ctx_create(model, &p, &c) == NB_OK, "ctx: %s", nb_last_error());
    return c;
}

/* fast_batch: a step of several sequences takes NB_ROUTE_BLOCK, as fast_prefill contexts do every
 * step (the three prompts, 22 rows, then one token each: 3 rows, which the block route leaves to
 * llama.cpp's orders); a step of one sequence keeps the default route. */
TEST(fast_batch_routes) {
    if (!model) SKIP("model %s absent", MODEL);
    nb_pool *pool;
    CHECK(nb_pool_create(2, &pool) == NB_OK, "pool: %s", nb_last_error());
    nb_ctx *fb[3], *fp[3];
    for (int i = 0; i < 3; i++) fb[i] = ctx_routed(pool, 0, 1), fp[i] = ctx_routed(pool, 1, 0);
    float *la = malloc(sizeof(float) * 3 * (size_t)n_vocab), *lb = malloc(sizeof(float) * 3 * (size_t)n_vocab);
    const int32_t *tok[3] = {P0, P1, P2};
    int n[3] = {N_PROMPT[0], N_PROMPT[1], N_PROMPT[2]};
    for (int step = 0; step < 2; step++) {
        CHECK(nb_batch_eval(fb, tok, n, 3, la) == NB_OK && nb_batch_eval(fp, tok, n, 3, lb) == NB_OK, "batch: %s",
              nb_last_error());
        CHECK(!memcmp(la, lb, sizeof(float) * 3 * (size_t)n_vocab), "step %d: fast_batch differs from fast_prefill",
              step);
        static int32_t next[3];
        for (int i = 0; i < 3; i++) next[i] = argmax(la + (size_t)i * n_vocab), tok[i] = &next[i], n[i] = 1;
    }
    nb_ctx *one = ctx_routed(pool, 0, 1), *plain = ctx_routed(pool, 0, 0);
    tok[0] = P2, n[0] = N_PROMPT[2];
    CHECK(nb_batch_eval(&one, tok, n, 1, la) == NB_OK && nb_ctx_eval(plain, P2, N_PROMPT[2], lb, 0) == NB_OK, "eval: %s",
          nb_last_error());
    CHECK(!memcmp(la, lb, sizeof(float) * (size_t)n_vocab), "one sequence under fast_batch left the default route");
    nb_ctx *mixed[2] = {plain, fb[0]};
    n[0] = n[1] = 1;
    CHECK(nb_batch_eval(mixed, tok, n, 2, NULL) == NB_ERR_INVALID_ARG && strstr(nb_last_error(), "fast_batch"),
          "a fast_batch context beside a default one: %s", nb_last_error());
    for (int i = 0; i < 3; i++) nb_ctx_free(fb[i]), nb_ctx_free(fp[i]);
    nb_ctx_free(one), nb_ctx_free(plain);
    free(la), free(lb);
    nb_pool_destroy(pool);
}

/* Refusals name the problem and leave every context where it was. */
TEST(bad_batches_refused) {
    if (!model) SKIP("model %s absent", MODEL);
    nb_pool *pool, *other;
    CHECK(nb_pool_create(2, &pool) == NB_OK && nb_pool_create(1, &other) == NB_OK, "pool: %s", nb_last_error());
    nb_ctx *c[3] = {ctx_on(pool, 16, 8), ctx_on(pool, 16, 8), ctx_on(other, 16, 8)};
    int32_t bad[2] = {2, n_vocab};
    const int32_t *tok[3] = {P0, P1, P0};
    int n[3] = {2, 2, 2};
    nb_ctx *twice[2] = {c[0], c[0]};
    CHECK(nb_batch_eval(twice, tok, n, 2, NULL) == NB_ERR_INVALID_ARG && strstr(nb_last_error(), "share"),
          "one context twice: %s", nb_last_error());
    CHECK(nb_batch_eval(c, tok, n, 3, NULL) == NB_ERR_INVALID_ARG && strstr(nb_last_error(), "pool"),
          "another pool: %s", nb_last_error());
    nb_ctx_params fp = nb_ctx_default_params();
    fp.n_ctx = 16, fp.n_batch = 8, fp.pool = pool, fp.fast_prefill = 1;
    nb_ctx *fast = NULL;
    CHECK(nb_ctx_create(model, &fp, &fast) == NB_OK, "ctx: %s", nb_last_error());
    nb_ctx *mixed[2] = {c[0], fast};
    CHECK(nb_batch_eval(mixed, tok, n, 2, NULL) == NB_ERR_INVALID_ARG && strstr(nb_last_error(), "fast_prefill"),
          "a fast_prefill context beside a default one: %s", nb_last_error());
    nb_ctx_free(fast);
    n[0] = 7;
    CHECK(nb_batch_eval(c, tok, n, 2, NULL) == NB_ERR_RANGE && strstr(nb_last_error(), "batch size 8"),
          "9 rows over n_batch 8: %s", nb_last_error());
    n[0] = 0;
    CHECK(nb_batch_eval(c, tok, n, 2, NULL) == NB_ERR_INVALID_ARG && strstr(nb_last_error(), "0 tokens"),
          "a sequence without tokens: %s", nb_last_error());
    n[0] = 2, tok[1] = bad;
    CHECK(nb_batch_eval(c, tok, n, 2, NULL) == NB_ERR_RANGE && strstr(nb_last_error(), "vocabulary"),
          "a token outside the vocabulary: %s", nb_last_error());
    CHECK(nb_batch_eval(c, tok, n, 0, NULL) == NB_ERR_INVALID_ARG, "no sequences");
    for (int i = 0; i < 3; i++) CHECK(nb_ctx_pos(c[i]) == 0, "context %d moved to %d", i, nb_ctx_pos(c[i]));
    for (int i = 0; i < 3; i++) nb_ctx_free(c[i]);
    nb_pool_destroy(pool), nb_pool_destroy(other);
}

int main(void) {
    if (access(MODEL, R_OK) == 0) {
        if (nb_model_load(MODEL, &model)) printf("FAIL load: %s\n", nb_last_error());
        else n_vocab = nb_model_get_info(model)->n_vocab;
    }
    RUN(one_sequence_is_ctx_eval);
    RUN(sequences_share_a_pass);
    RUN(truncate_reuses_a_prefix);
    RUN(fast_batch_routes);
    RUN(bad_batches_refused);
    nb_model_free(model);
    return test_summary();
}
