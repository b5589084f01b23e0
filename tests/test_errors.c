/*
 * test_errors.c: error messages (chaining, each thing said once, plurals), the thread limit and
 * the kernel-set choice.
 *
 * A tiny Gemma 3 file (one layer, width 32, F32 zeros, four tokens) is written with the GGUF
 * writer so the model path runs without the real checkpoint; its variants break one key each.
 */
#include <stdint.h>
#include <unistd.h>

#include "nibble.h"
#include "base/cpu.h"
#include "base/error.h"
#include "test.h"

static char tmpdir[] = "/tmp/nb_test_errors_XXXXXX";

static const char *tmp_path(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

/* 1 when some run of `len` characters occurs twice in s: a message that says a thing twice. */
static int has_repeat(const char *s, size_t len) {
    size_t n = strlen(s);
    for (size_t i = 0; i + len <= n; i++)
        for (size_t j = i + 1; j + len <= n; j++)
            if (!memcmp(s + i, s + j, len)) return 1;
    return 0;
}

static size_t count_of(const char *s, const char *part) {
    size_t c = 0;
    for (const char *p = strstr(s, part); p; p = strstr(p + 1, part)) c++;
    return c;
}

/* ---------------------------------------------------------------- chaining */

TEST(chain_is_exact) {
    nb_fail(NB_ERR_FORMAT, "inner %d", 7);
    nb_status s = nb_fail(NB_ERR_RANGE, "outer: %s", nb_last_error());
    CHECK(s == NB_ERR_RANGE, "status %d", s);
    CHECK(!strcmp(nb_last_error(), "outer: inner 7"), "got '%s'", nb_last_error());
    nb_fail(NB_ERR_FORMAT, "top: %s", nb_last_error());
    CHECK(!strcmp(nb_last_error(), "top: outer: inner 7"), "twice: '%s'", nb_last_error());
    /* the message alone, and the message at the end */
    nb_fail(NB_ERR_FORMAT, "%s", nb_last_error());
    CHECK(!strcmp(nb_last_error(), "top: outer: inner 7"), "itself: '%s'", nb_last_error());
    nb_fail(NB_ERR_FORMAT, "%s (again)", nb_last_error());
    CHECK(!strcmp(nb_last_error(), "top: outer: inner 7 (again)"), "suffix: '%s'", nb_last_error());
}

TEST(chain_truncates_cleanly) {
    char big[1200];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    nb_fail(NB_ERR_FORMAT, "%s", big);
    size_t n = strlen(nb_last_error());
    CHECK(n > 1000 && n < sizeof big - 1, "stored %zu characters", n);
    nb_fail(NB_ERR_FORMAT, "outer: %s", nb_last_error());
    const char *m = nb_last_error();
    CHECK(strlen(m) == n && !strncmp(m, "outer: xxxx", 11) && strspn(m + 7, "x") == n - 7, "truncated: %.20s... (%zu)",
          m, strlen(m));
}

/* -------------------------------------------------------- a tiny Gemma 3 */

enum { W = 32, VOCAB = 4 };
static float zeros[W * W];

enum variant {
    VALID,
    FF_MISSING,
    FF_STRING,
    ARCH_U32,
    ARCH_MISSING,
    ROPE_U32,
    PATTERN_LENGTH, /* sliding_window_pattern of 2 bools for 1 layer */
};

static nb_status add(nb_gguf_writer *w, const char *name, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return nb_gguf_writer_add_tensor(w, name, NB_TYPE_F32, ne1 > 1 ? 2 : 1, ne, zeros);
}

static nb_status write_model(const char *path, enum variant v) {
    nb_gguf_writer *w;
    nb_status s = nb_gguf_writer_create(&w);
    if (s) return s;
    if (v == ARCH_U32) s = nb_gguf_writer_set_u32(w, "general.architecture", 3);
    else if (v != ARCH_MISSING) s = nb_gguf_writer_set_string(w, "general.architecture", "gemma3");
    static const struct { const char *key; uint32_t v; } u32s[] = {
        {"gemma3.block_count", 1},          {"gemma3.embedding_length", W},  {"gemma3.feed_forward_length", W},
        {"gemma3.attention.head_count", 1}, {"gemma3.attention.head_count_kv", 1},
        {"gemma3.attention.key_length", W}, {"gemma3.attention.value_length", W}, {"gemma3.context_length", 64},
    };
    for (size_t i = 0; !s && i < sizeof u32s / sizeof u32s[0]; i++) {
        if (!strcmp(u32s[i].key, "gemma3.feed_forward_length") && v == FF_MISSING) continue;
        if (!strcmp(u32s[i].key, "gemma3.feed_forward_length") && v == FF_STRING)
            s = nb_gguf_writer_set_string(w, u32s[i].key, "32");
        else
            s = nb_gguf_writer_set_u32(w, u32s[i].key, u32s[i].v);
    }
    if (!s && v == ROPE_U32) s = nb_gguf_writer_set_u32(w, "gemma3.rope.freq_base", 10000);
    if (!s && v == PATTERN_LENGTH) {
        const uint8_t pattern[2] = {1, 0};
        s = nb_gguf_writer_set_u32(w, "gemma3.attention.sliding_window", 4);
        if (!s) s = nb_gguf_writer_set_array(w, "gemma3.attention.sliding_window_pattern", NB_GGUF_BOOL, pattern, 2);
    }
    static const char *const tokens[VOCAB] = {"<unk>", "<s>", "</s>", "a"};
    if (!s) s = nb_gguf_writer_set_string(w, "tokenizer.ggml.model", "llama");
    if (!s) s = nb_gguf_writer_set_array(w, "tokenizer.ggml.tokens", NB_GGUF_STRING, tokens, VOCAB);
    if (!s) s = add(w, "token_embd.weight", W, VOCAB);
    if (!s) s = add(w, "output_norm.weight", W, 1);
    static const char *const norms[] = {"attn_norm", "attn_q_norm", "attn_k_norm", "post_attention_norm", "ffn_norm",
                                        "post_ffw_norm"};
    static const char *const mats[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    char name[64];
    for (size_t i = 0; !s && i < sizeof norms / sizeof norms[0]; i++) {
        snprintf(name, sizeof name, "blk.0.%s.weight", norms[i]);
        s = add(w, name, W, 1);
    }
    for (size_t i = 0; !s && i < sizeof mats / sizeof mats[0]; i++) {
        snprintf(name, sizeof name, "blk.0.%s.weight", mats[i]);
        s = add(w, name, W, W);
    }
    if (!s) s = nb_gguf_writer_write(w, path);
    nb_gguf_writer_free(w);
    return s;
}

/* Loads variant v; returns the load's status and leaves its message in nb_last_error(). */
static nb_status load_variant(enum variant v, nb_model **m) {
    const char *path = tmp_path("tiny.gguf");
    *m = NULL;
    nb_status s = write_model(path, v);
    if (s) {
        CHECK(0, "writing variant %d: %s", (int)v, nb_last_error());
        return s;
    }
    return nb_model_load(path, m);
}

TEST(tiny_model_loads) {
    nb_model *m;
    nb_status s = load_variant(VALID, &m);
    CHECK(!s, "load: %s", nb_last_error());
    if (m) CHECK(nb_model_get_info(m)->n_ff == W && nb_model_get_info(m)->n_vocab == VOCAB, "hyperparameters");
    nb_model_free(m);
}

/* The refusal of variant v: status, exact message, and the key named once with nothing repeated. */
static void expect_refusal(enum variant v, nb_status want, const char *msg, const char *key) {
    nb_model *m;
    nb_status s = load_variant(v, &m);
    const char *got = nb_last_error();
    CHECK(s == want && !m, "variant %d: status %d, want %d", (int)v, s, want);
    CHECK(!strcmp(got, msg), "variant %d:\n  got  '%s'\n  want '%s'", (int)v, got, msg);
    CHECK(count_of(got, key) == 1, "variant %d names '%s' %zu times: %s", (int)v, key, count_of(got, key), got);
    CHECK(!has_repeat(got, 8), "variant %d repeats itself: %s", (int)v, got);
    nb_model_free(m);
}

TEST(metadata_said_once) {
    expect_refusal(FF_MISSING, NB_ERR_RANGE, "model: metadata 'gemma3.feed_forward_length': missing",
                   "feed_forward_length");
    expect_refusal(FF_STRING, NB_ERR_FORMAT,
                   "model: metadata 'gemma3.feed_forward_length': holds a string, expected u32", "feed_forward_length");
    expect_refusal(ARCH_U32, NB_ERR_FORMAT, "model: metadata 'general.architecture': holds a u32, expected string",
                   "general.architecture");
    expect_refusal(ARCH_MISSING, NB_ERR_RANGE, "model: metadata 'general.architecture': missing",
                   "general.architecture");
    expect_refusal(ROPE_U32, NB_ERR_FORMAT, "model: metadata 'gemma3.rope.freq_base': holds a u32, expected f32",
                   "rope.freq_base");
}

TEST(gguf_getter_alone) {
    /* meta.c's messages stand alone when nobody chains them */
    nb_gguf_writer *w;
    CHECK(!nb_gguf_writer_create(&w), "writer");
    const uint32_t one[1] = {5};
    CHECK(!nb_gguf_writer_set_string(w, "k.s", "x") && !nb_gguf_writer_set_array(w, "k.a", NB_GGUF_U32, one, 1), "set");
    const char *path = tmp_path("getter.gguf");
    CHECK(!nb_gguf_writer_write(w, path), "write: %s", nb_last_error());
    nb_gguf_writer_free(w);
    nb_gguf *g;
    if (nb_gguf_open(path, &g)) {
        CHECK(0, "open: %s", nb_last_error());
        return;
    }
    uint32_t u;
    CHECK(nb_gguf_get_u32(g, "k.none", &u) == NB_ERR_RANGE && strstr(nb_last_error(), "'k.none'") &&
              strstr(nb_last_error(), "not found"),
          "absent: %s", nb_last_error());
    CHECK(nb_gguf_get_u32(g, "k.s", &u) == NB_ERR_FORMAT && strstr(nb_last_error(), "'k.s' is string, expected u32"),
          "mistyped: %s", nb_last_error());
    nb_gguf_value v;
    CHECK(nb_gguf_kv_value(g, 9, &v) == NB_ERR_RANGE && strstr(nb_last_error(), "index 9 out of range (2 keys)"),
          "index: %s", nb_last_error());
    int64_t kv = nb_gguf_find_key(g, "k.a");
    CHECK(nb_gguf_arr_value(g, kv, 1, &v) == NB_ERR_RANGE &&
              strstr(nb_last_error(), "'k.a': element 1 out of range (1 element)"),
          "element: %s", nb_last_error());
    nb_gguf_close(g);
}

/* ---------------------------------------------------------------- plurals */

TEST(plural_helper) {
    CHECK(!strcmp(nb_plural(1), ""), "1");
    CHECK(!strcmp(nb_plural(0), "s") && !strcmp(nb_plural(2), "s") && !strcmp(nb_plural(-1), "s"), "0, 2, -1");
}

TEST(plural_layers) {
    expect_refusal(PATTERN_LENGTH, NB_ERR_FORMAT,
                   "model: metadata 'gemma3.attention.sliding_window_pattern' holds 2 values for 1 layer",
                   "sliding_window_pattern");
}

/* nb_perplexity's refusals: counts in the singular, no "perplexity: " (the CLI prints that). */
TEST(perplexity_messages) {
    nb_model *m;
    if (load_variant(VALID, &m)) {
        CHECK(0, "load: %s", nb_last_error());
        return;
    }
    nb_ctx_params cp = nb_ctx_default_params();
    cp.n_ctx = 1;
    cp.n_threads = 1;
    nb_ctx *c;
    if (nb_ctx_create(m, &cp, &c)) {
        CHECK(0, "context: %s", nb_last_error());
        nb_model_free(m);
        return;
    }
    const int32_t ids[8] = {1, 3, 3, 3, 3, 3, 3, 3};
    nb_ppl_params p = nb_ppl_default_params();
    p.n_ctx = 4;
    nb_ppl_result r;
    CHECK(nb_perplexity(c, ids, 1, &p, &r) == NB_ERR_RANGE &&
              !strcmp(nb_last_error(), "the text is 1 token; one window needs 4 (use a longer text or a smaller -c)"),
          "one token: %s", nb_last_error());
    CHECK(nb_perplexity(c, ids, 3, &p, &r) == NB_ERR_RANGE && !strncmp(nb_last_error(), "the text is 3 tokens;", 21),
          "three tokens: %s", nb_last_error());
    CHECK(nb_perplexity(c, ids, 8, &p, &r) == NB_ERR_RANGE &&
              !strcmp(nb_last_error(), "window 4 exceeds the context's 1 position"),
          "context of one: %s", nb_last_error());
    p.n_ctx = 2;
    CHECK(nb_perplexity(c, ids, 8, &p, &r) == NB_ERR_RANGE && !strncmp(nb_last_error(), "window 2 outside [4, ", 21),
          "window 2: %s", nb_last_error());
    nb_ctx_free(c);
    nb_model_free(m);
}

/* ---------------------------------------------------------------- threads */

static void touch(void *ctx, int64_t b, int64_t e) {
    int *seen = ctx;
    for (int64_t i = b; i < e; i++) seen[i] = 1;
}

TEST(thread_limit) {
    CHECK(NB_MAX_THREADS == 256, "NB_MAX_THREADS %d", NB_MAX_THREADS);
    nb_pool *p = (nb_pool *)1;
    CHECK(nb_pool_create(NB_MAX_THREADS + 1, &p) == NB_ERR_RANGE && !p, "one over the limit");
    CHECK(strstr(nb_last_error(), "257 threads, limit 256"), "message: %s", nb_last_error());
    /* the limit itself is allowed */
    if (nb_pool_create(NB_MAX_THREADS, &p)) {
        CHECK(0, "a pool of NB_MAX_THREADS: %s", nb_last_error());
        return;
    }
    static int seen[1000];
    CHECK(nb_pool_threads(p) == NB_MAX_THREADS, "%d threads", nb_pool_threads(p));
    CHECK(!nb_pool_for(p, 1000, 1, touch, seen), "run: %s", nb_last_error());
    int all = 1;
    for (int i = 0; i < 1000; i++) all &= seen[i];
    CHECK(all, "every item ran");
    nb_pool_destroy(p);
    /* the default (one per CPU) is capped, never refused */
    CHECK(!nb_pool_create(0, &p) && nb_pool_threads(p) <= NB_MAX_THREADS, "default: %s", nb_last_error());
    nb_pool_destroy(p);
}

/* ------------------------------------------------------------ kernel sets */

TEST(isa_forced_falls_back_to_best) {
    const nb_cpu_features avx2 = {.avx2 = 1, .fma = 1, .f16c = 1};
    const nb_cpu_features none = {0};
    const nb_cpu_features avx512 = {.avx2 = 1, .fma = 1, .f16c = 1, .avx512f = 1, .avx512bw = 1, .avx512vl = 1};
    char note[160];
    CHECK(nb_isa_choose(&avx2, "avx512", note, sizeof note) == NB_ISA_AVX2, "avx512 on an avx2 CPU: %s", note);
    CHECK(!strcmp(note, "avx2: NIBBLE_ISA=avx512 forced, but this CPU lacks it; using the best it has"), "note: %s",
          note);
    CHECK(nb_isa_choose(&none, "avx2", note, sizeof note) == NB_ISA_REF && !strncmp(note, "ref: NIBBLE_ISA=avx2", 20),
          "avx2 on a bare CPU: %s", note);
    CHECK(nb_isa_choose(&avx512, "avx2", note, sizeof note) == NB_ISA_AVX2 && !strcmp(note, "avx2: forced by NIBBLE_ISA"),
          "avx2 on an avx512 CPU: %s", note);
    CHECK(nb_isa_choose(&avx512, "ref", note, sizeof note) == NB_ISA_REF, "ref: %s", note);
    CHECK(nb_isa_choose(&avx512, NULL, note, sizeof note) == NB_ISA_AVX512 && strstr(note, "best"), "none: %s", note);
    CHECK(nb_isa_choose(&avx2, "", note, sizeof note) == NB_ISA_AVX2, "empty: %s", note);
    CHECK(nb_isa_choose(&avx2, "sse9", note, sizeof note) == NB_ISA_AVX2 && strstr(note, "ignored"), "bogus: %s",
          note);
    /* what this machine chose agrees with the pure function */
    CHECK(nb_isa_best() == nb_isa_best_of(nb_cpu()), "best");
}

int main(void) {
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(chain_is_exact);
    RUN(chain_truncates_cleanly);
    RUN(tiny_model_loads);
    RUN(metadata_said_once);
    RUN(gguf_getter_alone);
    RUN(plural_helper);
    RUN(plural_layers);
    RUN(perplexity_messages);
    RUN(thread_limit);
    RUN(isa_forced_falls_back_to_best);
    unlink(tmp_path("tiny.gguf"));
    unlink(tmp_path("getter.gguf"));
    rmdir(tmpdir);
    return test_summary();
}
