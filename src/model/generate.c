/*
 * generate.c: one sequence's generation, stepped token by token (nibble.h, "generation"), and the
 * loop that runs one sequence on one context. The reply's text is kept whole (released + held);
 * `released` bytes of it have been handed out, and no stop string starts before that point: what
 * is held is always the longest end of the reply that is a proper prefix of a stop string, or an
 * incomplete UTF-8 character, so a stop string is searched for only in the unreleased part.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/threads.h"
#include "model/context.h"
#include "nibble.h"

struct nb_gen {
    const nb_tokenizer *tok;
    nb_sampler *smp;
    nb_gen_params prm;
    char *stop[NB_GEN_MAX_STOPS];
    size_t stop_len[NB_GEN_MAX_STOPS];
    char *reply;                      /* the reply's text, released then held */
    size_t len, cap, released;
    size_t out_from, out_len;         /* what the last call released: reply[out_from, +out_len) */
    int64_t n_reply;                  /* tokens of this reply */
    int32_t last;                     /* the token the last step sampled, or -1 */
    nb_stop stopped;
    nb_gen_stats st;
    int first_end;                    /* nb_generate: the position after its first prompt, or -1 */
    float *logits;                    /* nb_generate's, n_logits floats */
    int n_logits;
};

nb_gen_params nb_gen_default_params(void) { return (nb_gen_params){.n_predict = -1}; }

nb_status nb_gen_create(const nb_tokenizer *tok, nb_sampler *smp, const nb_gen_params *p, nb_gen **out) {
    *out = NULL;
    if (!tok || !smp || !p) return nb_fail(NB_ERR_INVALID_ARG, "generate: no tokenizer, sampler or parameters");
    if (p->n_stop < 0 || p->n_stop > NB_GEN_MAX_STOPS)
        return nb_fail(NB_ERR_RANGE, "generate: %d stop strings, outside [0, %d]", p->n_stop, NB_GEN_MAX_STOPS);
    if (p->n_stop && !p->stop) return nb_fail(NB_ERR_INVALID_ARG, "generate: %d stop strings and no array", p->n_stop);
    for (int i = 0; i < p->n_stop; i++) {
        const size_t n = p->stop[i] ? strnlen(p->stop[i], NB_GEN_MAX_STOP_BYTES + 1) : 0;
        if (n < 1 || n > NB_GEN_MAX_STOP_BYTES)
            return nb_fail(NB_ERR_RANGE, "generate: stop string %d is %s (1 to %d bytes)", i, n ? "too long" : "empty",
                           NB_GEN_MAX_STOP_BYTES);
    }
    nb_gen *g = calloc(1, sizeof *g);
    if (!g) return nb_fail(NB_ERR_NOMEM, "generate: out of memory");
    g->tok = tok, g->smp = smp, g->prm = *p, g->last = -1, g->first_end = -1;
    g->prm.stop = NULL;
    for (int i = 0; i < p->n_stop; i++) {
        g->stop_len[i] = strlen(p->stop[i]);
        if (!(g->stop[i] = malloc(g->stop_len[i]))) {
            nb_gen_free(g);
            return nb_fail(NB_ERR_NOMEM, "generate: out of memory for the stop strings");
        }
        memcpy(g->stop[i], p->stop[i], g->stop_len[i]);
    }
    *out = g;
    return NB_OK;
}

void nb_gen_free(nb_gen *g) {
    if (!g) return;
    for (int i = 0; i < g->prm.n_stop; i++) free(g->stop[i]);
    free(g->reply);
    free(g->logits);
    free(g);
}

void nb_gen_restart(nb_gen *g) {
    g->len = g->released = g->out_from = g->out_len = 0;
    g->n_reply = 0;
    g->last = -1;
    g->stopped = NB_STOP_NONE;
}

void nb_gen_prompt(nb_gen *g, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) nb_sampler_accept(g->smp, ids[i]);
}

nb_stop nb_gen_stopped(const nb_gen *g) { return g->stopped; }
const nb_gen_stats *nb_gen_get_stats(const nb_gen *g) { return &g->st; }

const char *nb_gen_text(const nb_gen *g, size_t *len) {
    *len = g->out_len;
    return g->out_len ? g->reply + g->out_from : "";
}

const char *nb_gen_reply(const nb_gen *g, size_t *len) {
    *len = g->released;
    return g->released ? g->reply : "";
}

/* Releases reply[released, to) as this call's text (following what this call released before). */
static void release(nb_gen *g, size_t to) {
    if (!g->out_len) g->out_from = g->released;
    g->out_len += to - g->released;
    g->released = to;
}

void nb_gen_cancel(nb_gen *g) {
    if (g->stopped) return;
    g->out_len = 0;
    release(g, g->len);
    g->stopped = NB_STOP_CANCEL;
}

/* Bytes at the end of s[0, n) that begin a UTF-8 character still missing bytes. */
static size_t utf8_incomplete(const char *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        const unsigned char c = (unsigned char)s[n - k];
        if ((c & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        const size_t need = c >= 0xF8 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > k ? k : 0;
    }
    return 0;
}

/* Appends token id's piece to the reply. */
static nb_status append_piece(nb_gen *g, int32_t id) {
    for (size_t want = 256;;) {
        if (g->cap - g->len < want) {
            if (want > SIZE_MAX / 2 - g->len) return nb_fail(NB_ERR_OVERFLOW, "generate: the reply outgrew memory");
            size_t cap = 2 * (g->len + want);
            char *grown = realloc(g->reply, cap);
            if (!grown) return nb_fail(NB_ERR_NOMEM, "generate: out of memory for a reply of %zu bytes", g->len);
            g->reply = grown, g->cap = cap;
        }
        size_t n;
        nb_status s = nb_token_to_piece(g->tok, id, g->reply + g->len, g->cap - g->len, &n, 0);
        if (s == NB_OK) return g->len += n, NB_OK;
        if (s != NB_ERR_RANGE) return s;
        want = n;
    }
}

/* After a piece joined the reply: stop at the first stop string, else release what is decided. */
static void settle(nb_gen *g) {
    const char *u = g->reply + g->released;
    const size_t n = g->len - g->released;
    size_t first = n, hold = 0;
    for (int i = 0; i < g->prm.n_stop; i++) {
        const char *at = memmem(u, n, g->stop[i], g->stop_len[i]);
        if (at && (size_t)(at - u) < first) first = (size_t)(at - u);
        for (size_t k = g->stop_len[i] - 1 < n ? g->stop_len[i] - 1 : n; k > hold; k--)
            if (!memcmp(u + n - k, g->stop[i], k)) {
                hold = k;
                break;
            }
    }
    if (first < n) {
        release(g, g->released + first);
        g->len = g->released;
        g->stopped = NB_STOP_STRING;
        return;
    }
    const size_t part = utf8_incomplete(u, n);
    release(g, g->len - (part > hold ? part : hold));
}

nb_status nb_gen_step(nb_gen *g, const float *logits, int room, int32_t *tok) {
    *tok = -1;
    g->out_len = 0;
    g->last = -1;
    if (g->stopped) return nb_fail(NB_ERR_INVALID_ARG, "generate: the reply has stopped; restart it first");
    if (!logits) return nb_fail(NB_ERR_INVALID_ARG, "generate: no logits");
    if (g->prm.n_predict >= 0 && g->n_reply >= g->prm.n_predict) {
        g->stopped = NB_STOP_LENGTH;
        return NB_OK;
    }
    const int32_t id = g->last = nb_sampler_sample(g->smp, logits);
    if (!g->prm.ignore_eos && nb_tokenizer_is_eog(g->tok, id)) {
        release(g, g->len);
        g->stopped = NB_STOP_EOG;
        return NB_OK;
    }
    nb_status s = append_piece(g, id);
    if (s) return s;
    nb_sampler_accept(g->smp, id);
    g->n_reply++, g->st.n_gen++;
    settle(g);
    if (room > 0) *tok = id;
    if (g->stopped) return NB_OK;
    if (room <= 0) g->stopped = NB_STOP_CONTEXT;
    else if (g->prm.n_predict >= 0 && g->n_reply >= g->prm.n_predict) g->stopped = NB_STOP_LENGTH;
    if (g->stopped) release(g, g->len);
    return NB_OK;
}

nb_status nb_generate(nb_ctx *c, nb_gen *g, const int32_t *prompt, size_t n, const nb_gen_io *io) {
    if (!n || !prompt) return nb_fail(NB_ERR_INVALID_ARG, "generate: no prompt tokens");
    if (n > INT_MAX) return nb_fail(NB_ERR_RANGE, "generate: a prompt of %zu tokens", n);
    const int n_vocab = nb_model_get_info(nb_ctx_model(c))->n_vocab;
    if (g->n_logits != n_vocab) {
        free(g->logits);
        g->n_logits = 0;
        if (!(g->logits = malloc(sizeof(float) * (size_t)n_vocab)))
            return nb_fail(NB_ERR_NOMEM, "generate: out of memory for %d logits", n_vocab);
        g->n_logits = n_vocab;
    }
    const nb_gen_io none = {0};
    if (!io) io = &none;
    nb_gen_restart(g);
    nb_gen_prompt(g, prompt, n);
    const double t0 = nb_clock_s();
    nb_status s = nb_ctx_eval(c, prompt, (int)n, g->logits, 0);
    if (s) return s;
    if (g->first_end < 0) g->first_end = nb_ctx_pos(c);
    const double t1 = nb_clock_s();
    g->st.t_prompt += t1 - t0;
    g->st.n_prompt += (int64_t)n;
    while (!g->stopped) { /* a token's text goes out before it is fed; a cancel keeps it fed */
        int32_t id = -1;
        const int pos = nb_ctx_pos(c), want = g->prm.n_keep < 0 ? g->first_end : g->prm.n_keep;
        const int keep = want < pos ? want : pos;
        if (g->prm.context_shift && pos == nb_ctx_n_ctx(c) && (pos - keep) / 2 >= 1) {
            if ((s = nb_ctx_shift(c, keep, (pos - keep) / 2))) break;
            g->st.n_shift++;
        }
        if (io->cancelled && io->cancelled(io->user)) nb_gen_cancel(g);
        else if ((s = nb_gen_step(g, g->logits, nb_ctx_n_ctx(c) - nb_ctx_pos(c), &id))) break;
        if (g->last >= 0 && !g->st.t_first) g->st.t_first = nb_clock_s() - t0;
        size_t len;
        const char *text = nb_gen_text(g, &len);
        const int stop = len && io->on_text && io->on_text(io->user, text, len);
        if (id >= 0 && (s = nb_ctx_eval(c, &id, 1, g->logits, 0))) break;
        if (stop && !g->stopped) {
            nb_gen_cancel(g);
            if ((text = nb_gen_text(g, &len)), len) io->on_text(io->user, text, len);
        }
    }
    g->st.t_gen += nb_clock_s() - t1;
    return s;
}
