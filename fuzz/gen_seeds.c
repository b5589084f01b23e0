/*
 * gen_seeds.c: writes small, valid GGUF files with nibble's own writer, as the fuzzers' starting
 * corpora: into DIR (fuzz_gguf) metadata of every value type, a tensor of every type nibble runs,
 * and a miniature of a real model's header (architecture keys, tokenizer arrays); into MODEL_DIR
 * (fuzz_model) test_families.c's tiny file of every family (tests/tiny_family.h).
 */
#include <stdio.h>
#include <string.h>

#include "nibble.h"
#include "tests/tiny_family.h"

static int fail(const char *what) {
    fprintf(stderr, "gen_seeds: %s: %s\n", what, nb_last_error());
    return 1;
}

static int write(nb_gguf_writer *w, const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    nb_status s = nb_gguf_writer_write(w, path);
    nb_gguf_writer_free(w);
    return s ? fail(path) : 0;
}

static int metadata(const char *dir) {
    nb_gguf_writer *w;
    if (nb_gguf_writer_create(&w)) return fail("create");
    for (int t = NB_GGUF_U8; t <= NB_GGUF_F64; t++) {
        if (t == NB_GGUF_ARRAY || t == NB_GGUF_STRING) continue;
        char key[32];
        snprintf(key, sizeof key, "k.scalar%d", t);
        nb_gguf_value v = {.type = (nb_gguf_vtype)t};
        v.v.u = t == NB_GGUF_BOOL ? 1 : 7;
        if (nb_gguf_writer_set(w, key, &v)) return fail(key);
        static const uint64_t zeros[3];
        snprintf(key, sizeof key, "k.array%d", t);
        if (nb_gguf_writer_set_array(w, key, (nb_gguf_vtype)t, zeros, 3)) return fail(key);
    }
    static const char *const strs[] = {"a", "", "ccc"};
    if (nb_gguf_writer_set_string(w, "k.string", "text") ||
        nb_gguf_writer_set_array(w, "k.strings", NB_GGUF_STRING, strs, 3))
        return fail("strings");
    return write(w, dir, "metadata.gguf");
}

static int tensors(const char *dir) {
    static const int types[] = {NB_TYPE_F32,  NB_TYPE_F16,  NB_TYPE_Q4_0, NB_TYPE_Q5_0,  NB_TYPE_Q8_0, NB_TYPE_Q4_K,
                                NB_TYPE_Q5_K, NB_TYPE_Q6_K, NB_TYPE_BF16, NB_TYPE_MXFP4, NB_TYPE_NVFP4};
    static uint8_t data[1024];
    nb_gguf_writer *w;
    if (nb_gguf_writer_create(&w) || nb_gguf_writer_set_u32(w, "general.alignment", 64)) return fail("create");
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const nb_type_info *info = nb_type_get(types[i]);
        int64_t ne[2] = {info->block_elems, 2};
        char name[32];
        snprintf(name, sizeof name, "t%zu.weight", i);
        if (nb_gguf_writer_add_tensor(w, name, types[i], i % 2 ? 2 : 1, ne, data)) return fail(name);
    }
    return write(w, dir, "tensors.gguf");
}

static int model(const char *dir) {
    static const char *const tokens[] = {"<pad>", "<eos>", "<bos>", "<unk>", "\xe2\x96\x81the", "<0x0A>"};
    static const float scores[] = {0, 0, 0, 0, -1.5f, 0};
    static const int32_t ttype[] = {3, 3, 3, 2, 1, 6};
    static float w0[640], w1[640 * 2];
    nb_gguf_writer *w;
    if (nb_gguf_writer_create(&w)) return fail("create");
    if (nb_gguf_writer_set_string(w, "general.architecture", "gemma3") ||
        nb_gguf_writer_set_u32(w, "gemma3.block_count", 1) || nb_gguf_writer_set_u32(w, "gemma3.context_length", 32768) ||
        nb_gguf_writer_set_u32(w, "gemma3.embedding_length", 640) ||
        nb_gguf_writer_set_u32(w, "gemma3.attention.head_count_kv", 1) ||
        nb_gguf_writer_set_f32(w, "gemma3.rope.freq_base", 1e6f) ||
        nb_gguf_writer_set_string(w, "tokenizer.ggml.model", "llama") ||
        nb_gguf_writer_set_array(w, "tokenizer.ggml.tokens", NB_GGUF_STRING, tokens, 6) ||
        nb_gguf_writer_set_array(w, "tokenizer.ggml.scores", NB_GGUF_F32, scores, 6) ||
        nb_gguf_writer_set_array(w, "tokenizer.ggml.token_type", NB_GGUF_I32, ttype, 6) ||
        nb_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", 1))
        return fail("model keys");
    int64_t ne0[1] = {640}, ne1[2] = {640, 2};
    if (nb_gguf_writer_add_tensor(w, "output_norm.weight", NB_TYPE_F32, 1, ne0, w0) ||
        nb_gguf_writer_add_tensor(w, "token_embd.weight", NB_TYPE_F32, 2, ne1, w1))
        return fail("model tensors");
    return write(w, dir, "model.gguf");
}

static int families(const char *dir) {
    for (int k = 0; k < N_FAMILIES; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%d-%s.gguf", dir, k, FAMILIES[k].arch);
        if (write_family(path, &FAMILIES[k], WHOLE)) return fail(path);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: gen_seeds DIR MODEL_DIR\n");
        return 2;
    }
    return metadata(argv[1]) || tensors(argv[1]) || model(argv[1]) || families(argv[2]);
}
