/*
 * test_tokenizer.c: the SentencePiece tokenizer on small hand-made vocabularies: merge order by
 * score, leftmost on ties, byte fallback, special-token splitting, UTF-8 edge cases, BOS/EOS and
 * space prefix, pieces, detokenize round trips, descriptor validation, and a randomized check of
 * the heap-driven merge against a plain quadratic re-implementation of the same rule.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

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
static size_t naive(const vocab *v, const char *s, int32_t *out) {
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
        for (int trial = 0; trial < 50 && t; trial++) {
            char s[40];
            int len = 1 + (int)(rnd() % 30);
            for (int j = 0; j < len; j++) s[j] = (char)('a' + rnd() % 3);
            s[len] = 0;
            int32_t want[64], got[64];
            size_t nw = naive(&v, s, want), n = 0;
            CHECK(nb_tokenize(t, s, (size_t)len, 0, 0, got, 64, &n) == NB_OK, "tokenize: %s", nb_last_error());
            int same = n == nw;
            for (size_t i = 0; same && i < n; i++) same = got[i] == want[i];
            CHECK(same, "round %d '%s': nibble %zu ids, naive %zu ids", round, s, n, nw);
        }
        nb_tokenizer_free(t);
    }
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
    return test_summary();
}
