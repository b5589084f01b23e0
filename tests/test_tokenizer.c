/*
 * test_tokenizer.c: the SentencePiece tokenizer on small hand-made vocabularies: merge order by
 * score, leftmost on ties, byte fallback, special-token splitting, UTF-8 edge cases, BOS/EOS and
 * space prefix, pieces, detokenize round trips, descriptor validation, and a randomized check of
 * the heap-driven merge against a plain quadratic re-implementation of the same rule. Then the
 * byte-level BPE tokenizer the same way (merge ranks, merges through non-tokens, malformed merges,
 * pre-tokenizers, ignore_merges, invalid UTF-8, pieces, clean_spaces, a naive merge), also built
 * from a GGUF written with nibble's writer.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "nibble.h"
#include "test.h"

/* ------------------------------------------------------------ vocabulary builder */

#define MAX_TOK 600

typedef struct vocab {
    nb_token_text text[MAX_TOK];
    float score[MAX_TOK];
    int32_t type[MAX_TOK];
    char bytes[MAX_TOK][8]; /* storage for the <0xHH> names */
    int n;
    nb_vocab_desc d;
} vocab;

static int add(vocab *v, const char *s, float score, int type) {
    v->text[v->n] = (nb_token_text){s, strlen(s)};
    v->score[v->n] = score;
    v->type[v->n] = type;
    return v->n++;
}

/* ids: 0 <unk>, 1 <s> (bos), 2 </s> (eos), 3 <ctl>, 4 <u>, 5 <uu>, then the normal tokens below
 * with their scores, then the 256 byte tokens. */
enum { UNK, BOS, EOS, CTL, U1, U2, SP, A, B, C, AB, BC, ABC, SPA, AA, E_ACUTE, X, BYTE0 };

static void base_vocab(vocab *v, float ab, float bc) {
    memset(v, 0, sizeof *v);
    add(v, "<unk>", 0, NB_TOKEN_UNKNOWN);
    add(v, "<s>", 0, NB_TOKEN_CONTROL);
    add(v, "</s>", 0, NB_TOKEN_CONTROL);
    add(v, "<ctl>", 0, NB_TOKEN_CONTROL);
    add(v, "<u>", 0, NB_TOKEN_USER_DEFINED);
    add(v, "<uu>", 0, NB_TOKEN_USER_DEFINED);
    add(v, "\xe2\x96\x81", -1, NB_TOKEN_NORMAL);
    add(v, "a", -1, NB_TOKEN_NORMAL);
    add(v, "b", -1, NB_TOKEN_NORMAL);
    add(v, "c", -1, NB_TOKEN_NORMAL);
    add(v, "ab", ab, NB_TOKEN_NORMAL);
    add(v, "bc", bc, NB_TOKEN_NORMAL);
    add(v, "abc!", -9, NB_TOKEN_NORMAL); /* placeholder text, renamed by with_abc() */
    add(v, "\xe2\x96\x81" "a", -3, NB_TOKEN_NORMAL);
    add(v, "aa", -4, NB_TOKEN_NORMAL);
    add(v, "\xc3\xa9", -5, NB_TOKEN_NORMAL);
    add(v, "x", -6, NB_TOKEN_NORMAL);
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char *s = v->bytes[v->n];
        memcpy(s, "<0x", 3);
        s[3] = hex[b >> 4], s[4] = hex[b & 15], s[5] = '>', s[6] = 0;
        add(v, s, 0, NB_TOKEN_BYTE);
    }
    v->d = (nb_vocab_desc){.n_tokens = v->n, .texts = v->text, .scores = v->score, .types = v->type,
                           .bos_id = BOS, .eos_id = EOS, .unk_id = UNK, .eot_id = -1, .add_bos = 1};
}

static void with_abc(vocab *v) { v->text[ABC] = (nb_token_text){"abc", 3}; }

static nb_tokenizer *make(vocab *v) {
    nb_tokenizer *t = NULL;
    nb_status s = nb_tokenizer_create(&v->d, &t);
    CHECK(s == NB_OK, "create: %s", nb_last_error());
    return t;
}

/* Tokenizes s and compares with the expected ids (terminated by -1). */
static void expect(nb_tokenizer *t, const char *s, size_t len, int add_special, int parse_special,
                   const int32_t *want) {
    int32_t got[256];
    size_t n = 0, nw = 0;
    while (want[nw] >= 0) nw++;
    nb_status st = nb_tokenize(t, s, len, add_special, parse_special, got, 256, &n);
    CHECK(st == NB_OK, "tokenize '%.*s': %s", (int)len, s, nb_last_error());
    int same = n == nw;
    for (size_t i = 0; same && i < n; i++) same = got[i] == want[i];
    if (!same) {
        char g[512] = "", w[512] = "";
        for (size_t i = 0; i < n && i < 40; i++) snprintf(g + strlen(g), sizeof g - strlen(g), "%d ", (int)got[i]);
        for (size_t i = 0; i < nw; i++) snprintf(w + strlen(w), sizeof w - strlen(w), "%d ", (int)want[i]);
        CHECK(0, "tokenize '%.*s' (special %d/%d): got [%s] want [%s]", (int)len, s, add_special, parse_special, g, w);
    }
}

#define IDS(...) ((const int32_t[]){__VA_ARGS__, -1})
#define EXPECT(t, s, as, ps, ...) expect(t, s, strlen(s), as, ps, IDS(__VA_ARGS__))

/* ------------------------------------------------------------ tests */

TEST(merge_order_follows_score) {
    vocab v;
    base_vocab(&v, -1.0f, -2.0f); /* "ab" beats "bc" */
    nb_tokenizer *t = make(&v);
    EXPECT(t, "abc", 0, 0, AB, C);
    nb_tokenizer_free(t);
    base_vocab(&v, -2.0f, -1.0f); /* "bc" beats "ab" */
    t = make(&v);
    EXPECT(t, "abc", 0, 0, A, BC);
    nb_tokenizer_free(t);
    base_vocab(&v, -2.0f, -1.0f); /* merges continue through the result: a + bc -> abc */
    with_abc(&v);
    t = make(&v);
    EXPECT(t, "abc", 0, 0, ABC);
    EXPECT(t, "abcabc", 0, 0, ABC, ABC);
    nb_tokenizer_free(t);
}

TEST(ties_go_leftmost) {
    vocab v;
    base_vocab(&v, -1.0f, -2.0f);
    nb_tokenizer *t = make(&v);
    EXPECT(t, "aaa", 0, 0, AA, A);
    EXPECT(t, "aaaaa", 0, 0, AA, AA, A);
    EXPECT(t, "baaab", 0, 0, B, AA, AB);
    nb_tokenizer_free(t);
}

TEST(spaces_and_prefix) {
    vocab v;
    base_vocab(&v, -1.0f, -2.0f);
    nb_tokenizer *t = make(&v);
    EXPECT(t, " a", 0, 0, SPA);
    EXPECT(t, "b a", 0, 0, B, SPA);
    EXPECT(t, "b  c", 0, 0, B, SP, SP, C);
    EXPECT(t, "a", 1, 0, BOS, A);
    nb_tokenizer_free(t);
    v.d.add_space_prefix = 1;
    v.d.add_eos = 1;
    t = make(&v);
    EXPECT(t, "a", 0, 0, SPA);
    EXPECT(t, "a", 1, 0, BOS, SPA, EOS);
    /* the prefix also follows a special token */
    EXPECT(t, "a<u>a", 0, 0, SPA, U1, SPA);
    nb_tokenizer_free(t);
}

TEST(byte_fallback_and_utf8) {
    vocab v;
    base_vocab(&v, -1.0f, -2.0f);
    nb_tokenizer *t = make(&v);
    EXPECT(t, "z", 0, 0, BYTE0 + 'z');
    EXPECT(t, "\xc3\xa9", 0, 0, E_ACUTE);
    EXPECT(t, "\xc3\xa8", 0, 0, BYTE0 + 0xC3, BYTE0 + 0xA8);           /* a character not in the vocabulary */
    EXPECT(t, "a\xff" "b", 0, 0, A, BYTE0 + 0xFF, BYTE0 + 'b');        /* 0xFF claims 4 bytes, clipped */
    EXPECT(t, "\x80\x80", 0, 0, BYTE0 + 0x80, BYTE0 + 0x80);           /* lone continuation bytes */
    /* a lead byte claims its length even over a non-continuation byte: "\xc3a" is one symbol */
    EXPECT(t, "\xc3" "aa", 0, 0, BYTE0 + 0xC3, BYTE0 + 'a', A);
    EXPECT(t, "x\xe2\x82", 0, 0, X, BYTE0 + 0xE2, BYTE0 + 0x82);      /* truncated at the end */
    EXPECT(t, "\xf0\x9f\x98\x80", 0, 0, BYTE0 + 0xF0, BYTE0 + 0x9F, BYTE0 + 0x98, BYTE0 + 0x80);
    expect(t, "a\0b", 3, 0, 0, IDS(A, BYTE0 + 0, B));
    nb_tokenizer_free(t);
}

TEST(special_tokens) {
    vocab v;
    base_vocab(&v, -1.0f, -2.0f);
    nb_tokenizer *t = make(&v);
    EXPECT(t, "a<u>b", 0, 0, A, U1, B);                   /* user-defined: always */
    EXPECT(t, "<uu><u><u>", 0, 0, U2, U1, U1);            /* longest first */
    EXPECT(t, "<u<u>>", 0, 0, BYTE0 + '<', BYTE0 + 'u', U1, BYTE0 + '>');
    EXPECT(t, "<ctl>", 0, 1, CTL);                        /* control: only with parse_special */
    EXPECT(t, "a<ctl>", 0, 0, A, BYTE0 + '<', C, BYTE0 + 't', BYTE0 + 'l', BYTE0 + '>');
    EXPECT(t, "<s>a</s>", 1, 1, BOS, BOS, A, EOS);
    EXPECT(t, "<unk>", 0, 1, UNK);
    EXPECT(t, "", 1, 0, BOS);
    int32_t id;
    size_t n = 7;
    CHECK(nb_tokenize(t, "", 0, 0, 0, &id, 1, &n) == NB_OK && n == 0, "empty text gives no ids (n=%zu)", n);
    nb_tokenizer_free(t);
}

TEST(eog_and_lookups) {
    vocab v;
    base_vocab(&v, -1.0f, -2.0f);
    v.text[U2] = (nb_token_text){"<end_of_turn>", 13}; /* user-defined in the file, EOG by its text */
    nb_tokenizer *t = make(&v);
    CHECK(nb_tokenizer_is_eog(t, EOS), "</s> (eos) ends generation");
    CHECK(nb_tokenizer_is_eog(t, U2), "<end_of_turn> ends generation");
    CHECK(!nb_tokenizer_is_eog(t, A) && !nb_tokenizer_is_eog(t, -1), "others do not");
    CHECK(nb_tokenizer_find(t, "<ctl>", 5) == CTL, "find <ctl>");
    CHECK(nb_tokenizer_find(t, "nope", 4) == -1, "find absent");
    CHECK(nb_tokenizer_n_tokens(t) == v.n && nb_tokenizer_bos(t) == BOS && nb_tokenizer_eos(t) == EOS, "accessors");
    CHECK(nb_tokenizer_type(t, BYTE0) == NB_TOKEN_BYTE && nb_tokenizer_type(t, v.n) == -1, "types");
    /* being EOG makes it a control token: not split without parse_special, hidden in pieces */
    EXPECT(t, "<end_of_turn>", 0, 1, U2);
    int32_t ids[32];
    size_t n = 0;
    CHECK(nb_tokenize(t, "<end_of_turn>", 13, 0, 0, ids, 32, &n) == NB_OK && n == 13, "not split: %zu ids", n);
    char buf[32];
    size_t len = 9;
    CHECK(nb_token_to_piece(t, U2, buf, sizeof buf, &len, 0) == NB_OK && len == 0, "EOG piece hidden");
    nb_tokenizer_free(t);
}

TEST(pieces) {
    vocab v;
    base_vocab(&v, -1.0f, -2.0f);
    nb_tokenizer *t = make(&v);
    char buf[16];
    size_t len;
    CHECK(nb_token_to_piece(t, SPA, buf, sizeof buf, &len, 0) == NB_OK && len == 2 && !memcmp(buf, " a", 2),
          "U+2581 -> space");
    CHECK(nb_token_to_piece(t, BYTE0 + 0xA9, buf, sizeof buf, &len, 0) == NB_OK && len == 1 &&
              (uint8_t)buf[0] == 0xA9, "byte token");
    CHECK(nb_token_to_piece(t, CTL, buf, sizeof buf, &len, 0) == NB_OK && len == 0, "control hidden");
    CHECK(nb_token_to_piece(t, CTL, buf, sizeof buf, &len, 1) == NB_OK && len == 5 && !memcmp(buf, "<ctl>", 5),
          "control shown with special");
    CHECK(nb_token_to_piece(t, U1, buf, sizeof buf, &len, 0) == NB_OK && len == 3, "user-defined always shown");
    CHECK(nb_token_to_piece(t, CTL, buf, 2, &len, 1) == NB_ERR_RANGE && len == 5, "small buffer: RANGE + size");
    CHECK(nb_token_to_piece(t, v.n, buf, sizeof buf, &len, 1) == NB_ERR_INVALID_ARG, "bad id refused");
    CHECK(strstr(nb_last_error(), "token id") != NULL, "message names the id: %s", nb_last_error());
    nb_tokenizer_free(t);
}

TEST(round_trips) {
    vocab v;
    base_vocab(&v, -1.0f, -2.0f);
    with_abc(&v);
    nb_tokenizer *t = make(&v);
    static const char *const texts[] = {"abc ab  c", " a b c ", "\xc3\xa9t\xc3\xa9 \xff\xfe\x80",
                                        "x<u>y<uu>z<ctl>", "\xf0\x9f\x98\x80\xe2\x82", "\n\t\r"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int32_t ids[128];
        size_t n, len;
        char back[256];
        const char *s = texts[i];
        CHECK(nb_tokenize(t, s, strlen(s), 1, 0, ids, 128, &n) == NB_OK, "tokenize: %s", nb_last_error());
        CHECK(nb_detokenize(t, ids, n, 1, 1, back, sizeof back, &len) == NB_OK, "detokenize: %s", nb_last_error());
        CHECK(len == strlen(s) && !memcmp(back, s, len), "round trip %zu: '%.*s' -> '%.*s'", i, (int)strlen(s), s,
              (int)len, back);
    }
    /* remove_special drops the leading BOS; unparse_special decides whether controls show */
    int32_t ids[] = {BOS, A, CTL, B};
    char out[32];
    size_t len;
    CHECK(nb_detokenize(t, ids, 4, 0, 1, out, sizeof out, &len) == NB_OK && len == 10 &&
              !memcmp(out, "<s>a<ctl>b", 10), "all shown (len %zu)", len);
    CHECK(nb_detokenize(t, ids, 4, 1, 0, out, sizeof out, &len) == NB_OK && len == 2 && !memcmp(out, "ab", 2),
          "controls hidden (len %zu)", len);
    CHECK(nb_detokenize(t, ids, 4, 0, 1, out, 3, &len) == NB_ERR_RANGE && len == 10, "small buffer: RANGE + size");
    nb_tokenizer_free(t);
}

TEST(output_capacity) {
    vocab v;
    base_vocab(&v, -1.0f, -2.0f);
    nb_tokenizer *t = make(&v);
    int32_t ids[3] = {-7, -7, -7};
    size_t n = 0;
    CHECK(nb_tokenize(t, "zzzz", 4, 1, 0, ids, 2, &n) == NB_ERR_RANGE && n == 5, "needs 5, got n=%zu", n);
    CHECK(ids[0] == BOS && ids[1] == BYTE0 + 'z' && ids[2] == -7, "only cap ids written");
    CHECK(nb_tokenize(t, "zzzz", 4, 1, 0, NULL, 0, &n) == NB_ERR_RANGE && n == 5, "count-only call");
    nb_tokenizer_free(t);
}

static void expect_create_fail(vocab *v, nb_status want, const char *needle) {
    nb_tokenizer *t = (nb_tokenizer *)&t;
    nb_status s = nb_tokenizer_create(&v->d, &t);
    CHECK(s == want && t == NULL, "create gave %d (%s), want %d", s, nb_last_error(), want);
    CHECK(strstr(nb_last_error(), needle) != NULL, "message '%s' lacks '%s'", nb_last_error(), needle);
}

TEST(descriptor_validation) {
    vocab v;
    base_vocab(&v, -1.0f, -2.0f);
    v.type[9] = 7;
    expect_create_fail(&v, NB_ERR_FORMAT, "token 9");
    base_vocab(&v, -1.0f, -2.0f);
    v.score[11] = NAN;
    expect_create_fail(&v, NB_ERR_NONFINITE, "token 11");
    base_vocab(&v, -1.0f, -2.0f);
    v.text[BYTE0 + 3] = (nb_token_text){"<0xZZ>", 6};
    expect_create_fail(&v, NB_ERR_FORMAT, "token 20");
    base_vocab(&v, -1.0f, -2.0f);
    v.text[4] = (nb_token_text){NULL, 3};
    expect_create_fail(&v, NB_ERR_INVALID_ARG, "token 4");
    base_vocab(&v, -1.0f, -2.0f);
    v.text[5].len = (uint64_t)NB_TOKEN_MAX_BYTES + 1;
    expect_create_fail(&v, NB_ERR_RANGE, "token 5");
    base_vocab(&v, -1.0f, -2.0f);
    v.d.bos_id = v.n;
    expect_create_fail(&v, NB_ERR_RANGE, "bos");
    base_vocab(&v, -1.0f, -2.0f);
    v.d.bos_id = -1;
    expect_create_fail(&v, NB_ERR_FORMAT, "add_bos");
    base_vocab(&v, -1.0f, -2.0f);
    v.d.n_tokens = 0;
    expect_create_fail(&v, NB_ERR_RANGE, "0 tokens");
    nb_tokenizer *t = NULL;
    CHECK(nb_tokenizer_create(NULL, &t) == NB_ERR_INVALID_ARG, "NULL desc");
    nb_tokenizer_free(NULL);
}

/* ------------------------------------------------------------ randomized check */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}

/* Id of a text as the tokenizer resolves duplicates (the last one listed), or -1. */
static int find_last(const vocab *v, const char *s, size_t len) {
    int id = -1;
    for (int k = 0; k < v->n; k++)
        if (v->text[k].len == len && !memcmp(v->text[k].ptr, s, len)) id = k;
    return id;
}

/* The merge rule written the slow, obvious way: scan all adjacent pairs, merge the best-scoring
 * one (the first found wins ties), repeat. Input bytes are ASCII, so symbols start as bytes; a
 * symbol is a run of s (start[i], len[i]). */
static size_t naive(const void *vp, const char *s, int32_t *out) {
    const vocab *v = vp;
    size_t start[64], len[64];
    int n = 0;
    for (; s[n]; n++) start[n] = (size_t)n, len[n] = 1;
    for (;;) {
        int best = -1;
        float best_score = 0;
        for (int i = 0; i + 1 < n; i++) {
            int k = find_last(v, s + start[i], len[i] + len[i + 1]);
            if (k >= 0 && (best < 0 || v->score[k] > best_score)) best = i, best_score = v->score[k];
        }
        if (best < 0) break;
        len[best] += len[best + 1];
        for (int i = best + 1; i + 1 < n; i++) start[i] = start[i + 1], len[i] = len[i + 1];
        n--;
    }
    size_t m = 0;
    for (int i = 0; i < n; i++) {
        int id = find_last(v, s + start[i], len[i]);
        out[m++] = id >= 0 ? id : BYTE0 + (uint8_t)s[start[i]];
    }
    return m;
}

/* 50 random strings of 1..30 bytes over {a, b, c}: t gives the ids the naive rule gives on v. */
static void match_naive(const nb_tokenizer *t, size_t (*naive_ids)(const void *, const char *, int32_t *),
                        const void *v, int round) {
    for (int trial = 0; trial < 50; trial++) {
        char s[40];
        int len = 1 + (int)(rnd() % 30);
        for (int j = 0; j < len; j++) s[j] = (char)('a' + rnd() % 3);
        s[len] = 0;
        int32_t want[64], got[64];
        size_t nw = naive_ids(v, s, want), n = 0;
        CHECK(nb_tokenize(t, s, (size_t)len, 0, 0, got, 64, &n) == NB_OK, "tokenize: %s", nb_last_error());
        int same = n == nw;
        for (size_t i = 0; same && i < n; i++) same = got[i] == want[i];
        CHECK(same, "round %d '%s': nibble %zu ids, naive %zu ids", round, s, n, nw);
    }
}

TEST(random_vocab_matches_naive_merge) {
    static char store[200][8];
    for (int round = 0; round < 20; round++) {
        vocab v;
        base_vocab(&v, -1.0f, -2.0f);
        /* random multi-letter tokens over {a,b,c}; few distinct scores so ties are common */
        int extra = 0;
        for (int k = 0; k < 60 && v.n < MAX_TOK; k++) {
            char *s = store[extra++];
            int len = 2 + (int)(rnd() % 4);
            for (int j = 0; j < len; j++) s[j] = (char)('a' + rnd() % 3);
            s[len] = 0;
            add(&v, s, -(float)(rnd() % 5), NB_TOKEN_NORMAL);
        }
        v.d.n_tokens = v.n;
        nb_tokenizer *t = make(&v);
        if (t) match_naive(t, naive, &v, round);
        nb_tokenizer_free(t);
    }
}


/* ------------------------------------------------------------ byte-level BPE */

/* GPT-2's byte -> character mapping, written out again as the reference. */
static uint32_t gpt2_cp(int c) {
    if ((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE) return (uint32_t)c;
    int n = 0;
    for (int k = 0; k < c; k++) n += !((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || k >= 0xAE);
    return 256u + (uint32_t)n;
}

#define BPE_MAX 400

typedef struct bvocab {
    nb_token_text text[BPE_MAX], merge[BPE_MAX];
    int32_t type[BPE_MAX];
    char store[BPE_MAX][16], mstore[BPE_MAX][96];
    int n, nm;
    nb_vocab_desc d;
} bvocab;

/* "Ġ" etc. spelled from raw bytes: the GPT-2 text of s[0 .. len) into out. */
static size_t gpt2_text(const char *s, size_t len, char *out) {
    size_t m = 0;
    for (size_t i = 0; i < len; i++) {
        uint32_t cp = gpt2_cp((uint8_t)s[i]);
        if (cp < 0x80) out[m++] = (char)cp;
        else out[m++] = (char)(0xC0 | cp >> 6), out[m++] = (char)(0x80 | (cp & 0x3F));
    }
    out[m] = 0;
    return m;
}

static int btok(bvocab *v, const char *raw, int type) { /* a token whose raw bytes are raw */
    size_t m = type == NB_TOKEN_NORMAL ? gpt2_text(raw, strlen(raw), v->store[v->n]) : strlen(raw);
    if (type != NB_TOKEN_NORMAL) memcpy(v->store[v->n], raw, m + 1);
    v->text[v->n] = (nb_token_text){v->store[v->n], m};
    v->type[v->n] = type;
    return v->n++;
}

static void bmerge_text(bvocab *v, const char *text) { /* a merge line as written in the file */
    snprintf(v->mstore[v->nm], sizeof v->mstore[v->nm], "%s", text);
    v->merge[v->nm] = (nb_token_text){v->mstore[v->nm], strlen(text)};
    v->nm++;
}

static void bmerge(bvocab *v, const char *l, const char *r) { /* raw sides, GPT-2 spelled */
    char line[96];
    size_t a = gpt2_text(l, strlen(l), line);
    line[a] = ' ';
    gpt2_text(r, strlen(r), line + a + 1);
    bmerge_text(v, line);
}

/* ids 0..255: each byte's one-character token; then the tokens below. */
enum { B_EOT = 256, B_USER, B_AB, B_ABC, B_GA, B_BC, B_XYZ, B_GB, B_QQ, B_CJK, B_N };

static void bpe_vocab(bvocab *v, const char *pre) {
    memset(v, 0, sizeof *v);
    for (int c = 0; c < 256; c++) {
        char raw[2] = {(char)c, 0};
        size_t m = gpt2_text(raw, 1, v->store[c]);
        v->text[c] = (nb_token_text){v->store[c], m};
        v->type[c] = NB_TOKEN_NORMAL;
        v->n++;
    }
    btok(v, "<|endoftext|>", NB_TOKEN_CONTROL);
    btok(v, "<|user|>", NB_TOKEN_USER_DEFINED);
    btok(v, "ab", NB_TOKEN_NORMAL);
    btok(v, "abc", NB_TOKEN_NORMAL);
    btok(v, " a", NB_TOKEN_NORMAL);
    btok(v, "bc", NB_TOKEN_NORMAL);
    btok(v, "xyz", NB_TOKEN_NORMAL);
    btok(v, " b", NB_TOKEN_NORMAL);
    btok(v, "qq", NB_TOKEN_NORMAL);
    v->text[v->n] = (nb_token_text){"\xe4\xb8\x80", 3}; /* U+4E00: no GPT-2 character */
    v->type[v->n++] = NB_TOKEN_NORMAL;
    bmerge(v, "a", "b");   /* rank 0 */
    bmerge(v, "ab", "c");  /* 1 */
    bmerge(v, " ", "a");   /* 2 */
    bmerge(v, "b", "c");   /* 3 */
    bmerge(v, "x", "y");   /* 4: "xy" is no token */
    bmerge(v, "xy", "z");  /* 5 */
    bmerge(v, " ", "b");   /* 6 */
    bmerge_text(v, "nospace");   /* malformed: kept inert */
    bmerge_text(v, " a");        /* the only space is the first byte */
    bmerge_text(v, "a ");        /* empty right side */
    bmerge(v, "a", "b");         /* repeated pair: the first rank stays */
    v->d = (nb_vocab_desc){.n_tokens = v->n, .texts = v->text, .types = v->type, .bos_id = B_EOT, .eos_id = B_EOT,
                           .unk_id = -1, .eot_id = -1, .model = NB_VOCAB_BPE, .pre = pre, .merges = v->merge,
                           .n_merges = v->nm};
}

static nb_tokenizer *bmake(bvocab *v) {
    nb_tokenizer *t = NULL;
    nb_status s = nb_tokenizer_create(&v->d, &t);
    CHECK(s == NB_OK, "create BPE: %s", nb_last_error());
    return t;
}

TEST(bpe_merges_by_rank) {
    bvocab v;
    bpe_vocab(&v, "qwen2");
    nb_tokenizer *t = bmake(&v);
    EXPECT(t, "abc", 0, 0, B_ABC);       /* a b (0), then ab c (1) */
    EXPECT(t, "abab", 0, 0, B_AB, B_AB);
    EXPECT(t, "bcab", 0, 0, B_BC, B_AB);
    EXPECT(t, "xyz", 0, 0, B_XYZ);       /* through "xy", which is no token */
    EXPECT(t, "xy", 0, 0, 'x', 'y');     /* a final non-token symbol goes out byte by byte */
    EXPECT(t, "a", 1, 0, 'a');           /* add_bos is off */
    nb_tokenizer_free(t);
    /* ranks decide: with "b c" first, "abc" is a + bc */
    bpe_vocab(&v, "qwen2");
    nb_token_text first = v.merge[0];
    v.merge[0] = v.merge[3], v.merge[3] = first;
    t = bmake(&v);
    EXPECT(t, "abc", 0, 0, 'a', B_BC);
    nb_tokenizer_free(t);
}

TEST(bpe_pretokenizers) {
    bvocab v;
    bpe_vocab(&v, "gpt-2");
    nb_tokenizer *t = bmake(&v);
    EXPECT(t, "a b", 0, 0, 'a', B_GB);           /* words "a", " b" */
    EXPECT(t, "ab ab", 0, 0, B_AB, ' ', B_AB);   /* " ab": a b (rank 0) goes before " a" (2) */
    EXPECT(t, "qq", 0, 0, 'q', 'q');             /* no merge makes "qq" */
    EXPECT(t, "a1234", 0, 0, 'a', '1', '2', '3', '4');
    nb_tokenizer_free(t);
    bpe_vocab(&v, "llama-bpe");
    t = bmake(&v);
    EXPECT(t, "qq", 0, 0, B_QQ);                 /* ignore_merges: a word that is a token */
    EXPECT(t, " qq", 0, 0, ' ', 'q', 'q');       /* the word is " qq", no token */
    nb_tokenizer_free(t);
    bpe_vocab(&v, "nope");
    nb_tokenizer *bad = (nb_tokenizer *)&bad;
    CHECK(nb_tokenizer_create(&v.d, &bad) == NB_ERR_UNSUPPORTED && bad == NULL, "unknown pre refused");
    CHECK(strstr(nb_last_error(), "'nope'") != NULL, "message names the pre: %s", nb_last_error());
}

TEST(bpe_specials_and_utf8) {
    bvocab v;
    bpe_vocab(&v, "qwen2");
    nb_tokenizer *t = bmake(&v);
    EXPECT(t, "a<|user|>b", 0, 0, 'a', B_USER, 'b');
    EXPECT(t, "<|endoftext|>", 0, 1, B_EOT);
    CHECK(nb_tokenizer_is_eog(t, B_EOT), "<|endoftext|> ends generation");
    int32_t ids[32];
    size_t n = 0;
    CHECK(nb_tokenize(t, "<|endoftext|>", 13, 0, 0, ids, 32, &n) == NB_OK && n > 1 && ids[0] == '<',
          "control text not split without parse_special (%zu ids)", n);
    /* invalid UTF-8 as llama.cpp reads it: bad bytes are U+FFFD, surrogates and overlongs decode */
    EXPECT(t, "\xff", 0, 0, 0xEF, 0xBF, 0xBD);
    EXPECT(t, "\x80\x80", 0, 0, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD);
    EXPECT(t, "\xed\xa0\x80", 0, 0, 0xED, 0xA0, 0x80);
    expect(t, "\xc0\x80", 2, 0, 0, IDS(0));
    EXPECT(t, "\xe2\x82", 0, 0, 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD);
    EXPECT(t, "\xf4\x90\x80\x80", 0, 0, 0xEF, 0xBF, 0xBD); /* above U+10FFFF: one U+FFFD */
    nb_tokenizer_free(t);
}

TEST(bpe_pieces_and_detokenize) {
    bvocab v;
    bpe_vocab(&v, "qwen2");
    nb_tokenizer *t = bmake(&v);
    char buf[64];
    size_t len;
    CHECK(nb_token_to_piece(t, B_GA, buf, sizeof buf, &len, 0) == NB_OK && len == 2 && !memcmp(buf, " a", 2),
          "Ġa -> ' a'");
    CHECK(nb_token_to_piece(t, 0, buf, sizeof buf, &len, 0) == NB_OK && len == 1 && buf[0] == 0, "Ā -> 0x00");
    CHECK(nb_token_to_piece(t, B_EOT, buf, sizeof buf, &len, 0) == NB_OK && len == 0, "control hidden");
    CHECK(nb_token_to_piece(t, B_USER, buf, sizeof buf, &len, 0) == NB_OK && len == 8, "user-defined shown");
    static const char unk[] = "[UNK_BYTE_0xe4b880\xe4\xb8\x80]";
    CHECK(nb_token_to_piece(t, B_CJK, buf, sizeof buf, &len, 0) == NB_OK && len == sizeof unk - 1 &&
              !memcmp(buf, unk, len), "unmapped character: llama.cpp's marker (len %zu)", len);
    CHECK(nb_token_to_piece(t, B_N, buf, sizeof buf, &len, 0) == NB_ERR_INVALID_ARG, "id out of range refused");
    int32_t bad_ids[] = {1, B_N};
    CHECK(nb_detokenize(t, bad_ids, 2, 0, 0, buf, sizeof buf, &len) == NB_ERR_INVALID_ARG &&
              strstr(nb_last_error(), "ids[1]"), "detokenize names the bad id: %s", nb_last_error());
    /* every byte string that is valid UTF-8 comes back exactly (qwen2 keeps spaces as they are) */
    static const char *const texts[] = {"abc ab  c", " a b c . , ' s", "x\ty\n\nz", "\xc3\xa9t\xc3\xa9 \xe4\xb8\x80!",
                                        "a<|user|>b<|endoftext|>", "\x01\x7f \xf0\x9f\x98\x80"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int32_t ids[128];
        size_t n;
        char back[256];
        const char *s = texts[i];
        CHECK(nb_tokenize(t, s, strlen(s), 1, 1, ids, 128, &n) == NB_OK, "tokenize: %s", nb_last_error());
        CHECK(nb_detokenize(t, ids, n, 0, 1, back, sizeof back, &len) == NB_OK && len == strlen(s) &&
                  !memcmp(back, s, len), "round trip %zu: '%s' -> '%.*s'", i, s, (int)len, back);
    }
    nb_tokenizer_free(t);
    /* gpt-2 cleans spaces before punctuation and in contractions, as llama.cpp */
    bpe_vocab(&v, "gpt-2");
    t = bmake(&v);
    int32_t ids[64];
    size_t n;
    const char *s = "a . b , c ' d 's e 't";
    CHECK(nb_tokenize(t, s, strlen(s), 0, 0, ids, 64, &n) == NB_OK, "tokenize: %s", nb_last_error());
    CHECK(nb_detokenize(t, ids, n, 0, 0, NULL, 0, &len) == NB_ERR_RANGE && len == strlen(s), "size before clean-up");
    CHECK(nb_detokenize(t, ids, n, 0, 0, buf, sizeof buf, &len) == NB_OK && len == 16 &&
              !memcmp(buf, "a. b, c'd's e 't", 16), "cleaned: '%.*s'", (int)len, buf);
    nb_tokenizer_free(t);
}

TEST(bpe_descriptor_validation) {
    bvocab v;
    nb_tokenizer *t = NULL;
    bpe_vocab(&v, NULL); /* NULL pre is "default" */
    t = bmake(&v);
    nb_tokenizer_free(t);
    bpe_vocab(&v, "gpt-2");
    v.d.merges = NULL;
    CHECK(nb_tokenizer_create(&v.d, &t) == NB_ERR_INVALID_ARG && strstr(nb_last_error(), "NULL merge"),
          "NULL merges: %s", nb_last_error());
    bpe_vocab(&v, "gpt-2");
    v.merge[2] = (nb_token_text){NULL, 4};
    CHECK(nb_tokenizer_create(&v.d, &t) == NB_ERR_INVALID_ARG && strstr(nb_last_error(), "merge 2"),
          "NULL merge text: %s", nb_last_error());
    bpe_vocab(&v, "gpt-2");
    v.merge[1].len = 2 * (uint64_t)NB_TOKEN_MAX_BYTES + 1;
    CHECK(nb_tokenizer_create(&v.d, &t) == NB_ERR_RANGE && strstr(nb_last_error(), "merge 1"),
          "long merge: %s", nb_last_error());
    bpe_vocab(&v, "gpt-2");
    v.d.model = 7;
    CHECK(nb_tokenizer_create(&v.d, &t) == NB_ERR_UNSUPPORTED && strstr(nb_last_error(), "model 7"),
          "unknown model: %s", nb_last_error());
}

/* The BPE rule the slow way: join the adjacent pair of lowest rank (leftmost first) until none is
 * listed; symbols are raw byte strings, all ASCII letters here so GPT-2 text = raw text. */
static size_t naive_bpe(const void *vp, const char *s, int32_t *out) {
    const bvocab *v = vp;
    char sym[64][64];
    int n = 0;
    for (; s[n]; n++) sym[n][0] = s[n], sym[n][1] = 0;
    for (;;) {
        int best = -1, best_rank = 0;
        for (int i = 0; i + 1 < n; i++) {
            char line[132];
            size_t a = strlen(sym[i]), b = strlen(sym[i + 1]);
            memcpy(line, sym[i], a), line[a] = ' ', memcpy(line + a + 1, sym[i + 1], b);
            for (int r = 0; r < v->nm; r++)
                if (v->merge[r].len == a + b + 1 && !memcmp(v->merge[r].ptr, line, a + b + 1)) {
                    if (best < 0 || r < best_rank) best = i, best_rank = r;
                    break;
                }
        }
        if (best < 0) break;
        size_t a = strlen(sym[best]), b = strlen(sym[best + 1]);
        memcpy(sym[best] + a, sym[best + 1], b + 1);
        for (int i = best + 1; i + 1 < n; i++) memcpy(sym[i], sym[i + 1], sizeof sym[i]);
        n--;
    }
    size_t m = 0;
    for (int i = 0; i < n; i++) {
        int id = -1;
        for (int k = 0; k < v->n; k++)
            if (v->text[k].len == strlen(sym[i]) && !memcmp(v->text[k].ptr, sym[i], v->text[k].len)) id = k;
        if (id >= 0) out[m++] = id;
        else
            for (const char *c = sym[i]; *c; c++) out[m++] = (uint8_t)*c;
    }
    return m;
}

TEST(bpe_random_vocab_matches_naive_merge) {
    for (int round = 0; round < 20; round++) {
        bvocab v;
        bpe_vocab(&v, "qwen2");
        v.nm = 0;
        /* random merges of random strings over {a,b,c}; some results are tokens, some not */
        for (int k = 0; k < 80 && v.n < BPE_MAX && v.nm < BPE_MAX; k++) {
            char l[8], r[8];
            int nl = 1 + (int)(rnd() % 3), nr = 1 + (int)(rnd() % 3);
            for (int j = 0; j < nl; j++) l[j] = (char)('a' + rnd() % 3);
            for (int j = 0; j < nr; j++) r[j] = (char)('a' + rnd() % 3);
            l[nl] = r[nr] = 0;
            bmerge(&v, l, r);
            if (rnd() % 3) {
                char both[16];
                snprintf(both, sizeof both, "%s%s", l, r);
                btok(&v, both, NB_TOKEN_NORMAL);
            }
        }
        v.d.n_tokens = v.n, v.d.n_merges = v.nm;
        nb_tokenizer *t = bmake(&v);
        if (t) match_naive(t, naive_bpe, &v, round);
        nb_tokenizer_free(t);
    }
}

/* One BPE tokenizer, four threads tokenizing at once: the same ids as one thread. */
typedef struct job {
    const nb_tokenizer *t;
    const char *text;
    size_t len, n;
    int32_t ids[4096];
    nb_status s;
} job;

static void *tokenize_job(void *arg) {
    job *j = arg;
    for (int k = 0; k < 20 && !j->s; k++) j->s = nb_tokenize(j->t, j->text, j->len, 1, 1, j->ids, 4096, &j->n);
    return NULL;
}

TEST(bpe_threads) {
    bvocab v;
    bpe_vocab(&v, "llama-bpe");
    nb_tokenizer *t = bmake(&v);
    static const char piece[] = "abc ab<|user|> qq xyz \xe4\xb8\x80 12345 \xff!! \n\n";
    char text[2048];
    size_t len = 0;
    for (; len + sizeof piece < sizeof text; len += sizeof piece - 1) memcpy(text + len, piece, sizeof piece - 1);
    static job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job){.t = t, .text = text, .len = len};
        CHECK(pthread_create(&th[i], NULL, tokenize_job, &jobs[i]) == 0, "thread %d", i);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    job one = {.t = t, .text = text, .len = len};
    tokenize_job(&one);
    for (int i = 0; i < 4; i++)
        CHECK(jobs[i].s == NB_OK && jobs[i].n == one.n && !memcmp(jobs[i].ids, one.ids, one.n * sizeof one.ids[0]),
              "thread %d: status %d, %zu ids vs %zu", i, jobs[i].s, jobs[i].n, one.n);
    nb_tokenizer_free(t);
}

/* The GGUF route: keys of a gpt2 vocabulary written with nibble's writer, read back. */
static nb_status gguf_vocab(const char *path, int with_merges, const char *pre, nb_tokenizer **t, nb_gguf **g) {
    bvocab v;
    bpe_vocab(&v, pre);
    const char *toks[BPE_MAX], *merges[BPE_MAX];
    char texts[BPE_MAX][16];
    for (int i = 0; i < v.n; i++) {
        memcpy(texts[i], v.text[i].ptr, v.text[i].len);
        texts[i][v.text[i].len] = 0;
        toks[i] = texts[i];
    }
    for (int i = 0; i < v.nm; i++) merges[i] = v.mstore[i];
    nb_gguf_writer *w;
    nb_status s = nb_gguf_writer_create(&w);
    if (s) return s;
    if (!(s = nb_gguf_writer_set_string(w, "tokenizer.ggml.model", "gpt2")) && pre)
        s = nb_gguf_writer_set_string(w, "tokenizer.ggml.pre", pre);
    if (!s) s = nb_gguf_writer_set_string(w, "general.name", "tiny");
    if (!s) s = nb_gguf_writer_set_array(w, "tokenizer.ggml.tokens", NB_GGUF_STRING, toks, (uint64_t)v.n);
    if (!s) s = nb_gguf_writer_set_array(w, "tokenizer.ggml.token_type", NB_GGUF_I32, v.type, (uint64_t)v.n);
    if (!s && with_merges) s = nb_gguf_writer_set_array(w, "tokenizer.ggml.merges", NB_GGUF_STRING, merges, (uint64_t)v.nm);
    if (!s) s = nb_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", B_EOT);
    if (!s) s = nb_gguf_writer_write(w, path);
    nb_gguf_writer_free(w);
    if (s || (s = nb_gguf_open(path, g))) return s;
    s = nb_tokenizer_from_gguf(*g, t);
    return s;
}

TEST(bpe_from_gguf) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/nb_test_bpe_%d.gguf", (int)getpid());
    nb_tokenizer *t = NULL;
    nb_gguf *g = NULL;
    CHECK(gguf_vocab(path, 1, "llama-bpe", &t, &g) == NB_OK, "gpt2 GGUF: %s", nb_last_error());
    if (t) {
        /* llama3 adds BOS by default, and a BPE file without bos_token_id has BOS 11 */
        EXPECT(t, "qq abc", 1, 0, 11, B_QQ, ' ', B_ABC);
        CHECK(nb_tokenizer_eos(t) == B_EOT, "eos from the file");
    }
    nb_tokenizer_free(t), nb_gguf_close(g), t = NULL, g = NULL;
    CHECK(gguf_vocab(path, 0, "gpt-2", &t, &g) == NB_ERR_FORMAT && strstr(nb_last_error(), "tokenizer.ggml.merges"),
          "missing merges: %s", nb_last_error());
    nb_tokenizer_free(t), nb_gguf_close(g), t = NULL, g = NULL;
    CHECK(gguf_vocab(path, 1, "made-up", &t, &g) == NB_ERR_UNSUPPORTED && strstr(nb_last_error(), "made-up"),
          "unknown pre: %s", nb_last_error());
    nb_tokenizer_free(t), nb_gguf_close(g);
    unlink(path);
}

int main(void) {
    RUN(merge_order_follows_score);
    RUN(ties_go_leftmost);
    RUN(spaces_and_prefix);
    RUN(byte_fallback_and_utf8);
    RUN(special_tokens);
    RUN(eog_and_lookups);
    RUN(pieces);
    RUN(round_trips);
    RUN(output_capacity);
    RUN(descriptor_validation);
    RUN(random_vocab_matches_naive_merge);
    RUN(bpe_merges_by_rank);
    RUN(bpe_pretokenizers);
    RUN(bpe_specials_and_utf8);
    RUN(bpe_pieces_and_detokenize);
    RUN(bpe_descriptor_validation);
    RUN(bpe_random_vocab_matches_naive_merge);
    RUN(bpe_threads);
    RUN(bpe_from_gguf);
    return test_summary();
}
