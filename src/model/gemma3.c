/*
 * gemma3.c: Gemma 3 text (llama.cpp's `gemma3`). Embedding rows scaled by sqrt(n_embd), RMSNorm
 * of every query and key head, norms after attention and FFN as well as before, tanh GELU, NEOX
 * RoPE, five local layers (sliding window, their own RoPE base) to one global, queries scaled
 * before the scores, an optional final logit softcap.
 */
#include <math.h>

#include "model/family.h"

static nb_status load(nb_model *m) {
    nb_model_info *in = &m->info;
    nb_arch *a = &m->arch;
    nb_status s;
    in->rope_base_local = 10000.0f;
    if ((s = nb_load_int_opt(m, "attention.sliding_window", 0, 1 << 24, &in->sliding_window)) ||
        (s = nb_load_f32_opt(m, "rope.freq_base_swa", &in->rope_base_local)) ||
        (s = nb_load_f32_opt(m, "final_logit_softcapping", &a->final_softcap)))
        return s;
    if (in->sliding_window && (s = nb_load_sliding(m, 6))) return s;
    a->act = NB_ACT_GELU;
    a->rope = NB_ROPE_NEOX;
    a->q_prescale = 1;
    a->rope_freq_scale_local = 1.0f;
    /* llama.cpp: query_pre_attn_scalar is head_dim for every Gemma 3 size but 27B (62 layers) */
    a->attn_scale = 1.0f / sqrtf(in->n_layer == 62 ? (float)(in->n_embd / in->n_head) : (float)in->head_dim);
    a->embd_scale = sqrtf((float)in->n_embd);
    return nb_bind_decoder(m, NB_T_QK_NORM | NB_T_POST_NORMS);
}

const nb_family nb_family_gemma3 = {"gemma3", load};
