/*
 * test_sampler.c: the sampling chain on small hand-made distributions: greedy, repetition penalty,
 * top-k, top-p, min-p, temperature, seeds, and parameter checks.
 */
#include <math.h>
#include <string.h>

#include "nibble.h"
#include "test.h"

enum { V = 8 };

static nb_sampler *make(nb_sampler_params p) {
    nb_sampler *s = NULL;
    CHECK(nb_sampler_create(&p, V, &s) == NB_OK, "create: %s", nb_last_error());
    return s;
}

static nb_sampler_params base(void) {
    nb_sampler_params p = nb_sampler_default_params();
    p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f, p.temp = 1.0f, p.seed = 7;
    return p;
}

/* logits whose softmax at temperature 1 is probs */
static void from_probs(const double *probs, float *logits) {
    for (int i = 0; i < V; i++) logits[i] = probs[i] > 0 ? (float)log(probs[i]) : -1e30f;
}

static void histogram(nb_sampler *s, const float *logits, int n, int *count) {
    memset(count, 0, sizeof(int) * V);
    for (int i = 0; i < n; i++) count[nb_sampler_sample(s, logits)]++;
}

TEST(greedy_and_repetition_penalty) {
    const float logits[V] = {1, 5, 4.5f, -2, 0, 0, 0, -1};
    nb_sampler_params p = base();
    p.temp = 0;
    nb_sampler *s = make(p);
    CHECK(nb_sampler_sample(s, logits) == 1, "greedy picks the largest logit");
    nb_sampler_free(s);
    p.repeat_penalty = 1.5f;
    s = make(p);
    nb_sampler_accept(s, 1);
    CHECK(nb_sampler_sample(s, logits) == 2, "5/1.5 < 4.5: the repeated token loses");
    nb_sampler_free(s);
    const float neg[V] = {-3, -1, -1.2f, -9, -9, -9, -9, -9};
    s = make(p);
    nb_sampler_accept(s, 1);
    CHECK(nb_sampler_sample(s, neg) == 2, "a negative logit is multiplied: -1*1.5 < -1.2");
    nb_sampler_free(s);
}

TEST(top_k_top_p_min_p_filters) {
    const double probs[V] = {0.40, 0.25, 0.15, 0.10, 0.05, 0.03, 0.01, 0.01};
    float logits[V];
    from_probs(probs, logits);
    int count[V];
    nb_sampler_params p = base();
    p.top_k = 2;
    nb_sampler *s = make(p);
    histogram(s, logits, 2000, count);
    CHECK(count[0] + count[1] == 2000 && count[0] > count[1] && count[1] > 0, "top-k 2: only ids 0 and 1 (%d %d)",
          count[0], count[1]);
    nb_sampler_free(s);
    p = base();
    p.top_p = 0.7f; /* 0.40 + 0.25 = 0.65 < 0.7: the third token completes the nucleus */
    s = make(p);
    histogram(s, logits, 3000, count);
    CHECK(count[3] + count[4] + count[5] + count[6] + count[7] == 0 && count[2] > 0, "top-p 0.7 keeps ids 0-2");
    nb_sampler_free(s);
    p = base();
    p.min_p = 0.5f; /* keeps p >= 0.20: ids 0 and 1 */
    s = make(p);
    histogram(s, logits, 2000, count);
    CHECK(count[0] + count[1] == 2000, "min-p 0.5 keeps ids 0 and 1 (%d %d %d)", count[0], count[1], count[2]);
    nb_sampler_free(s);
}

/* Without filters, draws follow softmax(logits / temp): each count within 5 standard deviations. */
TEST(draws_follow_the_distribution) {
    const double probs[V] = {0.30, 0.20, 0.15, 0.12, 0.10, 0.08, 0.04, 0.01};
    float logits[V];
    from_probs(probs, logits);
    const double temps[] = {1.0, 0.5, 2.0};
    for (int ti = 0; ti < 3; ti++) {
        nb_sampler_params p = base();
        p.temp = (float)temps[ti];
        nb_sampler *s = make(p);
        enum { N = 20000 };
        int count[V];
        histogram(s, logits, N, count);
        double z = 0, want[V];
        for (int i = 0; i < V; i++) z += want[i] = pow(probs[i], 1.0 / temps[ti]);
        for (int i = 0; i < V; i++) {
            double e = N * want[i] / z, sd = sqrt(e * (1 - want[i] / z));
            CHECK(fabs(count[i] - e) <= 5 * sd + 1, "temp %g id %d: %d draws, expected %.0f", temps[ti], i, count[i], e);
        }
        nb_sampler_free(s);
    }
}

TEST(seeds_reproduce) {
    const double probs[V] = {0.2, 0.2, 0.15, 0.15, 0.1, 0.1, 0.05, 0.05};
    float logits[V];
    from_probs(probs, logits);
    nb_sampler_params p = base();
    nb_sampler *a = make(p), *b = make(p);
    p.seed = 8;
    nb_sampler *c = make(p);
    int same = 1, differs = 0;
    for (int i = 0; i < 200; i++) {
        int x = nb_sampler_sample(a, logits), y = nb_sampler_sample(b, logits), w = nb_sampler_sample(c, logits);
        same &= x == y;
        differs |= x != w;
    }
    CHECK(same, "the same seed gives the same draws");
    CHECK(differs, "another seed gives other draws");
    nb_sampler_free(a), nb_sampler_free(b), nb_sampler_free(c);
}

TEST(bad_parameters) {
    nb_sampler *s = NULL;
    nb_sampler_params p = base();
    p.top_p = 0;
    CHECK(nb_sampler_create(&p, V, &s) == NB_ERR_RANGE && !s, "top-p 0");
    p = base(), p.min_p = 1.5f;
    CHECK(nb_sampler_create(&p, V, &s) == NB_ERR_RANGE, "min-p 1.5");
    p = base(), p.repeat_penalty = 0;
    CHECK(nb_sampler_create(&p, V, &s) == NB_ERR_RANGE, "repeat penalty 0");
    p = base(), p.temp = NAN;
    CHECK(nb_sampler_create(&p, V, &s) == NB_ERR_RANGE, "temperature NaN");
    p = base();
    CHECK(nb_sampler_create(&p, 0, &s) == NB_ERR_INVALID_ARG, "empty vocabulary");
}

/* A vocabulary of many chunks (the scans skip chunks that cannot change the choice): the lowest
 * id among equal maxima wins across chunk borders, a penalized maximum loses to the next best in
 * another chunk, NaN never wins, and top-k with k = 1 keeps the same token as greedy. */
TEST(long_vocabulary) {
    enum { N = 1000 };
    static float l[N];
    for (int i = 0; i < N; i++) l[i] = (float)((i * 7919) % 1000) / 100.0f - 5.0f; /* below 5 */
    l[3] = NAN, l[130] = 7.0f, l[500] = 7.0f, l[999] = 6.5f, l[700] = 9.0f;
    nb_sampler_params p = nb_sampler_default_params();
    p.temp = 0, p.seed = 3;
    nb_sampler *s = NULL;
    CHECK(nb_sampler_create(&p, N, &s) == NB_OK, "create");
    CHECK(nb_sampler_sample(s, l) == 700, "greedy: the largest logit, in a late chunk");
    l[700] = 7.0f;
    CHECK(nb_sampler_sample(s, l) == 130, "greedy: of equal maxima (ids 130, 500, 700) the lowest id");
    nb_sampler_free(s);
    p.repeat_penalty = 2.0f;
    CHECK(nb_sampler_create(&p, N, &s) == NB_OK, "create");
    nb_sampler_accept(s, 130), nb_sampler_accept(s, 500), nb_sampler_accept(s, 700);
    CHECK(nb_sampler_sample(s, l) == 999, "greedy: the penalized maxima lose to 6.5 in the last chunk");
    nb_sampler_free(s);
    p = nb_sampler_default_params(), p.top_k = 1, p.seed = 3;
    CHECK(nb_sampler_create(&p, N, &s) == NB_OK, "create");
    CHECK(nb_sampler_sample(s, l) == 130, "top-k 1 keeps the greedy token");
    nb_sampler_free(s);
}

int main(void) {
    RUN(greedy_and_repetition_penalty);
    RUN(top_k_top_p_min_p_filters);
    RUN(draws_follow_the_distribution);
    RUN(seeds_reproduce);
    RUN(bad_parameters);
    RUN(long_vocabulary);
    return test_summary();
}
