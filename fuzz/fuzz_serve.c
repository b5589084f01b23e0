/*
 * fuzz_serve.c: libFuzzer harness for the server's request handling (src/serve/api.c): the body
 * parser of /v1/completions, /v1/chat/completions, /tokenize and /detokenize, and the responses
 * built from what it accepts. The input's first byte picks the route and how a generated reply is
 * faked (its text: the input's bytes, valid UTF-8 or not; its log-probabilities: ids from the
 * input); the rest is the body. Over a small SentencePiece vocabulary and the gemma template, a
 * slot context of 64. Every reply, error or not, must be a JSON object that cJSON parses back
 * (an error with "error".message), and streamed chunks must be "data: {...}\n\n". ASan/UBSan
 * catch the rest.
 */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/internal.h"

static void check(int ok) {
    if (!ok) __builtin_trap();
}

static nb_tokenizer *tok;

/* A vocabulary of <unk>/<bos>/<eos>, the gemma turn markers, U+2581, a few letters, 256 bytes. */
static void make_tokenizer(void) {
    static const char *const base[] = {"<unk>", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>",
                                       "\xe2\x96\x81", "a", "b", "ab", "user", "model", "\n"};
    enum { N_BASE = sizeof base / sizeof base[0] };
    static char names[256][7];
    static nb_token_text texts[N_BASE + 256];
    static int32_t types[N_BASE + 256];
    int n = 0;
    for (; n < N_BASE; n++) {
        texts[n] = (nb_token_text){base[n], strlen(base[n])};
        types[n] = n == 0 ? NB_TOKEN_UNKNOWN : n < 5 ? NB_TOKEN_CONTROL : NB_TOKEN_NORMAL;
    }
    for (int b = 0; b < 256; b++, n++) {
        static const char hex[] = "0123456789ABCDEF";
        char *s = names[b];
        memcpy(s, "<0x", 3), s[3] = hex[b >> 4], s[4] = hex[b & 15], s[5] = '>', s[6] = 0;
        texts[n] = (nb_token_text){s, 6};
        types[n] = NB_TOKEN_BYTE;
    }
    nb_vocab_desc d = {.n_tokens = n, .texts = texts, .types = types, .bos_id = 1, .eos_id = 2, .unk_id = 0,
                       .eot_id = 4, .add_bos = 1, .add_space_prefix = 0};
    check(nb_tokenizer_create(&d, &tok) == NB_OK);
}

/* A reply body: a JSON object; an error reply has "error".message. */
static void check_json(const sv_reply *r) {
    check(r->body != NULL && r->len == strlen(r->body));
    cJSON *root = cJSON_ParseWithLength(r->body, r->len);
    check(cJSON_IsObject(root));
    if (r->status != 200) check(cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "error"), "message")));
    cJSON_Delete(root);
}

static void check_event(char *ev, size_t n) {
    check(ev && n > 8 && !memcmp(ev, "data: ", 6) && !memcmp(ev + n - 2, "\n\n", 2));
    cJSON *root = cJSON_ParseWithLength(ev + 6, n - 8);
    check(cJSON_IsObject(root));
    cJSON_Delete(root);
    free(ev);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tok) make_tokenizer();
    if (size < 1) return 0;
    const sv_model m = {tok, nb_chat_template_find("gemma"), 64, "fuzz.gguf"};
    const char *body = (const char *)data + 1;
    const size_t len = size - 1;
    sv_reply r = {0};
    switch (data[0] & 3) {
    case 2: sv_tokenize(&m, body, len, &r); break;
    case 3: sv_detokenize(&m, body, len, &r); break;
    default: {
        sv_job *j = NULL;
        const int st = sv_parse_job(&m, data[0] & 1 ? SV_CHAT : SV_COMPLETION, body, len, &j, &r);
        check((st == 0) == (j != NULL));
        if (!j) break;
        check(j->n_prompt >= 1 && j->n_prompt <= m.n_ctx && j->n_stop <= NB_GEN_MAX_STOPS);
        for (int i = 0; i < j->n_prompt; i++) check(j->prompt[i] >= 0 && j->prompt[i] < nb_tokenizer_n_tokens(tok));
        /* a fake reply: the body's bytes as text, one log-probability entry per byte */
        const size_t n_text = len < 64 ? len : 64;
        j->text = malloc(n_text + 1);
        j->lp = calloc(n_text + 1, sizeof *j->lp);
        check(j->text && j->lp);
        memcpy(j->text, body, n_text);
        j->len = n_text;
        for (size_t i = 0; i < n_text; i++) {
            sv_logprob *l = &j->lp[j->n_lp++];
            l->id = (unsigned char)body[i] % nb_tokenizer_n_tokens(tok);
            l->logprob = -(float)i;
            l->n_top = j->top_logprobs;
            for (int k = 0; k < l->n_top; k++) l->top_id[k] = (l->id + k) % nb_tokenizer_n_tokens(tok), l->top_lp[k] = -(float)k;
        }
        j->n_gen = (int)n_text;
        j->stop_reason = data[0] & 4 ? NB_STOP_LENGTH : NB_STOP_EOG;
        sv_job_reply(&m, j, &r);
        size_t n = 0;
        check_event(sv_job_chunk(&m, j, 0, n_text / 2, 0, (int)n_text / 2, 1, 0, &n), n);
        check_event(sv_job_chunk(&m, j, n_text / 2, n_text - n_text / 2, (int)n_text / 2, (int)n_text, 0, 1, &n), n);
        check_event(sv_usage_chunk(&m, j, &n), n);
        sv_job_free(j);
    }
    }
    check_json(&r);
    free(r.body);
    return 0;
}
