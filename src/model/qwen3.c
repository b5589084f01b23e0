/*
 * qwen3.c: Qwen 3 dense (llama.cpp's `qwen3`): the llama graph with RMSNorm of every query and
 * key head before NEOX RoPE, no biases.
 */
#include "model/family.h"

static nb_status load(nb_model *m) {
    m->arch.act = NB_ACT_SILU;
    m->arch.rope = NB_ROPE_NEOX;
    return nb_bind_decoder(m, NB_T_QK_NORM);
}

const nb_family nb_family_qwen3 = {"qwen3", load};
