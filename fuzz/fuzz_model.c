/*
 * fuzz_model.c: libFuzzer harness for what a model file reaches past the reader: the family's
 * hyperparameters and their checks, tensor binding (required and optional tensors, shapes, types),
 * the tokenizer built from the file's vocabulary, the context's reservation and the forward pass.
 * An input the reader accepts is bound as a model; an accepted model tokenizes a short text, and
 * a context of 32 positions evaluates a 3-token prompt (every position's logits) and one more
 * token, with f16 cells through llama.cpp's unfused attention and through the fused one, then
 * with q8_0 cells (fused) where the head size allows them. A refusal anywhere is fine; a crash, a sanitizer report
 * or a token id the tokenizer returns outside the vocabulary is not. Seeds: every family's tiny
 * file from tests/tiny_family.h (gen_seeds.c).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "nibble.h"

static void run(const nb_model *m, int type, int fa) {
    const nb_model_info *in = nb_model_get_info(m);
    nb_ctx_params p = nb_ctx_default_params();
    p.n_ctx = 32, p.n_batch = 8, p.n_threads = 1;
    p.type_k = p.type_v = type, p.flash_attn = fa;
    nb_ctx *c;
    if (nb_ctx_create(m, &p, &c)) return;
    float *lg = malloc(sizeof(float) * 3 * (size_t)in->n_vocab);
    if (lg) {
        const int32_t ids[3] = {1 % in->n_vocab, 2 % in->n_vocab, 3 % in->n_vocab};
        if (!nb_ctx_eval(c, ids, 3, lg, 1)) nb_ctx_eval(c, ids, 1, lg, 0);
    }
    free(lg);
    nb_ctx_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nb_gguf *g;
    if (nb_gguf_parse(data, size, &g)) return 0;
    nb_model *m;
    if (!nb_model_bind(g, &m)) {
        const nb_tokenizer *t = nb_model_tokenizer(m);
        static const char text[] = "hello, world <s> 12";
        int32_t ids[64];
        size_t n = 0;
        if (!nb_tokenize(t, text, sizeof text - 1, 1, 1, ids, 64, &n))
            for (size_t i = 0; i < n; i++)
                if (ids[i] < 0 || ids[i] >= nb_tokenizer_n_tokens(t)) __builtin_trap();
        run(m, NB_TYPE_F16, NB_FA_OFF);
        run(m, NB_TYPE_F16, NB_FA_ON);
        run(m, NB_TYPE_Q8_0, NB_FA_ON);
        nb_model_free(m);
    }
    nb_gguf_close(g);
    return 0;
}
