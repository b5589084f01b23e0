/*
 * serve.h: `nibble serve`, an OpenAI-compatible HTTP server over the library (what cli/serve.c
 * calls). It links libmicrohttpd (HTTP) and cJSON (JSON) and is built into the nibble binary, not
 * into libnibble: the library stays free of both.
 *
 *   http.c    the daemon (libmicrohttpd, a thread per connection): limits, the API key, routes,
 *             request bodies, waiting for a reply or streaming it as Server-Sent Events
 *   api.c     request bodies (cJSON) -> a validated job, and every response body
 *   sched.c   the slots (one nb_ctx each, one shared pool), the queue, and the scheduler thread
 *             that steps every active slot through one nb_batch_eval per step
 */
#ifndef NB_SERVE_SERVE_H
#define NB_SERVE_SERVE_H

#include <stddef.h>

#include "nibble.h"

typedef struct nb_serve_params {
    const char *model;         /* GGUF path */
    const char *host;          /* numeric IPv4 or IPv6 address to bind (default 127.0.0.1) */
    int port;                  /* 0: any free port (nb_serve_port says which) */
    int n_slots;               /* sequences decoded together (-np, default 4) */
    int n_ctx;                 /* positions per slot (-c, default 4096; 0: the training context) */
    int n_batch;               /* rows per step (-b, default 512) */
    int n_threads;             /* <= 0: one per CPU */
    nb_ctx_params slot;        /* the slots' -ctk, -ctv, -fa, --swa-full, --fast-prefill, fast_batch
                                * (default 1; --no-fast-batch); their n_ctx, n_batch and pool come from
                                * the fields here */
    int n_queue;               /* requests waiting for a slot before 503 (default 64) */
    int timeout_s;             /* idle seconds before a connection is closed (default 600) */
    const char *api_key;       /* NULL: none */
    const char *chat_template; /* a template name, NULL: the file's */
} nb_serve_params;

typedef struct nb_server nb_server;

nb_serve_params nb_serve_default_params(void);
/* Binds the address (GET /health answers 503 while the model loads), loads the model, creates the
 * slots and starts the scheduler. Fails with the library's status and message. */
nb_status nb_serve_start(const nb_serve_params *p, nb_server **out);
int nb_serve_port(const nb_server *s);
int nb_serve_n_ctx(const nb_server *s); /* positions per slot (-c 0 resolved) */
const char *nb_serve_model_name(const nb_server *s);
/* Cancels every running and queued request (each gets its reply: what was generated, or 503 for
 * a queued one), closes every connection, and frees the server. */
void nb_serve_stop(nb_server *s);

#endif
