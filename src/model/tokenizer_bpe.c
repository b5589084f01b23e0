/*
 * tokenizer_bpe.c: the byte-level BPE tokenizer (tokenizer.ggml.model = "gpt2"): the GPT-2
 * byte <-> character mapping, merge ranks, the pre-tokenizer of each tokenizer.ggml.pre name (PCRE2
 * patterns over code points) and the merge loop. Rules: tokenizer.h, "BPE".
 */
#define PCRE2_CODE_UNIT_WIDTH 32
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/error.h"
#include "model/tokenizer.h"

/* ------------------------------------------------------------ UTF-8 and the byte mapping */

uint32_t nb_utf8_next(const uint8_t *s, size_t n, size_t *i) {
    uint8_t c = s[*i];
    if (c < 0x80) return (*i)++, c;
    /* length from the lead byte; every continuation byte must be there and be 10xxxxxx */
    size_t len = (c & 0x40) == 0 ? 0 : (c & 0x20) == 0 ? 2 : (c & 0x10) == 0 ? 3 : (c & 0x08) == 0 ? 4 : 0;
    if (len == 0 || *i + len > n) return (*i)++, 0xFFFD;
    uint32_t cp = c & (0x7F >> len);
    for (size_t k = 1; k < len; k++) {
        if ((s[*i + k] & 0xC0) != 0x80) return (*i)++, 0xFFFD;
        cp = cp << 6 | (s[*i + k] & 0x3F);
    }
    *i += len;
    return cp > 0x10FFFF ? 0xFFFD : cp;
}

size_t nb_utf8_put(uint32_t cp, char *out) {
    if (cp < 0x80) return out[0] = (char)cp, 1;
    if (cp < 0x800) return out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12), out[1] = (char)(0x80 | (cp >> 6 & 0x3F)), out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18), out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F)), out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* GPT-2's mapping: the printable bytes ! .. ~, 0xA1 .. 0xAC and 0xAE .. 0xFF stand for themselves;
 * the other 68 (0x00 .. 0x20, 0x7F .. 0xA0, 0xAD) in order for U+0100 .. U+0143. */
static uint32_t byte_cp(int c) {
    if (c <= 0x20) return 0x100u + (uint32_t)c;
    if (c >= 0x7F && c <= 0xA0) return 0x121u + (uint32_t)(c - 0x7F);
    return c == 0xAD ? 0x143u : (uint32_t)c;
}

int nb_bpe_cp_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
    if (cp >= 0x100 && cp <= 0x120) return (int)(cp - 0x100);
    if (cp >= 0x121 && cp <= 0x142) return (int)(cp - 0x121 + 0x7F);
    return cp == 0x143 ? 0xAD : -1;
}

/* ------------------------------------------------------------ pre-tokenizers */

/* llama.cpp's whitespace (Unicode White_Space): \s of PCRE2 also takes U+180E, so it is spelled out */
#define WS "\\t-\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"
#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" WS "\\p{L}\\p{N}]+|[" WS "]+(?![^" WS "])"
#define TAIL "|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+"
#define LLAMA3 CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*" TAIL
#define QWEN2 CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*" TAIL
#define QWEN35 CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^" WS "\\p{L}\\p{M}\\p{N}]+[\\r\\n]*" TAIL
/* CJK runs of the DeepSeek tokenizers: U+0800..U+4E00 less the whitespace in it, which llama.cpp's
 * wregex never sees (it is replaced before matching) */
#define DS_CJK                                                                                                       \
    "[\\x{800}-\\x{167F}\\x{1681}-\\x{1FFF}\\x{200B}-\\x{2027}\\x{202A}-\\x{202E}\\x{2030}-\\x{205E}"           \
    "\\x{2060}-\\x{2FFF}\\x{3001}-\\x{9FA5}\\x{AC00}-\\x{D7FF}]+"
#define DS_LETTERS                                                                                                   \
    "[" WS "]?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"        \
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}"    \
    "\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"        \
    "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}"                 \
    "\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"                 \
    "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}"         \
    "\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}"        \
    "\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}"         \
    "\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}"                   \
    "\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"         \
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}"                  \
    "\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}"                 \
    "\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"           \
    "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+"

typedef struct pre_type {
    const char *names; /* tokenizer.ggml.pre values, '|'-separated */
    const char *re[6]; /* applied in turn, each to every piece the previous ones left */
    uint8_t ignore_merges, add_bos, clean_spaces;
} pre_type;

/* names as llama.cpp's loader groups them; a name it does not know is refused */
static const pre_type pre_types[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}, 0, 0, 1},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano", {LLAMA3}, 1, 1, 1},
    {"dbrx|smaug-bpe", {LLAMA3}, 0, 0, 1},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|mpt|olmo|jais|exaone4",
     {GPT2}, 0, 0, 1},
    {"trillion|granite-docling", {GPT2}, 0, 0, 0},
    {"qwen2|deepseek-r1-qwen|kormo|f2llmv2|hunyuan|solar-open", {QWEN2}, 0, 0, 0},
    {"stablelm2|megrez", {QWEN2}, 0, 0, 1},
    {"qwen35", {QWEN35}, 0, 0, 0},
    {"starcoder|refact|codeshell|exaone|minerva-7b|mellum2", {"\\p{N}", GPT2}, 0, 0, 1},
    {"smollm|command-r", {"\\p{N}", GPT2}, 0, 0, 0},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2, "[0-9][0-9][0-9]"}, 0, 0, 1},
    {"deepseek-coder", {"[\\r\\n]", "[" WS "]?\\p{L}+", "[" WS "]?\\p{P}+", DS_CJK, "\\p{N}"}, 0, 0, 0},
    {"deepseek-llm",
     {"[\\r\\n]", DS_LETTERS, "[" WS "]?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3001}-\\x{3002}]+",
      "[" WS "]+\\z", DS_CJK, "\\p{N}+"},
     0, 0, 0},
};

int nb_bpe_pre_find(const char *name) {
    if (!name || !*name) name = "default";
    size_t len = strlen(name);
    for (size_t i = 0; i < sizeof pre_types / sizeof pre_types[0]; i++)
        for (const char *p = pre_types[i].names; p;) {
            const char *bar = strchr(p, '|');
            size_t n = bar ? (size_t)(bar - p) : strlen(p);
            if (n == len && !memcmp(p, name, n)) return (int)i;
            p = bar ? bar + 1 : NULL;
        }
    return -1;
}

int nb_bpe_pre_add_bos(int pre) { return pre >= 0 ? pre_types[pre].add_bos : 0; }

/* ------------------------------------------------------------ the merge table */

/* Merge sides and results are strings, keyed like llama.cpp by text: a string is a token id
 * (< n) when the vocabulary has it, else an extra id n + k into the strings below. */
typedef struct pair_slot {
    uint64_t key; /* (left id + 1) << 32 | (right id + 1); 0 = empty */
    int32_t rank, result;
} pair_slot;

struct nb_bpe {
    int pre;
    pcre2_code *re[6];
    int n_re;
    int32_t byte_sid[256]; /* string id of each byte's one-character text, -1 none */
    char enc[256][2];      /* that text: UTF-8 of the mapped code point */
    uint8_t enc_len[256];
    pair_slot *pairs;
    uint64_t pmask;
    char *arena;           /* texts of the extra strings */
    size_t arena_len, arena_cap;
    uint64_t *xs;          /* [n_xs] arena offset << 20 | length */
    int32_t n_xs, xs_cap;
    int32_t *xslot;        /* hash of the extra strings: index + 1, 0 = empty */
    uint64_t xmask;
};

static uint64_t hash_pair(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    return key ^ key >> 33;
}

static const char *xs_text(const nb_bpe *b, int32_t k, size_t *len) {
    *len = (size_t)(b->xs[k] & 0xFFFFF);
    return b->arena + (b->xs[k] >> 20);
}

static int32_t xs_find(const nb_bpe *b, const char *s, size_t len, uint64_t *slot) {
    if (!b->xslot) return -1;
    for (uint64_t i = nb_tok_hash(s, len) & b->xmask;; i = (i + 1) & b->xmask) {
        int32_t v = b->xslot[i];
        if (slot) *slot = i;
        if (v == 0) return -1;
        size_t n;
        const char *x = xs_text(b, v - 1, &n);
        if (n == len && !memcmp(x, s, len)) return v - 1;
    }
}

static nb_status xs_grow(nb_bpe *b) {
    uint64_t slots = b->xslot ? (b->xmask + 1) * 2 : 1024;
    int32_t *ns = calloc(slots, sizeof *ns);
    if (!ns) return nb_fail(NB_ERR_NOMEM, "tokenizer: merge string table of %llu slots", (unsigned long long)slots);
    free(b->xslot);
    b->xslot = ns;
    b->xmask = slots - 1;
    for (int32_t k = 0; k < b->n_xs; k++) {
        size_t n;
        const char *x = xs_text(b, k, &n);
        uint64_t i = nb_tok_hash(x, n) & b->xmask;
        while (b->xslot[i]) i = (i + 1) & b->xmask;
        b->xslot[i] = k + 1;
    }
    return NB_OK;
}

/* String id of (s, len), adding it as an extra string when neither the vocabulary nor the extras
 * have it. */
static nb_status intern(const nb_tokenizer *t, nb_bpe *b, const char *s, size_t len, int32_t *sid) {
    int32_t id = nb_tok_lookup(t, s, len);
    if (id >= 0) return *sid = id, NB_OK;
    uint64_t slot;
    int32_t k = xs_find(b, s, len, &slot);
    if (k >= 0) return *sid = t->n + k, NB_OK;
    nb_status st;
    if (!b->xslot || (uint64_t)(b->n_xs + 1) * 2 > b->xmask + 1) {
        if ((st = xs_grow(b))) return st;
        xs_find(b, s, len, &slot);
    }
    if (b->n_xs == b->xs_cap) {
        int32_t cap = b->xs_cap ? b->xs_cap * 2 : 256;
        if (cap > INT32_MAX / 2 - t->n) return nb_fail(NB_ERR_OVERFLOW, "tokenizer: too many merge strings");
        uint64_t *p = realloc(b->xs, (size_t)cap * sizeof *p);
        if (!p) return nb_fail(NB_ERR_NOMEM, "tokenizer: %d merge strings", (int)cap);
        b->xs = p, b->xs_cap = cap;
    }
    if (b->arena_len + len > b->arena_cap) {
        size_t cap = b->arena_cap ? b->arena_cap : 4096;
        while (cap < b->arena_len + len) cap *= 2;
        if (cap >> 44) return nb_fail(NB_ERR_OVERFLOW, "tokenizer: merge strings over %zu bytes", cap);
        char *p = realloc(b->arena, cap);
        if (!p) return nb_fail(NB_ERR_NOMEM, "tokenizer: %zu bytes of merge strings", cap);
        b->arena = p, b->arena_cap = cap;
    }
    memcpy(b->arena + b->arena_len, s, len);
    b->xs[b->n_xs] = (uint64_t)b->arena_len << 20 | len;
    b->arena_len += len;
    b->xslot[slot] = ++b->n_xs;
    *sid = t->n + b->n_xs - 1;
    return NB_OK;
}

static const pair_slot *pair_find(const nb_bpe *b, int32_t l, int32_t r) {
    if (l < 0 || r < 0 || !b->pairs) return NULL;
    uint64_t key = (uint64_t)(l + 1) << 32 | (uint32_t)(r + 1);
    for (uint64_t i = hash_pair(key) & b->pmask;; i = (i + 1) & b->pmask) {
        if (b->pairs[i].key == key) return &b->pairs[i];
        if (b->pairs[i].key == 0) return NULL;
    }
}

/* Merges as llama.cpp reads them: "left right" cut at the first space after the first byte; an
 * entry without one, or with an empty side, can never apply; a repeated pair keeps its first rank.
 * Sides need not be tokens: a merge whose result is no token still joins symbols, which are then
 * emitted byte by byte. */
static nb_status load_merges(const nb_tokenizer *t, nb_bpe *b, const nb_vocab_desc *d) {
    if (d->n_merges < 0 || d->n_merges > INT32_MAX || (d->n_merges && !d->merges))
        return nb_fail(NB_ERR_INVALID_ARG, "tokenizer: %lld merges%s", (long long)d->n_merges,
                       d->n_merges > 0 ? " but a NULL merge array" : "");
    uint64_t slots = 16;
    while (slots < (uint64_t)d->n_merges * 2) slots <<= 1;
    b->pairs = calloc(slots, sizeof *b->pairs);
    if (!b->pairs) return nb_fail(NB_ERR_NOMEM, "tokenizer: merge table for %lld merges", (long long)d->n_merges);
    b->pmask = slots - 1;
    char *cat = NULL;
    size_t cat_cap = 0;
    nb_status s = NB_OK;
    for (int64_t i = 0; i < d->n_merges && !s; i++) {
        const nb_token_text *m = &d->merges[i];
        if (m->len > 2 * (uint64_t)NB_TOKEN_MAX_BYTES)
            s = nb_fail(NB_ERR_RANGE, "tokenizer: merge %lld is %llu bytes long, limit %d", (long long)i,
                        (unsigned long long)m->len, 2 * NB_TOKEN_MAX_BYTES);
        else if (!m->ptr && m->len)
            s = nb_fail(NB_ERR_INVALID_ARG, "tokenizer: merge %lld has a NULL text", (long long)i);
        if (s || m->len < 3) continue;
        const char *sp = memchr(m->ptr + 1, ' ', m->len - 1);
        if (!sp || sp == m->ptr + m->len - 1) continue;
        size_t nl = (size_t)(sp - m->ptr), nr = m->len - nl - 1;
        int32_t l, r, res;
        if ((s = intern(t, b, m->ptr, nl, &l)) || (s = intern(t, b, sp + 1, nr, &r))) break;
        if (m->len - 1 > cat_cap) {
            char *p = realloc(cat, m->len);
            if (!p) {
                s = nb_fail(NB_ERR_NOMEM, "tokenizer: merge %lld", (long long)i);
                break;
            }
            cat = p, cat_cap = m->len;
        }
        memcpy(cat, m->ptr, nl);
        memcpy(cat + nl, sp + 1, nr);
        if ((s = intern(t, b, cat, nl + nr, &res))) break;
        uint64_t key = (uint64_t)(l + 1) << 32 | (uint32_t)(r + 1), k = hash_pair(key) & b->pmask;
        while (b->pairs[k].key && b->pairs[k].key != key) k = (k + 1) & b->pmask;
        if (!b->pairs[k].key) b->pairs[k] = (pair_slot){key, (int32_t)i, res};
    }
    free(cat);
    return s;
}

static nb_status compile_patterns(nb_bpe *b) {
    const pre_type *p = &pre_types[b->pre];
    for (b->n_re = 0; b->n_re < 6 && p->re[b->n_re]; b->n_re++) {
        int err;
        PCRE2_SIZE at;
        const char *src = p->re[b->n_re];
        size_t n = strlen(src);
        PCRE2_UCHAR32 *wide = malloc((n + 1) * sizeof *wide);
        if (!wide) return nb_fail(NB_ERR_NOMEM, "tokenizer: pattern of %zu bytes", n);
        for (size_t i = 0; i <= n; i++) wide[i] = (uint8_t)src[i];
        /* code points, not UTF: llama.cpp's decoder lets surrogates through, PCRE2's UTF mode would not */
        b->re[b->n_re] = pcre2_compile(wide, n, PCRE2_UCP, &err, &at, NULL);
        free(wide);
        if (!b->re[b->n_re]) {
            PCRE2_UCHAR32 msg[128];
            char m8[128];
            int len = pcre2_get_error_message(err, msg, 128);
            for (int i = 0; i < len && i < 127; i++) m8[i] = (char)(msg[i] < 128 ? msg[i] : '?');
            m8[len > 0 ? (len < 127 ? len : 127) : 0] = 0;
            return nb_fail(NB_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer '%s' pattern %d: PCRE2 error at %zu: %s",
                           p->names, b->n_re, (size_t)at, m8);
        }
        pcre2_jit_compile(b->re[b->n_re], PCRE2_JIT_COMPLETE); /* interpreted when JIT is unavailable */
    }
    return NB_OK;
}

nb_status nb_bpe_create(nb_tokenizer *t, const nb_vocab_desc *d) {
    int pre = nb_bpe_pre_find(d->pre);
    if (pre < 0) return nb_fail(NB_ERR_UNSUPPORTED, "tokenizer: unknown pre-tokenizer '%.64s' (tokenizer.ggml.pre)", d->pre);
    nb_bpe *b = calloc(1, sizeof *b);
    if (!b) return nb_fail(NB_ERR_NOMEM, "tokenizer: BPE tables");
    t->bpe = b;
    b->pre = pre;
    t->clean_spaces = pre_types[pre].clean_spaces;
    t->ignore_merges = pre_types[pre].ignore_merges;
    nb_status s;
    if ((s = compile_patterns(b)) || (s = load_merges(t, b, d))) return s;
    for (int c = 0; c < 256; c++) {
        b->enc_len[c] = (uint8_t)nb_utf8_put(byte_cp(c), b->enc[c]);
        int32_t id = nb_tok_lookup(t, b->enc[c], b->enc_len[c]);
        int32_t k = id >= 0 ? -1 : xs_find(b, b->enc[c], b->enc_len[c], NULL);
        b->byte_sid[c] = id >= 0 ? id : k >= 0 ? t->n + k : -1;
    }
    return NB_OK;
}

void nb_bpe_free(nb_bpe *b) {
    if (!b) return;
    for (int i = 0; i < b->n_re; i++) pcre2_code_free(b->re[i]);
    free(b->pairs), free(b->arena), free(b->xs), free(b->xslot), free(b);
}

/* ------------------------------------------------------------ text -> ids */

typedef struct piece { size_t off, len; } piece; /* code points */

typedef struct bsym {
    int32_t prev, next, sid;
    uint32_t off, n; /* bytes of the word; n = 0 once merged into the left neighbour */
} bsym;

typedef struct bbig {
    int32_t rank, left, right, lsid, rsid;
} bbig;

struct nb_bpe_scratch {
    uint32_t *cp;
    size_t cp_cap;
    piece *pa, *pb;
    size_t pa_cap, pb_cap;
    char *word, *enc;      /* a word's bytes; the same in GPT-2 characters */
    size_t word_cap, enc_cap;
    bsym *sym;
    size_t sym_cap;
    bbig *heap;
    size_t heap_cap, heap_n;
    pcre2_match_data *md;
};

void nb_bpe_scratch_free(nb_bpe_scratch *w) {
    if (!w) return;
    free(w->cp), free(w->pa), free(w->pb), free(w->word), free(w->enc), free(w->sym), free(w->heap);
    pcre2_match_data_free(w->md);
    free(w);
}

/* lowest rank first, then the leftmost pair */
static int bbefore(const bbig *a, const bbig *b) { return a->rank < b->rank || (a->rank == b->rank && a->left < b->left); }

static void bpush(nb_bpe_scratch *w, bbig x) {
    size_t i = w->heap_n++;
    while (i > 0 && bbefore(&x, &w->heap[(i - 1) / 2])) w->heap[i] = w->heap[(i - 1) / 2], i = (i - 1) / 2;
    w->heap[i] = x;
}

static bbig bpop(nb_bpe_scratch *w) {
    bbig top = w->heap[0], last = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bbefore(&w->heap[c + 1], &w->heap[c])) c++;
        if (!bbefore(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c], i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

static void bpair(const nb_bpe *b, nb_bpe_scratch *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const pair_slot *p = pair_find(b, w->sym[l].sid, w->sym[r].sid);
    if (p) bpush(w, (bbig){p->rank, l, r, w->sym[l].sid, w->sym[r].sid});
}

/* BPE of one pre-tokenized word (raw bytes w->word[0 .. n)) onto o. */
static nb_status merge_word(const nb_tokenizer *t, nb_bpe_scratch *w, size_t n, nb_ids_out *o) {
    const nb_bpe *b = t->bpe;
    nb_status s;
    if (t->ignore_merges && n > 1) { /* a word that is a token is that token (llama.cpp's ignore_merges) */
        if ((s = nb_tok_reserve((void **)&w->enc, &w->enc_cap, 2 * n, 1))) return s;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            memcpy(w->enc + m, b->enc[(uint8_t)w->word[i]], b->enc_len[(uint8_t)w->word[i]]);
            m += b->enc_len[(uint8_t)w->word[i]];
        }
        int32_t id = nb_tok_lookup(t, w->enc, m);
        if (id >= 0) return nb_ids_emit(o, id), NB_OK;
    }
    if ((s = nb_tok_reserve((void **)&w->sym, &w->sym_cap, n, sizeof(bsym))) ||
        (s = nb_tok_reserve((void **)&w->heap, &w->heap_cap, 3 * n, sizeof(bbig))))
        return s;
    for (size_t i = 0; i < n; i++)
        w->sym[i] = (bsym){(int32_t)i - 1, i + 1 == n ? -1 : (int32_t)i + 1, b->byte_sid[(uint8_t)w->word[i]],
                           (uint32_t)i, 1};
    w->heap_n = 0;
    for (size_t i = 1; i < n; i++) bpair(b, w, (int32_t)i - 1, (int32_t)i);
    while (w->heap_n) {
        bbig g = bpop(w);
        bsym *l = &w->sym[g.left], *r = &w->sym[g.right];
        if (!l->n || !r->n || l->sid != g.lsid || r->sid != g.rsid) continue;
        l->sid = pair_find(b, g.lsid, g.rsid)->result;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = g.left;
        bpair(b, w, l->prev, g.left);
        bpair(b, w, g.left, l->next);
    }
    for (int32_t i = 0; i >= 0 && n; i = w->sym[i].next) {
        const bsym *y = &w->sym[i];
        if (y->sid >= 0 && y->sid < t->n) {
            nb_ids_emit(o, y->sid);
            continue;
        }
        for (uint32_t j = 0; j < y->n; j++) { /* as llama.cpp: a byte without a token is dropped */
            int32_t id = b->byte_sid[(uint8_t)w->word[y->off + j]];
            if (id >= 0 && id < t->n) nb_ids_emit(o, id);
        }
    }
    return NB_OK;
}

/* Cuts every piece of w->pa by pattern re: each match is a piece, and so is the text between two
 * matches (llama.cpp keeps what no alternative matched as words of its own). */
static nb_status split_by(const pcre2_code *re, nb_bpe_scratch *w, size_t *np) {
    size_t m = 0;
    nb_status s;
    for (size_t p = 0; p < *np; p++) {
        const uint32_t *subj = w->cp + w->pa[p].off;
        size_t len = w->pa[p].len, at = 0;
        while (at < len) {
            int rc = pcre2_match(re, subj, len, at, 0, w->md, NULL);
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* the interpreter keeps its frames on the heap */
                rc = pcre2_match(re, subj, len, at, PCRE2_NO_JIT, w->md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0)
                return nb_fail(NB_ERR_UNSUPPORTED, "nb_tokenize: pre-tokenizer match failed (PCRE2 error %d) at code point %zu",
                               rc, w->pa[p].off + at);
            const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
            if (ov[1] == ov[0]) break; /* no pattern matches empty; stop rather than loop */
            if ((s = nb_tok_reserve((void **)&w->pb, &w->pb_cap, m + 2, sizeof(piece)))) return s;
            if (ov[0] > at) w->pb[m++] = (piece){w->pa[p].off + at, ov[0] - at};
            w->pb[m++] = (piece){w->pa[p].off + ov[0], ov[1] - ov[0]};
            at = ov[1];
        }
        if (at < len) {
            if ((s = nb_tok_reserve((void **)&w->pb, &w->pb_cap, m + 1, sizeof(piece)))) return s;
            w->pb[m++] = (piece){w->pa[p].off + at, len - at};
        }
    }
    piece *tp = w->pa;
    size_t tc = w->pa_cap;
    w->pa = w->pb, w->pa_cap = w->pb_cap;
    w->pb = tp, w->pb_cap = tc;
    *np = m;
    return NB_OK;
}

nb_status nb_bpe_encode(const nb_tokenizer *t, const char *text, size_t len, nb_bpe_scratch **wp, nb_ids_out *o) {
    const nb_bpe *b = t->bpe;
    nb_status s;
    if (!*wp && !(*wp = calloc(1, sizeof **wp))) return nb_fail(NB_ERR_NOMEM, "nb_tokenize: BPE scratch");
    nb_bpe_scratch *w = *wp;
    if (!w->md && !(w->md = pcre2_match_data_create(1, NULL))) return nb_fail(NB_ERR_NOMEM, "nb_tokenize: match data");
    if ((s = nb_tok_reserve((void **)&w->cp, &w->cp_cap, len, sizeof(uint32_t)))) return s;
    size_t n = 0;
    for (size_t i = 0; i < len;) w->cp[n++] = nb_utf8_next((const uint8_t *)text, len, &i);
    if ((s = nb_tok_reserve((void **)&w->pa, &w->pa_cap, 1, sizeof(piece)))) return s;
    w->pa[0] = (piece){0, n};
    size_t np = n ? 1 : 0;
    for (int r = 0; r < b->n_re; r++)
        if ((s = split_by(b->re[r], w, &np))) return s;
    for (size_t p = 0; p < np; p++) {
        /* the word as llama.cpp sees it: its code points encoded again (a bad byte is now U+FFFD) */
        if ((s = nb_tok_reserve((void **)&w->word, &w->word_cap, 4 * w->pa[p].len, 1))) return s;
        size_t m = 0;
        for (size_t k = 0; k < w->pa[p].len; k++) m += nb_utf8_put(w->cp[w->pa[p].off + k], w->word + m);
        if ((s = merge_word(t, w, m, o))) return s;
    }
    return NB_OK;
}
