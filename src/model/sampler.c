/*
 * sampler.c: next-token choice from logits, in llama.cpp's default order: repetition penalty,
 * top-k, top-p, min-p (these three on the temperature-1 distribution), temperature, then a draw
 * from a seeded generator. temp <= 0 is greedy (argmax after the penalty). The result depends only
 * on the logits, the options, the seed and the accepted history.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "nibble.h"

typedef struct cand {
    int32_t id;
    float logit;
    float p;
} cand;

struct nb_sampler {
    nb_sampler_params prm;
    int n_vocab;
    uint64_t rng;
    cand *c;            /* (n_vocab) candidates */
    int32_t *history;   /* (repeat_last_n) ring of accepted tokens */
    int n_hist, hist_at;
};

nb_sampler_params nb_sampler_default_params(void) {
    nb_sampler_params p = {.temp = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .repeat_penalty = 1.0f,
                           .repeat_last_n = 64, .seed = 0};
    return p;
}

nb_status nb_sampler_create(const nb_sampler_params *p, int n_vocab, nb_sampler **out) {
    *out = NULL;
    if (n_vocab < 1) return nb_fail(NB_ERR_INVALID_ARG, "sampler: vocabulary of %d tokens", n_vocab);
    if (!(p->top_p > 0 && p->top_p <= 1)) return nb_fail(NB_ERR_RANGE, "sampler: top-p %g is outside (0, 1]", p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1)) return nb_fail(NB_ERR_RANGE, "sampler: min-p %g is outside [0, 1]", p->min_p);
    if (!(p->repeat_penalty > 0)) return nb_fail(NB_ERR_RANGE, "sampler: repeat penalty %g must be > 0", p->repeat_penalty);
    if (!isfinite(p->temp)) return nb_fail(NB_ERR_RANGE, "sampler: temperature must be finite");
    if (p->repeat_last_n < 0 || p->repeat_last_n > (1 << 20))
        return nb_fail(NB_ERR_RANGE, "sampler: repeat-last-n %d is outside [0, 2^20]", p->repeat_last_n);
    nb_sampler *s = calloc(1, sizeof *s);
    if (!s) return nb_fail(NB_ERR_NOMEM, "sampler: out of memory");
    s->prm = *p;
    s->n_vocab = n_vocab;
    s->rng = p->seed ^ 0x9E3779B97F4A7C15ull;
    s->c = malloc(sizeof(cand) * (size_t)n_vocab);
    s->history = malloc(sizeof(int32_t) * (size_t)(p->repeat_last_n + 1));
    if (!s->c || !s->history) {
        nb_sampler_free(s);
        return nb_fail(NB_ERR_NOMEM, "sampler: out of memory");
    }
    *out = s;
    return NB_OK;
}

void nb_sampler_free(nb_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->history);
    free(s);
}

void nb_sampler_accept(nb_sampler *s, int32_t tok) {
    if (s->prm.repeat_last_n == 0) return;
    s->history[s->hist_at] = tok;
    s->hist_at = (s->hist_at + 1) % s->prm.repeat_last_n;
    if (s->n_hist < s->prm.repeat_last_n) s->n_hist++;
}

/* splitmix64: small, seedable, the same sequence on every platform */
static double next_uniform(nb_sampler *s) {
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

static int by_logit_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id; /* stable order for equal logits */
}

/* Moves the k largest candidates (by logit, then lower id) to the front, sorted. */
static void top_k(cand *c, int n, int k) {
    /* a min-heap of the best k seen so far, at c[0..k) */
    for (int i = 0; i < n; i++) {
        if (i < k) {
            int j = i;
            cand v = c[i];
            while (j > 0 && by_logit_desc(&c[(j - 1) / 2], &v) < 0) {
                c[j] = c[(j - 1) / 2];
                j = (j - 1) / 2;
            }
            c[j] = v;
        } else if (by_logit_desc(&c[i], &c[0]) < 0) {
            cand v = c[i];
            int j = 0;
            for (;;) {
                int l = 2 * j + 1, r = l + 1, w = j;
                cand *best = &v;
                if (l < k && by_logit_desc(&c[l], best) > 0) w = l, best = &c[l];
                if (r < k && by_logit_desc(&c[r], best) > 0) w = r;
                if (w == j) break;
                c[j] = c[w];
                j = w;
            }
            c[j] = v;
        }
    }
    qsort(c, (size_t)k, sizeof *c, by_logit_desc);
}

static void softmax(cand *c, int n, float temp) {
    double sum = 0;
    for (int i = 0; i < n; i++) {
        c[i].p = expf((c[i].logit - c[0].logit) / temp);
        sum += c[i].p;
    }
    for (int i = 0; i < n; i++) c[i].p = (float)(c[i].p / sum);
}

int32_t nb_sampler_sample(nb_sampler *s, const float *logits) {
    const nb_sampler_params *p = &s->prm;
    int n = s->n_vocab;
    for (int i = 0; i < n; i++) s->c[i] = (cand){i, logits[i], 0};
    if (p->repeat_penalty != 1.0f)
        for (int h = 0; h < s->n_hist; h++) {
            cand *c = &s->c[s->history[h]];
            /* each distinct token once: skip if it appeared earlier in the ring */
            int seen = 0;
            for (int e = 0; e < h && !seen; e++) seen = s->history[e] == s->history[h];
            if (!seen) c->logit = c->logit > 0 ? c->logit / p->repeat_penalty : c->logit * p->repeat_penalty;
        }
    if (p->temp <= 0) {
        int best = 0;
        for (int i = 1; i < n; i++)
            if (s->c[i].logit > s->c[best].logit) best = i;
        return s->c[best].id;
    }
    int k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    top_k(s->c, n, k);
    n = k;
    softmax(s->c, n, 1.0f);
    if (p->top_p < 1.0f) {
        double cum = 0;
        for (int i = 0; i < n; i++) {
            cum += s->c[i].p;
            if (cum >= p->top_p) {
                n = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0) {
        const float floor_p = p->min_p * s->c[0].p;
        int keep = 1;
        while (keep < n && s->c[keep].p >= floor_p) keep++;
        n = keep;
    }
    softmax(s->c, n, p->temp);
    double u = next_uniform(s), cum = 0;
    for (int i = 0; i < n; i++) {
        cum += s->c[i].p;
        if (u < cum) return s->c[i].id;
    }
    return s->c[n - 1].id;
}
