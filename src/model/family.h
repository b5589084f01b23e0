/*
 * family.h: what a family file (src/model/<arch>.c) provides, and the loader's helpers it uses.
 *
 * load.c reads what every family shares (widths, heads, context, RMS epsilon, RoPE base, rotated
 * dimensions, RoPE scaling keys) and then calls the family's `load`, which reads its own keys,
 * fills m->arch and binds the tensors with nb_bind_decoder. Every hyperparameter is checked
 * once here, so forward.c indexes without checks.
 */
#ifndef NB_MODEL_FAMILY_H
#define NB_MODEL_FAMILY_H

#include "model/model.h"

typedef struct nb_family {
    const char *arch;               /* general.architecture */
    nb_status (*load)(nb_model *m); /* the family's keys, m->arch, tensors */
} nb_family;

extern const nb_family nb_family_gemma3, nb_family_gemma2, nb_family_llama, nb_family_qwen2, nb_family_qwen3,
    nb_family_phi3;

/* "<arch>.<suffix>" as an integer in [lo, hi]: required, or (opt) *out kept when absent. */
nb_status nb_load_int(const nb_model *m, const char *suffix, int lo, int hi, int *out);
nb_status nb_load_int_opt(const nb_model *m, const char *suffix, int lo, int hi, int *out);
/* An optional positive finite f32 "<arch>.<suffix>": *out kept when absent. */
nb_status nb_load_f32_opt(const nb_model *m, const char *suffix, float *out);
/* Which layers are local: `attention.sliding_window_pattern` as a per-layer bool array or a period
 * n (layer il is local unless il % n == n-1), else `period`; only when info.sliding_window > 0. */
nb_status nb_load_sliding(nb_model *m, int period);

/* Tensors nb_bind_decoder requires beyond the shared set (norms, q/k/v or fused qkv, o, ffn). */
enum {
    NB_T_QK_NORM = 1u << 0,    /* blk.N.attn_q_norm / attn_k_norm (head_dim) */
    NB_T_POST_NORMS = 1u << 1, /* blk.N.post_attention_norm / post_ffw_norm */
    NB_T_FUSED_UP = 1u << 2,   /* blk.N.ffn_up holds gate | up (2 n_ff rows), no ffn_gate */
    NB_T_TIED = 1u << 3,       /* the output is token_embd even when output.weight exists */
    NB_T_ROPE_FACTORS = 1u << 4, /* the graph reads rope_freqs or rope_factors_long/short (optional) */
};

/* Binds token_embd, output_norm, output (or token_embd), every layer's tensors by llama.cpp's
 * names with the shapes the hyperparameters give, the optional biases every family may carry
 * (attn_q/k/v/output, ffn_gate/up/down, output), and what `flags` adds; sets n_vocab and
 * weight_bytes. A missing, mis-shaped or unrunnable tensor fails naming it. */
nb_status nb_bind_decoder(nb_model *m, unsigned flags);

#endif
