/*
 * sched.c: the slots and the scheduler thread. A slot is one sequence: its own context (all slots
 * share one thread pool, so nb_batch_eval can take them together), the tokens that context holds,
 * and while it runs a job, that job's sampler and nb_gen. Each step the scheduler
 *   1. hands queued jobs to free slots, preferring the slot whose tokens begin the job's prompt for
 *      longest (prompt reuse: the context is truncated to the common part, at least one prompt
 *      token is left to evaluate, so the first token has logits), and finishes cancelled jobs;
 *   2. builds one batch: the next token of every decoding slot, then prompt chunks of prefilling
 *      slots (round robin) in the rows left, at most n_batch / 4 of them while any slot decodes,
 *      so that a long prompt does not stall the streams;
 *   3. runs nb_batch_eval, then steps every slot that evaluated the last token of its prompt or
 *      its next token: OpenAI's presence and frequency penalties on the logits, nb_gen_step, the
 *      released text (and log-probabilities) appended to the job, which wakes its connection.
 * The server's lock guards the queue and every job's reply; the slots are the scheduler's alone.
 * With one slot, prompts are fed in n_batch chunks and tokens one at a time, as nb_generate feeds
 * them, so a request at temperature 0 gives `nibble run`'s text.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "base/threads.h"
#include "serve/internal.h"

typedef struct slot {
    nb_ctx *ctx;
    int32_t *cache;      /* the tokens ctx holds, nb_ctx_pos of them */
    sv_job *job;         /* NULL: free */
    nb_sampler *smp;
    nb_gen *gen;
    int fed;             /* prompt tokens of the job in ctx */
    int32_t next;        /* decoding: the token to feed; -1 while the prompt is fed */
    int32_t *counts;     /* (n_vocab) occurrences of each token in the reply, for the penalties */
    int32_t *reply;      /* the reply's tokens fed so far (n_reply), for the penalties */
    int n_reply;
    uint64_t used;       /* step at which it last finished a job: the oldest free slot is taken first */
} slot;

struct sv_sched {
    nb_model *m;
    nb_pool *pool;
    pthread_mutex_t *mu;
    pthread_cond_t wake;
    pthread_t thread;
    int started, stop;
    slot *slots;
    int n_slots, n_ctx, n_batch, n_vocab, n_queue;
    sv_job **queue;      /* FIFO ring */
    int q_head, q_len;
    float *logits;       /* (n_slots, n_vocab) */
    float *raw;          /* (n_vocab) a row before the penalties, for log-probabilities */
    uint64_t step, rr, serial; /* steps run; round-robin start; jobs submitted (their ids) */
    sv_metrics met;
};

static void *run(void *arg);

nb_status sv_sched_create(nb_model *m, const nb_serve_params *p, pthread_mutex_t *mu, sv_sched **out) {
    *out = NULL;
    sv_sched *s = calloc(1, sizeof *s);
    if (!s) return nb_fail(NB_ERR_NOMEM, "serve: out of memory");
    s->m = m, s->mu = mu;
    s->n_slots = p->n_slots, s->n_queue = p->n_queue;
    s->n_vocab = nb_model_get_info(m)->n_vocab;
    nb_status st = NB_OK;
    if (pthread_cond_init(&s->wake, NULL)) {
        free(s);
        return nb_fail(NB_ERR_NOMEM, "serve: cannot create a condition variable");
    }
    s->slots = calloc((size_t)s->n_slots, sizeof *s->slots);
    s->queue = calloc((size_t)s->n_queue, sizeof *s->queue);
    s->logits = malloc(sizeof(float) * (size_t)s->n_vocab * (size_t)s->n_slots);
    s->raw = malloc(sizeof(float) * (size_t)s->n_vocab);
    if (!s->slots || !s->queue || !s->logits || !s->raw) st = nb_fail(NB_ERR_NOMEM, "serve: out of memory for %d slots", s->n_slots);
    if (!st) st = nb_pool_create(p->n_threads, &s->pool);
    nb_ctx_params cp = p->slot;
    cp.n_ctx = p->n_ctx;
    cp.n_batch = p->n_batch;
    cp.pool = s->pool;
    for (int i = 0; !st && i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        sl->next = -1;
        if ((st = nb_ctx_create(m, &cp, &sl->ctx))) break;
        sl->cache = malloc(sizeof(int32_t) * (size_t)p->n_ctx);
        sl->reply = malloc(sizeof(int32_t) * (size_t)p->n_ctx);
        sl->counts = calloc((size_t)s->n_vocab, sizeof(int32_t));
        if (!sl->cache || !sl->reply || !sl->counts) st = nb_fail(NB_ERR_NOMEM, "serve: out of memory for slot %d", i);
    }
    s->n_ctx = p->n_ctx;
    s->n_batch = p->n_batch < p->n_ctx ? p->n_batch : p->n_ctx; /* as nb_ctx_create caps it */
    s->met.n_slots = s->n_slots;
    s->met.kv_cells = s->n_slots * s->n_ctx;
    if (!st && pthread_create(&s->thread, NULL, run, s)) st = nb_fail(NB_ERR_NOMEM, "serve: cannot start the scheduler");
    if (st) {
        sv_sched_free(s);
        return st;
    }
    s->started = 1;
    *out = s;
    return NB_OK;
}

void sv_job_release(sv_job *j) {
    if (j && --j->refs == 0) sv_job_free(j);
}

int sv_sched_submit(sv_sched *s, sv_job *j) {
    if (s->stop || s->q_len == s->n_queue) return 503;
    snprintf(j->id, sizeof j->id, "%s-%llx%04llx", j->kind == SV_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)time(NULL),
             (unsigned long long)(++s->serial & 0xFFFF));
    j->created = (int64_t)time(NULL);
    j->refs++;
    s->queue[(s->q_head + s->q_len++) % s->n_queue] = j;
    s->met.requests++;
    pthread_cond_signal(&s->wake);
    return 0;
}

void sv_sched_metrics(sv_sched *s, sv_metrics *m) {
    s->met.queued = s->q_len;
    s->met.busy = 0; /* slots change hands under the lock */
    for (int i = 0; i < s->n_slots; i++) s->met.busy += s->slots[i].job != NULL;
    *m = s->met;
}

/* ------------------------------------------------------------ the scheduler (its own slots) */

/* Ends the slot's job (the lock held): wakes its connection and frees the slot. */
static void finish(slot *sl, nb_stop why, int status, const char *err) {
    sv_job *j = sl->job;
    j->done = 1;
    j->stop_reason = why;
    if (status) {
        j->status = status;
        snprintf(j->err, sizeof j->err, "%s", err);
    }
    pthread_cond_broadcast(&j->cv);
    sv_job_release(j);
    for (int i = 0; i < sl->n_reply; i++) sl->counts[sl->reply[i]] = 0;
    sl->n_reply = 0;
    sl->job = NULL;
    nb_gen_free(sl->gen), nb_sampler_free(sl->smp);
    sl->gen = NULL, sl->smp = NULL;
    sl->next = -1;
}

/* Appends the text the last step released (the lock held). 0, or out of memory. */
static int take_text(slot *sl) {
    sv_job *j = sl->job;
    size_t n;
    const char *t = nb_gen_text(sl->gen, &n);
    if (j->cap - j->len < n) {
        size_t cap = 2 * (j->len + n) + 256;
        char *grown = realloc(j->text, cap);
        if (!grown) return 1;
        j->text = grown, j->cap = cap;
    }
    memcpy(j->text + j->len, t, n);
    j->len += n;
    return 0;
}

static size_t common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int k = 0;
    while (k < na && k < nb && a[k] == b[k]) k++;
    return (size_t)k;
}

/* Gives a queued job a slot: the free slot holding the longest start of its prompt, or when no
 * slot holds more of it than its first token (BOS, which every prompt shares), the one free the
 * longest, so that a cache another prompt may reuse is not spent on nothing. 0, or -1 when every
 * slot is busy. */
static int start_job(sv_sched *s, sv_job *j) {
    slot *best = NULL;
    size_t best_k = 0;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->job) continue;
        const size_t k = common_prefix(sl->cache, nb_ctx_pos(sl->ctx), j->prompt, j->n_prompt);
        if (!best || k > best_k || (k == best_k && sl->used < best->used)) best = sl, best_k = k;
    }
    if (!best) return -1;
    for (int i = 0; best_k <= 1 && i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->job && sl->used < best->used) best = sl;
    }
    if (best_k <= 1) best_k = common_prefix(best->cache, nb_ctx_pos(best->ctx), j->prompt, j->n_prompt);
    if ((int)best_k >= j->n_prompt) best_k = (size_t)j->n_prompt - 1;
    nb_ctx_truncate(best->ctx, (int)best_k);
    best_k = (size_t)nb_ctx_pos(best->ctx); /* less where a sliding-window ring has moved on */
    nb_gen_params gp = nb_gen_default_params();
    gp.n_predict = j->n_predict;
    gp.ignore_eos = j->ignore_eos;
    gp.stop = (const char *const *)j->stop;
    gp.n_stop = j->n_stop;
    best->job = j;
    if (nb_sampler_create(&j->sp, s->n_vocab, &best->smp) ||
        nb_gen_create(nb_model_tokenizer(s->m), best->smp, &gp, &best->gen)) {
        finish(best, NB_STOP_CANCEL, 400, nb_last_error());
        return 0;
    }
    nb_gen_prompt(best->gen, j->prompt, (size_t)j->n_prompt);
    best->fed = (int)best_k;
    j->n_reused = (int)best_k;
    s->met.reused_tokens += (int64_t)best_k;
    return 0;
}

/* OpenAI's penalties on one row of logits: each token of the reply so far lowers its logit by
 * frequency per occurrence plus presence once. */
static void penalize(const slot *sl, float *row) {
    const sv_job *j = sl->job;
    if (!j->presence && !j->frequency) return;
    for (int i = 0; i < sl->n_reply; i++) {
        const int32_t id = sl->reply[i];
        row[id] -= j->frequency;
        if (sl->counts[id] > 0) { /* the first occurrence met: presence counted once */
            row[id] -= j->presence;
            sl->counts[id] = -sl->counts[id];
        }
    }
    for (int i = 0; i < sl->n_reply; i++)
        if (sl->counts[sl->reply[i]] < 0) sl->counts[sl->reply[i]] = -sl->counts[sl->reply[i]];
}

/* The log-probability of id and the top k of the row (the model's distribution, before the
 * penalties and the sampler's cuts). */
static void logprob_of(const float *row, int n_vocab, int32_t id, int k, sv_logprob *out) {
    float mx = row[0];
    for (int v = 1; v < n_vocab; v++) mx = row[v] > mx ? row[v] : mx;
    double sum = 0;
    for (int v = 0; v < n_vocab; v++) sum += exp((double)row[v] - mx);
    const float lse = mx + (float)log(sum);
    out->id = id;
    out->logprob = row[id] - lse;
    out->n_top = 0;
    for (int v = 0; v < n_vocab; v++) { /* insertion into the k best, highest first, lower id on ties */
        int at = out->n_top;
        while (at > 0 && row[v] > out->top_lp[at - 1]) at--;
        if (at >= k) continue;
        const int last = out->n_top < k ? out->n_top : k - 1;
        memmove(out->top_id + at + 1, out->top_id + at, sizeof(int32_t) * (size_t)(last - at));
        memmove(out->top_lp + at + 1, out->top_lp + at, sizeof(float) * (size_t)(last - at));
        out->top_id[at] = v, out->top_lp[at] = row[v];
        if (out->n_top < k) out->n_top++;
    }
    for (int i = 0; i < out->n_top; i++) out->top_lp[i] -= lse;
}

/* Appends a log-probability entry (the lock held); 0, or out of memory. */
static int take_logprob(sv_job *j, const sv_logprob *lp) {
    if (j->n_lp == j->cap_lp) {
        const int cap = j->cap_lp ? 2 * j->cap_lp : 64;
        sv_logprob *grown = realloc(j->lp, sizeof *grown * (size_t)cap);
        if (!grown) return 1;
        j->lp = grown, j->cap_lp = cap;
    }
    j->lp[j->n_lp++] = *lp;
    return 0;
}

/* Samples the slot's next token from its row of logits and hands the job what it released (the
 * lock is taken here). */
static void step_slot(sv_sched *s, slot *sl, float *row) {
    sv_job *j = sl->job;
    if (j->logprobs) memcpy(s->raw, row, sizeof(float) * (size_t)s->n_vocab);
    penalize(sl, row);
    int32_t tok = -1;
    const nb_status st = nb_gen_step(sl->gen, row, nb_ctx_n_ctx(sl->ctx) - nb_ctx_pos(sl->ctx), &tok);
    sv_logprob lp;
    if (!st && tok >= 0 && j->logprobs) logprob_of(s->raw, s->n_vocab, tok, j->top_logprobs, &lp);
    pthread_mutex_lock(s->mu);
    const nb_stop why = nb_gen_stopped(sl->gen);
    const int64_t n_gen = nb_gen_get_stats(sl->gen)->n_gen;
    s->met.gen_tokens += n_gen - j->n_gen;
    j->n_gen = (int)n_gen;
    if (tok >= 0) sl->counts[sl->reply[sl->n_reply++] = tok]++;
    if (st) finish(sl, NB_STOP_CANCEL, 500, nb_last_error());
    else if (take_text(sl) || (tok >= 0 && j->logprobs && take_logprob(j, &lp)))
        finish(sl, NB_STOP_CANCEL, 500, "out of memory for the reply");
    else if (why) finish(sl, why, 0, NULL);
    else {
        sl->next = tok;
        pthread_cond_broadcast(&j->cv);
    }
    pthread_mutex_unlock(s->mu);
}

static void *run(void *arg) {
    sv_sched *s = arg;
    nb_ctx *ctxs[NB_BATCH_MAX_SEQ];
    const int32_t *toks[NB_BATCH_MAX_SEQ];
    int ns[NB_BATCH_MAX_SEQ];
    slot *who[NB_BATCH_MAX_SEQ];
    for (;;) {
        pthread_mutex_lock(s->mu);
        for (;;) {
            int busy = 0;
            for (int i = 0; i < s->n_slots; i++) busy += s->slots[i].job != NULL;
            if (s->stop || busy || s->q_len) break;
            pthread_cond_wait(&s->wake, s->mu);
        }
        if (s->stop) {
            pthread_mutex_unlock(s->mu);
            break;
        }
        while (s->q_len) { /* the queue in order; a cancelled job leaves it when it is first */
            sv_job *j = s->queue[s->q_head];
            if (j->cancelled) {
                j->done = 1, j->stop_reason = NB_STOP_CANCEL;
                pthread_cond_broadcast(&j->cv);
                sv_job_release(j);
            } else if (start_job(s, j)) {
                break;
            }
            s->q_head = (s->q_head + 1) % s->n_queue, s->q_len--;
        }
        for (int i = 0; i < s->n_slots; i++)
            if (s->slots[i].job && s->slots[i].job->cancelled) finish(&s->slots[i], NB_STOP_CANCEL, 0, NULL);
        pthread_mutex_unlock(s->mu);
        /* the batch: decoders' next tokens, then prompt chunks */
        int k = 0, rows = 0;
        for (int i = 0; i < s->n_slots; i++) {
            slot *sl = &s->slots[i];
            if (!sl->job || sl->next < 0) continue;
            who[k] = sl, ctxs[k] = sl->ctx, toks[k] = &sl->next, ns[k++] = 1;
            rows++;
        }
        const int n_dec = rows, cap = n_dec ? (s->n_batch / 4 > 1 ? s->n_batch / 4 : 1) : s->n_batch;
        int prefill = 0;
        for (int r = 0; r < s->n_slots && rows < s->n_batch; r++) {
            slot *sl = &s->slots[(s->rr + (uint64_t)r) % (uint64_t)s->n_slots];
            if (!sl->job || sl->next >= 0) continue;
            int take = sl->job->n_prompt - sl->fed;
            if (take > s->n_batch - rows) take = s->n_batch - rows;
            if (take > cap - prefill) take = cap - prefill;
            if (take <= 0) break;
            who[k] = sl, ctxs[k] = sl->ctx, toks[k] = sl->job->prompt + sl->fed, ns[k++] = take;
            rows += take, prefill += take;
        }
        s->rr++;
        if (!k) continue;
        const double t0 = nb_clock_s();
        nb_status st = nb_batch_eval(ctxs, toks, ns, k, s->logits);
        const double dt = nb_clock_s() - t0;
        pthread_mutex_lock(s->mu);
        s->step++;
        s->met.t_prefill += dt * prefill / rows, s->met.t_decode += dt * n_dec / rows;
        s->met.prefill_rows += prefill, s->met.decode_rows += n_dec, s->met.prompt_tokens += prefill;
        s->met.steps++, s->met.mixed_steps += prefill && n_dec;
        if (st) {
            for (int i = 0; i < k; i++) finish(who[i], NB_STOP_CANCEL, 500, nb_last_error());
            pthread_mutex_unlock(s->mu);
            continue;
        }
        for (int i = 0; i < k; i++) /* the tokens the contexts now hold */
            memcpy(who[i]->cache + nb_ctx_pos(who[i]->ctx) - ns[i], toks[i], sizeof(int32_t) * (size_t)ns[i]);
        s->met.kv_used = 0;
        for (int i = 0; i < s->n_slots; i++) s->met.kv_used += nb_ctx_pos(s->slots[i].ctx);
        pthread_mutex_unlock(s->mu);
        for (int i = 0; i < k; i++) {
            slot *sl = who[i];
            float *row = s->logits + (size_t)i * s->n_vocab;
            if (sl->next < 0 && (sl->fed += ns[i]) < sl->job->n_prompt) continue; /* more prompt to feed */
            step_slot(s, sl, row);
            sl->used = s->step;
        }
    }
    /* stopping: every job ends cancelled; queued ones never started (503) */
    pthread_mutex_lock(s->mu);
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].job) {
            nb_gen_cancel(s->slots[i].gen);
            take_text(&s->slots[i]);
            finish(&s->slots[i], NB_STOP_CANCEL, 0, NULL);
        }
    for (; s->q_len; s->q_head = (s->q_head + 1) % s->n_queue, s->q_len--) {
        sv_job *j = s->queue[s->q_head];
        j->done = 1, j->stop_reason = NB_STOP_CANCEL, j->status = 503;
        snprintf(j->err, sizeof j->err, "the server is shutting down");
        pthread_cond_broadcast(&j->cv);
        sv_job_release(j);
    }
    pthread_mutex_unlock(s->mu);
    return NULL;
}

void sv_sched_stop(sv_sched *s) {
    if (!s || !s->started) return;
    pthread_mutex_lock(s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(s->mu);
    pthread_join(s->thread, NULL);
    s->started = 0;
}

void sv_sched_free(sv_sched *s) {
    if (!s) return;
    sv_sched_stop(s);
    for (int i = 0; s->slots && i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        nb_gen_free(sl->gen), nb_sampler_free(sl->smp), nb_ctx_free(sl->ctx);
        free(sl->cache), free(sl->reply), free(sl->counts);
    }
    nb_pool_destroy(s->pool);
    pthread_cond_destroy(&s->wake);
    free(s->slots), free(s->queue), free(s->logits), free(s->raw);
    free(s);
}
