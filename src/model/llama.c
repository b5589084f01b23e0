/*
 * llama.c: Llama 2 and 3.x, TinyLlama, SmolLM, Mistral-style dense files (llama.cpp's `llama`).
 * SiLU-gated FFN, NORM RoPE (adjacent pairs) with Llama 3's frequency factors when the file has
 * rope_freqs, scores scaled inside the softmax; optional biases.
 */
#include "base/error.h"
#include "model/family.h"

static nb_status load(nb_model *m) {
    int experts = 0;
    nb_status s = nb_load_int_opt(m, "expert_count", 0, 1 << 16, &experts);
    if (s) return s;
    if (experts) /* Mixtral-style files share the architecture name */
        return nb_fail(NB_ERR_UNSUPPORTED, "model: llama.expert_count = %d: nibble runs dense llama files only", experts);
    m->arch.act = NB_ACT_SILU;
    m->arch.rope = NB_ROPE_NORM;
    if (m->info.n_rot != m->info.head_dim) /* llama.cpp refuses it too */
        return nb_fail(NB_ERR_FORMAT, "model: rope.dimension_count %d differs from the head size %d", m->info.n_rot,
                       m->info.head_dim);
    return nb_bind_decoder(m, NB_T_ROPE_FACTORS);
}

const nb_family nb_family_llama = {"llama", load};
