/*
 * perplexity.c: nb_perplexity (contract in nibble.h, formulas in docs/QUALITY.md).
 *
 * Memory: a window is evaluated in two steps. Its first half (positions 0 .. n_ctx/2-1) produces
 * no logits; the scored half is evaluated n_rows positions at a time into one buffer of n_rows
 * logit rows, which the pool turns into per-position numbers (nll, top K, KL) before the next
 * group. So a 262k vocabulary costs n_rows MiB, whatever the window. The window's last token is
 * never evaluated: its logits would predict past the window.
 *
 * Determinism: each position's numbers are computed by one thread from its own logits row and
 * written to its own slot; the sums run afterwards in position order on the calling thread.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/error.h"
#include "model/context.h"
#include "quant/perplexity.h"

#define PPL_DEFAULT_CTX 512

nb_ppl_params nb_ppl_default_params(void) {
    nb_ppl_params p = {0};
    p.n_rows = 32;
    p.top_k = 64;
    return p;
}

/* ------------------------------------------------------- one position */

/* ln p(id) from a logit, the row maximum and ln(sum exp(l - max)). Saving and comparing both go
 * through here, so the same logits give bit-identical log-probabilities on both sides. */
static float logprob(float l, float max, double log_sum) { return (float)((double)l - (double)max - log_sum); }

/* a is a worse top-K candidate than b: lower logit, or the same logit and a higher id */
static int worse(const nb_lprob_entry *a, const nb_lprob_entry *b) {
    return a->logprob < b->logprob || (a->logprob == b->logprob && a->id > b->id);
}

static void sift_down(nb_lprob_entry *h, int n, int i) {
    for (;;) {
        int w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && worse(&h[l], &h[w])) w = l;
        if (r < n && worse(&h[r], &h[w])) w = r;
        if (w == i) return;
        nb_lprob_entry t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static int better_first(const void *a, const void *b) {
    const nb_lprob_entry *x = a, *y = b;
    return worse(y, x) ? -1 : worse(x, y) ? 1 : 0;
}

/* The k largest logits of a row, best first (equal logits: lower id first); `logprob` holds the
 * raw logit on return. A min-heap of the k best so far: ids arrive in increasing order, so a
 * candidate equal to the heap's worst loses the tie and only a strictly larger logit enters. */
static void top_k(const float *l, int n_vocab, int k, nb_lprob_entry *h) {
    for (int i = 0; i < k; i++) h[i] = (nb_lprob_entry){(uint32_t)i, l[i]};
    for (int i = k / 2 - 1; i >= 0; i--) sift_down(h, k, i);
    for (int v = k; v < n_vocab; v++)
        if (l[v] > h[0].logprob) {
            h[0] = (nb_lprob_entry){(uint32_t)v, l[v]};
            sift_down(h, k, 0);
        }
    qsort(h, (size_t)k, sizeof *h, better_first);
}

typedef struct rows_job {
    const float *logits;          /* [n][n_vocab] */
    int n_vocab;
    const int32_t *next;          /* [n] the token each row predicts */
    int save_k;                   /* > 0: fill save_top / save_tail */
    nb_lprob_entry *save_top;     /* [n][save_k] */
    double *save_tail;            /* [n] */
    const nb_lprob_record *base;  /* [n] or NULL */
    int base_k;                   /* entries per base record */
    double *nll, *kld, *dp;       /* [n] */
    uint8_t *same;                /* [n] */
} rows_job;

void nb_ppl_row_init(const float *l, int n_vocab, nb_ppl_row *r) {
    float max = l[0];
    int32_t arg = 0;
    for (int v = 1; v < n_vocab; v++)
        if (l[v] > max) max = l[v], arg = v;
    double sum = 0;
    for (int v = 0; v < n_vocab; v++) sum += expf(l[v] - max);
    *r = (nb_ppl_row){max, arg, sum, log(sum)};
}

double nb_ppl_row_nll(const float *l, const nb_ppl_row *r, int32_t next) {
    return (double)r->max + r->log_sum - (double)l[next];
}

void nb_ppl_row_save(const float *l, int n_vocab, const nb_ppl_row *r, int k, nb_lprob_record *rec) {
    top_k(l, n_vocab, k, rec->top);
    double kept = 0;
    for (int i = 0; i < k; i++) {
        kept += expf(rec->top[i].logprob - r->max);
        rec->top[i].logprob = logprob(rec->top[i].logprob, r->max, r->log_sum);
    }
    rec->tail = r->sum > kept ? (r->sum - kept) / r->sum : 0;
}

double nb_ppl_row_kl(const float *l, const nb_ppl_row *r, const nb_lprob_record *base, int k) {
    double kl = 0, kept_q = 0;
    for (int i = 0; i < k; i++) {
        const float lp = base->top[i].logprob, lq = logprob(l[base->top[i].id], r->max, r->log_sum);
        kl += exp((double)lp) * (double)(lp - lq);
        kept_q += expf(l[base->top[i].id] - r->max);
    }
    const double q_tail = r->sum > kept_q ? (r->sum - kept_q) / r->sum : 0;
    if (base->tail > 0) kl += base->tail * log(base->tail / fmax(q_tail, DBL_MIN));
    return kl;
}

static void rows_stats(void *ctx, int64_t begin, int64_t end) {
    const rows_job *j = ctx;
    for (int64_t i = begin; i < end; i++) {
        const float *l = j->logits + (size_t)i * (size_t)j->n_vocab;
        nb_ppl_row r;
        nb_ppl_row_init(l, j->n_vocab, &r);
        j->nll[i] = nb_ppl_row_nll(l, &r, j->next[i]);
        if (j->save_k) {
            nb_lprob_record rec = {.top = j->save_top + (size_t)i * (size_t)j->save_k};
            nb_ppl_row_save(l, j->n_vocab, &r, j->save_k, &rec);
            j->save_tail[i] = rec.tail;
        }
        if (j->base) {
            const nb_lprob_record *b = &j->base[i];
            j->kld[i] = nb_ppl_row_kl(l, &r, b, j->base_k);
            j->same[i] = (uint32_t)r.argmax == b->top[0].id;
            j->dp[i] = exp(-j->nll[i]) - exp(-b->nll);
        }
    }
}

/* ------------------------------------------------------- running sums */

typedef struct sums {
    int64_t count, same;
    double nll, nll2;             /* -ln p(next), model */
    double nll_b, nll_b2, nll_nll_b; /* the base's, and the cross term for the ratio's error */
    double kld, kld2;
    double dp, dp2, dp4, dp_max;
} sums;

/* Mean of n values from their sum and sum of squares, and the standard error of that mean. */
static void mean_err(double sum, double sum2, int64_t n, double *mean, double *err) {
    *mean = n > 0 ? sum / (double)n : 0;
    const double var = n > 0 ? sum2 / (double)n - *mean * *mean : 0;
    *err = var > 0 && n > 1 ? sqrt(var / (double)(n - 1)) : 0;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Linear interpolation between the two nearest ranks of sorted values (llama.cpp's rule). */
static double percentile(const double *v, int64_t n, double f) {
    const double p = f * (double)(n - 1);
    const int64_t i = (int64_t)p;
    const double t = p - (double)i;
    return i + 1 < n ? (1 - t) * v[i] + t * v[i + 1] : v[n - 1];
}

static void finish_result(const sums *s, double *kld_all, nb_ppl_result *r) {
    double m, e;
    mean_err(s->nll, s->nll2, s->count, &m, &e);
    r->count = s->count;
    r->ppl = exp(m);
    r->ppl_err = r->ppl * e;
    if (!r->has_base) return;
    const double n = (double)s->count;
    double mb, eb;
    mean_err(s->nll_b, s->nll_b2, s->count, &mb, &eb);
    r->ppl_base = exp(mb);
    r->ppl_base_err = r->ppl_base * eb;
    /* the two nll means are measured on the same positions: their covariance narrows the ratio */
    const double cov = s->count > 10 ? (s->nll_nll_b / n - m * mb) / (n - 1) : 0;
    r->ln_ratio = m - mb;
    r->ln_ratio_err = sqrt(fmax(0, e * e + eb * eb - 2 * cov));
    mean_err(s->kld, s->kld2, s->count, &r->kld, &r->kld_err);
    qsort(kld_all, (size_t)s->count, sizeof *kld_all, cmp_double);
    r->kld_min = kld_all[0];
    r->kld_max = kld_all[s->count - 1];
    r->kld_median = percentile(kld_all, s->count, 0.5);
    r->kld_p90 = percentile(kld_all, s->count, 0.90);
    r->kld_p95 = percentile(kld_all, s->count, 0.95);
    r->kld_p99 = percentile(kld_all, s->count, 0.99);
    r->kld_p999 = percentile(kld_all, s->count, 0.999);
    r->same_top = (double)s->same / n;
    r->same_top_err = s->count > 1 ? sqrt(r->same_top * (1 - r->same_top) / (n - 1)) : 0;
    mean_err(s->dp, s->dp2, s->count, &r->dp_mean, &r->dp_mean_err);
    double mse, mse_err;
    mean_err(s->dp2, s->dp4, s->count, &mse, &mse_err);
    r->dp_rms = sqrt(mse);
    r->dp_rms_err = r->dp_rms > 0 ? 0.5 / r->dp_rms * mse_err : 0;
    r->dp_max = s->dp_max;
}

/* ------------------------------------------------------- the run */

typedef struct ppl_run {
    nb_ctx *c;
    const int32_t *tokens;          /* [n_chunks * n_ctx] */
    int n_ctx, n_chunks, n_rows, n_vocab, first;
    int32_t bos;                    /* -1: the vocabulary adds none, windows keep their first token */
    nb_lprob_file *save, *base;
    float *logits;                  /* [n_rows][n_vocab] */
    int32_t *window;                /* [n_ctx] */
    rows_job job;                   /* per-group arrays, n_rows each */
    nb_lprob_record *base_recs;     /* [n_rows]: base records of a group, entries in base_top */
    nb_lprob_entry *base_top;       /* [n_rows][base K] */
    double *kld_all;                /* [count] with a base, for the percentiles */
    sums s;
} ppl_run;

static void run_free(ppl_run *r) {
    nb_lprob_close(r->save);
    nb_lprob_close(r->base);
    free(r->logits);
    free(r->window);
    free(r->job.nll);
    free(r->job.kld);
    free(r->job.dp);
    free(r->job.same);
    free(r->job.save_top);
    free(r->job.save_tail);
    free(r->base_recs);
    free(r->base_top);
    free(r->kld_all);
}

/* Window, chunk count and the base file, after checking them against the context and model. */
static nb_status run_plan(ppl_run *r, const int32_t *tokens, int64_t n_tokens, const nb_ppl_params *p) {
    const nb_model_info *in = nb_model_get_info(nb_ctx_model(r->c));
    nb_status s;
    r->n_vocab = in->n_vocab;
    if (p->base_path) {
        if (tokens) return nb_fail(NB_ERR_INVALID_ARG, "tokens given with a base file (its tokens are scored)");
        if ((s = nb_lprob_open(p->base_path, &r->base))) return s;
        const nb_lprob_header *h = &r->base->h;
        if (h->n_vocab != in->n_vocab)
            return nb_fail(NB_ERR_INVALID_ARG, "base file '%s' was written for a vocabulary of %d; this model has %d",
                           p->base_path, h->n_vocab, in->n_vocab);
        if (p->n_ctx && p->n_ctx != h->n_ctx)
            return nb_fail(NB_ERR_INVALID_ARG, "window %d differs from the %d of base file '%s' (omit -c)", p->n_ctx,
                           h->n_ctx, p->base_path);
        r->n_ctx = h->n_ctx;
        r->n_chunks = p->n_chunks > 0 && p->n_chunks < h->n_chunks ? p->n_chunks : h->n_chunks;
        r->tokens = r->base->tokens;
    } else {
        if (!tokens || n_tokens < 0) return nb_fail(NB_ERR_INVALID_ARG, "no tokens and no base file");
        r->n_ctx = p->n_ctx ? p->n_ctx : PPL_DEFAULT_CTX;
        if (r->n_ctx < 4 || r->n_ctx > NB_LPROB_MAX_CTX)
            return nb_fail(NB_ERR_RANGE, "window %d outside [4, %d]", r->n_ctx, NB_LPROB_MAX_CTX);
        const int64_t whole = n_tokens / r->n_ctx;
        if (whole < 1)
            return nb_fail(NB_ERR_RANGE,
                           "the text is %lld token%s; one window needs %d (use a longer text or a smaller -c)",
                           (long long)n_tokens, nb_plural(n_tokens), r->n_ctx);
        r->n_chunks = (int)(whole < NB_LPROB_MAX_CHUNKS ? whole : NB_LPROB_MAX_CHUNKS);
        if (p->n_chunks > 0 && p->n_chunks < r->n_chunks) r->n_chunks = p->n_chunks;
        r->tokens = tokens;
    }
    if (r->n_ctx > nb_ctx_n_ctx(r->c))
        return nb_fail(NB_ERR_RANGE, "window %d exceeds the context's %d position%s", r->n_ctx, nb_ctx_n_ctx(r->c),
                       nb_plural(nb_ctx_n_ctx(r->c)));
    if (p->n_rows < 1) return nb_fail(NB_ERR_RANGE, "n_rows %d must be >= 1", p->n_rows);
    r->first = r->n_ctx / 2;
    r->n_rows = p->n_rows < r->n_ctx - 1 - r->first ? p->n_rows : r->n_ctx - 1 - r->first;
    const nb_tokenizer *tok = nb_model_tokenizer(nb_ctx_model(r->c));
    r->bos = nb_tokenizer_add_bos(tok) ? nb_tokenizer_bos(tok) : -1;
    return NB_OK;
}

static nb_status run_alloc(ppl_run *r, const nb_ppl_params *p) {
    const size_t n = (size_t)r->n_rows;
    uint64_t logit_floats;
    if (!nb_mul_u64(n, (uint64_t)r->n_vocab, &logit_floats) || logit_floats > SIZE_MAX / sizeof(float))
        return nb_fail(NB_ERR_OVERFLOW, "%zu logit row%s of %d", n, nb_plural((long long)n), r->n_vocab);
    rows_job *j = &r->job;
    j->n_vocab = r->n_vocab;
    r->logits = malloc(logit_floats * sizeof(float));
    r->window = malloc(sizeof(int32_t) * (size_t)r->n_ctx);
    j->nll = malloc(sizeof(double) * n);
    int ok = r->logits && r->window && j->nll;
    if (p->save_path) {
        j->save_k = p->top_k < r->n_vocab ? p->top_k : r->n_vocab;
        ok = ok && (j->save_top = malloc(sizeof(nb_lprob_entry) * n * (size_t)j->save_k)) &&
             (j->save_tail = malloc(sizeof(double) * n));
    }
    if (r->base) {
        const int64_t count = (int64_t)r->n_chunks * (r->n_ctx - 1 - r->first);
        j->base_k = r->base->h.top_k;
        ok = ok && (r->base_recs = calloc(n, sizeof *r->base_recs)) &&
             (r->base_top = malloc(sizeof(nb_lprob_entry) * n * (size_t)j->base_k)) &&
             (j->kld = malloc(sizeof(double) * n)) && (j->dp = malloc(sizeof(double) * n)) && (j->same = malloc(n)) &&
             (r->kld_all = malloc(sizeof(double) * (size_t)count));
        for (size_t i = 0; ok && i < n; i++) r->base_recs[i].top = r->base_top + i * (size_t)j->base_k;
        j->base = r->base_recs;
    }
    if (!ok)
        return nb_fail(NB_ERR_NOMEM, "buffers for %zu logit row%s of %d (%.1f MiB)", n, nb_plural((long long)n),
                       r->n_vocab, (double)logit_floats * sizeof(float) / 1048576.0);
    return NB_OK;
}

/* Scores positions [pos, pos + n) of window w, whose logits are in r->logits. */
static nb_status score_group(ppl_run *r, int w, int pos, int n) {
    rows_job *j = &r->job;
    const int32_t *win = r->tokens + (size_t)w * (size_t)r->n_ctx;
    nb_status s;
    j->logits = r->logits;
    j->next = win + pos + 1;
    for (int i = 0; r->base && i < n; i++)
        if ((s = nb_lprob_read(r->base, &r->base_recs[i]))) return s;
    if ((s = nb_pool_for(nb_ctx_pool(r->c), n, 1, rows_stats, j))) return s;
    sums *t = &r->s;
    for (int i = 0; i < n; i++) {
        const double v = j->nll[i];
        t->nll += v, t->nll2 += v * v;
        if (r->save) {
            nb_lprob_record rec = {win[pos + i + 1], v, j->save_tail[i], j->save_top + (size_t)i * (size_t)j->save_k};
            if ((s = nb_lprob_write(r->save, &rec))) return s;
        }
        if (r->base) {
            const double b = r->base_recs[i].nll, k = j->kld[i], d = j->dp[i];
            t->nll_b += b, t->nll_b2 += b * b, t->nll_nll_b += v * b;
            t->kld += k, t->kld2 += k * k;
            t->dp += d, t->dp2 += d * d, t->dp4 += d * d * d * d;
            t->dp_max = fmax(t->dp_max, fabs(d));
            t->same += j->same[i];
            r->kld_all[t->count] = k;
        }
        t->count++;
    }
    return NB_OK;
}

static nb_status score_window(ppl_run *r, int w) {
    memcpy(r->window, r->tokens + (size_t)w * (size_t)r->n_ctx, sizeof(int32_t) * (size_t)r->n_ctx);
    if (r->bos >= 0) r->window[0] = r->bos;
    nb_ctx_reset(r->c);
    nb_status s = nb_ctx_eval(r->c, r->window, r->first, NULL, 0);
    for (int pos = r->first; !s && pos < r->n_ctx - 1; pos += r->n_rows) {
        const int n = r->n_ctx - 1 - pos < r->n_rows ? r->n_ctx - 1 - pos : r->n_rows;
        if (!(s = nb_ctx_eval(r->c, r->window + pos, n, r->logits, 1))) s = score_group(r, w, pos, n);
    }
    return s;
}

nb_status nb_perplexity(nb_ctx *c, const int32_t *tokens, int64_t n_tokens, const nb_ppl_params *p,
                        nb_ppl_result *out) {
    if (!c || !p || !out) return nb_fail(NB_ERR_INVALID_ARG, "nb_perplexity: NULL context, parameters or result");
    memset(out, 0, sizeof *out);
    if (p->save_path && (p->top_k < 1 || p->top_k > NB_LPROB_MAX_TOP_K))
        return nb_fail(NB_ERR_RANGE, "top_k %d outside [1, %d]", p->top_k, NB_LPROB_MAX_TOP_K);
    ppl_run r = {.c = c};
    nb_status s = run_plan(&r, tokens, n_tokens, p);
    if (!s) s = run_alloc(&r, p);
    if (!s && p->save_path) {
        const nb_lprob_header h = {r.n_vocab, r.n_ctx, r.n_chunks, r.job.save_k, r.first};
        s = nb_lprob_create(p->save_path, &h, r.tokens, &r.save);
    }
    for (int w = 0; !s && w < r.n_chunks; w++) {
        if ((s = score_window(&r, w))) break;
        if (p->progress) p->progress(p->user, w + 1, r.n_chunks, exp(r.s.nll / (double)r.s.count));
    }
    nb_ctx_reset(c);
    if (!s && r.save) {
        s = nb_lprob_finish(r.save); /* closes it either way */
        r.save = NULL;
    }
    if (!s) {
        out->n_ctx = r.n_ctx;
        out->n_chunks = r.n_chunks;
        out->has_base = r.base != NULL;
        finish_result(&r.s, r.kld_all, out);
    }
    run_free(&r);
    return s;
}

nb_status nb_ppl_base_info(const char *path, int *n_ctx, int *n_chunks) {
    nb_lprob_file *f;
    nb_status s = nb_lprob_open(path, &f);
    if (s) return s;
    if (n_ctx) *n_ctx = f->h.n_ctx;
    if (n_chunks) *n_chunks = f->h.n_chunks;
    nb_lprob_close(f);
    return NB_OK;
}
