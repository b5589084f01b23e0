/*
 * serve.c: `nibble serve`, an OpenAI-compatible HTTP server (src/serve/, llama-server's flag
 * names). This file parses flags, starts the server, prints one line when it is ready, and waits
 * for SIGINT or SIGTERM, which cancel what is running (every client gets its reply so far) and exit
 * 0. The signals are blocked before any thread starts, so only sigwait here receives them.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "serve/serve.h"

static const char USAGE[] =
    "usage: nibble serve -m MODEL [options]\n"
    "  -m, --model FILE          the GGUF model\n"
    "  --host ADDR               numeric address to bind (default 127.0.0.1; 0.0.0.0 listens everywhere)\n"
    "  --port N                  port (default 8080; 0: any free port, printed)\n"
    "  -np, --parallel N         slots: requests decoded together in one batch (default 4)\n"
    "  -c, --ctx-size N          context per slot (default 4096; 0: the model's training context)\n"
    "  -b, --batch-size N        rows per step: prompt chunks plus every slot's next token (default 512)\n"
    "  -t, --threads N           threads (default: all CPUs)\n"
    "  --api-key KEY             require 'Authorization: Bearer KEY' (every route but /health)\n"
    "  --chat-template NAME      the template of /v1/chat/completions instead of the file's\n"
    ARG_CACHE_USAGE
    "  --kv T                    both cache types at once (-ctk T -ctv T)\n"
    "  --timeout S               close a connection idle for S seconds (default 600)\n"
    "  --queue N                 requests waiting for a slot before 503 (default 64)\n"
    "  --no-fast-batch           steps of several slots keep llama.cpp's orders (slower; by default they sum\n"
    "                            each weight block exactly, then round once)\n"
    "  -ngl N                    accepted and ignored (nibble runs on the CPU)\n"
    "Endpoints: POST /v1/chat/completions, /v1/completions, /tokenize, /detokenize;\n"
    "GET /v1/models, /health, /metrics. SIGINT/SIGTERM cancel running requests and exit 0.\n";

int cmd_serve(int argc, char **argv) {
    nb_serve_params p = nb_serve_default_params();
    int kv = -1, exact_batch = 0;
    arg_cache cache = {0};
    arg_opt opts[] = {
        OPT_STR("-m|--model", &p.model),
        OPT_STR("--host", &p.host),
        OPT_INT("--port", &p.port, 0, 65535),
        OPT_INT("-np|--parallel", &p.n_slots, 1, NB_BATCH_MAX_SEQ),
        OPT_INT("-c|--ctx-size", &p.n_ctx, 0, 1 << 24),
        OPT_INT("-b|--batch-size", &p.n_batch, 1, 4096),
        OPT_THREADS(&p.n_threads),
        OPT_STR("--api-key", &p.api_key),
        OPT_STR("--chat-template", &p.chat_template),
        OPT_CACHE(&cache),
        OPT_CHOICE("--kv", &kv, ARG_CACHE_TYPES),
        OPT_INT("--timeout", &p.timeout_s, 1, 86400),
        OPT_INT("--queue", &p.n_queue, 1, 1 << 16),
        OPT_FLAG("--no-fast-batch", &exact_batch),
        OPT_NGL,
    };
    arg_spec spec = ARG_SPEC("serve", USAGE, opts, NULL, 0);
    int rc = arg_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    if (!p.model) return arg_usage_error(&spec, "-m MODEL is required");
    if (p.chat_template && nb_chat_template_find(p.chat_template) < 0)
        return arg_usage_error(&spec, "--chat-template '%s' is none of %s", arg_safe(0, p.chat_template),
                               nb_chat_template_list());
    if (p.api_key && !*p.api_key) return arg_usage_error(&spec, "--api-key is empty");
    if (kv >= 0) cache.k = cache.v = kv;
    arg_cache_apply(&cache, &p.slot);
    if (exact_batch) p.slot.fast_batch = 0;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-reply is an error of that write, not of the process */
    nb_server *s;
    nb_status st = nb_serve_start(&p, &s);
    if (st) return arg_status(st);
    printf("nibble serve: listening on http://%s%s%s:%d/ (model %s, %d slot%s, context %d each)\n",
           strchr(p.host, ':') ? "[" : "", p.host, strchr(p.host, ':') ? "]" : "", nb_serve_port(s),
           arg_safe(0, nb_serve_model_name(s)), p.n_slots, nb_plural(p.n_slots), nb_serve_n_ctx(s));
    fflush(stdout);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "nibble serve: %s: cancelling running requests\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    nb_serve_stop(s);
    return 0;
}
