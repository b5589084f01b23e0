/*
 * conv.c: a multi-turn chat held on one context (nb_conv, nibble.h "conversation"): the turns as
 * text, and for each new user message the tokens it adds to the context.
 *
 * After a reply the context holds the reply as generated: its end-of-turn token was sampled, not
 * fed. The next turn then adds the template's text after that reply, found by rendering the
 * conversation with REPLY_MARK as the reply and cutting the rendering after the mark; whatever a
 * template writes before a reply's content beyond the assistant opening is lost (the reply was
 * generated without it). A rendering that does not begin with the one that ends where the reply
 * begins (a template that rewrites earlier turns) rebuilds the context instead.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "nibble.h"

typedef struct turn {
    char *user, *reply; /* reply: NULL until nb_conv_add_reply */
} turn;

struct nb_conv {
    const nb_tokenizer *tok;
    int tmpl;
    char *system;  /* NULL: none */
    turn *turns;   /* the conversation's n turns, oldest first */
    int n, cap;
    int32_t *ids;  /* the last prompt's */
    size_t ids_cap;
};

/* Stands for a reply in a rendering, to find where the template's text after a reply begins. */
static const char REPLY_MARK[] = "\x01nibble reply\x02";

nb_status nb_conv_create(const nb_tokenizer *tok, int tmpl, const char *system, nb_conv **out) {
    if (!out) return nb_fail(NB_ERR_INVALID_ARG, "conversation: NULL result");
    *out = NULL;
    if (!tok) return nb_fail(NB_ERR_INVALID_ARG, "conversation: NULL tokenizer");
    if (!nb_chat_template_name(tmpl))
        return nb_fail(NB_ERR_INVALID_ARG, "conversation: template %d (0 to %d)", tmpl, nb_chat_template_count() - 1);
    nb_conv *cv = calloc(1, sizeof *cv);
    if (!cv || (system && !(cv->system = strdup(system)))) {
        free(cv);
        return nb_fail(NB_ERR_NOMEM, "conversation: out of memory");
    }
    cv->tok = tok, cv->tmpl = tmpl;
    *out = cv;
    return NB_OK;
}

void nb_conv_free(nb_conv *cv) {
    if (!cv) return;
    for (int i = 0; i < cv->n; i++) free(cv->turns[i].user), free(cv->turns[i].reply);
    free(cv->turns);
    free(cv->system);
    free(cv->ids);
    free(cv);
}

int nb_conv_turns(const nb_conv *cv) { return cv ? cv->n : 0; }

/* The template's text of msgs (NUL-terminated, to free) into *text. */
static nb_status render(const nb_conv *cv, const nb_chat_msg *msgs, size_t n, char **text, size_t *len) {
    *text = NULL;
    nb_status s = nb_chat_apply(cv->tmpl, msgs, n, 1, NULL, 0, len);
    if (s && !(s == NB_ERR_RANGE && *len)) return s;
    if (!(*text = malloc(*len + 1))) return nb_fail(NB_ERR_NOMEM, "conversation: out of memory for %zu bytes", *len);
    if ((s = nb_chat_apply(cv->tmpl, msgs, n, 1, *text, *len, len))) {
        free(*text);
        *text = NULL;
        return s;
    }
    (*text)[*len] = '\0';
    return NB_OK;
}

/* The messages of turns from..to-1 after the system text: each user text and, but for the last
 * turn, its reply. Returns the count; msgs holds 1 + 2 (to - from) + 2. */
static size_t messages(const nb_conv *cv, nb_chat_msg *msgs, int from, int to) {
    size_t k = 0;
    if (cv->system) msgs[k++] = (nb_chat_msg){"system", cv->system};
    for (int i = from; i < to; i++) {
        msgs[k++] = (nb_chat_msg){"user", cv->turns[i].user};
        if (i < to - 1) msgs[k++] = (nb_chat_msg){"assistant", cv->turns[i].reply ? cv->turns[i].reply : ""};
    }
    return k;
}

/* The text that turns from..n-1 add to the context, the last one awaiting its reply: with `fresh`
 * (the text starts the context) the whole conversation; else the text after the previous reply
 * (*text NULL when the renderings do not line up: see the file's comment). */
static nb_status turn_text(const nb_conv *cv, int from, int fresh, char **text, size_t *len) {
    *text = NULL;
    nb_chat_msg *msgs = malloc(sizeof *msgs * (3 + 2 * (size_t)(cv->n - from)));
    if (!msgs) return nb_fail(NB_ERR_NOMEM, "conversation: out of memory for %d turns", cv->n - from);
    nb_status s;
    if (fresh) s = render(cv, msgs, messages(cv, msgs, from, cv->n), text, len);
    else {
        size_t k = messages(cv, msgs, from, cv->n - 1), n_before;
        char *before;
        if (!(s = render(cv, msgs, k, &before, &n_before))) {
            msgs[k++] = (nb_chat_msg){"assistant", REPLY_MARK};
            msgs[k++] = (nb_chat_msg){"user", cv->turns[cv->n - 1].user};
            const char *mark = NULL;
            if (!(s = render(cv, msgs, k, text, len)) && *len >= n_before && !memcmp(*text, before, n_before))
                mark = memmem(*text + n_before, *len - n_before, REPLY_MARK, sizeof REPLY_MARK - 1);
            if (mark) {
                const size_t skip = (size_t)(mark - *text) + sizeof REPLY_MARK - 1;
                *len -= skip;
                memmove(*text, *text + skip, *len + 1);
            } else {
                free(*text);
                *text = NULL;
            }
            free(before);
        }
    }
    free(msgs);
    return s;
}

static nb_status tokenize(nb_conv *cv, const char *text, size_t len, int add_bos, size_t *n) {
    for (;;) {
        nb_status s = nb_tokenize(cv->tok, text, len, add_bos, 1, cv->ids, cv->ids_cap, n);
        if (s != NB_ERR_RANGE || *n <= cv->ids_cap) return s;
        int32_t *grown = realloc(cv->ids, sizeof *grown * *n);
        if (!grown) return nb_fail(NB_ERR_NOMEM, "conversation: out of memory for %zu token ids", *n);
        cv->ids = grown, cv->ids_cap = *n;
    }
}

/* The oldest k turns leave the conversation for good. */
static void forget_turns(nb_conv *cv, int k) {
    for (int i = 0; i < k; i++) free(cv->turns[i].user), free(cv->turns[i].reply);
    memmove(cv->turns, cv->turns + k, sizeof *cv->turns * (size_t)(cv->n - k));
    cv->n -= k;
}

/* The tokens of the newest turn (cv->n - 1), rebuilding c when they do not fit (see nibble.h). */
static nb_status plan(nb_conv *cv, nb_ctx *c, int reserve, const int32_t **ids, size_t *n, int *dropped) {
    const int n_ctx = nb_ctx_n_ctx(c);
    int fresh = nb_ctx_pos(c) == 0, from = 0, reset = 0;
    for (;;) {
        char *text;
        size_t len;
        nb_status s = turn_text(cv, from, fresh, &text, &len);
        if (s) return s;
        if (text) {
            s = tokenize(cv, text, len, fresh, n);
            free(text);
            if (s) return s;
            if ((long)*n + reserve <= n_ctx - (reset ? 0 : nb_ctx_pos(c))) break;
            if (fresh && from == cv->n - 1)
                return nb_fail(NB_ERR_RANGE,
                               "conversation: the message is %zu token%s; with %d kept for the reply the context "
                               "of %d holds %d",
                               *n, *n == 1 ? "" : "s", reserve, n_ctx, n_ctx - reserve);
        }
        if (!fresh) fresh = reset = 1;
        else from++;
    }
    if (reset) nb_ctx_reset(c);
    forget_turns(cv, *dropped = from);
    *ids = cv->ids;
    return NB_OK;
}

nb_status nb_conv_prompt(nb_conv *cv, nb_ctx *c, const char *user, int reserve, const int32_t **ids, size_t *n,
                         int *dropped) {
    if (!cv || !c || !user || !ids || !n || !dropped)
        return nb_fail(NB_ERR_INVALID_ARG, "conversation: NULL argument");
    *ids = NULL, *n = 0, *dropped = 0;
    if (reserve < 0 || reserve >= nb_ctx_n_ctx(c))
        return nb_fail(NB_ERR_INVALID_ARG, "conversation: %d tokens kept for a reply in a context of %d", reserve,
                       nb_ctx_n_ctx(c));
    if (cv->n == cv->cap) {
        const int cap = cv->cap ? 2 * cv->cap : 16;
        if (cap > NB_CHAT_MAX_MESSAGES / 2)
            return nb_fail(NB_ERR_RANGE, "conversation: more than %d turns", NB_CHAT_MAX_MESSAGES / 2);
        turn *grown = realloc(cv->turns, sizeof *grown * (size_t)cap);
        if (!grown) return nb_fail(NB_ERR_NOMEM, "conversation: out of memory for %d turns", cap);
        cv->turns = grown, cv->cap = cap;
    }
    if (!(cv->turns[cv->n].user = strdup(user))) return nb_fail(NB_ERR_NOMEM, "conversation: out of memory");
    cv->turns[cv->n++].reply = NULL;
    nb_status s = plan(cv, c, reserve, ids, n, dropped);
    if (s) { /* the conversation as it was; the context too (it is reset only once a plan fits) */
        free(cv->turns[--cv->n].user);
        *ids = NULL, *n = 0;
    }
    return s;
}

nb_status nb_conv_add_reply(nb_conv *cv, const char *reply, size_t len) {
    if (!cv || (!reply && len)) return nb_fail(NB_ERR_INVALID_ARG, "conversation: NULL argument");
    if (!cv->n || cv->turns[cv->n - 1].reply)
        return nb_fail(NB_ERR_INVALID_ARG, "conversation: no message awaits a reply");
    char *r = malloc(len + 1);
    if (!r) return nb_fail(NB_ERR_NOMEM, "conversation: out of memory for a reply of %zu bytes", len);
    if (len) memcpy(r, reply, len);
    r[len] = '\0';
    cv->turns[cv->n - 1].reply = r;
    return NB_OK;
}
