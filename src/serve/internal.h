/*
 * internal.h: what http.c, api.c and sched.c share. A job is one completion request: api.c fills
 * its request part from the body, sched.c runs it on a slot and appends to its reply part under
 * the server's lock, and http.c waits on it (its condition variable) and sends the reply. A job is
 * freed when both the connection and the scheduler have let it go (refs).
 */
#ifndef NB_SERVE_INTERNAL_H
#define NB_SERVE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "nibble.h"
#include "serve/serve.h"

#define SV_MAX_BODY (8u << 20)      /* bytes of a request body; more is 413 */
#define SV_MAX_TOP_LOGPROBS 20
#define SV_MAX_MESSAGES 4096

/* What a request may use of the model, for api.c (the fuzz harness builds one without a model). */
typedef struct sv_model {
    const nb_tokenizer *tok;
    int tmpl;                 /* chat template id */
    int n_ctx;                /* positions per slot */
    const char *name;         /* the id /v1/models reports */
} sv_model;

/* The log-probabilities of one generated token. */
typedef struct sv_logprob {
    int32_t id;
    float logprob;
    int n_top;
    int32_t top_id[SV_MAX_TOP_LOGPROBS];
    float top_lp[SV_MAX_TOP_LOGPROBS];
} sv_logprob;

typedef enum sv_kind { SV_COMPLETION, SV_CHAT } sv_kind;

typedef struct sv_job {
    /* the request, fixed once queued */
    sv_kind kind;
    int stream, include_usage;
    int logprobs, top_logprobs;  /* logprobs: entries wanted; top_logprobs: alternatives per entry */
    int32_t *prompt;
    int n_prompt;
    nb_sampler_params sp;
    float presence, frequency;   /* OpenAI's penalties (applied by the scheduler before sampling) */
    int n_predict, ignore_eos;   /* ignore_eos: llama-server's field (benchmarks) */
    char *stop[NB_GEN_MAX_STOPS];
    int n_stop;
    char id[48];
    int64_t created;
    /* the reply, under the server's lock */
    pthread_cond_t cv;
    char *text;                  /* released text */
    size_t len, cap;
    sv_logprob *lp;              /* one per generated token when logprobs */
    int n_lp, cap_lp;
    int n_gen, n_reused;         /* tokens generated; prompt tokens the slot already held */
    int done, cancelled;
    nb_stop stop_reason;
    int status;                  /* 0, or the HTTP status of a failure (message in err) */
    char err[256];
    int refs;
} sv_job;

/* A reply body: status, content type and a malloc'ed body. */
typedef struct sv_reply {
    int status;
    const char *type;
    char *body;
    size_t len;
} sv_reply;

/* ---- api.c */
/* Parses and checks a /v1/completions or /v1/chat/completions body into a new job (refs 1), or
 * fills *err (400 naming the field, or the prompt's length against the context). */
int sv_parse_job(const sv_model *m, sv_kind kind, const char *body, size_t len, sv_job **out, sv_reply *err);
void sv_job_free(sv_job *j);
/* An OpenAI error object ({"error": {"message", "type", "param", "code"}}). */
void sv_error(sv_reply *r, int status, const char *param, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The whole response of a finished job (stream false). */
void sv_job_reply(const sv_model *m, const sv_job *j, sv_reply *r);
/* One Server-Sent Event of a streamed job: the text [from, from+len) and the log-probabilities
 * [lp0, lp1), with finish_reason when `final`; or the usage chunk. Returns a malloc'ed
 * "data: {...}\n\n" (NULL when out of memory) and its length. */
char *sv_job_chunk(const sv_model *m, const sv_job *j, size_t from, size_t len, int lp0, int lp1, int first, int final,
                   size_t *n);
char *sv_usage_chunk(const sv_model *m, const sv_job *j, size_t *n);
/* /tokenize, /detokenize, /v1/models. */
void sv_tokenize(const sv_model *m, const char *body, size_t len, sv_reply *r);
void sv_detokenize(const sv_model *m, const char *body, size_t len, sv_reply *r);
void sv_models(const sv_model *m, sv_reply *r);

/* ---- sched.c */
typedef struct sv_sched sv_sched;
typedef struct sv_metrics {
    int64_t requests, prompt_tokens, reused_tokens, gen_tokens;
    double t_prefill, t_decode;  /* seconds of steps, split by their rows */
    int64_t prefill_rows, decode_rows;
    int64_t steps, mixed_steps;  /* nb_batch_eval calls; those that held prompt and decode rows */
    int busy, queued, kv_used, n_slots, kv_cells;
} sv_metrics;

nb_status sv_sched_create(nb_model *m, const nb_serve_params *p, pthread_mutex_t *mu, sv_sched **out);
/* Queues a job (the scheduler takes a reference); 0, or 503 when the queue is full or the server
 * stops. Called with the lock held. */
int sv_sched_submit(sv_sched *s, sv_job *j);
/* Drops a reference (the lock held); the last one frees the job. */
void sv_job_release(sv_job *j);
void sv_sched_metrics(sv_sched *s, sv_metrics *m); /* the lock held */
/* Stops the scheduler: every job it holds finishes cancelled (queued ones with 503). */
void sv_sched_stop(sv_sched *s);
void sv_sched_free(sv_sched *s);

#endif
