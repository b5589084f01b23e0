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
#include "base/rng.h"
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
    cand *c;            /* (n_vocab) candidates: a heap of the best top_k */
    int32_t *history;   /* (repeat_last_n) ring of accepted tokens */
    cand *pen;          /* (repeat_last_n) the distinct recent tokens, penalized */
    uint8_t *mark;      /* (n_vocab bits) which tokens are in pen, cleared after each draw */
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
    s->pen = malloc(sizeof(cand) * (size_t)(p->repeat_last_n + 1));
    s->mark = calloc((size_t)n_vocab / 8 + 1, 1);
    if (!s->c || !s->history || !s->pen || !s->mark) {
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
    free(s->pen);
    free(s->mark);
    free(s);
}

void nb_sampler_accept(nb_sampler *s, int32_t tok) {
    if (s->prm.repeat_last_n == 0) return;
    s->history[s->hist_at] = tok;
    s->hist_at = (s->hist_at + 1) % s->prm.repeat_last_n;
    if (s->n_hist < s->prm.repeat_last_n) s->n_hist++;
}

static int by_logit_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id; /* stable order for equal logits */
}

/* Offers v to a min-heap of the k best candidates so far (by logit, then lower id); heap[0] is the
 * worst one kept. */
static void offer(cand *heap, int *size, int k, cand v) {
    int j;
    if (*size < k) {
        for (j = (*size)++; j > 0 && by_logit_desc(&heap[(j - 1) / 2], &v) < 0; j = (j - 1) / 2) heap[j] = heap[(j - 1) / 2];
        heap[j] = v;
        return;
    }
    if (by_logit_desc(&v, &heap[0]) >= 0) return;
    for (j = 0;;) {
        int l = 2 * j + 1, r = l + 1, w = j;
        const cand *worst = &v;
        if (l < k && by_logit_desc(&heap[l], worst) > 0) w = l, worst = &heap[l];
        if (r < k && by_logit_desc(&heap[r], worst) > 0) w = r;
        if (w == j) break;
        heap[j] = heap[w];
        j = w;
    }
    heap[j] = v;
}

#define MARKED(s, id) ((s)->mark[(id) >> 3] & (1u << ((id) & 7)))

static void softmax(cand *c, int n, float temp) {
    double sum = 0;
    for (int i = 0; i < n; i++) {
        c[i].p = expf((c[i].logit - c[0].logit) / temp);
        sum += c[i].p;
    }
    for (int i = 0; i < n; i++) c[i].p = (float)(c[i].p / sum);
}

/* The scans over the vocabulary go by chunks: a chunk whose largest logit cannot change the
 * choice (greedy) or enter the kept top-k is skipped after one pass of 8 independent maxima,
 * which the compiler turns into vector max instructions (about 10x faster than the per-token
 * test on Gemma's 262144 logits). A NaN never wins a comparison here, as in the per-token test. */
enum { CHUNK = 64 };

static float chunk_max(const float *x, int n) {
    float m[8];
    for (int j = 0; j < 8; j++) m[j] = -INFINITY;
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
    for (; i < n; i++) m[0] = x[i] > m[0] ? x[i] : m[0];
    float r = m[0];
    for (int j = 1; j < 8; j++) r = m[j] > r ? m[j] : r;
    return r;
}

int32_t nb_sampler_sample(nb_sampler *s, const float *logits) {
    const nb_sampler_params *p = &s->prm;
    /* the penalty touches only the distinct recent tokens: they are set aside (marked) with their
     * penalized logits, and the scans below skip them and then consider them */
    int np = 0;
    if (p->repeat_penalty != 1.0f)
        for (int h = 0; h < s->n_hist; h++) {
            const int32_t id = s->history[h];
            if (MARKED(s, id)) continue;
            s->mark[id >> 3] |= (uint8_t)(1u << (id & 7));
            const float l = logits[id];
            s->pen[np++] = (cand){id, l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty, 0};
        }
    int32_t chosen = -1;
    int n = 0;
    if (p->temp <= 0) { /* greedy: the largest logit, the lowest id among equals */
        float best = -INFINITY;
        for (int i0 = 0; i0 < s->n_vocab; i0 += CHUNK) {
            const int i1 = i0 + CHUNK < s->n_vocab ? i0 + CHUNK : s->n_vocab;
            if (chosen >= 0 && !(chunk_max(logits + i0, i1 - i0) > best)) continue; /* nothing better here */
            for (int i = i0; i < i1; i++)
                if (!MARKED(s, i) && (chosen < 0 || logits[i] > best)) best = logits[i], chosen = i;
        }
        for (int j = 0; j < np; j++)
            if (chosen < 0 || s->pen[j].logit > best || (s->pen[j].logit == best && s->pen[j].id < chosen))
                best = s->pen[j].logit, chosen = s->pen[j].id;
    } else {
        const int k = p->top_k > 0 && p->top_k < s->n_vocab ? p->top_k : s->n_vocab;
        for (int i0 = 0; i0 < s->n_vocab; i0 += CHUNK) {
            const int i1 = i0 + CHUNK < s->n_vocab ? i0 + CHUNK : s->n_vocab;
            if (n == k && chunk_max(logits + i0, i1 - i0) < s->c[0].logit) continue; /* the common case */
            for (int i = i0; i < i1; i++) {
                if (n == k && logits[i] < s->c[0].logit) continue; /* below the worst kept */
                if (!MARKED(s, i)) offer(s->c, &n, k, (cand){i, logits[i], 0});
            }
        }
        for (int j = 0; j < np; j++) offer(s->c, &n, k, s->pen[j]);
        qsort(s->c, (size_t)n, sizeof *s->c, by_logit_desc);
    }
    for (int j = 0; j < np; j++) s->mark[s->pen[j].id >> 3] = 0;
    if (chosen >= 0) return chosen;
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
    double u = nb_splitmix64_uniform(&s->rng), cum = 0;
    for (int i = 0; i < n; i++) {
        cum += s->c[i].p;
        if (u < cum) return s->c[i].id;
    }
    return s->c[n - 1].id;
}
