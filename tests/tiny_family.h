/*
 * tiny_family.h: tiny random-weight files of every family nibble runs, written with nibble's own
 * GGUF writer: F32 weights, an 8-token SentencePiece vocabulary, the keys and tensor names
 * llama.cpp's converter writes for each family, and broken copies. tests/test_families.c runs
 * them; fuzz/gen_seeds.c writes them as the seeds of fuzz_model.
 */
#ifndef NB_TESTS_TINY_FAMILY_H
#define NB_TESTS_TINY_FAMILY_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "nibble.h"

enum { E = 32, H = 2, HKV = 1, D = 16, F = 48, LAYERS = 2, VOCAB = 8, CTX = 64 };

/* What sets a family's file apart (the tensors and keys llama.cpp's converter writes for it). */
typedef struct family {
    const char *arch;
    int head_dim;       /* D, or wider than E / H (qwen3) */
    int qk_norm, post_norms, biases, fused, rope_freqs, longrope, yarn, sliding, softcap, untied;
} family;

static const family FAMILIES[] = {
    {"gemma3", D, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0},
    {"gemma2", D, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0},
    {"llama", D, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1},
    {"llama", D, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}, /* YaRN */
    {"qwen2", D, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3", 2 * D, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"phi3", D, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1},
};
#define N_FAMILIES (int)(sizeof FAMILIES / sizeof FAMILIES[0])

/* What a broken copy changes. */
enum breakage { WHOLE, NO_FFN_DOWN, SHORT_OUTPUT, HEADS_4097, ARCH_BERT };

static uint64_t rng_state;
static float rnd(void) { /* splitmix64, uniform in [-1, 1) */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (float)((double)((z ^ (z >> 31)) >> 11) / 4503599627370496.0 - 1.0);
}

/* Every tensor's data, kept until the file is written (the writer does not copy). */
static float *bufs[256];
static int n_bufs;

/* A tensor of random values: matrices ~ U(-1, 1)/sqrt(n_in), vectors 1 + U/10 (norms, factors) or
 * U/10 (biases). */
static nb_status add(nb_gguf_writer *w, const char *name, int64_t ne0, int64_t ne1, int bias) {
    float *x = malloc(sizeof(float) * (size_t)(ne0 * ne1));
    if (!x || n_bufs == 256) return NB_ERR_NOMEM;
    bufs[n_bufs++] = x;
    for (int64_t i = 0; i < ne0 * ne1; i++) x[i] = ne1 > 1 ? rnd() / sqrtf((float)ne0) : bias ? rnd() / 10 : 1 + rnd() / 10;
    const int64_t ne[2] = {ne0, ne1};
    return nb_gguf_writer_add_tensor(w, name, NB_TYPE_F32, ne1 > 1 ? 2 : 1, ne, x);
}

static nb_status add_layer(nb_gguf_writer *w, const family *f, int il, enum breakage b) {
    const int64_t QW = (int64_t)f->head_dim * H, KW = (int64_t)f->head_dim * HKV;
    char n[64];
    nb_status s = NB_OK;
#define T(stem, ne0, ne1) (snprintf(n, sizeof n, "blk.%d.%s.weight", il, stem), add(w, n, ne0, ne1, 0))
#define B(stem, len) (snprintf(n, sizeof n, "blk.%d.%s.bias", il, stem), add(w, n, len, 1, 1))
    if (!s) s = T("attn_norm", E, 1);
    if (f->fused) {
        if (!s) s = T("attn_qkv", E, QW + 2 * KW);
    } else {
        if (!s) s = T("attn_q", E, QW);
        if (!s) s = T("attn_k", E, KW);
        if (!s) s = T("attn_v", E, KW);
    }
    if (f->biases && !s) s = B("attn_q", QW);
    if (f->biases && !s) s = B("attn_k", KW);
    if (f->biases && !s) s = B("attn_v", KW);
    if (f->qk_norm && !s) s = T("attn_q_norm", f->head_dim, 1);
    if (f->qk_norm && !s) s = T("attn_k_norm", f->head_dim, 1);
    if (!s) s = T("attn_output", QW, E);
    if (f->post_norms && !s) s = T("post_attention_norm", E, 1);
    if (!s) s = T("ffn_norm", E, 1);
    if (!f->fused && !s) s = T("ffn_gate", E, F);
    if (!s) s = T("ffn_up", E, f->fused ? 2 * F : F);
    if (!s && !(b == NO_FFN_DOWN && il == 1)) s = T("ffn_down", F, E);
    if (f->post_norms && !s) s = T("post_ffw_norm", E, 1);
#undef T
#undef B
    return s;
}

static nb_status write_family(const char *path, const family *f, enum breakage b) {
    nb_gguf_writer *w;
    nb_status s = nb_gguf_writer_create(&w);
    if (s) return s;
    rng_state = 42;
    n_bufs = 0;
    const char *a = f->arch;
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", a, suffix), key)
    s = nb_gguf_writer_set_string(w, "general.architecture", b == ARCH_BERT ? "bert" : a);
    const struct { const char *suffix; uint32_t v; } u32s[] = {
        {"block_count", LAYERS},        {"embedding_length", E},
        {"feed_forward_length", F},     {"attention.head_count", b == HEADS_4097 ? 4097 : H},
        {"attention.head_count_kv", HKV}, {"attention.key_length", (uint32_t)f->head_dim},
        {"attention.value_length", (uint32_t)f->head_dim}, {"context_length", 4 * CTX},
    };
    for (size_t i = 0; !s && i < sizeof u32s / sizeof u32s[0]; i++) s = nb_gguf_writer_set_u32(w, KEY(u32s[i].suffix), u32s[i].v);
    if (!s) s = nb_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    if (!s && f->sliding) s = nb_gguf_writer_set_u32(w, KEY("attention.sliding_window"), 8);
    if (!s && f->softcap) s = nb_gguf_writer_set_f32(w, KEY("attn_logit_softcapping"), 5.0f);
    if (!s && f->softcap) s = nb_gguf_writer_set_f32(w, KEY("final_logit_softcapping"), 3.0f);
    if (!s && (f->yarn || f->longrope)) s = nb_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), CTX);
    if (!s && f->yarn) s = nb_gguf_writer_set_string(w, KEY("rope.scaling.type"), "yarn");
    if (!s && f->yarn) s = nb_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 4.0f);
    if (!s && f->longrope) s = nb_gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"), 1.2f);
#undef KEY
    static const char *const tokens[VOCAB] = {"<unk>", "<s>", "</s>", ("\xe2\x96\x81" "a"), "b", "c", "d", "e"};
    if (!s) s = nb_gguf_writer_set_string(w, "tokenizer.ggml.model", "llama");
    if (!s) s = nb_gguf_writer_set_array(w, "tokenizer.ggml.tokens", NB_GGUF_STRING, tokens, VOCAB);
    if (!s) s = add(w, "token_embd.weight", E, VOCAB, 0);
    if (!s) s = add(w, "output_norm.weight", E, 1, 0);
    if (!s && f->untied) s = add(w, "output.weight", E, b == SHORT_OUTPUT ? VOCAB - 1 : VOCAB, 0);
    if (!s && f->rope_freqs) s = add(w, "rope_freqs.weight", f->head_dim / 2, 1, 0);
    if (!s && f->longrope) s = add(w, "rope_factors_short.weight", f->head_dim / 2, 1, 0);
    if (!s && f->longrope) s = add(w, "rope_factors_long.weight", f->head_dim / 2, 1, 0);
    for (int il = 0; il < LAYERS && !s; il++) s = add_layer(w, f, il, b);
    if (!s) s = nb_gguf_writer_write(w, path);
    nb_gguf_writer_free(w);
    for (int i = 0; i < n_bufs; i++) free(bufs[i]);
    return s;
}

#endif
