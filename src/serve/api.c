/*
 * api.c: OpenAI's request and response shapes (and llama-server's /tokenize, /detokenize). Bodies
 * are parsed by cJSON; every field this server reads is checked for its type and range, and a
 * failure is a 400 naming the field; fields it does not know are ignored. Strings the model sees
 * must be UTF-8. Responses are built as cJSON trees and printed, so every string is escaped by the
 * library; generated text that is not UTF-8 goes out with U+FFFD in place of each bad byte.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/internal.h"

/* ------------------------------------------------------------ replies */

static void set_json(sv_reply *r, int status, cJSON *root) {
    r->status = status;
    r->type = "application/json";
    r->body = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!r->body) { /* out of memory: a fixed body */
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}";
        r->status = 500;
        r->body = strdup(oom);
    }
    r->len = r->body ? strlen(r->body) : 0;
}

static const char *error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 503: return "unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

void sv_error(sv_reply *r, int status, const char *param, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", error_type(status));
    if (param) cJSON_AddStringToObject(e, "param", param);
    else cJSON_AddNullToObject(e, "param");
    cJSON_AddNumberToObject(e, "code", status);
    set_json(r, status, root);
}

/* Length of the valid UTF-8 character at s[0, n), or 0 (overlong forms, surrogates and code
 * points past U+10FFFF are not valid). */
static size_t utf8_char(const unsigned char *s, size_t n) {
    if (s[0] < 0x80) return 1;
    const size_t k = s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 && s[0] < 0xE0 ? 2 : 0;
    if (!k || k > n || s[0] > 0xF4) return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (k == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0))) return 0;
    if (k == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))) return 0;
    return k;
}

static int utf8_valid(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const size_t k = utf8_char((const unsigned char *)s + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

/* A NUL-terminated copy of s[0, n) with every byte outside a valid UTF-8 character as U+FFFD. */
static char *utf8_clean(const char *s, size_t n) {
    char *out = malloc(3 * n + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n;) {
        const size_t k = utf8_char((const unsigned char *)s + i, n - i);
        if (k) memcpy(o, s + i, k), o += k, i += k;
        else memcpy(o, "\xEF\xBF\xBD", 3), o += 3, i++;
    }
    *o = '\0';
    return out;
}

/* Adds s[0, n) as a string member (cleaned of bad UTF-8). */
static void add_text(cJSON *obj, const char *key, const char *s, size_t n) {
    char *t = utf8_clean(s, n);
    cJSON_AddStringToObject(obj, key, t ? t : "");
    free(t);
}

/* ------------------------------------------------------------ fields */

/* A failed check: the reply is filled, the parse stops. */
typedef struct parse {
    sv_reply *err;
    int failed;
} parse;

static int bad(parse *p, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(parse *p, const char *field, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sv_error(p->err, 400, field, "'%s' %s", field, msg);
    p->failed = 1;
    return 0;
}

/* Optional members: absent or null keeps *v; 1 when set. */
static int get_number(parse *p, const cJSON *o, const char *key, double lo, double hi, double *v) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (p->failed || !x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsNumber(x)) return bad(p, key, "must be a number");
    if (!(x->valuedouble >= lo && x->valuedouble <= hi)) return bad(p, key, "%g is outside [%g, %g]", x->valuedouble, lo, hi);
    *v = x->valuedouble;
    return 1;
}

static int get_int(parse *p, const cJSON *o, const char *key, double lo, double hi, int64_t *v) {
    double d = 0;
    if (!get_number(p, o, key, lo, hi, &d)) return 0;
    if (d != floor(d)) return bad(p, key, "must be an integer, not %g", d);
    *v = (int64_t)d;
    return 1;
}

static int get_float(parse *p, const cJSON *o, const char *key, double lo, double hi, float *v) {
    double d = 0;
    if (!get_number(p, o, key, lo, hi, &d)) return 0;
    *v = (float)d;
    return 1;
}

static int get_bool(parse *p, const cJSON *o, const char *key, int *v) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
    if (p->failed || !x || cJSON_IsNull(x)) return 0;
    if (!cJSON_IsBool(x)) return bad(p, key, "must be true or false");
    *v = cJSON_IsTrue(x);
    return 1;
}

/* A string member that must be UTF-8 (field: its name in messages). */
static const char *get_text(parse *p, const cJSON *x, const char *field) {
    if (!cJSON_IsString(x)) return bad(p, field, "must be a string"), NULL;
    if (!utf8_valid(x->valuestring, strlen(x->valuestring))) return bad(p, field, "is not valid UTF-8"), NULL;
    return x->valuestring;
}

/* ------------------------------------------------------------ jobs */

void sv_job_free(sv_job *j) {
    if (!j) return;
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->prompt);
    free(j->text);
    free(j->lp);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* Tokenizes text into j->prompt (BOS as the vocabulary wants, special tokens parsed: as
 * `nibble run`). */
static int tokenize_prompt(parse *p, const sv_model *m, sv_job *j, const char *text, size_t len, const char *field) {
    size_t cap = NB_TOKENIZE_MAX_IDS(len), n;
    if (!(j->prompt = malloc(sizeof(int32_t) * cap))) return bad(p, field, "is too long (out of memory)");
    nb_status s = nb_tokenize(m->tok, text, len, 1, 1, j->prompt, cap, &n);
    if (s) return bad(p, field, "cannot be tokenized: %s", nb_last_error());
    j->n_prompt = (int)n;
    return 1;
}

/* The chat messages, rendered in the template and tokenized. */
static int chat_prompt(parse *p, const sv_model *m, const cJSON *root, sv_job *j) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!cJSON_IsArray(msgs)) return bad(p, "messages", "must be an array of messages");
    const int n = cJSON_GetArraySize(msgs);
    if (n < 1 || n > SV_MAX_MESSAGES) return bad(p, "messages", "holds %d messages (1 to %d)", n, SV_MAX_MESSAGES);
    nb_chat_msg *cm = calloc((size_t)n, sizeof *cm);
    char **parts = calloc((size_t)n, sizeof *parts); /* contents joined from arrays of text parts */
    int k = 0, ok = cm && parts;
    if (!ok) bad(p, "messages", "too many (out of memory)");
    char field[64];
    for (const cJSON *msg = msgs->child; ok && msg; msg = msg->next, k++) {
        snprintf(field, sizeof field, "messages[%d]", k);
        if (!cJSON_IsObject(msg)) {
            ok = bad(p, field, "must be an object");
            break;
        }
        snprintf(field, sizeof field, "messages[%d].role", k);
        if (!(cm[k].role = get_text(p, cJSON_GetObjectItemCaseSensitive(msg, "role"), field))) ok = 0;
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(msg, "content");
        snprintf(field, sizeof field, "messages[%d].content", k);
        if (!ok) break;
        if (!c || cJSON_IsNull(c)) {
            cm[k].content = "";
        } else if (cJSON_IsArray(c)) { /* [{"type": "text", "text": ...}, ...], joined */
            size_t at = 0;
            for (const cJSON *part = c->child; ok && part; part = part->next) {
                const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
                if (!cJSON_IsObject(part) || !cJSON_IsString(t)) {
                    ok = bad(p, field, "parts must be objects with a string 'text'");
                    break;
                }
                const size_t n_t = strlen(t->valuestring);
                char *grown = realloc(parts[k], at + n_t + 1);
                if (!grown) {
                    ok = bad(p, field, "is too long (out of memory)");
                    break;
                }
                memcpy(grown + at, t->valuestring, n_t + 1);
                parts[k] = grown, at += n_t;
            }
            if (ok && !utf8_valid(parts[k] ? parts[k] : "", at)) ok = bad(p, field, "is not valid UTF-8");
            cm[k].content = parts[k] ? parts[k] : "";
        } else if (!(cm[k].content = get_text(p, c, field))) {
            ok = 0;
        }
    }
    size_t len = 0;
    char *text = NULL;
    if (ok) {
        nb_status s = nb_chat_apply(m->tmpl, cm, (size_t)n, 1, NULL, 0, &len);
        if ((s && !(s == NB_ERR_RANGE && len)) || !(text = malloc(len + 1)) ||
            nb_chat_apply(m->tmpl, cm, (size_t)n, 1, text, len, &len))
            ok = bad(p, "messages", "cannot be rendered: %s", nb_last_error());
    }
    if (ok) ok = tokenize_prompt(p, m, j, text, len, "messages");
    free(text);
    for (int i = 0; parts && i < n; i++) free(parts[i]);
    free(parts);
    free(cm);
    return ok;
}

/* "prompt": a string, an array holding one string, or an array of token ids. */
static int completion_prompt(parse *p, const sv_model *m, const cJSON *root, sv_job *j) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (cJSON_IsArray(x) && cJSON_GetArraySize(x) == 1 && cJSON_IsString(x->child)) x = x->child;
    if (cJSON_IsString(x)) {
        const char *t = get_text(p, x, "prompt");
        return t && tokenize_prompt(p, m, j, t, strlen(t), "prompt");
    }
    if (!cJSON_IsArray(x)) return bad(p, "prompt", "must be a string or an array of token ids");
    const int n = cJSON_GetArraySize(x), n_vocab = nb_tokenizer_n_tokens(m->tok);
    if (n > m->n_ctx) return bad(p, "prompt", "is %d tokens but the slot context holds %d", n, m->n_ctx);
    if (!(j->prompt = malloc(sizeof(int32_t) * (size_t)(n ? n : 1)))) return bad(p, "prompt", "out of memory");
    int i = 0;
    for (const cJSON *t = x->child; t; t = t->next, i++) {
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 ||
            t->valuedouble >= n_vocab)
            return bad(p, "prompt", "item %d is not a token id in [0, %d)", i, n_vocab);
        j->prompt[i] = (int32_t)t->valuedouble;
    }
    j->n_prompt = n;
    return 1;
}

static int get_stops(parse *p, const cJSON *root, sv_job *j) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (!x || cJSON_IsNull(x)) return 1;
    const cJSON *one = cJSON_IsString(x) ? x : NULL;
    if (!one && !cJSON_IsArray(x)) return bad(p, "stop", "must be a string or an array of strings");
    if (!one && cJSON_GetArraySize(x) > NB_GEN_MAX_STOPS) return bad(p, "stop", "holds more than %d strings", NB_GEN_MAX_STOPS);
    for (const cJSON *s = one ? one : x->child; s; s = one ? NULL : s->next) {
        const char *t = get_text(p, s, "stop");
        if (!t) return 0;
        if (strlen(t) > NB_GEN_MAX_STOP_BYTES) return bad(p, "stop", "strings are at most %d bytes", NB_GEN_MAX_STOP_BYTES);
        if (!*t) continue; /* an empty stop string stops nothing */
        if (!(j->stop[j->n_stop] = strdup(t))) return bad(p, "stop", "out of memory");
        j->n_stop++;
    }
    return 1;
}

int sv_parse_job(const sv_model *m, sv_kind kind, const char *body, size_t len, sv_job **out, sv_reply *err) {
    *out = NULL;
    parse p = {err, 0};
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root) {
        sv_error(err, 400, NULL, "the body is not valid JSON (at byte %zu)", end ? (size_t)(end - body) : len);
        return 400;
    }
    sv_job *j = calloc(1, sizeof *j);
    if (!j || pthread_cond_init(&j->cv, NULL)) {
        free(j);
        cJSON_Delete(root);
        sv_error(err, 500, NULL, "out of memory");
        return 500;
    }
    j->kind = kind;
    j->refs = 1;
    j->n_predict = -1;
    j->sp = nb_sampler_default_params();
    j->sp.repeat_penalty = 1.0f;
    int64_t v = 0, seed = -1, n = 1, max_tokens = -1;
    int lp_flag = 0;
    if (!cJSON_IsObject(root)) bad(&p, "body", "must be a JSON object");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!p.failed && model && !cJSON_IsNull(model) && !cJSON_IsString(model)) bad(&p, "model", "must be a string");
    get_int(&p, root, "max_tokens", -1, 2147483647.0, &max_tokens);
    get_int(&p, root, "max_completion_tokens", -1, 2147483647.0, &max_tokens);
    get_int(&p, root, "n_predict", -1, 2147483647.0, &max_tokens); /* llama-server's name */
    j->n_predict = (int)max_tokens;
    get_float(&p, root, "temperature", 0, 100, &j->sp.temp);
    get_float(&p, root, "top_p", 1e-9, 1, &j->sp.top_p);
    if (get_int(&p, root, "top_k", 0, 1 << 24, &v)) j->sp.top_k = (int)v;
    get_float(&p, root, "min_p", 0, 1, &j->sp.min_p);
    get_float(&p, root, "repeat_penalty", 1e-3, 100, &j->sp.repeat_penalty);
    if (get_int(&p, root, "repeat_last_n", 0, 1 << 20, &v)) j->sp.repeat_last_n = (int)v;
    get_float(&p, root, "presence_penalty", -2, 2, &j->presence);
    get_float(&p, root, "frequency_penalty", -2, 2, &j->frequency);
    get_int(&p, root, "seed", -9.2e18, 9.2e18, &seed);
    if (get_int(&p, root, "n", 0, 1e9, &n) && n != 1) bad(&p, "n", "is %lld; only n = 1 is supported", (long long)n);
    get_bool(&p, root, "stream", &j->stream);
    get_bool(&p, root, "ignore_eos", &j->ignore_eos);
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (!p.failed && so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so)) bad(&p, "stream_options", "must be an object");
        else get_bool(&p, so, "include_usage", &j->include_usage);
    }
    if (kind == SV_CHAT) { /* logprobs: true, top_logprobs: 0..20 */
        get_bool(&p, root, "logprobs", &lp_flag);
        if (get_int(&p, root, "top_logprobs", 0, SV_MAX_TOP_LOGPROBS, &v)) {
            if (!lp_flag && !p.failed) bad(&p, "top_logprobs", "needs 'logprobs': true");
            j->top_logprobs = (int)v;
        }
        j->logprobs = lp_flag;
    } else if (get_int(&p, root, "logprobs", 0, SV_MAX_TOP_LOGPROBS, &v)) { /* an integer: the alternatives */
        j->logprobs = 1;
        j->top_logprobs = (int)v;
    }
    if (!p.failed) get_stops(&p, root, j);
    if (!p.failed) (kind == SV_CHAT ? chat_prompt : completion_prompt)(&p, m, root, j);
    if (!p.failed && j->n_prompt < 1) bad(&p, kind == SV_CHAT ? "messages" : "prompt", "gives no tokens");
    if (!p.failed && j->n_prompt > m->n_ctx)
        sv_error(err, 400, kind == SV_CHAT ? "messages" : "prompt",
                 "the prompt is %d tokens but the slot context holds %d (-c %d)", j->n_prompt, m->n_ctx, m->n_ctx),
            p.failed = 1;
    cJSON_Delete(root);
    if (p.failed) {
        sv_job_free(j);
        return err->status;
    }
    j->sp.seed = seed >= 0 ? (uint64_t)seed : 0;
    if (seed < 0) {
        FILE *f = fopen("/dev/urandom", "rb");
        if (!f || fread(&j->sp.seed, sizeof j->sp.seed, 1, f) != 1) j->sp.seed = (uint64_t)time(NULL);
        if (f) fclose(f);
    }
    *out = j;
    return 0;
}

/* ------------------------------------------------------------ responses */

static const char *finish_reason(nb_stop s) {
    return s == NB_STOP_LENGTH || s == NB_STOP_CONTEXT ? "length" : "stop";
}

static cJSON *usage(const sv_job *j) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", j->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", j->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", j->n_prompt + j->n_gen);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", j->n_reused);
    return u;
}

/* A token's piece in buf (SV_PIECE bytes): its length; a control token, or a piece longer than
 * the buffer (none of the vocabularies nibble runs has one), gives "". */
#define SV_PIECE 256
static size_t piece_of(const sv_model *m, int32_t id, char *buf) {
    size_t n = 0;
    return nb_token_to_piece(m->tok, id, buf, SV_PIECE, &n, 0) ? 0 : n;
}

/* A token's text, its bytes and its log-probability, as chat's logprobs.content entries. */
static cJSON *token_entry(const sv_model *m, int32_t id, float lp) {
    char piece[SV_PIECE];
    const size_t n = piece_of(m, id, piece);
    cJSON *e = cJSON_CreateObject(), *bytes = cJSON_CreateArray();
    add_text(e, "token", piece, n);
    cJSON_AddNumberToObject(e, "logprob", lp);
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)piece[i]));
    cJSON_AddItemToObject(e, "bytes", bytes);
    return e;
}

/* logprobs of entries [lp0, lp1): chat's {"content": [...]} or completions' parallel arrays. */
static cJSON *logprobs_json(const sv_model *m, const sv_job *j, int lp0, int lp1) {
    cJSON *o = cJSON_CreateObject();
    if (j->kind == SV_CHAT) {
        cJSON *content = cJSON_AddArrayToObject(o, "content");
        for (int i = lp0; i < lp1; i++) {
            const sv_logprob *l = &j->lp[i];
            cJSON *e = token_entry(m, l->id, l->logprob), *top = cJSON_AddArrayToObject(e, "top_logprobs");
            for (int k = 0; k < l->n_top; k++) cJSON_AddItemToArray(top, token_entry(m, l->top_id[k], l->top_lp[k]));
            cJSON_AddItemToArray(content, e);
        }
        return o;
    }
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens"), *lps = cJSON_AddArrayToObject(o, "token_logprobs"),
          *tops = cJSON_AddArrayToObject(o, "top_logprobs"), *offs = cJSON_AddArrayToObject(o, "text_offset");
    size_t off = 0; /* each token's byte offset in the reply: the pieces before it */
    for (int i = 0; i < lp1; i++) {
        char piece[SV_PIECE];
        if (i >= lp0) cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        off += piece_of(m, j->lp[i].id, piece);
    }
    for (int i = lp0; i < lp1; i++) {
        const sv_logprob *l = &j->lp[i];
        cJSON *e = token_entry(m, l->id, l->logprob), *top = cJSON_CreateObject();
        cJSON_AddItemToArray(toks, cJSON_CreateString(cJSON_GetObjectItem(e, "token")->valuestring));
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(l->logprob));
        for (int k = 0; k < l->n_top; k++) {
            cJSON *t = token_entry(m, l->top_id[k], l->top_lp[k]);
            if (!cJSON_GetObjectItem(top, cJSON_GetObjectItem(t, "token")->valuestring))
                cJSON_AddNumberToObject(top, cJSON_GetObjectItem(t, "token")->valuestring, l->top_lp[k]);
            cJSON_Delete(t);
        }
        cJSON_AddItemToArray(tops, top);
        cJSON_Delete(e);
    }
    return o;
}

/* The envelope every completion body shares. */
static cJSON *envelope(const sv_model *m, const sv_job *j, int chunk) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", j->id);
    cJSON_AddStringToObject(root, "object", j->kind == SV_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                               : "text_completion");
    cJSON_AddNumberToObject(root, "created", (double)j->created);
    cJSON_AddStringToObject(root, "model", m->name);
    cJSON_AddStringToObject(root, "system_fingerprint", "nibble");
    return root;
}

/* choices[0] with the text [from, from+len) and entries [lp0, lp1). */
static cJSON *choice(const sv_model *m, const sv_job *j, size_t from, size_t len, int lp0, int lp1, int chunk,
                     int first, int final) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    if (j->kind == SV_CHAT) {
        cJSON *msg = cJSON_AddObjectToObject(c, chunk ? "delta" : "message");
        if (!chunk || first) cJSON_AddStringToObject(msg, "role", "assistant");
        if (!chunk || len || first) add_text(msg, "content", j->text ? j->text + from : "", len);
    } else {
        add_text(c, "text", j->text ? j->text + from : "", len);
    }
    if (j->logprobs && lp1 > lp0) cJSON_AddItemToObject(c, "logprobs", logprobs_json(m, j, lp0, lp1));
    else cJSON_AddNullToObject(c, "logprobs");
    if (final) cJSON_AddStringToObject(c, "finish_reason", finish_reason(j->stop_reason));
    else cJSON_AddNullToObject(c, "finish_reason");
    return c;
}

void sv_job_reply(const sv_model *m, const sv_job *j, sv_reply *r) {
    cJSON *root = envelope(m, j, 0), *choices = cJSON_AddArrayToObject(root, "choices");
    cJSON_AddItemToArray(choices, choice(m, j, 0, j->len, 0, j->n_lp, 0, 1, 1));
    cJSON_AddItemToObject(root, "usage", usage(j));
    set_json(r, 200, root);
}

static char *event(cJSON *root, size_t *n) {
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json) return NULL;
    const size_t k = strlen(json);
    char *ev = malloc(k + 9);
    if (ev) {
        memcpy(ev, "data: ", 6);
        memcpy(ev + 6, json, k);
        memcpy(ev + 6 + k, "\n\n", 3);
        *n = k + 8;
    }
    free(json);
    return ev;
}

char *sv_job_chunk(const sv_model *m, const sv_job *j, size_t from, size_t len, int lp0, int lp1, int first, int final,
                   size_t *n) {
    cJSON *root = envelope(m, j, 1), *choices = cJSON_AddArrayToObject(root, "choices");
    cJSON_AddItemToArray(choices, choice(m, j, from, len, lp0, lp1, 1, first, final));
    if (j->include_usage) cJSON_AddNullToObject(root, "usage");
    return event(root, n);
}

char *sv_usage_chunk(const sv_model *m, const sv_job *j, size_t *n) {
    cJSON *root = envelope(m, j, 1);
    cJSON_AddArrayToObject(root, "choices");
    cJSON_AddItemToObject(root, "usage", usage(j));
    return event(root, n);
}

/* ------------------------------------------------------------ tokenize, detokenize, models */

void sv_tokenize(const sv_model *m, const char *body, size_t len, sv_reply *r) {
    parse p = {r, 0};
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return sv_error(r, 400, NULL, "the body is not a JSON object");
    }
    int add_special = 0, with_pieces = 0, parse_special = 1;
    get_bool(&p, root, "add_special", &add_special);
    get_bool(&p, root, "with_pieces", &with_pieces);
    get_bool(&p, root, "parse_special", &parse_special);
    const char *text = p.failed ? NULL : get_text(&p, cJSON_GetObjectItemCaseSensitive(root, "content"), "content");
    int32_t *ids = NULL;
    size_t n = 0;
    if (text) {
        const size_t tl = strlen(text), cap = NB_TOKENIZE_MAX_IDS(tl);
        if (!(ids = malloc(sizeof(int32_t) * (cap ? cap : 1)))) bad(&p, "content", "is too long (out of memory)");
        else if (nb_tokenize(m->tok, text, tl, add_special, parse_special, ids, cap, &n))
            bad(&p, "content", "cannot be tokenized: %s", nb_last_error());
    }
    if (!p.failed) {
        cJSON *out = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(out, "tokens");
        for (size_t i = 0; i < n; i++) {
            if (!with_pieces) {
                cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
                continue;
            }
            cJSON *e = token_entry(m, ids[i], 0), *t = cJSON_CreateObject();
            cJSON_AddNumberToObject(t, "id", ids[i]);
            cJSON_AddStringToObject(t, "piece", cJSON_GetObjectItem(e, "token")->valuestring);
            cJSON_AddItemToArray(arr, t);
            cJSON_Delete(e);
        }
        set_json(r, 200, out);
    }
    free(ids);
    cJSON_Delete(root);
}

void sv_detokenize(const sv_model *m, const char *body, size_t len, sv_reply *r) {
    parse p = {r, 0};
    cJSON *root = cJSON_ParseWithLength(body, len);
    const cJSON *toks = root ? cJSON_GetObjectItemCaseSensitive(root, "tokens") : NULL;
    if (!root || !cJSON_IsObject(root)) bad(&p, "body", "must be a JSON object");
    else if (!cJSON_IsArray(toks)) bad(&p, "tokens", "must be an array of token ids");
    const int n = p.failed ? 0 : cJSON_GetArraySize(toks), n_vocab = nb_tokenizer_n_tokens(m->tok);
    int32_t *ids = p.failed ? NULL : malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!p.failed && !ids) bad(&p, "tokens", "too many (out of memory)");
    int i = 0;
    for (const cJSON *t = p.failed ? NULL : toks->child; t; t = t->next, i++) {
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 || t->valuedouble >= n_vocab) {
            bad(&p, "tokens", "item %d is not a token id in [0, %d)", i, n_vocab);
            break;
        }
        ids[i] = (int32_t)t->valuedouble;
    }
    size_t need = 0;
    char *text = NULL;
    if (!p.failed) {
        nb_status s = nb_detokenize(m->tok, ids, (size_t)n, 0, 0, NULL, 0, &need);
        if ((s && s != NB_ERR_RANGE) || !(text = malloc(need + 1)) ||
            nb_detokenize(m->tok, ids, (size_t)n, 0, 0, text, need, &need))
            bad(&p, "tokens", "cannot be detokenized: %s", nb_last_error());
    }
    if (!p.failed) {
        cJSON *out = cJSON_CreateObject();
        add_text(out, "content", text, need);
        set_json(r, 200, out);
    }
    free(text);
    free(ids);
    cJSON_Delete(root);
}

void sv_models(const sv_model *m, sv_reply *r) {
    cJSON *root = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(root, "data"), *e = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON_AddStringToObject(e, "id", m->name);
    cJSON_AddStringToObject(e, "object", "model");
    cJSON_AddNumberToObject(e, "created", 0);
    cJSON_AddStringToObject(e, "owned_by", "nibble");
    cJSON_AddItemToArray(data, e);
    set_json(r, 200, root);
}
