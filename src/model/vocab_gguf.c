/*
 * vocab_gguf.c: the GGUF keys of a SentencePiece ("llama") or byte-level BPE ("gpt2") vocabulary
 * -> nb_vocab_desc -> nb_tokenizer_create. Keys read (defaults as llama.cpp's loader, SPM / BPE):
 *   tokenizer.ggml.model            string, "llama" or "gpt2"
 *   tokenizer.ggml.tokens           array of string [n]
 *   tokenizer.ggml.scores           array of f32 [n]   (absent: all 0)
 *   tokenizer.ggml.token_type       array of i32 [n]   (absent: all normal)
 *   tokenizer.ggml.merges           array of string    (BPE, required)
 *   tokenizer.ggml.pre              string             (BPE, absent: "default")
 *   tokenizer.ggml.bos_token_id     u32 (1 / 11), eos_token_id (2 / 11), unknown_token_id (0 / none),
 *                                   eot_token_id (none)
 *   tokenizer.ggml.add_bos_token    bool (true / the pre-tokenizer's: true for llama3),
 *                                   add_eos_token (false), add_space_prefix (true / false)
 *   general.name                    string (absent: none), for llama.cpp's name-keyed attributes
 * Token and merge texts point into the mapping; nothing of them is copied.
 */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/tokenizer.h"
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

/* tokenizer.ggml.merges as text pointers into the mapping. */
static nb_status read_merges(const nb_gguf *g, nb_token_text **merges, int64_t *n_merges) {
    int64_t kv;
    uint64_t n;
    if (nb_gguf_find_key(g, KEY "merges") < 0)
        return nb_fail(NB_ERR_FORMAT, "GGUF key %s: missing (a gpt2 tokenizer needs its merges)", KEY "merges");
    if (nb_gguf_get_array(g, KEY "merges", NB_GGUF_STRING, &kv, &n))
        return nb_fail(NB_ERR_FORMAT, "GGUF key %s: expected an array of strings", KEY "merges");
    if (n > INT32_MAX) return nb_fail(NB_ERR_RANGE, "GGUF key %s: %llu merges", KEY "merges", (unsigned long long)n);
    *merges = malloc((n ? n : 1) * sizeof **merges);
    if (!*merges) return nb_fail(NB_ERR_NOMEM, "tokenizer: %llu merges", (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        const char *p;
        size_t len;
        nb_status s = nb_gguf_arr_str(g, kv, i, &p, &len);
        if (s) return s;
        (*merges)[i] = (nb_token_text){p, len};
    }
    *n_merges = (int64_t)n;
    return NB_OK;
}

static nb_status fill_desc(const nb_gguf *g, nb_vocab_desc *d, nb_token_text **texts, float **scores,
                           int32_t **types, nb_token_text **merges) {
    const char *model, *pre = NULL;
    if (nb_gguf_get_string(g, KEY "model", &model))
        return nb_fail(NB_ERR_FORMAT, "GGUF key %s: missing or not a string", KEY "model");
    int bpe = !strcmp(model, "gpt2");
    if (!bpe && strcmp(model, "llama"))
        return nb_fail(NB_ERR_UNSUPPORTED,
                       "GGUF key %s = '%s': supported are 'llama' (SentencePiece) and 'gpt2' (byte-level BPE)",
                       KEY "model", model);
    if (bpe && nb_gguf_find_key(g, KEY "pre") >= 0 && nb_gguf_get_string(g, KEY "pre", &pre))
        return nb_fail(NB_ERR_FORMAT, "GGUF key %s: expected a string", KEY "pre");
    int pre_type = bpe ? nb_bpe_pre_find(pre) : -1;
    if (bpe && pre_type < 0)
        return nb_fail(NB_ERR_UNSUPPORTED, "GGUF key %s = '%s': unknown pre-tokenizer", KEY "pre", pre);
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
    if (bpe) {
        *d = (nb_vocab_desc){
            .n_tokens = (int64_t)n, .texts = *texts, .scores = *scores, .types = *types,
            .bos_id = n > 11 ? 11 : -1, .eos_id = n > 11 ? 11 : -1, .unk_id = -1, .eot_id = -1,
            .add_bos = nb_bpe_pre_add_bos(pre_type), .model = NB_VOCAB_BPE, .pre = pre,
        };
        if ((s = read_merges(g, merges, &d->n_merges))) return s;
        d->merges = *merges;
    } else {
        *d = (nb_vocab_desc){
            .n_tokens = (int64_t)n, .texts = *texts, .scores = *scores, .types = *types,
            .bos_id = n > 1 ? 1 : -1, .eos_id = n > 2 ? 2 : -1, .unk_id = 0, .eot_id = -1,
            .add_bos = 1, .add_eos = 0, .add_space_prefix = 1,
        };
    }
    if (nb_gguf_find_key(g, "general.name") >= 0 && nb_gguf_get_string(g, "general.name", &d->name))
        return nb_fail(NB_ERR_FORMAT, "GGUF key general.name: expected a string");
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
    nb_token_text *merges = NULL;
    nb_status s = fill_desc(g, &d, &texts, &scores, &types, &merges);
    if (!s) s = nb_tokenizer_create(&d, out);
    free(texts), free(scores), free(types), free(merges);
    return s;
}
