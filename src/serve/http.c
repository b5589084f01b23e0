/*
 * http.c: the daemon. libmicrohttpd parses HTTP, with a thread per connection, an idle timeout
 * (--timeout: a body that never finishes is dropped), a per-connection memory pool that bounds
 * the request line and headers (431 past it, answered by the library), and a connection limit.
 * Bodies are gathered up to SV_MAX_BODY (a larger Content-Length is refused before it is read,
 * a chunked body once it grows past it: 413). Routes: the OpenAI endpoints, llama-server's
 * /health, /metrics, /tokenize, /detokenize; with --api-key every route but /health wants
 * "Authorization: Bearer KEY". A completion waits for its job (stream false) or streams it as
 * Server-Sent Events from a content reader; both watch the socket while they wait, and a client
 * that hung up cancels its job, which frees its slot at the scheduler's next step.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "serve/internal.h"

struct nb_server {
    struct MHD_Daemon *d;
    pthread_mutex_t mu;      /* the queue, every job's reply, `ready` */
    nb_model *m;
    sv_model sm;
    sv_sched *sched;
    char name[256];
    char *api_key;
    int ready, port;
    int replying;            /* completions queued whose connection is not done with them, */
    pthread_cond_t idle;     /* signalled when that falls to 0 */
};

/* A completion's reply has been sent (or its connection is gone); the lock held. */
static void replied(nb_server *s) {
    if (--s->replying == 0) pthread_cond_broadcast(&s->idle);
}

nb_serve_params nb_serve_default_params(void) {
    nb_serve_params p = {.host = "127.0.0.1", .port = 8080, .n_slots = 4, .n_ctx = 4096, .n_batch = 512,
                         .slot = nb_ctx_default_params(), .n_queue = 64, .timeout_s = 600};
    p.slot.fast_batch = 1; /* steps of several slots sum each weight block exactly (nibble.h) */
    return p;
}

int nb_serve_port(const nb_server *s) { return s->port; }
int nb_serve_n_ctx(const nb_server *s) { return s->sm.n_ctx; }
const char *nb_serve_model_name(const nb_server *s) { return s->name; }

/* ------------------------------------------------------------ replies */

static enum MHD_Result send_body(struct MHD_Connection *c, int status, const char *type, char *body, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    const enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_reply(struct MHD_Connection *c, sv_reply *r) {
    return r->body ? send_body(c, r->status, r->type, r->body, r->len) : MHD_NO;
}

static enum MHD_Result send_error(struct MHD_Connection *c, int status, const char *msg) {
    sv_reply r = {0};
    sv_error(&r, status, NULL, "%s", msg);
    return send_reply(c, &r);
}

/* ------------------------------------------------------------ waiting on a job */

/* The client has closed its end of the connection. */
static int hung_up(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return i ? i->connect_fd : -1;
}

/* Waits (the lock held) until the job has something new or is done: 0, or -1 when the client hung
 * up (the job is then cancelled). `fresh` says whether there is anything to send. */
static int wait_job(nb_server *s, sv_job *j, int fd, int (*fresh)(const sv_job *, const void *), const void *arg) {
    while (!j->done && !fresh(j, arg)) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 100 * 1000 * 1000;
        if (t.tv_nsec >= 1000000000) t.tv_sec++, t.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&j->cv, &s->mu, &t);
        if (!j->done && fd >= 0 && hung_up(fd)) {
            j->cancelled = 1;
            return -1;
        }
    }
    return 0;
}

static int nothing_new(const sv_job *j, const void *arg) { return (void)j, (void)arg, 0; }

/* A streamed job: its events are formatted into `out` and handed to the reader in pieces. */
typedef struct stream {
    nb_server *s;
    sv_job *j;
    int fd, first, ended;
    size_t sent;         /* bytes of the job's text already in events */
    int lp_sent;
    char *out;
    size_t out_len, out_at;
} stream;

static int stream_fresh(const sv_job *j, const void *arg) {
    const stream *st = arg;
    return j->len > st->sent || j->n_lp > st->lp_sent || (st->first && j->kind == SV_CHAT);
}

/* Appends an event (NULL: out of memory, the stream ends). */
static int put(stream *st, char *ev, size_t n) {
    if (!ev) return 1;
    char *grown = realloc(st->out, st->out_len + n);
    if (!grown) return free(ev), 1;
    memcpy(grown + st->out_len, ev, n);
    st->out = grown, st->out_len += n;
    free(ev);
    return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *st = cls;
    if (st->out_at == st->out_len) {
        if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        st->out_at = st->out_len = 0;
        sv_job *j = st->j;
        pthread_mutex_lock(&st->s->mu);
        if (wait_job(st->s, j, st->fd, stream_fresh, st)) {
            pthread_mutex_unlock(&st->s->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        size_t n = 0;
        int fail = 0;
        if (j->done && j->status) {
            sv_reply r = {0};
            sv_error(&r, j->status, NULL, "%s", j->err);
            char *ev = malloc(r.len + 9);
            if (ev) snprintf(ev, r.len + 9, "data: %s\n\n", r.body), n = r.len + 8;
            free(r.body);
            fail = put(st, ev, n);
        } else {
            char *ev = sv_job_chunk(&st->s->sm, j, st->sent, j->len - st->sent, st->lp_sent, j->n_lp, st->first, j->done, &n);
            fail = put(st, ev, n);
            if (!fail && j->done && j->include_usage) {
                ev = sv_usage_chunk(&st->s->sm, j, &n);
                fail = put(st, ev, n);
            }
        }
        st->first = 0, st->sent = j->len, st->lp_sent = j->n_lp;
        if (j->done || fail) {
            static const char done[] = "data: [DONE]\n\n";
            put(st, strdup(done), sizeof done - 1);
            st->ended = 1;
        }
        pthread_mutex_unlock(&st->s->mu);
        if (!st->out_len) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    const size_t n = st->out_len - st->out_at < max ? st->out_len - st->out_at : max;
    memcpy(buf, st->out + st->out_at, n);
    st->out_at += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    stream *st = cls;
    pthread_mutex_lock(&st->s->mu);
    if (!st->j->done) st->j->cancelled = 1; /* the connection went away mid-stream */
    sv_job_release(st->j);
    pthread_mutex_unlock(&st->s->mu);
    free(st->out);
    free(st);
}

typedef struct request {
    char *body;
    size_t len, cap;
    int too_big;
    int replying;        /* counted in nb_server.replying until the connection is done with it */
} request;

static enum MHD_Result completion(nb_server *s, struct MHD_Connection *c, sv_kind kind, request *rq) {
    const char *body = rq->body ? rq->body : "";
    const size_t len = rq->len;
    sv_job *j;
    sv_reply r = {0};
    if (sv_parse_job(&s->sm, kind, body, len, &j, &r)) return send_reply(c, &r);
    pthread_mutex_lock(&s->mu);
    const int full = sv_sched_submit(s->sched, j);
    s->replying += rq->replying = !full;
    pthread_mutex_unlock(&s->mu);
    if (full) {
        sv_job_free(j);
        return send_error(c, 503, "every slot is busy and the queue is full; try again later");
    }
    const int fd = conn_fd(c);
    if (j->stream) {
        stream *st = calloc(1, sizeof *st);
        struct MHD_Response *resp = st ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free) : NULL;
        if (!resp) {
            free(st);
            pthread_mutex_lock(&s->mu);
            j->cancelled = 1;
            sv_job_release(j);
            pthread_mutex_unlock(&s->mu);
            return MHD_NO;
        }
        *st = (stream){.s = s, .j = j, .fd = fd, .first = 1};
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        const enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return ok;
    }
    pthread_mutex_lock(&s->mu);
    const int gone = wait_job(s, j, fd, nothing_new, NULL); /* hung up: nobody to answer */
    if (!gone && j->status) sv_error(&r, j->status, NULL, "%s", j->err);
    else if (!gone) sv_job_reply(&s->sm, j, &r);
    sv_job_release(j);
    pthread_mutex_unlock(&s->mu);
    return gone ? MHD_NO : send_reply(c, &r);
}

/* ------------------------------------------------------------ metrics */

static enum MHD_Result metrics(nb_server *s, struct MHD_Connection *c) {
    sv_metrics m;
    pthread_mutex_lock(&s->mu);
    sv_sched_metrics(s->sched, &m);
    pthread_mutex_unlock(&s->mu);
    char *b = malloc(4096);
    if (!b) return MHD_NO;
    const int n = snprintf(b, 4096,
        "# HELP nibble_requests_total Completion requests accepted.\n# TYPE nibble_requests_total counter\n"
        "nibble_requests_total %lld\n"
        "# HELP nibble_prompt_tokens_total Prompt tokens evaluated.\n# TYPE nibble_prompt_tokens_total counter\n"
        "nibble_prompt_tokens_total %lld\n"
        "# HELP nibble_prompt_tokens_reused_total Prompt tokens a slot already held (not evaluated).\n"
        "# TYPE nibble_prompt_tokens_reused_total counter\nnibble_prompt_tokens_reused_total %lld\n"
        "# HELP nibble_tokens_predicted_total Tokens generated.\n# TYPE nibble_tokens_predicted_total counter\n"
        "nibble_tokens_predicted_total %lld\n"
        "# HELP nibble_prompt_tokens_seconds Prefill throughput, tokens/s.\n# TYPE nibble_prompt_tokens_seconds gauge\n"
        "nibble_prompt_tokens_seconds %.3f\n"
        "# HELP nibble_predicted_tokens_seconds Decode throughput over all slots, tokens/s.\n"
        "# TYPE nibble_predicted_tokens_seconds gauge\nnibble_predicted_tokens_seconds %.3f\n"
        "# HELP nibble_requests_processing Busy slots.\n# TYPE nibble_requests_processing gauge\n"
        "nibble_requests_processing %d\n"
        "# HELP nibble_requests_deferred Requests waiting for a slot.\n# TYPE nibble_requests_deferred gauge\n"
        "nibble_requests_deferred %d\n"
        "# HELP nibble_slots Slots.\n# TYPE nibble_slots gauge\nnibble_slots %d\n"
        "# HELP nibble_kv_cache_tokens KV cells in use over all slots.\n# TYPE nibble_kv_cache_tokens gauge\n"
        "nibble_kv_cache_tokens %d\n"
        "# HELP nibble_kv_cache_usage_ratio KV cells in use / cells.\n# TYPE nibble_kv_cache_usage_ratio gauge\n"
        "nibble_kv_cache_usage_ratio %.6f\n"
        "# HELP nibble_steps_total Batched forward passes.\n# TYPE nibble_steps_total counter\nnibble_steps_total %lld\n"
        "# HELP nibble_steps_mixed_total Passes that fed a prompt chunk beside decoding slots.\n"
        "# TYPE nibble_steps_mixed_total counter\nnibble_steps_mixed_total %lld\n",
        (long long)m.requests, (long long)m.prompt_tokens, (long long)m.reused_tokens, (long long)m.gen_tokens,
        m.t_prefill > 0 ? m.prefill_rows / m.t_prefill : 0.0, m.t_decode > 0 ? m.decode_rows / m.t_decode : 0.0,
        m.busy, m.queued, m.n_slots, m.kv_used, m.kv_cells ? (double)m.kv_used / m.kv_cells : 0.0,
        (long long)m.steps, (long long)m.mixed_steps);
    return send_body(c, 200, "text/plain; version=0.0.4", b, (size_t)n < 4096 ? (size_t)n : 4095);
}

/* ------------------------------------------------------------ routing */

/* Constant-time comparison of the bearer token with the key. */
static int authorized(const nb_server *s, struct MHD_Connection *c) {
    if (!s->api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7)) return 0;
    h += 7;
    const size_t n = strlen(s->api_key), m = strlen(h);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)s->api_key[i] ^ (unsigned char)(i < m ? h[i] : 0);
    return diff == 0;
}

static enum MHD_Result route(nb_server *s, struct MHD_Connection *c, const char *url, const char *method, request *rq) {
    const int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    static const struct { const char *path; int post; } known[] = {
        {"/health", 0}, {"/metrics", 0}, {"/v1/models", 0}, {"/models", 0}, {"/v1/chat/completions", 1},
        {"/chat/completions", 1}, {"/v1/completions", 1}, {"/completions", 1}, {"/tokenize", 1}, {"/detokenize", 1},
    };
    int k = -1;
    for (int i = 0; i < (int)(sizeof known / sizeof known[0]); i++)
        if (!strcmp(url, known[i].path)) k = i;
    if (k < 0) return send_error(c, 404, "no such route");
    if (known[k].post ? !post : !get) return send_error(c, 405, known[k].post ? "use POST" : "use GET");
    pthread_mutex_lock(&s->mu);
    const int ready = s->ready;
    pthread_mutex_unlock(&s->mu);
    if (k == 0) {
        static const char ok[] = "{\"status\":\"ok\"}";
        return ready ? send_body(c, 200, "application/json", strdup(ok), sizeof ok - 1)
                     : send_error(c, 503, "loading the model");
    }
    if (!authorized(s, c)) return send_error(c, 401, "a valid API key is required (Authorization: Bearer KEY)");
    if (!ready) return send_error(c, 503, "loading the model");
    sv_reply r = {0};
    const char *b = rq->body ? rq->body : "";
    switch (k) {
    case 1: return metrics(s, c);
    case 2: case 3: sv_models(&s->sm, &r); break;
    case 4: case 5: return completion(s, c, SV_CHAT, rq);
    case 6: case 7: return completion(s, c, SV_COMPLETION, rq);
    case 8: sv_tokenize(&s->sm, b, rq->len, &r); break;
    default: sv_detokenize(&s->sm, b, rq->len, &r); break;
    }
    return send_reply(c, &r);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *size, void **state) {
    (void)version;
    nb_server *s = cls;
    request *rq = *state;
    if (!rq) { /* the headers: refuse a declared body over the bound before reading it */
        if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
        *state = rq;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > SV_MAX_BODY) {
            rq->too_big = 1;
            return send_error(c, 413, "the request body is larger than 8 MiB");
        }
        return MHD_YES;
    }
    if (*size) {
        if (!rq->too_big && *size > SV_MAX_BODY - rq->len) {
            rq->too_big = 1;
            free(rq->body);
            rq->body = NULL;
        }
        if (!rq->too_big) {
            if (rq->cap - rq->len < *size + 1) {
                size_t cap = 2 * (rq->len + *size) + 1;
                char *grown = realloc(rq->body, cap);
                if (!grown) return MHD_NO;
                rq->body = grown, rq->cap = cap;
            }
            memcpy(rq->body + rq->len, data, *size);
            rq->len += *size;
            rq->body[rq->len] = '\0';
        }
        *size = 0;
        return MHD_YES;
    }
    if (rq->too_big) return send_error(c, 413, "the request body is larger than 8 MiB");
    return route(s, c, url, method, rq);
}

/* After the reply is sent, or the connection failed. */
static void on_completed(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode why) {
    (void)c, (void)why;
    nb_server *s = cls;
    request *rq = *state;
    if (rq && rq->replying) {
        pthread_mutex_lock(&s->mu);
        replied(s);
        pthread_mutex_unlock(&s->mu);
    }
    if (rq) free(rq->body);
    free(rq);
    *state = NULL;
}

/* ------------------------------------------------------------ start and stop */

nb_status nb_serve_start(const nb_serve_params *p, nb_server **out) {
    *out = NULL;
    struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->port)};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)p->port)};
    const struct sockaddr *addr = (const struct sockaddr *)&v4;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    if (inet_pton(AF_INET, p->host, &v4.sin_addr) != 1) {
        if (inet_pton(AF_INET6, p->host, &v6.sin6_addr) != 1)
            return nb_fail(NB_ERR_INVALID_ARG, "serve: --host '%s' is not a numeric IPv4 or IPv6 address", p->host);
        addr = (const struct sockaddr *)&v6;
        flags |= MHD_USE_IPv6;
    }
    nb_server *s = calloc(1, sizeof *s);
    if (!s || pthread_mutex_init(&s->mu, NULL) || pthread_cond_init(&s->idle, NULL)) {
        free(s);
        return nb_fail(NB_ERR_NOMEM, "serve: out of memory");
    }
    if (p->api_key && !(s->api_key = strdup(p->api_key))) {
        nb_serve_stop(s);
        return nb_fail(NB_ERR_NOMEM, "serve: out of memory");
    }
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)p->timeout_s,
                            MHD_OPTION_CONNECTION_LIMIT, 256u, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 << 10,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
    if (!s->d) {
        const int e = errno;
        nb_serve_stop(s);
        return nb_fail(NB_ERR_IO, "serve: cannot listen on %s port %d: %s", p->host, p->port, strerror(e));
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : p->port;
    nb_status st = nb_model_load(p->model, &s->m);
    int tmpl = 0;
    if (!st) st = p->chat_template ? (tmpl = nb_chat_template_find(p->chat_template)) < 0
                                         ? nb_fail(NB_ERR_INVALID_ARG, "serve: no chat template '%s'", p->chat_template)
                                         : NB_OK
                                   : nb_gguf_chat_template(nb_model_gguf(s->m), &tmpl);
    const int n_ctx = s->m && !p->n_ctx ? nb_model_get_info(s->m)->n_ctx_train : p->n_ctx;
    nb_serve_params q = *p;
    q.n_ctx = n_ctx;
    if (!st) st = sv_sched_create(s->m, &q, &s->mu, &s->sched);
    if (st) {
        nb_serve_stop(s);
        return st;
    }
    const char *base = strrchr(p->model, '/');
    snprintf(s->name, sizeof s->name, "%s", base ? base + 1 : p->model);
    s->sm = (sv_model){nb_model_tokenizer(s->m), tmpl, n_ctx, s->name};
    pthread_mutex_lock(&s->mu);
    s->ready = 1;
    pthread_mutex_unlock(&s->mu);
    *out = s;
    return NB_OK;
}

void nb_serve_stop(nb_server *s) {
    if (!s) return;
    if (s->d) MHD_quiesce_daemon(s->d); /* no new connections */
    sv_sched_stop(s->sched);            /* every job finishes: waiting connections answer */
    struct timespec t;                  /* ... and are given 10 s to send it */
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += 10;
    pthread_mutex_lock(&s->mu);
    while (s->replying > 0 && pthread_cond_timedwait(&s->idle, &s->mu, &t) == 0) {}
    pthread_mutex_unlock(&s->mu);
    if (s->d) MHD_stop_daemon(s->d);
    sv_sched_free(s->sched);
    nb_model_free(s->m);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    free(s->api_key);
    free(s);
}
