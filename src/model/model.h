/*
 * model.h: a GGUF checkpoint bound to the Gemma 3 text graph, and the state of one sequence.
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

struct nb_ctx {
    const nb_model *m;
    nb_pool *pool;
    int own_pool;
    int n_ctx, n_batch, kv_type; /* kv_type: NB_TYPE_F16 or NB_TYPE_F32 */
    int n_cells;                 /* cache positions: n_ctx rounded up to 32 (attention reads whole 32s) */
    int pos;                     /* tokens already in the cache */
    size_t kv_row_bytes;         /* one cached head row: head_dim elements of kv_type */
    uint8_t *k_cache;            /* (n_layer, n_head_kv, n_cells, head_dim), zero until written */
    uint8_t *v_cache;            /* (n_layer, n_head_kv, head_dim, n_cells): transposed */
    /* activation arena, (n_batch, width) each */
    float *x, *h, *q, *k, *v, *att, *o, *g, *u;
    float *scores;               /* (n_threads, ATT_SCRATCH): scores, rounded queries */
    nb_observer_fn observer;     /* optional: sees every matmul input */
    void *observer_user;
    size_t arena_bytes;          /* KV cache plus arena, allocated once */
};

#endif
