/*
 * tokenizer.c: building a tokenizer from plain vocabulary arrays, and everything that runs from
 * ids back to bytes (pieces, detokenize) plus the small accessors. Text -> ids lives in
 * tokenizer_encode.c, the BPE tables and merge loop in tokenizer_bpe.c; the rules are in
 * tokenizer.h.
 */
#include "model/tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/error.h"

/* ------------------------------------------------------------ text hash table */

/* FNV-1a: token texts are short (a few bytes on average), so a byte loop is as fast as anything. */
uint64_t nb_tok_hash(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

int32_t nb_tok_lookup(const nb_tokenizer *t, const char *s, size_t len) {
    if (len == 0) return -1;
    for (uint64_t i = nb_tok_hash(s, len) & t->mask;; i = (i + 1) & t->mask) {
        int32_t v = t->slot[i];
        if (v == 0) return -1;
        const nb_tok *k = &t->tok[v - 1];
        if (k->len == len && memcmp(k->text, s, len) == 0) return v - 1;
    }
}

/* llama.cpp keeps one id per text, the last one listed, so a later duplicate replaces the slot. */
static void table_insert(nb_tokenizer *t, int32_t id) {
    const nb_tok *k = &t->tok[id];
    for (uint64_t i = nb_tok_hash(k->text, k->len) & t->mask;; i = (i + 1) & t->mask) {
        int32_t v = t->slot[i];
        if (v == 0 || (t->tok[v - 1].len == k->len && memcmp(t->tok[v - 1].text, k->text, k->len) == 0)) {
            t->slot[i] = id + 1;
            return;
        }
    }
}

static int32_t find_cstr(const nb_tokenizer *t, const char *s) { return nb_tok_lookup(t, s, strlen(s)); }

/* ------------------------------------------------------------ validation */

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The byte a BYTE token stands for, or -1 when its text is not "<0xHH>". */
static int byte_value(const nb_tok *k) {
    if (k->len != 6 || memcmp(k->text, "<0x", 3) != 0 || k->text[5] != '>') return -1;
    int hi = hex_digit(k->text[3]), lo = hex_digit(k->text[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

static nb_status check_id(const char *what, int32_t id, int64_t n) {
    if (id < -1 || id >= n)
        return nb_fail(NB_ERR_RANGE, "vocabulary: %s id %d outside -1..%lld", what, (int)id, (long long)n - 1);
    return NB_OK;
}

static nb_status check_desc(const nb_vocab_desc *d) {
    if (!d || !d->texts) return nb_fail(NB_ERR_INVALID_ARG, "vocabulary: NULL descriptor or token texts");
    if (d->n_tokens < 1 || d->n_tokens > NB_VOCAB_MAX_TOKENS)
        return nb_fail(NB_ERR_RANGE, "vocabulary: %lld tokens, allowed 1..%d", (long long)d->n_tokens,
                       NB_VOCAB_MAX_TOKENS);
    nb_status s;
    if ((s = check_id("bos", d->bos_id, d->n_tokens)) || (s = check_id("eos", d->eos_id, d->n_tokens)) ||
        (s = check_id("unk", d->unk_id, d->n_tokens)) || (s = check_id("eot", d->eot_id, d->n_tokens)))
        return s;
    if (d->model != NB_VOCAB_SPM && d->model != NB_VOCAB_BPE)
        return nb_fail(NB_ERR_UNSUPPORTED, "vocabulary: model %d, known are 0 (SPM) and 1 (BPE)", d->model);
    if (d->add_bos && d->bos_id < 0) return nb_fail(NB_ERR_FORMAT, "vocabulary: add_bos is set but there is no bos id");
    if (d->add_eos && d->eos_id < 0) return nb_fail(NB_ERR_FORMAT, "vocabulary: add_eos is set but there is no eos id");
    return NB_OK;
}

static nb_status load_token(nb_tokenizer *t, const nb_vocab_desc *d, int32_t i) {
    nb_tok *k = &t->tok[i];
    const nb_token_text *x = &d->texts[i];
    if (x->len > NB_TOKEN_MAX_BYTES)
        return nb_fail(NB_ERR_RANGE, "vocabulary: token %d is %llu bytes long, limit %d", (int)i,
                       (unsigned long long)x->len, NB_TOKEN_MAX_BYTES);
    if (!x->ptr && x->len) return nb_fail(NB_ERR_INVALID_ARG, "vocabulary: token %d has a NULL text", (int)i);
    int32_t type = d->types ? d->types[i] : NB_TOKEN_NORMAL;
    if (type < NB_TOKEN_UNDEFINED || type > NB_TOKEN_BYTE)
        return nb_fail(NB_ERR_FORMAT, "vocabulary: token %d has type %d, known types are 0..6", (int)i, (int)type);
    float score = d->scores ? d->scores[i] : 0.0f;
    if (!isfinite(score))
        return nb_fail(NB_ERR_NONFINITE, "vocabulary: token %d has a non-finite score", (int)i);
    k->text = x->ptr;
    k->len = (uint32_t)x->len;
    k->score = score;
    k->type = (uint8_t)type;
    k->attr = type == NB_TOKEN_CONTROL || type == NB_TOKEN_UNKNOWN ? NB_TA_HIDDEN
              : type == NB_TOKEN_USER_DEFINED                      ? NB_TA_USER
                                                                   : 0;
    if (type == NB_TOKEN_BYTE && byte_value(k) < 0)
        return nb_fail(NB_ERR_FORMAT, "vocabulary: byte token %d is '%.*s', expected <0xHH>", (int)i,
                       (int)(k->len > 32 ? 32 : k->len), k->text);
    return NB_OK;
}

/* ------------------------------------------------------------ attributes */

/* Texts llama.cpp's loader takes as "end of generation", whatever the file says; a listed token
 * that is not a control token becomes one. */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    ("<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"), "[e~[",
};

/* Fill-in-the-middle markers llama.cpp's loader detects by text and makes control tokens; the
 * last three (pad, repo, file separator) also end generation. */
#define FW "\xef\xbd\x9c" /* U+FF5C, DeepSeek's bar */
#define LB "\xe2\x96\x81" /* U+2581 */
static const char *const fim_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<" FW "fim" LB "begin" FW ">", "<PRE>", LB "<PRE>",
    "<|code_prefix|>", "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<" FW "fim" LB "hole" FW ">",
    "<SUF>", LB "<SUF>", "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
    "<" FW "fim" LB "end" FW ">", "<MID>", LB "<MID>", "<|code_middle|>", "<|middle|>",
};
static const char *const fim_eog_texts[] = {
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
    "<REPO>", "<reponame>", "<|file_sep|>",
};

static int is_eog_text(const nb_tokenizer *t, const char *s) {
    int32_t id = find_cstr(t, s);
    return id >= 0 && (t->tok[id].attr & NB_TA_EOG);
}

static void set_user_defined(nb_tokenizer *t, int32_t id) {
    t->tok[id].type = NB_TOKEN_USER_DEFINED;
    t->tok[id].attr = NB_TA_USER;
}

static void mark_attributes(nb_tokenizer *t) {
    for (size_t i = 0; i < sizeof eog_texts / sizeof eog_texts[0]; i++) {
        int32_t id = find_cstr(t, eog_texts[i]);
        if (id >= 0) t->tok[id].attr |= NB_TA_EOG | NB_TA_HIDDEN;
    }
    for (size_t i = 0; i < sizeof fim_texts / sizeof fim_texts[0]; i++) {
        int32_t id = find_cstr(t, fim_texts[i]);
        if (id >= 0) t->tok[id].attr |= NB_TA_HIDDEN;
    }
    for (size_t i = 0; i < sizeof fim_eog_texts / sizeof fim_eog_texts[0]; i++) {
        int32_t id = find_cstr(t, fim_eog_texts[i]);
        if (id >= 0) t->tok[id].attr |= NB_TA_HIDDEN | NB_TA_EOG;
    }
    /* gpt-oss writes these as control tokens but they must always be rendered */
    static const char *const shown[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
        int32_t id = find_cstr(t, shown[i]);
        if (id >= 0) set_user_defined(t, id);
    }
    if (t->eos >= 0) t->tok[t->eos].attr |= NB_TA_EOG;
    if (t->eot >= 0) t->tok[t->eot].attr |= NB_TA_EOG;
    /* Chat formats that have their own return/call markers use <|end|> between messages. */
    int call = is_eog_text(t, "<|call|>") || is_eog_text(t, "<|calls|>");
    int32_t end = find_cstr(t, "<|end|>");
    if (end >= 0 && (t->tok[end].attr & NB_TA_EOG) && call &&
        (is_eog_text(t, "<|return|>") || is_eog_text(t, "<|flush|>")))
        set_user_defined(t, end);
    /* Vocabularies with their own end marker use </s> as ordinary text. */
    int32_t s_end = find_cstr(t, "</s>");
    if (s_end >= 0 && (t->tok[s_end].attr & NB_TA_EOG) &&
        (is_eog_text(t, "<|tool_response>") || is_eog_text(t, "<|plamo:eos|>"))) {
        t->tok[s_end].type = NB_TOKEN_NORMAL;
        t->tok[s_end].attr = 0;
    }
}

/* Some name-keyed attributes of llama.cpp's loader (tokenizer.h). */
static void mark_strips(nb_tokenizer *t, const char *name, const char *pre) {
    char low[128] = "";
    for (size_t i = 0; name && name[i] && i + 1 < sizeof low; i++)
        low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    if (strstr(low, "phi-3") || strstr(low, "phi3")) {
        for (int32_t i = 0; i < t->n; i++)
            if (t->tok[i].attr & (NB_TA_HIDDEN | NB_TA_USER)) t->tok[i].attr |= NB_TA_RSTRIP;
        int32_t id = find_cstr(t, "</s>");
        if (id >= 0) t->tok[id].attr |= NB_TA_RSTRIP;
        static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t k = 0; k < sizeof keep / sizeof keep[0]; k++)
            if ((id = find_cstr(t, keep[k])) >= 0) t->tok[id].attr &= (uint8_t)~NB_TA_RSTRIP;
    }
    int32_t mask = pre && (!strcmp(pre, "jina-v2-de") || !strcmp(pre, "jina-v2-es") || !strcmp(pre, "jina-v2-code"))
                       ? find_cstr(t, "<mask>")
                   : strstr(low, "modern-bert") ? find_cstr(t, "[MASK]")
                                                : -1;
    if (mask >= 0) t->tok[mask].attr |= NB_TA_LSTRIP;
}

/* ------------------------------------------------------------ special-token trie */

typedef struct { uint32_t len; int32_t id; } special_key;

/* Longest text first; equal lengths in id order (llama.cpp leaves that order unspecified). */
static int special_cmp(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static nb_status trie_node(nb_tokenizer *t, size_t *cap, uint8_t byte, int32_t *out) {
    if ((size_t)t->n_trie == *cap) {
        uint64_t bytes, ncap = *cap ? *cap * 2 : 1024;
        if (ncap > INT32_MAX || !nb_mul_u64(ncap, sizeof(nb_trie_node), &bytes))
            return nb_fail(NB_ERR_OVERFLOW, "vocabulary: special-token trie over %lld nodes", (long long)ncap);
        nb_trie_node *p = realloc(t->trie, bytes);
        if (!p) return nb_fail(NB_ERR_NOMEM, "vocabulary: special-token trie of %llu bytes", (unsigned long long)bytes);
        t->trie = p;
        *cap = ncap;
    }
    t->trie[t->n_trie] = (nb_trie_node){.child = -1, .sibling = -1, .rank = -1, .byte = byte};
    *out = t->n_trie++;
    return NB_OK;
}

static nb_status build_specials(nb_tokenizer *t) {
    int32_t n = 0;
    for (int32_t i = 0; i < t->n; i++)
        if ((t->tok[i].attr & (NB_TA_HIDDEN | NB_TA_USER)) && t->tok[i].len) n++;
    for (int i = 0; i < 256; i++) t->root[i] = -1;
    if (n == 0) return NB_OK;
    special_key *keys = malloc((size_t)n * sizeof *keys);
    t->special = malloc((size_t)n * sizeof *t->special);
    if (!keys || !t->special) {
        free(keys);
        return nb_fail(NB_ERR_NOMEM, "vocabulary: %d special tokens", (int)n);
    }
    n = 0;
    for (int32_t i = 0; i < t->n; i++)
        if ((t->tok[i].attr & (NB_TA_HIDDEN | NB_TA_USER)) && t->tok[i].len)
            keys[n++] = (special_key){t->tok[i].len, i};
    qsort(keys, (size_t)n, sizeof *keys, special_cmp);
    t->n_special = n;
    size_t cap = 0;
    nb_status s = NB_OK;
    for (int32_t r = 0; r < n && !s; r++) {
        const nb_tok *k = &t->tok[keys[r].id];
        t->special[r] = keys[r].id;
        int32_t node = -1;
        for (uint32_t j = 0; j < k->len && !s; j++) {
            uint8_t c = (uint8_t)k->text[j];
            int32_t cur = node < 0 ? t->root[c] : t->trie[node].child, prev = -1;
            while (cur >= 0 && t->trie[cur].byte != c) prev = cur, cur = t->trie[cur].sibling;
            if (cur < 0) {
                if ((s = trie_node(t, &cap, c, &cur))) break;
                if (prev >= 0) t->trie[prev].sibling = cur;
                else if (node < 0) t->root[c] = cur;
                else t->trie[node].child = cur;
            }
            node = cur;
        }
        /* a duplicate text keeps the token that comes first in priority order */
        if (!s && t->trie[node].rank < 0) t->trie[node].rank = r;
    }
    free(keys);
    return s;
}

/* ------------------------------------------------------------ create / free */

nb_status nb_tokenizer_create(const nb_vocab_desc *d, nb_tokenizer **out) {
    if (!out) return nb_fail(NB_ERR_INVALID_ARG, "nb_tokenizer_create: NULL out");
    *out = NULL;
    nb_status s = check_desc(d);
    if (s) return s;
    nb_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return nb_fail(NB_ERR_NOMEM, "vocabulary: tokenizer object");
    t->n = (int32_t)d->n_tokens;
    t->bos = d->bos_id, t->eos = d->eos_id, t->unk = d->unk_id, t->eot = d->eot_id;
    t->add_bos = !!d->add_bos, t->add_eos = !!d->add_eos, t->add_space_prefix = !!d->add_space_prefix;
    /* table at most half full: 2n rounded up to a power of two */
    uint64_t slots = 1;
    while (slots < (uint64_t)t->n * 2) slots <<= 1;
    t->mask = slots - 1;
    t->tok = malloc((size_t)t->n * sizeof *t->tok);
    t->slot = calloc(slots, sizeof *t->slot);
    if (!t->tok || !t->slot) {
        nb_tokenizer_free(t);
        return nb_fail(NB_ERR_NOMEM, "vocabulary: tables for %d tokens", (int)d->n_tokens); /* t is freed */
    }
    for (int32_t i = 0; i < t->n; i++) {
        if ((s = load_token(t, d, i))) {
            nb_tokenizer_free(t);
            return s;
        }
        if (t->tok[i].len) table_insert(t, i);
    }
    mark_attributes(t);
    mark_strips(t, d->name, d->pre);
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'}, raw = (char)b;
        int32_t id = nb_tok_lookup(t, name, 6);
        t->byte_tok[b] = id >= 0 ? id : nb_tok_lookup(t, &raw, 1);
    }
    t->model = d->model;
    if ((s = build_specials(t)) || (t->model == NB_VOCAB_BPE && (s = nb_bpe_create(t, d)))) {
        nb_tokenizer_free(t);
        return s;
    }
    *out = t;
    return NB_OK;
}

void nb_tokenizer_free(nb_tokenizer *t) {
    if (!t) return;
    free(t->tok);
    free(t->slot);
    free(t->special);
    free(t->trie);
    nb_bpe_free(t->bpe);
    free(t);
}

/* ------------------------------------------------------------ ids -> bytes */

/* Output that counts every byte but stores only what fits, and drops one leading space on request
 * (llama.cpp's lstrip = 1, used when the vocabulary prefixes text with a space). */
typedef struct sink {
    char *buf;
    size_t cap, len;
    int strip;
} sink;

static void put(sink *o, char c) {
    if (o->strip) {
        o->strip = 0;
        if (c == ' ') return;
    }
    if (o->len < o->cap) o->buf[o->len] = c;
    o->len++;
}

static void put_piece(const nb_tokenizer *t, int32_t id, int special, sink *o) {
    const nb_tok *k = &t->tok[id];
    if ((k->attr & NB_TA_HIDDEN) && !special) return;
    if (k->attr & (NB_TA_HIDDEN | NB_TA_USER)) {
        for (uint32_t i = 0; i < k->len; i++) put(o, k->text[i]);
    } else if (k->type == NB_TOKEN_NORMAL && t->model == NB_VOCAB_BPE) {
        const uint8_t *s = (const uint8_t *)k->text;
        for (size_t i = 0; i < k->len;) {
            char u[4];
            uint32_t cp = nb_utf8_next(s, k->len, &i);
            int b = nb_bpe_cp_byte(cp);
            if (b >= 0) {
                put(o, (char)b);
                continue;
            }
            /* llama.cpp's marker for a character outside the mapping: its UTF-8, then the whole text */
            static const char hex[] = "0123456789abcdef";
            for (const char *m = "[UNK_BYTE_0x"; *m; m++) put(o, *m);
            size_t n = nb_utf8_put(cp, u);
            for (size_t j = 0; j < n; j++) put(o, hex[(uint8_t)u[j] >> 4]), put(o, hex[u[j] & 15]);
            for (uint32_t j = 0; j < k->len; j++) put(o, k->text[j]);
            put(o, ']');
        }
    } else if (k->type == NB_TOKEN_NORMAL) {
        for (uint32_t i = 0; i < k->len; i++) {
            if (i + 2 < k->len && !memcmp(k->text + i, "\xe2\x96\x81", 3)) {
                put(o, ' ');
                i += 2;
            } else {
                put(o, k->text[i]);
            }
        }
    } else if (k->type == NB_TOKEN_BYTE) {
        put(o, (char)byte_value(k));
    }
}

nb_status nb_token_to_piece(const nb_tokenizer *t, int32_t id, char *buf, size_t cap, size_t *len,
                            int special) {
    if (!t || !len || (!buf && cap)) return nb_fail(NB_ERR_INVALID_ARG, "nb_token_to_piece: NULL argument");
    if (id < 0 || id >= t->n)
        return nb_fail(NB_ERR_INVALID_ARG, "nb_token_to_piece: token id %d outside 0..%d", (int)id, (int)t->n - 1);
    sink o = {buf, cap, 0, 0};
    put_piece(t, id, special, &o);
    *len = o.len;
    if (o.len > cap)
        return nb_fail(NB_ERR_RANGE, "nb_token_to_piece: token %d needs %zu bytes, buffer has %zu", (int)id, o.len, cap);
    return NB_OK;
}

/* llama.cpp's clean_up_tokenization_spaces, its three passes in place; returns the new length. */
static size_t clean_spaces(char *s, size_t n) {
    size_t m = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) { /* " ?" " !" " ." " ," */
        char x = s[i];
        if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) m--;
        s[m++] = x;
    }
    n = m, m = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) { /* " ' " -> "'" */
        char x = s[i];
        if (x == '\'' && i + 1 < n && s[i - 1] == ' ' && s[i + 1] == ' ') m--, s[++i] = 0;
        s[m++] = x;
    }
    n = m, m = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) { /* " 's" " 'm" " 're" " 've" */
        char x = s[i];
        if (s[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = s[i + 1], x2 = i + 2 < n ? s[i + 2] : 0;
            if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) m--;
        }
        s[m++] = x;
    }
    return m;
}

nb_status nb_detokenize(const nb_tokenizer *t, const int32_t *ids, size_t n, int remove_special,
                        int unparse_special, char *buf, size_t cap, size_t *len) {
    if (!t || !len || (!ids && n) || (!buf && cap))
        return nb_fail(NB_ERR_INVALID_ARG, "nb_detokenize: NULL argument");
    sink o = {buf, cap, 0, t->add_space_prefix};
    if (remove_special && t->add_bos && n > 0 && ids[0] == t->bos) {
        o.strip = 0; /* as llama.cpp: the space after a dropped BOS stays */
        ids++, n--;
    }
    if (remove_special && t->add_eos && n > 0 && ids[n - 1] == t->eos) n--;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n)
            return nb_fail(NB_ERR_INVALID_ARG, "nb_detokenize: ids[%zu] = %d outside 0..%d", i, (int)ids[i],
                           (int)t->n - 1);
        put_piece(t, ids[i], unparse_special, &o);
        o.strip = 0;
    }
    *len = o.len;
    if (o.len > cap) return nb_fail(NB_ERR_RANGE, "nb_detokenize: text needs %zu bytes, buffer has %zu", o.len, cap);
    if (t->clean_spaces) *len = clean_spaces(buf, o.len);
    return NB_OK;
}

/* ------------------------------------------------------------ accessors */

int32_t nb_tokenizer_n_tokens(const nb_tokenizer *t) { return t ? t->n : 0; }
int32_t nb_tokenizer_bos(const nb_tokenizer *t) { return t ? t->bos : -1; }
int32_t nb_tokenizer_eos(const nb_tokenizer *t) { return t ? t->eos : -1; }
int nb_tokenizer_add_bos(const nb_tokenizer *t) { return t ? t->add_bos : 0; }

int32_t nb_tokenizer_find(const nb_tokenizer *t, const char *text, size_t len) {
    return t && (text || !len) ? nb_tok_lookup(t, text, len) : -1;
}

const char *nb_tokenizer_text(const nb_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n) return NULL;
    if (len) *len = t->tok[id].len;
    return t->tok[id].text ? t->tok[id].text : "";
}

int nb_tokenizer_type(const nb_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n ? t->tok[id].type : -1;
}

int nb_tokenizer_is_eog(const nb_tokenizer *t, int32_t id) {
    return t && id >= 0 && id < t->n && (t->tok[id].attr & NB_TA_EOG);
}
