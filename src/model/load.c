/*
 * load.c: opens a checkpoint, finds its family by general.architecture, reads the hyperparameters
 * every family shares and binds the tensors the shared decoder reads (family.h).
 *
 * Everything the forward pass will index is checked here, once: hyperparameters are bounded and
 * consistent (heads divide widths, the vocabulary matches the token list and the embedding), and
 * every tensor exists with a type nibble runs and the exact shape the graph expects.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/family.h"

/* Bounds that keep every product of hyperparameters far from overflow and refuse absurd files. */
#define MAX_WIDTH (1 << 16)
#define MAX_HEADS 1024
#define MAX_VOCAB (1 << 22)

static const nb_family *const families[] = {&nb_family_gemma3, &nb_family_gemma2, &nb_family_llama,
                                            &nb_family_qwen2,  &nb_family_qwen3,  &nb_family_phi3};
#define N_FAMILIES (sizeof families / sizeof families[0])

/* ------------------------------------------------------------ metadata */

/* Why `key` could not be read as `want`, naming the key once: the getter's own message names it
 * too, so it is quoted only for a failure other than absent or mistyped. */
static nb_status meta_fail(nb_status s, const nb_gguf *g, const char *key, nb_gguf_vtype want) {
    int64_t kv = nb_gguf_find_key(g, key);
    if (kv < 0) return nb_fail(s, "model: metadata '%s': missing", key);
    nb_gguf_value v;
    if (nb_gguf_kv_value(g, kv, &v) == NB_OK && v.type != want) {
        const char *got = nb_gguf_vtype_name(v.type);
        return nb_fail(s, "model: metadata '%s': holds %s %s, expected %s", key, strchr("aeiof", got[0]) ? "an" : "a",
                       got, nb_gguf_vtype_name(want));
    }
    return nb_fail(s, "model: metadata '%s': %s", key, nb_last_error());
}

nb_status nb_load_int(const nb_model *m, const char *suffix, int lo, int hi, int *out) {
    char full[128];
    nb_gguf_find_arch_key(m->gguf, suffix, full, sizeof full); /* absent: the getter below says so */
    uint32_t v;
    nb_status s = nb_gguf_get_u32(m->gguf, full, &v);
    if (s) return meta_fail(s, m->gguf, full, NB_GGUF_U32);
    if ((int64_t)v < lo || (int64_t)v > hi)
        return nb_fail(NB_ERR_FORMAT, "model: metadata '%s' = %u is outside [%d, %d]", full, v, lo, hi);
    *out = (int)v;
    return NB_OK;
}

nb_status nb_load_int_opt(const nb_model *m, const char *suffix, int lo, int hi, int *out) {
    if (nb_gguf_find_arch_key(m->gguf, suffix, NULL, 0) < 0) return NB_OK;
    return nb_load_int(m, suffix, lo, hi, out);
}

nb_status nb_load_f32_opt(const nb_model *m, const char *suffix, float *out) {
    char full[128];
    if (nb_gguf_find_arch_key(m->gguf, suffix, full, sizeof full) < 0) return NB_OK;
    nb_status s = nb_gguf_get_f32(m->gguf, full, out);
    if (s) return meta_fail(s, m->gguf, full, NB_GGUF_F32);
    if (!isfinite(*out) || *out <= 0)
        return nb_fail(NB_ERR_FORMAT, "model: metadata '%s' = %g must be positive", full, *out);
    return NB_OK;
}

nb_status nb_load_sliding(nb_model *m, int period) {
    nb_model_info *in = &m->info;
    char key[128];
    int64_t kv = nb_gguf_find_arch_key(m->gguf, "attention.sliding_window_pattern", key, sizeof key);
    if (kv >= 0) {
        nb_gguf_value v;
        nb_status s = nb_gguf_kv_value(m->gguf, kv, &v);
        if (s) return s;
        if (v.type == NB_GGUF_ARRAY && v.v.arr.type == NB_GGUF_BOOL) {
            if (v.v.arr.count != (uint64_t)in->n_layer)
                return nb_fail(NB_ERR_FORMAT, "model: metadata '%s' holds %llu value%s for %d layer%s", key,
                               (unsigned long long)v.v.arr.count, nb_plural((long long)v.v.arr.count), in->n_layer,
                               nb_plural(in->n_layer));
            for (int il = 0; il < in->n_layer; il++) {
                nb_gguf_value e;
                if ((s = nb_gguf_arr_value(m->gguf, kv, (uint64_t)il, &e))) return s;
                m->layers[il].sliding = e.v.u != 0;
            }
            period = 0;
        } else if ((s = nb_load_int(m, "attention.sliding_window_pattern", 1, NB_MAX_LAYERS, &period))) {
            return s;
        }
    }
    for (int il = 0; il < in->n_layer && period; il++) m->layers[il].sliding = il % period < period - 1;
    in->n_sliding = 0;
    for (int il = 0; il < in->n_layer; il++) in->n_sliding += m->layers[il].sliding;
    return NB_OK;
}

/* The hyperparameters every family reads the same way (llama.cpp's load_hparams). */
static nb_status load_shared(nb_model *m) {
    nb_model_info *in = &m->info;
    nb_status s;
    if ((s = nb_load_int(m, "block_count", 1, NB_MAX_LAYERS, &in->n_layer)) ||
        (s = nb_load_int(m, "embedding_length", 1, MAX_WIDTH, &in->n_embd)) ||
        (s = nb_load_int(m, "feed_forward_length", 1, 8 * MAX_WIDTH, &in->n_ff)) ||
        (s = nb_load_int(m, "attention.head_count", 1, MAX_HEADS, &in->n_head)) ||
        (s = nb_load_int(m, "context_length", 1, 1 << 24, &in->n_ctx_train)))
        return s;
    in->n_head_kv = in->n_head;
    in->head_dim = in->n_embd / in->n_head;
    int vdim = in->head_dim;
    if ((s = nb_load_int_opt(m, "attention.head_count_kv", 1, MAX_HEADS, &in->n_head_kv)) ||
        (s = nb_load_int_opt(m, "attention.key_length", 2, NB_MAX_HEAD_DIM, &in->head_dim)) ||
        (s = nb_load_int_opt(m, "attention.value_length", 2, NB_MAX_HEAD_DIM, &vdim)))
        return s;
    if (vdim != in->head_dim || in->head_dim % 2 || in->head_dim < 2 || in->head_dim > NB_MAX_HEAD_DIM)
        return nb_fail(NB_ERR_UNSUPPORTED, "model: key_length %d and value_length %d must be equal, even and in [2, %d]",
                       in->head_dim, vdim, NB_MAX_HEAD_DIM);
    if (in->n_head % in->n_head_kv)
        return nb_fail(NB_ERR_FORMAT, "model: head_count %d is not a multiple of head_count_kv %d", in->n_head,
                       in->n_head_kv);
    in->n_rot = in->head_dim;
    if ((s = nb_load_int_opt(m, "rope.dimension_count", 2, in->head_dim, &in->n_rot))) return s;
    if (in->n_rot % 2) return nb_fail(NB_ERR_FORMAT, "model: rope.dimension_count %d is odd", in->n_rot);
    in->rope_base = 10000.0f;
    in->rms_eps = 1e-6f;
    if ((s = nb_load_f32_opt(m, "rope.freq_base", &in->rope_base)) ||
        (s = nb_load_f32_opt(m, "attention.layer_norm_rms_epsilon", &in->rms_eps)))
        return s;
    in->rope_base_local = in->rope_base;
    /* RoPE scaling: llama.cpp reads a missing type as linear, a missing factor as none */
    char key[128];
    const char *type = "linear";
    if (nb_gguf_find_arch_key(m->gguf, "rope.scaling.type", key, sizeof key) >= 0 &&
        (s = nb_gguf_get_string(m->gguf, key, &type)))
        return meta_fail(s, m->gguf, key, NB_GGUF_STRING);
    float factor = 1.0f;
    if ((s = nb_load_f32_opt(m, "rope.scaling.factor", &factor))) return s;
    const int yarn = !strcmp(type, "yarn");
    if (!strcmp(type, "none")) factor = 1.0f;
    else if (strcmp(type, "linear") && strcmp(type, "longrope") && !yarn)
        return nb_fail(NB_ERR_UNSUPPORTED, "model: metadata '%s' = '%.32s': nibble runs none, linear, yarn and longrope",
                       key, type);
    snprintf(in->rope_scaling, sizeof in->rope_scaling, "%s",
             yarn || !strcmp(type, "longrope") ? type : factor != 1.0f ? "linear" : "none");
    nb_arch *a = &m->arch;
    a->rope_freq_scale = a->rope_freq_scale_local = 1.0f / factor;
    a->rope_attn_factor = 1.0f;
    a->n_ctx_orig = in->n_ctx_train;
    if ((s = nb_load_f32_opt(m, "rope.scaling.attn_factor", &a->rope_attn_factor)) ||
        (s = nb_load_int_opt(m, "rope.scaling.original_context_length", 1, 1 << 24, &a->n_ctx_orig)))
        return s;
    if (yarn) { /* llama.cpp's context: its YaRN magnitude, cancelled by the one rope_yarn applies */
        a->rope_ext_factor = 1.0f;
        const float mscale = factor <= 1.0f ? 1.0f : fmaf(0.1f, logf(factor), 1.0f);
        a->rope_attn_factor *= mscale * (1.0f / fmaf(0.1f, logf(factor), 1.0f));
    }
    m->arch.attn_scale = 1.0f / sqrtf((float)in->head_dim);
    m->arch.embd_scale = 1.0f;
    return NB_OK;
}

/* ------------------------------------------------------------ tensors */

/* The optional per-tensor factor of an NVFP4 two-level weight: an F32 tensor of one element named
 * like the weight with ".scale" in place of ".weight"; the matmul output is multiplied by it. */
static nb_status bind_scale(const nb_model *m, const char *name, nb_weight *w) {
    w->scale = 1.0f;
    char sname[96];
    if (!nb_gguf_scale_name(name, sname, sizeof sname)) return NB_OK;
    const nb_gguf_tensor *t = nb_gguf_find_tensor(m->gguf, sname);
    if (!t) return NB_OK;
    if (t->type != NB_TYPE_F32 || t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] != 1)
        return nb_fail(NB_ERR_FORMAT, "model: tensor '%s' must be one f32 value", sname);
    memcpy(&w->scale, t->data, sizeof(float));
    if (!isfinite(w->scale)) return nb_fail(NB_ERR_FORMAT, "model: tensor '%s' is not finite", sname);
    return NB_OK;
}

/* Tensor `name` with shape (ne0, ne1) (ne1 = 1: a vector) and a type nibble runs. Absent: an
 * error when required, else w->name stays NULL. */
static nb_status bind(const nb_model *m, const char *name, int64_t ne0, int64_t ne1, int required, nb_weight *w) {
    const nb_gguf_tensor *t = nb_gguf_find_tensor(m->gguf, name);
    *w = (nb_weight){0};
    if (!t) return required ? nb_fail(NB_ERR_FORMAT, "model: tensor '%s' is missing", name) : NB_OK;
    int64_t got1 = t->n_dims >= 2 ? t->ne[1] : 1;
    if (t->ne[0] != ne0 || got1 != ne1 || (t->n_dims > 2 && (t->ne[2] != 1 || t->ne[3] != 1)))
        return nb_fail(NB_ERR_FORMAT, "model: tensor '%s' has shape [%lld, %lld], expected [%lld, %lld]", name,
                       (long long)t->ne[0], (long long)got1, (long long)ne0, (long long)ne1);
    if (!t->supported || !nb_matmul_kernel_name(t->type, NB_ROUTE_QUANT))
        return nb_fail(NB_ERR_UNSUPPORTED, "model: tensor '%s' has type %s, which nibble cannot run", name,
                       nb_type_name(t->type));
    w->name = t->name;
    w->type = t->type;
    w->data = t->data;
    w->n_in = ne0;
    w->n_out = ne1;
    return bind_scale(m, name, w);
}

/* An f32 vector of n elements (a norm, a bias, RoPE factors); *out NULL when absent and optional. */
static nb_status bind_vec(const nb_model *m, const char *name, int64_t n, int required, const float **out) {
    nb_weight w;
    nb_status s = bind(m, name, n, 1, required, &w);
    *out = NULL;
    if (s || !w.name) return s;
    if (w.type != NB_TYPE_F32)
        return nb_fail(NB_ERR_UNSUPPORTED, "model: vector '%s' is %s; nibble expects f32 norms and biases", name,
                       nb_type_name(w.type));
    *out = w.data;
    return NB_OK;
}

typedef struct binder {
    nb_model *m;
    int il;
    char name[96];
} binder;

/* "blk.<il>.<stem>.<what>" */
static const char *layer_name(binder *b, const char *stem, const char *what) {
    snprintf(b->name, sizeof b->name, "blk.%d.%s.%s", b->il, stem, what);
    return b->name;
}

static nb_status layer_mat(binder *b, const char *stem, int64_t ne0, int64_t ne1, int required, nb_weight *w) {
    return bind(b->m, layer_name(b, stem, "weight"), ne0, ne1, required, w);
}

static nb_status layer_vec(binder *b, const char *stem, const char *what, int64_t n, int required, const float **out) {
    return bind_vec(b->m, layer_name(b, stem, what), n, required, out);
}

/* q, k, v: fused attn_qkv (its bias, or separate biases) or three tensors with optional biases. */
static nb_status bind_qkv(binder *b, nb_layer *L) {
    const nb_model_info *in = &b->m->info;
    const int64_t E = in->n_embd, QW = (int64_t)in->head_dim * in->n_head, KW = (int64_t)in->head_dim * in->n_head_kv;
    nb_status s;
    if ((s = layer_mat(b, "attn_qkv", E, QW + 2 * KW, 0, &L->wqkv))) return s;
    if (L->wqkv.name) {
        const float *bqkv;
        if ((s = layer_vec(b, "attn_qkv", "bias", QW + 2 * KW, 0, &bqkv))) return s;
        if (bqkv) {
            L->bq = bqkv, L->bk = bqkv + QW, L->bv = bqkv + QW + KW;
            return NB_OK;
        }
    } else {
        if (!nb_gguf_find_tensor(b->m->gguf, layer_name(b, "attn_q", "weight")))
            return nb_fail(NB_ERR_FORMAT, "model: tensors 'blk.%d.attn_qkv.weight' and 'blk.%d.attn_q.weight' are missing "
                           "(a layer needs the fused one or attn_q, attn_k and attn_v)", b->il, b->il);
        if ((s = layer_mat(b, "attn_q", E, QW, 1, &L->wq)) || (s = layer_mat(b, "attn_k", E, KW, 1, &L->wk)) ||
            (s = layer_mat(b, "attn_v", E, KW, 1, &L->wv)))
            return s;
    }
    if ((s = layer_vec(b, "attn_q", "bias", QW, 0, &L->bq)) || (s = layer_vec(b, "attn_k", "bias", KW, 0, &L->bk)) ||
        (s = layer_vec(b, "attn_v", "bias", KW, 0, &L->bv)))
        return s;
    return NB_OK;
}

static nb_status bind_layer(binder *b, unsigned flags) {
    const nb_model_info *in = &b->m->info;
    nb_layer *L = &b->m->layers[b->il];
    const int64_t E = in->n_embd, F = in->n_ff, D = in->head_dim, QW = D * in->n_head;
    const int qk = (flags & NB_T_QK_NORM) != 0, post = (flags & NB_T_POST_NORMS) != 0;
    nb_status s;
    if ((s = layer_vec(b, "attn_norm", "weight", E, 1, &L->attn_norm)) || (s = bind_qkv(b, L)) ||
        (s = layer_vec(b, "attn_q_norm", "weight", D, qk, &L->q_norm)) ||
        (s = layer_vec(b, "attn_k_norm", "weight", D, qk, &L->k_norm)) ||
        (s = layer_mat(b, "attn_output", QW, E, 1, &L->wo)) || (s = layer_vec(b, "attn_output", "bias", E, 0, &L->bo)) ||
        (s = layer_vec(b, "post_attention_norm", "weight", E, post, &L->post_attn_norm)) ||
        (s = layer_vec(b, "ffn_norm", "weight", E, 1, &L->ffn_norm)) ||
        (s = layer_mat(b, "ffn_down", F, E, 1, &L->down)) || (s = layer_vec(b, "ffn_down", "bias", E, 0, &L->b_down)) ||
        (s = layer_vec(b, "post_ffw_norm", "weight", E, post, &L->post_ffw_norm)))
        return s;
    if (!!L->q_norm != !!L->k_norm)
        return nb_fail(NB_ERR_FORMAT, "model: layer %d has only one of attn_q_norm and attn_k_norm", b->il);
    if (!!L->post_attn_norm != !!L->post_ffw_norm)
        return nb_fail(NB_ERR_FORMAT, "model: layer %d has only one of post_attention_norm and post_ffw_norm", b->il);
    if (flags & NB_T_FUSED_UP) return layer_mat(b, "ffn_up", E, 2 * F, 1, &L->up);
    if ((s = layer_mat(b, "ffn_gate", E, F, 1, &L->gate)) || (s = layer_mat(b, "ffn_up", E, F, 1, &L->up)) ||
        (s = layer_vec(b, "ffn_gate", "bias", F, 0, &L->b_gate)) || (s = layer_vec(b, "ffn_up", "bias", F, 0, &L->b_up)))
        return s;
    return NB_OK;
}

/* rope_freqs (llama3 frequency factors) or LongRoPE's rope_factors_long / _short: one tensor of
 * n_rot/2 factors that every layer shares, as llama.cpp's converter writes them. */
static nb_status bind_rope_factors(nb_model *m) {
    nb_model_info *in = &m->info;
    const float *freqs, *lng, *shrt;
    nb_status s;
    if ((s = bind_vec(m, "rope_freqs.weight", in->n_rot / 2, 0, &freqs)) ||
        (s = bind_vec(m, "rope_factors_long.weight", in->n_rot / 2, 0, &lng)) ||
        (s = bind_vec(m, "rope_factors_short.weight", in->n_rot / 2, 0, &shrt)))
        return s;
    const float *f[] = {freqs, lng, shrt};
    for (int k = 0; k < 3; k++)
        for (int i = 0; f[k] && i < in->n_rot / 2; i++)
            if (!isfinite(f[k][i]) || f[k][i] <= 0)
                return nb_fail(NB_ERR_FORMAT, "model: RoPE factor %d of '%s' is %g; factors must be positive", i,
                               k == 0 ? "rope_freqs.weight" : k == 1 ? "rope_factors_long.weight" : "rope_factors_short.weight",
                               f[k][i]);
    if (freqs) snprintf(in->rope_scaling, sizeof in->rope_scaling, "freqs");
    else if (lng || shrt) snprintf(in->rope_scaling, sizeof in->rope_scaling, "longrope");
    for (int il = 0; il < in->n_layer; il++) {
        m->layers[il].rope_factors = freqs ? freqs : shrt;
        m->layers[il].rope_long = freqs ? freqs : lng ? lng : shrt;
    }
    return NB_OK;
}

nb_status nb_bind_decoder(nb_model *m, unsigned flags) {
    nb_model_info *in = &m->info;
    const nb_gguf_tensor *emb = nb_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!emb || emb->n_dims != 2) return nb_fail(NB_ERR_FORMAT, "model: tensor 'token_embd.weight' is missing or not 2-D");
    if (emb->ne[1] > MAX_VOCAB)
        return nb_fail(NB_ERR_FORMAT, "model: vocabulary of %lld tokens exceeds %d", (long long)emb->ne[1], MAX_VOCAB);
    in->n_vocab = (int)emb->ne[1];
    const int64_t E = in->n_embd;
    nb_status s;
    if ((s = bind(m, "token_embd.weight", E, in->n_vocab, 1, &m->token_embd)) ||
        (s = bind_vec(m, "output_norm.weight", E, 1, &m->output_norm)) ||
        (s = bind_vec(m, "output.bias", in->n_vocab, 0, &m->b_output)))
        return s;
    m->output = m->token_embd;
    if (!(flags & NB_T_TIED) && nb_gguf_find_tensor(m->gguf, "output.weight") &&
        (s = bind(m, "output.weight", E, in->n_vocab, 1, &m->output)))
        return s;
    binder b = {.m = m};
    for (b.il = 0; b.il < in->n_layer; b.il++)
        if ((s = bind_layer(&b, flags))) return s;
    if ((flags & NB_T_ROPE_FACTORS) && (s = bind_rope_factors(m))) return s;
    in->weight_bytes = 0;
    for (int64_t i = 0; i < nb_gguf_tensor_count(m->gguf); i++) in->weight_bytes += nb_gguf_tensor_at(m->gguf, i)->bytes;
    return NB_OK;
}

/* ------------------------------------------------------------ model */

static nb_status load(nb_model *m) {
    nb_model_info *in = &m->info;
    const nb_gguf *g = m->gguf;
    const char *arch, *name;
    nb_status s = nb_gguf_get_string(g, "general.architecture", &arch);
    if (s) return meta_fail(s, g, "general.architecture", NB_GGUF_STRING);
    const nb_family *f = NULL;
    for (size_t i = 0; i < N_FAMILIES && !f; i++)
        if (!strcmp(arch, families[i]->arch)) f = families[i];
    if (!f) {
        char list[128] = "";
        for (size_t i = 0; i < N_FAMILIES; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", families[i]->arch);
        return nb_fail(NB_ERR_UNSUPPORTED, "model: architecture '%.60s' is not supported (nibble runs: %s)", arch, list);
    }
    snprintf(in->arch, sizeof in->arch, "%s", arch);
    if (!nb_gguf_get_string(g, "general.name", &name)) snprintf(in->name, sizeof in->name, "%s", name);
    if ((s = load_shared(m)) || (s = f->load(m))) return s;
    return NB_OK;
}

/* A model bound over g (family, hyperparameters, tensors, tokenizer); `owned` (g or NULL) is
 * closed with the model, or at once when binding fails. */
static nb_status new_model(const nb_gguf *g, nb_gguf *owned, nb_model **out) {
    nb_model *m = calloc(1, sizeof *m);
    if (!m) {
        nb_gguf_close(owned);
        return nb_fail(NB_ERR_NOMEM, "model: out of memory");
    }
    m->gguf = g, m->owned = owned;
    nb_status s = load(m);
    if (!s) s = nb_tokenizer_from_gguf(g, &m->tok);
    if (!s && nb_tokenizer_n_tokens(m->tok) != m->info.n_vocab)
        s = nb_fail(NB_ERR_FORMAT, "model: the tokenizer has %d token%s but token_embd has %d row%s",
                    nb_tokenizer_n_tokens(m->tok), nb_plural(nb_tokenizer_n_tokens(m->tok)), m->info.n_vocab,
                    nb_plural(m->info.n_vocab));
    if (s) {
        nb_model_free(m);
        return s;
    }
    m->info.attn_softcap = m->arch.attn_softcap;
    m->info.final_softcap = m->arch.final_softcap;
    m->info.rope_freq_scale = m->arch.rope_freq_scale;
    *out = m;
    return NB_OK;
}

nb_status nb_model_load(const char *path, nb_model **out) {
    *out = NULL;
    nb_gguf *g;
    nb_status s = nb_gguf_open_ex(path, NB_GGUF_RESIDENT, &g);
    return s ? s : new_model(g, g, out);
}

nb_status nb_model_bind(const nb_gguf *g, nb_model **out) {
    *out = NULL;
    return new_model(g, NULL, out);
}

void nb_model_free(nb_model *m) {
    if (!m) return;
    nb_tokenizer_free(m->tok);
    nb_gguf_close(m->owned);
    free(m);
}

const nb_model_info *nb_model_get_info(const nb_model *m) { return &m->info; }
const nb_tokenizer *nb_model_tokenizer(const nb_model *m) { return m->tok; }
const nb_gguf *nb_model_gguf(const nb_model *m) { return m->gguf; }
