/*
 * model.h: a GGUF checkpoint bound to a decoder-only transformer. One file per family
 * (src/model/<arch>.c, listed in load.c's table) reads its hyperparameters, binds its tensors and
 * fills the nb_arch description; forward.c runs every family from that description (the context
 * it runs in is defined there).
 *
 * Weights stay in the read-only mapping of the file: a weight is a (type, pointer) pair that the
 * kernel layer reads in place. Activations and the KV cache live in one arena per context,
 * sized up front from n_ctx and n_batch, so a forward pass never allocates.
 */
#ifndef NB_MODEL_MODEL_H
#define NB_MODEL_MODEL_H

#include "nibble.h"

#define NB_MAX_LAYERS 256
#define NB_MAX_HEAD_DIM 1024 /* attention.key_length and value_length, checked at load */

typedef struct nb_weight {
    const char *name;  /* GGUF tensor name; NULL: the graph has no such tensor */
    int type;          /* GGUF type id */
    const void *data;  /* into the mapping */
    int64_t n_in;      /* ne[0]: row length */
    int64_t n_out;     /* ne[1]: rows (1 for vectors) */
    float scale;       /* per-tensor output factor (NVFP4 two-level ".scale" tensor), else 1 */
} nb_weight;

/* One layer. Vectors (norms, biases, RoPE factors) are f32 in the mapping; NULL where the file
 * (or the family) has none. */
typedef struct nb_layer {
    const float *attn_norm;      /* (n_embd) */
    nb_weight wqkv;              /* fused (q | k | v widths, n_embd), or name NULL and: */
    nb_weight wq, wk, wv;        /* (n_head*head_dim, n_embd), (n_head_kv*head_dim, n_embd) x 2 */
    const float *bq, *bk, *bv;   /* biases of q, k, v (a fused bias: its three slices) */
    const float *q_norm, *k_norm; /* (head_dim): RMSNorm of every query and key head */
    nb_weight wo;                /* (n_embd, n_head*head_dim) */
    const float *bo;
    const float *post_attn_norm; /* (n_embd): RMSNorm of the attention output before the residual */
    const float *ffn_norm;       /* (n_embd) */
    nb_weight gate;              /* (n_ff, n_embd); name NULL when `up` holds gate | up (2*n_ff rows) */
    nb_weight up;
    nb_weight down;              /* (n_embd, n_ff) */
    const float *b_gate, *b_up, *b_down;
    const float *post_ffw_norm;  /* (n_embd) */
    const float *rope_factors;   /* (n_rot/2): each angle divided by its factor (llama3; LongRoPE short) */
    const float *rope_long;      /* LongRoPE's factors for a context past n_ctx_orig */
    int sliding;                 /* 1: local layer (sliding window, the local RoPE base) */
} nb_layer;

typedef enum nb_act_kind { NB_ACT_GELU, NB_ACT_SILU } nb_act_kind;
typedef enum nb_rope_kind { NB_ROPE_NORM, NB_ROPE_NEOX } nb_rope_kind;

/* What a family's graph does beyond the shared skeleton (forward.c's header comment). */
typedef struct nb_arch {
    nb_act_kind act;      /* FFN: act(x Wgate) * (x Wup); GELU is tanh GELU through llama.cpp's fp16 table */
    nb_rope_kind rope;    /* NORM rotates pairs (2i, 2i+1), NEOX (i, i + n_rot/2) */
    int q_prescale;       /* 1: queries are multiplied by attn_scale before the scores (Gemma, Phi-3);
                           * 0: the scores are, inside the softmax (llama.cpp's kq_scale) */
    float attn_scale;
    float embd_scale;     /* the embedding rows' factor (Gemma: sqrt(n_embd)), else 1 */
    float attn_softcap;   /* scores = cap * tanh(scores / cap) before the softmax; 0: none */
    float final_softcap;  /* the same on the logits */
    float rope_freq_scale, rope_freq_scale_local; /* angle factor (1 / rope.scaling.factor) */
    float rope_attn_factor; /* cos and sin multiplied by it (rope.scaling.attn_factor; YaRN's mscale) */
    float rope_ext_factor;  /* YaRN: 1 mixes interpolated and extrapolated angles per dimension; 0: off */
    int n_ctx_orig;       /* rope.scaling.original_context_length: YaRN's ramp; a longer context
                           * takes rope_long */
} nb_arch;

struct nb_model {
    const nb_gguf *gguf;
    nb_gguf *owned;             /* nb_model_load's file, closed with the model; NULL after nb_model_bind */
    nb_tokenizer *tok;
    nb_model_info info;
    nb_arch arch;
    nb_weight token_embd;       /* (n_vocab, n_embd) */
    nb_weight output;           /* (n_vocab, n_embd): token_embd when tied */
    const float *output_norm;   /* (n_embd) */
    const float *b_output;      /* (n_vocab) or NULL */
    nb_layer layers[NB_MAX_LAYERS];
};

#endif
