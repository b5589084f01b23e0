/*
 * qwen2.c: Qwen 2 and 2.5 (llama.cpp's `qwen2`): the llama graph with NEOX RoPE; its files carry
 * biases on q, k and v (optional for every family, as in llama.cpp).
 */
#include "model/family.h"

static nb_status load(nb_model *m) {
    m->arch.act = NB_ACT_SILU;
    m->arch.rope = NB_ROPE_NEOX;
    return nb_bind_decoder(m, 0);
}

const nb_family nb_family_qwen2 = {"qwen2", load};
