/*
 * gemma3.c: binds a GGUF checkpoint to the Gemma 3 text graph (llama.cpp's `gemma3` architecture).
 *
 * Everything the forward pass will index is checked here, once: hyperparameters are bounded and
 * consistent (heads divide widths, the vocabulary matches the token list and the embedding), and
 * every tensor exists with the type nibble runs and the exact shape the graph expects.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "formats/codes.h"
#include "model/model.h"

/* Bounds that keep every product of hyperparameters far from overflow and refuse absurd files. */
#define MAX_WIDTH (1 << 16)
#define MAX_HEADS 1024
#define MAX_VOCAB (1 << 22)

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

static nb_status get_arch_u32(const nb_gguf *g, const char *key, int lo, int hi, int *out) {
    char full[128];
    nb_gguf_find_arch_key(g, key, full, sizeof full); /* absent: the getter below says so */
    uint32_t v;
    nb_status s = nb_gguf_get_u32(g, full, &v);
    if (s) return meta_fail(s, g, full, NB_GGUF_U32);
    if ((int64_t)v < lo || (int64_t)v > hi)
        return nb_fail(NB_ERR_FORMAT, "model: metadata '%s' = %u is outside [%d, %d]", full, v, lo, hi);
    *out = (int)v;
    return NB_OK;
}

/* An optional f32 key: keeps *out when absent, fails when present with another type. */
static nb_status get_arch_f32_opt(const nb_gguf *g, const char *key, float *out) {
    char full[128];
    if (nb_gguf_find_arch_key(g, key, full, sizeof full) < 0) return NB_OK;
    nb_status s = nb_gguf_get_f32(g, full, out);
    if (s) return meta_fail(s, g, full, NB_GGUF_F32);
    if (!isfinite(*out) || *out <= 0)
        return nb_fail(NB_ERR_FORMAT, "model: metadata '%s' = %g must be positive", full, *out);
    return NB_OK;
}

/* The optional per-tensor factor of an NVFP4 two-level weight: an F32 tensor of one element named
 * like the weight with ".scale" in place of ".weight"; the matmul output is multiplied by it. */
static nb_status bind_scale(const nb_model *m, const char *name, nb_weight *w) {
    w->scale = 1.0f;
    size_t n = strlen(name);
    if (n < 7 || strcmp(name + n - 7, ".weight")) return NB_OK;
    char sname[96];
    snprintf(sname, sizeof sname, "%.*s.scale", (int)(n - 7), name);
    const nb_gguf_tensor *t = nb_gguf_find_tensor(m->gguf, sname);
    if (!t) return NB_OK;
    if (t->type != NB_TYPE_F32 || t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] != 1)
        return nb_fail(NB_ERR_FORMAT, "model: tensor '%s' must be one f32 value", sname);
    memcpy(&w->scale, t->data, sizeof(float));
    if (!isfinite(w->scale)) return nb_fail(NB_ERR_FORMAT, "model: tensor '%s' is not finite", sname);
    return NB_OK;
}

/* Finds tensor `name`, checks it is supported and has shape (ne0, ne1) (ne1 = 1: a vector). */
static nb_status bind(const nb_model *m, const char *name, int64_t ne0, int64_t ne1, nb_weight *w) {
    const nb_gguf_tensor *t = nb_gguf_find_tensor(m->gguf, name);
    if (!t) return nb_fail(NB_ERR_FORMAT, "model: tensor '%s' is missing", name);
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

static nb_status bind_norm(const nb_model *m, const char *name, int64_t n, const float **out) {
    nb_weight w;
    nb_status s = bind(m, name, n, 1, &w);
    if (s) return s;
    if (w.type != NB_TYPE_F32)
        return nb_fail(NB_ERR_UNSUPPORTED, "model: norm '%s' is %s; nibble expects f32 norms", name,
                       nb_type_name(w.type));
    *out = w.data;
    return NB_OK;
}

/* Which layers use the sliding window: `sliding_window_pattern` as a per-layer bool array, or as
 * a period n (layer il is local unless il % n == n-1), or Gemma 3's period of 6 when absent. */
static nb_status sliding_pattern(nb_model *m) {
    nb_model_info *in = &m->info;
    char key[128];
    int period = 6;
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
        } else if ((s = get_arch_u32(m->gguf, "attention.sliding_window_pattern", 1, NB_MAX_LAYERS,
                                     &period))) {
            return s;
        }
    }
    for (int il = 0; il < in->n_layer && period; il++) m->layers[il].sliding = il % period < period - 1;
    in->n_sliding = 0;
    for (int il = 0; il < in->n_layer; il++) in->n_sliding += m->layers[il].sliding;
    return NB_OK;
}

static nb_status load_hparams(nb_model *m) {
    nb_model_info *in = &m->info;
    const nb_gguf *g = m->gguf;
    const char *arch, *name;
    nb_status s = nb_gguf_get_string(g, "general.architecture", &arch);
    if (s) return meta_fail(s, g, "general.architecture", NB_GGUF_STRING);
    if (strcmp(arch, "gemma3"))
        return nb_fail(NB_ERR_UNSUPPORTED, "model: architecture '%.60s' is not supported (nibble runs: gemma3)", arch);
    snprintf(in->arch, sizeof in->arch, "%s", arch);
    if (!nb_gguf_get_string(g, "general.name", &name)) snprintf(in->name, sizeof in->name, "%s", name);

    if ((s = get_arch_u32(g, "block_count", 1, NB_MAX_LAYERS, &in->n_layer)) ||
        (s = get_arch_u32(g, "embedding_length", 1, MAX_WIDTH, &in->n_embd)) ||
        (s = get_arch_u32(g, "feed_forward_length", 1, 8 * MAX_WIDTH, &in->n_ff)) ||
        (s = get_arch_u32(g, "attention.head_count", 1, MAX_HEADS, &in->n_head)) ||
        (s = get_arch_u32(g, "attention.head_count_kv", 1, MAX_HEADS, &in->n_head_kv)) ||
        (s = get_arch_u32(g, "attention.key_length", 2, NB_MAX_HEAD_DIM, &in->head_dim)) ||
        (s = get_arch_u32(g, "context_length", 1, 1 << 24, &in->n_ctx_train)))
        return s;
    int vdim;
    if ((s = get_arch_u32(g, "attention.value_length", 2, NB_MAX_HEAD_DIM, &vdim))) return s;
    if (vdim != in->head_dim || in->head_dim % 2)
        return nb_fail(NB_ERR_UNSUPPORTED, "model: key_length %d and value_length %d must be equal and even",
                       in->head_dim, vdim);
    if (in->n_head % in->n_head_kv)
        return nb_fail(NB_ERR_FORMAT, "model: head_count %d is not a multiple of head_count_kv %d", in->n_head,
                       in->n_head_kv);
    in->sliding_window = 0;
    if (nb_gguf_find_arch_key(g, "attention.sliding_window", NULL, 0) >= 0 &&
        (s = get_arch_u32(g, "attention.sliding_window", 1, 1 << 24, &in->sliding_window)))
        return s;
    in->rope_base = 10000.0f;
    in->rope_base_local = 10000.0f;
    in->rms_eps = 1e-6f;
    if ((s = get_arch_f32_opt(g, "rope.freq_base", &in->rope_base)) ||
        (s = get_arch_f32_opt(g, "rope.freq_base_swa", &in->rope_base_local)) ||
        (s = get_arch_f32_opt(g, "attention.layer_norm_rms_epsilon", &in->rms_eps)))
        return s;
    /* llama.cpp: query_pre_attn_scalar is head_dim for every Gemma 3 size but 27B (62 layers) */
    float pre = in->n_layer == 62 ? (float)(in->n_embd / in->n_head) : (float)in->head_dim;
    m->attn_scale = 1.0f / sqrtf(pre);
    if (in->sliding_window) return sliding_pattern(m);
    return NB_OK;
}

static nb_status bind_tensors(nb_model *m) {
    nb_model_info *in = &m->info;
    const nb_gguf_tensor *emb = nb_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!emb || emb->n_dims != 2) return nb_fail(NB_ERR_FORMAT, "model: tensor 'token_embd.weight' is missing or not 2-D");
    if (emb->ne[1] > MAX_VOCAB)
        return nb_fail(NB_ERR_FORMAT, "model: vocabulary of %lld tokens exceeds %d", (long long)emb->ne[1], MAX_VOCAB);
    in->n_vocab = (int)emb->ne[1];
    const int64_t E = in->n_embd, F = in->n_ff, D = in->head_dim;
    const int64_t QW = D * in->n_head, KW = D * in->n_head_kv;
    nb_status s;
    if ((s = bind(m, "token_embd.weight", E, in->n_vocab, &m->token_embd)) ||
        (s = bind_norm(m, "output_norm.weight", E, &m->output_norm)))
        return s;
    m->output = m->token_embd;
    if (nb_gguf_find_tensor(m->gguf, "output.weight") && (s = bind(m, "output.weight", E, in->n_vocab, &m->output)))
        return s;
    char name[96];
#define LAYER_TENSOR(field, suffix, ne0, ne1)                                    \
    (snprintf(name, sizeof name, "blk.%d.%s.weight", il, suffix),                 \
     bind(m, name, ne0, ne1, &L->field))
#define LAYER_NORM(field, suffix, n)                                              \
    (snprintf(name, sizeof name, "blk.%d.%s.weight", il, suffix),                 \
     bind_norm(m, name, n, &L->field))
    for (int il = 0; il < in->n_layer; il++) {
        nb_layer *L = &m->layers[il];
        if ((s = LAYER_NORM(attn_norm, "attn_norm", E)) || (s = LAYER_TENSOR(wq, "attn_q", E, QW)) ||
            (s = LAYER_TENSOR(wk, "attn_k", E, KW)) || (s = LAYER_TENSOR(wv, "attn_v", E, KW)) ||
            (s = LAYER_NORM(q_norm, "attn_q_norm", D)) || (s = LAYER_NORM(k_norm, "attn_k_norm", D)) ||
            (s = LAYER_TENSOR(wo, "attn_output", QW, E)) ||
            (s = LAYER_NORM(post_attn_norm, "post_attention_norm", E)) ||
            (s = LAYER_NORM(ffn_norm, "ffn_norm", E)) || (s = LAYER_TENSOR(gate, "ffn_gate", E, F)) ||
            (s = LAYER_TENSOR(up, "ffn_up", E, F)) || (s = LAYER_TENSOR(down, "ffn_down", F, E)) ||
            (s = LAYER_NORM(post_ffw_norm, "post_ffw_norm", E)))
            return s;
    }
#undef LAYER_TENSOR
#undef LAYER_NORM
    in->weight_bytes = 0;
    for (int64_t i = 0; i < nb_gguf_tensor_count(m->gguf); i++) in->weight_bytes += nb_gguf_tensor_at(m->gguf, i)->bytes;
    return NB_OK;
}

/* llama.cpp's CPU GELU looks its input up as fp16 in a table of fp16 results; doing the same keeps
 * nibble's logits next to llama.cpp's (measured effect in docs/BENCHMARKS.md, parity section).
 * Its x86 build fuses 1 + 0.044715*x*x into one fma, which decides one entry (x = -1.999): this
 * table equals the one libggml-cpu builds, all 65536 entries (checked against it). */
static void build_gelu_table(nb_model *m) {
    for (uint32_t h = 0; h < 65536; h++) {
        float x = nb_fp16_to_fp32((uint16_t)h);
        float y = 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x * fmaf(0.044715f * x, x, 1.0f)));
        m->gelu_f16[h] = nb_fp16_to_fp32(nb_fp32_to_fp16(y));
    }
}

nb_status nb_model_load(const char *path, nb_model **out) {
    *out = NULL;
    nb_model *m = calloc(1, sizeof *m);
    if (!m) return nb_fail(NB_ERR_NOMEM, "model: out of memory");
    nb_status s = nb_gguf_open_ex(path, NB_GGUF_RESIDENT, &m->gguf);
    if (!s) s = load_hparams(m);
    if (!s) s = bind_tensors(m);
    if (!s) s = nb_tokenizer_from_gguf(m->gguf, &m->tok);
    if (!s && nb_tokenizer_n_tokens(m->tok) != m->info.n_vocab)
        s = nb_fail(NB_ERR_FORMAT, "model: the tokenizer has %d token%s but token_embd has %d row%s",
                    nb_tokenizer_n_tokens(m->tok), nb_plural(nb_tokenizer_n_tokens(m->tok)), m->info.n_vocab,
                    nb_plural(m->info.n_vocab));
    if (s) {
        nb_model_free(m);
        return s;
    }
    build_gelu_table(m);
    *out = m;
    return NB_OK;
}

void nb_model_free(nb_model *m) {
    if (!m) return;
    nb_tokenizer_free(m->tok);
    nb_gguf_close(m->gguf);
    free(m);
}

const nb_model_info *nb_model_get_info(const nb_model *m) { return &m->info; }
const nb_tokenizer *nb_model_tokenizer(const nb_model *m) { return m->tok; }
const nb_gguf *nb_model_gguf(const nb_model *m) { return m->gguf; }
