/*
 * model.h: a GGUF checkpoint bound to the Gemma 3 text graph (gemma3.c builds it, forward.c runs
 * it; the context it runs in is defined in forward.c).
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
    const char *name;  /* GGUF tensor name */
    int type;          /* GGUF type id */
    const void *data;  /* into the mapping */
    int64_t n_in;      /* ne[0]: row length */
    int64_t n_out;     /* ne[1]: rows (1 for vectors) */
    float scale;       /* per-tensor output factor (NVFP4 two-level ".scale" tensor), else 1 */
} nb_weight;

typedef struct nb_layer {
    const float *attn_norm;      /* (n_embd) */
    nb_weight wq;                /* (n_head*head_dim, n_embd) */
    nb_weight wk;                /* (n_head_kv*head_dim, n_embd) */
    nb_weight wv;                /* (n_head_kv*head_dim, n_embd) */
    const float *q_norm;         /* (head_dim) */
    const float *k_norm;         /* (head_dim) */
    nb_weight wo;                /* (n_embd, n_head*head_dim) */
    const float *post_attn_norm; /* (n_embd) */
    const float *ffn_norm;       /* (n_embd) */
    nb_weight gate;              /* (n_ff, n_embd) */
    nb_weight up;                /* (n_ff, n_embd) */
    nb_weight down;              /* (n_embd, n_ff) */
    const float *post_ffw_norm;  /* (n_embd) */
    int sliding;                 /* 1: local layer (sliding window, local RoPE base) */
} nb_layer;

struct nb_model {
    nb_gguf *gguf;
    nb_tokenizer *tok;
    nb_model_info info;
    float attn_scale;           /* 1/sqrt(query_pre_attn_scalar) */
    nb_weight token_embd;       /* (n_vocab, n_embd) */
    nb_weight output;           /* (n_vocab, n_embd): token_embd when tied */
    const float *output_norm;   /* (n_embd) */
    nb_layer layers[NB_MAX_LAYERS];
    float gelu_f16[65536];      /* GELU(tanh) of every fp16 input, rounded to fp16, as llama.cpp */
};

#endif
