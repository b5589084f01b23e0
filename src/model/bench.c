/*
 * bench.c: one test of the model benchmark (nb_bench_run, nibble.h "benchmark"), timed as
 * llama.cpp's llama-bench times it, the bytes a decode step reads (nb_decode_step_bytes), and
 * decode against the ceiling those bytes and the streaming rate set (nb_bench_roofline).
 *
 * A test: create the context (n_ctx = depth + prompt + gen), warm up (a prefill of n_prompt on the
 * empty context, one decode step), fill the depth once, then per repetition run the prefill and
 * the decode steps under the clock and truncate back to the depth. Everything a repetition needs
 * (ids, logits) is allocated before the first one; the clock reads only the evaluation.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "base/threads.h"
#include "kernels/api.h"
#include "model/context.h"
#include "nibble.h"

nb_bench_params nb_bench_default_params(void) {
    nb_bench_params p = {.n_prompt = 512, .n_gen = 0, .n_depth = 0, .n_batch = 2048, .reps = 5, .warmup = 1,
                         .seed = 1234, .ctx = nb_ctx_default_params()};
    return p;
}

nb_status nb_decode_step_bytes(const nb_model *m, int type_k, int type_v, int pos, double *bytes) {
    if (!m || !bytes || pos < 0) return nb_fail(NB_ERR_INVALID_ARG, "decode step bytes: NULL argument or position %d", pos);
    const nb_model_info *in = nb_model_get_info(m);
    size_t k_row, v_row;
    if (nb_row_bytes(type_k, in->head_dim, &k_row) || nb_row_bytes(type_v, in->head_dim, &v_row))
        return nb_fail(NB_ERR_INVALID_ARG, "decode step bytes: cells %s/%s for heads of %d elements: %s",
                       nb_type_name(type_k), nb_type_name(type_v), in->head_dim, nb_last_error());
    const double per_pos = (double)in->n_head_kv * (double)(k_row + v_row);
    const int local = in->sliding_window > 0 && pos + 1 > in->sliding_window ? in->sliding_window : pos + 1;
    *bytes = (double)in->weight_bytes +
             per_pos * ((double)(in->n_layer - in->n_sliding) * (pos + 1) + (double)in->n_sliding * local);
    return NB_OK;
}

/* What the runs of one test share. */
typedef struct run {
    nb_ctx *c;
    int n_batch, n_vocab;
    int32_t bos;      /* the first id of a prefill and of a decode run, or -1: a drawn one */
    int32_t *ids;     /* n_batch of them */
    float *logits;    /* n_vocab */
    uint64_t rng;
} run;

static int32_t draw(run *r) {
    const int32_t id = (int32_t)(nb_splitmix64_uniform(&r->rng) * r->n_vocab);
    return id < r->n_vocab ? id : r->n_vocab - 1;
}

/* n prompt tokens in calls of n_batch, logits of each call's last token (llama-bench's batches). */
static nb_status prefill(run *r, int n) {
    for (int done = 0; done < n;) {
        const int k = n - done < r->n_batch ? n - done : r->n_batch;
        for (int i = 0; i < k; i++) r->ids[i] = !done && !i && r->bos >= 0 ? r->bos : draw(r);
        nb_status s = nb_ctx_eval(r->c, r->ids, k, r->logits, 0);
        if (s) return s;
        done += k;
    }
    return NB_OK;
}

static nb_status decode(run *r, int n) {
    int32_t id = r->bos >= 0 ? r->bos : draw(r);
    for (int i = 0; i < n; i++) {
        nb_status s = nb_ctx_eval(r->c, &id, 1, r->logits, 0);
        if (s) return s;
        id = draw(r);
    }
    return NB_OK;
}

static nb_status check(const nb_bench_params *p) {
    if (p->n_prompt < 0 || p->n_gen < 0 || p->n_depth < 0 || p->n_prompt + (int64_t)p->n_gen < 1)
        return nb_fail(NB_ERR_INVALID_ARG, "bench: %d prompt tokens and %d decode steps at depth %d (none negative, "
                       "at least one token)", p->n_prompt, p->n_gen, p->n_depth);
    if ((int64_t)p->n_depth + p->n_prompt + p->n_gen > INT_MAX)
        return nb_fail(NB_ERR_INVALID_ARG, "bench: depth %d + %d + %d tokens overflow a context", p->n_depth,
                       p->n_prompt, p->n_gen);
    if (p->n_batch < 1) return nb_fail(NB_ERR_INVALID_ARG, "bench: batch size %d (at least 1)", p->n_batch);
    if (p->reps < 1 || p->reps > NB_BENCH_MAX_REPS)
        return nb_fail(NB_ERR_INVALID_ARG, "bench: %d repetitions (1 to %d)", p->reps, NB_BENCH_MAX_REPS);
    return NB_OK;
}

/* avg, sample stddev and median of the repetitions. */
static void summarize(nb_bench_result *o) {
    const int n = o->n_reps;
    double sum_ns = 0, sum_ts = 0, sq_ns = 0, sq_ts = 0, sorted[NB_BENCH_MAX_REPS];
    for (int i = 0; i < n; i++) sum_ns += (double)o->samples_ns[i], sum_ts += o->samples_ts[i];
    const double avg_ns = sum_ns / n, avg_ts = sum_ts / n;
    for (int i = 0; i < n; i++) {
        const double dn = (double)o->samples_ns[i] - avg_ns, dt = o->samples_ts[i] - avg_ts;
        sq_ns += dn * dn, sq_ts += dt * dt;
        sorted[i] = o->samples_ts[i];
    }
    o->avg_ns = (uint64_t)llround(avg_ns);
    o->avg_ts = avg_ts;
    o->stddev_ns = n > 1 ? (uint64_t)llround(sqrt(sq_ns / (n - 1))) : 0;
    o->stddev_ts = n > 1 ? sqrt(sq_ts / (n - 1)) : 0;
    o->median_ts = nb_bench_stat_of(sorted, n).median;
}

/* The mean of nb_decode_step_bytes over the decode steps, at positions depth + prompt onwards. */
static nb_status mean_step_bytes(const nb_model *m, const nb_bench_params *p, double *mean) {
    *mean = 0;
    for (int i = 0; i < p->n_gen; i++) {
        double b;
        nb_status s = nb_decode_step_bytes(m, p->ctx.type_k, p->ctx.type_v, p->n_depth + p->n_prompt + i, &b);
        if (s) return s;
        *mean += b / p->n_gen;
    }
    return NB_OK;
}

static nb_status timed(run *r, const nb_bench_params *p, nb_bench_result *o) {
    nb_status s;
    if (p->warmup) {
        if (p->n_prompt && (s = prefill(r, p->n_prompt))) return s;
        if (p->n_gen && (s = decode(r, 1))) return s;
        nb_ctx_reset(r->c);
    }
    if (p->n_depth && (s = prefill(r, p->n_depth))) return s;
    for (int k = 0; k < p->reps; k++) {
        const uint64_t t0 = nb_clock_ns();
        if (p->n_prompt && (s = prefill(r, p->n_prompt))) return s;
        if (p->n_gen && (s = decode(r, p->n_gen))) return s;
        const uint64_t ns = nb_clock_ns() - t0;
        o->samples_ns[k] = ns ? ns : 1;
        o->samples_ts[k] = 1e9 * (p->n_prompt + p->n_gen) / (double)o->samples_ns[k];
        o->n_reps = k + 1;
        if ((s = nb_ctx_truncate(r->c, p->n_depth))) return s;
    }
    summarize(o);
    return NB_OK;
}

nb_status nb_bench_run(const nb_model *m, const nb_bench_params *p, nb_bench_result *out) {
    if (!out) return nb_fail(NB_ERR_INVALID_ARG, "bench: NULL result");
    memset(out, 0, sizeof *out);
    if (!m || !p) return nb_fail(NB_ERR_INVALID_ARG, "bench: NULL argument");
    nb_status s = check(p);
    if (s) return s;
    double step_bytes = 0;
    if ((s = mean_step_bytes(m, p, &step_bytes))) return s;
    const nb_tokenizer *tok = nb_model_tokenizer(m);
    nb_ctx_params cp = p->ctx;
    cp.n_ctx = p->n_depth + p->n_prompt + p->n_gen;
    const int longest = p->n_prompt > p->n_depth ? p->n_prompt : p->n_depth;
    run r = {.n_batch = p->n_batch < longest ? p->n_batch : (longest ? longest : 1),
             .n_vocab = nb_model_get_info(m)->n_vocab,
             .bos = nb_tokenizer_add_bos(tok) ? nb_tokenizer_bos(tok) : -1,
             .rng = p->seed};
    if ((s = nb_ctx_create(m, &cp, &r.c))) return s;
    r.ids = malloc(sizeof *r.ids * (size_t)r.n_batch);
    r.logits = malloc(sizeof *r.logits * (size_t)r.n_vocab);
    if (!r.ids || !r.logits) s = nb_fail(NB_ERR_NOMEM, "bench: out of memory for %d ids and %d logits", r.n_batch, r.n_vocab);
    else s = timed(&r, p, out);
    out->step_bytes = step_bytes;
    out->n_threads = nb_pool_threads(nb_ctx_pool(r.c));
    free(r.ids);
    free(r.logits);
    nb_ctx_free(r.c);
    if (s) memset(out, 0, sizeof *out);
    return s;
}

nb_status nb_bench_roofline(const nb_model *m, nb_pool *pool, int n_gen, int rounds, nb_bench_roofline_result *out) {
    if (!out) return nb_fail(NB_ERR_INVALID_ARG, "bench roofline: NULL result");
    memset(out, 0, sizeof *out);
    if (!m || !pool) return nb_fail(NB_ERR_INVALID_ARG, "bench roofline: NULL model or pool");
    if (rounds < 1 || rounds > NB_BENCH_MAX_REPS)
        return nb_fail(NB_ERR_INVALID_ARG, "bench roofline: %d rounds (1 to %d)", rounds, NB_BENCH_MAX_REPS);
    nb_bench_params bp = nb_bench_default_params();
    bp.n_prompt = 0, bp.n_gen = n_gen, bp.n_depth = 1, bp.reps = 1, bp.ctx.pool = pool;
    nb_bench_result res;
    nb_status s = nb_bench_run(m, &bp, &res); /* the weights' pages */
    if (s) return s;
    uint64_t *buf = nb_stream_buffer();
    if (!buf) return NB_ERR_NOMEM;
    double gbs[NB_BENCH_MAX_REPS], tps[NB_BENCH_MAX_REPS], ceil[NB_BENCH_MAX_REPS], share[NB_BENCH_MAX_REPS];
    for (int r = 0; r < rounds && !s; r++) {
        gbs[r] = nb_stream_passes(pool, buf, 3).median;
        s = nb_bench_run(m, &bp, &res);
        tps[r] = res.avg_ts;
        ceil[r] = gbs[r] * 1e9 / res.step_bytes;
        share[r] = 100 * tps[r] / ceil[r];
    }
    free(buf);
    if (s) return s;
    *out = (nb_bench_roofline_result){nb_bench_stat_of(gbs, rounds), nb_bench_stat_of(tps, rounds),
                                      nb_bench_stat_of(ceil, rounds), nb_bench_stat_of(share, rounds), res.step_bytes};
    return NB_OK;
}
