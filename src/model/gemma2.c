/*
 * gemma2.c: Gemma 2 (llama.cpp's `gemma2`). Gemma 3's graph without the q/k head norms, with
 * every other layer local (window 4096 unless the file says), and softcaps on the attention
 * scores (50) and on the logits (30); the output is always the embedding.
 */
#include <math.h>

#include "model/family.h"

static nb_status load(nb_model *m) {
    nb_model_info *in = &m->info;
    nb_arch *a = &m->arch;
    nb_status s;
    in->sliding_window = 4096;
    a->attn_softcap = 50.0f;
    a->final_softcap = 30.0f;
    if ((s = nb_load_int_opt(m, "attention.sliding_window", 1, 1 << 24, &in->sliding_window)) ||
        (s = nb_load_f32_opt(m, "rope.freq_base_swa", &in->rope_base_local)) ||
        (s = nb_load_f32_opt(m, "attn_logit_softcapping", &a->attn_softcap)) ||
        (s = nb_load_f32_opt(m, "final_logit_softcapping", &a->final_softcap)) || (s = nb_load_sliding(m, 2)))
        return s;
    a->act = NB_ACT_GELU;
    a->rope = NB_ROPE_NEOX;
    a->q_prescale = 1;
    /* llama.cpp: 1/sqrt(n_embd / n_head) for the 27B (46 layers), 1/sqrt(head_dim) otherwise */
    a->attn_scale = 1.0f / sqrtf(in->n_layer == 46 ? (float)(in->n_embd / in->n_head) : (float)in->head_dim);
    a->embd_scale = sqrtf((float)in->n_embd);
    return nb_bind_decoder(m, NB_T_POST_NORMS | NB_T_TIED);
}

const nb_family nb_family_gemma2 = {"gemma2", load};
