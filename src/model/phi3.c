/*
 * phi3.c: Phi-3 and Phi-3.5 dense (llama.cpp's `phi3`). Fused q|k|v projection, fused gate|up
 * (SiLU of the first half times the second), NEOX RoPE with LongRoPE's short or long factors
 * (long when the context exceeds rope.scaling.original_context_length) and its attn_factor on
 * cos and sin, queries scaled before the scores. llama.cpp ignores Phi's sliding window (it
 * warns and attends globally); so does nibble.
 */
#include "model/family.h"

static nb_status load(nb_model *m) {
    m->arch.act = NB_ACT_SILU;
    m->arch.rope = NB_ROPE_NEOX;
    m->arch.q_prescale = 1;
    return nb_bind_decoder(m, NB_T_FUSED_UP | NB_T_ROPE_FACTORS);
}

const nb_family nb_family_phi3 = {"phi3", load};
