/*
 * vocab_gguf.c: the GGUF keys of a SentencePiece ("llama") vocabulary -> nb_vocab_desc ->
 * nb_tokenizer_create. Keys read (defaults as llama.cpp's loader for this model type):
 *   tokenizer.ggml.model            string, must be "llama"
 *   tokenizer.ggml.tokens           array of string [n]
 *   tokenizer.ggml.scores           array of f32 [n]   (absent: all 0)
 *   tokenizer.ggml.token_type       array of i32 [n]   (absent: all normal)
 *   tokenizer.ggml.bos_token_id     u32 (default 1), eos_token_id (2), unknown_token_id (0),
 *                                   eot_token_id (none)
 *   tokenizer.ggml.add_bos_token    bool (true), add_eos_token (false), add_space_prefix (true)
 * Token texts point into the mapping; nothing of them is copied.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "nibble.h"

#define KEY "tokenizer.ggml."

/* An optional token id: absent keeps *id; present must be u32 (or i32) and inside the vocabulary. */
static nb_status opt_id(const nb_gguf *g, const char *key, int64_t n, int32_t *id) {
    if (nb_gguf_find_key(g, key) < 0) return NB_OK;
    uint32_t u;
    int32_t i;
    int64_t v;
    if (nb_gguf_get_u32(g, key, &u) == NB_OK) v = u;
    else if (nb_gguf_get_i32(g, key, &i) == NB_OK) v = i;
    else return nb_fail(NB_ERR_FORMAT, "GGUF key %s: expected a u32 token id", key);
    if (v < 0 || v >= n)
        return nb_fail(NB_ERR_FORMAT, "GGUF key %s: token id %lld outside 0..%lld", key, (long long)v, (long long)n - 1);
    *id = (int32_t)v;
    return NB_OK;
}

static nb_status opt_bool(const nb_gguf *g, const char *key, int *v) {
    if (nb_gguf_find_key(g, key) < 0) return NB_OK;
    if (nb_gguf_get_bool(g, key, v)) return nb_fail(NB_ERR_FORMAT, "GGUF key %s: expected a bool", key);
    return NB_OK;
}

/* An optional per-token array: absent leaves *kv = -1; present must have elem type and n entries. */
static nb_status opt_array(const nb_gguf *g, const char *key, nb_gguf_vtype elem, uint64_t n, int64_t *kv) {
    *kv = -1;
    if (nb_gguf_find_key(g, key) < 0) return NB_OK;
    uint64_t count;
    if (nb_gguf_get_array(g, key, elem, kv, &count))
        return nb_fail(NB_ERR_FORMAT, "GGUF key %s: expected an array of %s", key,
                       elem == NB_GGUF_F32 ? "f32" : "i32");
    if (count != n)
        return nb_fail(NB_ERR_FORMAT, "GGUF key %s: %llu entries, but %s has %llu", key, (unsigned long long)count,
                       KEY "tokens", (unsigned long long)n);
    return NB_OK;
}

static nb_status fill_desc(const nb_gguf *g, nb_vocab_desc *d, nb_token_text **texts, float **scores,
                           int32_t **types) {
    const char *model;
    if (nb_gguf_get_string(g, KEY "model", &model))
        return nb_fail(NB_ERR_FORMAT, "GGUF key %s: missing or not a string", KEY "model");
    if (strcmp(model, "llama"))
        return nb_fail(NB_ERR_UNSUPPORTED, "GGUF key %s = '%s': only the 'llama' (SentencePiece) tokenizer is supported",
                       KEY "model", model);
    int64_t kv_tok, kv_score, kv_type;
    uint64_t n;
    if (nb_gguf_get_array(g, KEY "tokens", NB_GGUF_STRING, &kv_tok, &n))
        return nb_fail(NB_ERR_FORMAT, "GGUF key %s: missing or not an array of strings", KEY "tokens");
    if (n < 1 || n > NB_VOCAB_MAX_TOKENS)
        return nb_fail(NB_ERR_RANGE, "GGUF key %s: %llu tokens, allowed 1..%d", KEY "tokens", (unsigned long long)n,
                       NB_VOCAB_MAX_TOKENS);
    nb_status s;
    if ((s = opt_array(g, KEY "scores", NB_GGUF_F32, n, &kv_score)) ||
        (s = opt_array(g, KEY "token_type", NB_GGUF_I32, n, &kv_type)))
        return s;
    *texts = malloc(n * sizeof **texts);
    *scores = kv_score >= 0 ? malloc(n * sizeof **scores) : NULL;
    *types = kv_type >= 0 ? malloc(n * sizeof **types) : NULL;
    if (!*texts || (kv_score >= 0 && !*scores) || (kv_type >= 0 && !*types))
        return nb_fail(NB_ERR_NOMEM, "vocabulary arrays for %llu tokens", (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        const char *p;
        size_t len;
        if ((s = nb_gguf_arr_str(g, kv_tok, i, &p, &len))) return s;
        (*texts)[i] = (nb_token_text){p, len};
        if (kv_score >= 0 && (s = nb_gguf_arr_f32(g, kv_score, i, &(*scores)[i]))) return s;
        if (kv_type >= 0 && (s = nb_gguf_arr_i32(g, kv_type, i, &(*types)[i]))) return s;
    }
    *d = (nb_vocab_desc){
        .n_tokens = (int64_t)n, .texts = *texts, .scores = *scores, .types = *types,
        .bos_id = n > 1 ? 1 : -1, .eos_id = n > 2 ? 2 : -1, .unk_id = 0, .eot_id = -1,
        .add_bos = 1, .add_eos = 0, .add_space_prefix = 1,
    };
    if ((s = opt_id(g, KEY "bos_token_id", d->n_tokens, &d->bos_id)) ||
        (s = opt_id(g, KEY "eos_token_id", d->n_tokens, &d->eos_id)) ||
        (s = opt_id(g, KEY "unknown_token_id", d->n_tokens, &d->unk_id)) ||
        (s = opt_id(g, KEY "eot_token_id", d->n_tokens, &d->eot_id)) ||
        (s = opt_bool(g, KEY "add_bos_token", &d->add_bos)) || (s = opt_bool(g, KEY "add_eos_token", &d->add_eos)) ||
        (s = opt_bool(g, KEY "add_space_prefix", &d->add_space_prefix)))
        return s;
    return NB_OK;
}

nb_status nb_tokenizer_from_gguf(const nb_gguf *g, nb_tokenizer **out) {
    if (!g || !out) return nb_fail(NB_ERR_INVALID_ARG, "nb_tokenizer_from_gguf: NULL argument");
    *out = NULL;
    nb_vocab_desc d;
    nb_token_text *texts = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    nb_status s = fill_desc(g, &d, &texts, &scores, &types);
    if (!s) s = nb_tokenizer_create(&d, out);
    free(texts), free(scores), free(types);
    return s;
}
