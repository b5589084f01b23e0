/*
 * recipe.c: which type each tensor of a model gets (rules in quant.h), in llama.cpp's order.
 * The q8_0 / q4_0 / q4_k_m rules restate llama-quant.cpp (llama_tensor_get_type) so that the same
 * input gives the same types; the counters it keeps (attn_v seen so far, ffn_down layer) advance
 * in the same order, which is why the tensors are sorted first.
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "formats/types.h"
#include "quant/quant.h"

enum recipe_kind { R_LLAMA, R_FP4, R_FP4_M, R_AUTO };

typedef struct recipe {
    const char *name;
    enum recipe_kind kind;
    int base;   /* type of an ordinary weight */
    const char *ftype; /* general.file_type by llama.cpp's name, NULL for none */
    int two_level;
} recipe;

static const recipe recipes[] = {
    {"q8_0", R_LLAMA, NB_TYPE_Q8_0, "Q8_0", 0},
    {"q4_0", R_LLAMA, NB_TYPE_Q4_0, "Q4_0", 0},
    {"q4_k_m", R_LLAMA, NB_TYPE_Q4_K, "Q4_K_M", 0},
    {"mxfp4", R_FP4, NB_TYPE_MXFP4, "MXFP4_MOE", 0},
    {"nvfp4", R_FP4, NB_TYPE_NVFP4, "NVFP4", 0},
    {"mxfp4_m", R_FP4_M, NB_TYPE_MXFP4, "MXFP4_MOE", 0},
    {"nvfp4_m", R_FP4_M, NB_TYPE_NVFP4, "NVFP4", 0},
    {"nvfp4_2l", R_FP4, NB_TYPE_NVFP4, "NVFP4", 1},
};

enum category { C_TOKEN_EMBD, C_OUTPUT, C_ATTN_Q, C_ATTN_K, C_ATTN_V, C_ATTN_QKV, C_ATTN_KV_B, C_ATTN_OUTPUT,
                C_FFN_UP, C_FFN_GATE, C_FFN_DOWN, C_OTHER };

/* llama.cpp's tensor_get_category: the first test that matches wins. */
static enum category category_of(const char *name) {
    if (!strcmp(name, "output.weight")) return C_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight")) return C_TOKEN_EMBD;
    static const struct { const char *s; enum category c; } subs[] = {
        {"attn_qkv.weight", C_ATTN_QKV}, {"attn_kv_b.weight", C_ATTN_KV_B}, {"attn_v.weight", C_ATTN_V},
        {"attn_k.weight", C_ATTN_K},     {"attn_q.weight", C_ATTN_Q},       {"attn_output.weight", C_ATTN_OUTPUT},
        {"ffn_up", C_FFN_UP},            {"ffn_gate", C_FFN_GATE},          {"ffn_down", C_FFN_DOWN},
    };
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (strstr(name, subs[i].s)) return subs[i].c;
    return C_OTHER;
}

static int is_attn_v(enum category c) { return c == C_ATTN_V || c == C_ATTN_QKV || c == C_ATTN_KV_B; }

/* ggml_n_dims: trailing dimensions of 1 do not count. */
static int n_dims_of(const nb_gguf_tensor *t) {
    for (int d = 3; d >= 1; d--)
        if (t->ne[d] > 1) return d + 1;
    return 1;
}

/* llama.cpp's tensor_allows_quantization for the architectures nibble reads. */
static int allows_quantization(const nb_gguf_tensor *t) {
    static const char *const keep[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
        "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
        "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
        "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
        "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
        "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.",
        "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
    };
    size_t n = strlen(t->name);
    if (n_dims_of(t) < 2 || n < 6 || strcmp(t->name + n - 6, "weight")) return 0;
    if (!strcmp(t->name, "position_embd.weight") || !strcmp(t->name, "token_types.weight")) return 0;
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (strstr(t->name, keep[i])) return 0;
    return 1;
}

static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int block_of(int type) {
    const nb_type_info *ti = nb_type_get(type);
    return ti ? ti->block_elems : 1;
}

/* llama.cpp's tensor_type_fallback: the table's fallback of the type, then F16. */
static int fallback(int type, int64_t ncols) {
    if (ncols % block_of(type) == 0) return type;
    const nb_type_traits *t = nb_type_traits_get(type);
    int r = t && t->fallback >= 0 ? t->fallback : type;
    return ncols % block_of(r) == 0 ? r : NB_TYPE_F16;
}

/* llama.cpp's weight_name_comparer: tensors outside a layer first, then by layer number, then name. */
static int layer_of(const char *name) {
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1) l = -1;
    return l;
}

static int by_llama_order(const void *a, const void *b) {
    const nb_qplan *x = a, *y = b;
    int la = layer_of(x->t->name), lb = layer_of(y->t->name);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(x->t->name, y->t->name);
}

typedef struct state {
    const recipe *r;
    const char *arch;
    int n_layer, n_expert, tied, n_attn_v, i_attn_v, i_ffn_down;
} state;

/* llama_tensor_get_type_impl restricted to the recipes above. */
static int recipe_type(state *st, const nb_gguf_tensor *t, enum category cat) {
    const recipe *r = st->r;
    int type = r->base;
    const int falcon = !strcmp(st->arch, "falcon");
    const int more_bits_recipe = r->base == NB_TYPE_Q4_K || r->kind == R_FP4_M;
    if (cat == C_OUTPUT || (st->tied && cat == C_TOKEN_EMBD)) {
        if (r->kind == R_LLAMA) {
            if (falcon || t->ne[0] % block_of(type)) type = NB_TYPE_Q8_0;
            else if (type != NB_TYPE_Q8_0) type = NB_TYPE_Q6_K;
        } else if (r->kind == R_FP4_M) {
            type = NB_TYPE_Q6_K;
        }
    } else if (cat == C_TOKEN_EMBD) {
        if (r->kind == R_FP4_M) type = NB_TYPE_Q6_K;
    } else if (is_attn_v(cat)) {
        if (more_bits_recipe && use_more_bits(st->i_attn_v, st->n_attn_v)) type = NB_TYPE_Q6_K;
        if (r->kind == R_LLAMA && st->n_expert == 8) type = NB_TYPE_Q8_0;
        st->i_attn_v++;
    } else if (cat == C_ATTN_K) {
        if (r->kind == R_LLAMA && st->n_expert == 8) type = NB_TYPE_Q8_0;
    } else if (cat == C_FFN_DOWN) {
        int il = st->i_ffn_down;
        if (st->n_expert > 1) il = layer_of(t->name);
        if (r->base == NB_TYPE_Q4_K && falcon)
            type = il < st->n_layer / 16 ? NB_TYPE_Q6_K : use_more_bits(il, st->n_layer) ? NB_TYPE_Q5_K : NB_TYPE_Q4_K;
        else if (more_bits_recipe && use_more_bits(il, st->n_layer))
            type = NB_TYPE_Q6_K;
        st->i_ffn_down++;
    } else if (cat == C_ATTN_OUTPUT) {
        if (r->base == NB_TYPE_Q4_K && r->kind == R_LLAMA && !falcon && st->n_expert == 8) type = NB_TYPE_Q5_K;
    } else if (cat == C_ATTN_QKV) {
        if (r->base == NB_TYPE_Q4_K && r->kind == R_LLAMA) type = NB_TYPE_Q5_K;
    }
    return type;
}

static const recipe *find_recipe(const char *name, double *bpw) {
    if (!strncasecmp(name, "auto:", 5)) {
        static const recipe autor = {"auto", R_AUTO, NB_TYPE_Q4_K, NULL, 0};
        char *end;
        *bpw = strtod(name + 5, &end);
        return end != name + 5 && !*end && *bpw > 0 && *bpw <= 32 ? &autor : NULL;
    }
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++)
        if (!strcasecmp(name, recipes[i].name)) return &recipes[i];
    return NULL;
}

/* The compiled --tensor-type overrides. */
typedef struct overrides {
    regex_t *re;
    int *type;
    int n;
} overrides;

static void overrides_free(overrides *o) {
    for (int i = 0; i < o->n; i++) regfree(&o->re[i]);
    free(o->re);
    free(o->type);
}

static nb_status overrides_compile(const nb_quant_params *p, overrides *o) {
    memset(o, 0, sizeof *o);
    if (p->n_overrides <= 0) return NB_OK;
    o->re = calloc((size_t)p->n_overrides, sizeof *o->re);
    o->type = calloc((size_t)p->n_overrides, sizeof *o->type);
    if (!o->re || !o->type) {
        overrides_free(o);
        return nb_fail(NB_ERR_NOMEM, "%d overrides", p->n_overrides);
    }
    for (int i = 0; i < p->n_overrides; i++) {
        const char *s = p->overrides[i], *eq = s ? strrchr(s, '=') : NULL;
        if (!eq || eq == s) {
            overrides_free(o);
            return nb_fail(NB_ERR_INVALID_ARG, "override '%s' is not PATTERN=TYPE", s ? s : "(null)");
        }
        char pat[256];
        if ((size_t)(eq - s) >= sizeof pat) {
            overrides_free(o);
            return nb_fail(NB_ERR_INVALID_ARG, "override pattern longer than %zu bytes", sizeof pat - 1);
        }
        memcpy(pat, s, (size_t)(eq - s));
        pat[eq - s] = 0;
        o->type[i] = nb_type_from_name(eq + 1);
        if (o->type[i] < 0) {
            overrides_free(o);
            return nb_fail(NB_ERR_INVALID_ARG, "override '%s': unknown type '%s'", s, eq + 1);
        }
        if (regcomp(&o->re[i], pat, REG_EXTENDED | REG_NOSUB)) {
            overrides_free(o);
            return nb_fail(NB_ERR_INVALID_ARG, "override '%s': bad regular expression", s);
        }
        o->n = i + 1;
    }
    return NB_OK;
}

static int override_type(const overrides *o, const char *name) {
    for (int i = 0; i < o->n; i++)
        if (!regexec(&o->re[i], name, 0, NULL, 0)) return o->type[i];
    return -1;
}

static int check_type_arg(int type) {
    const nb_type_info *ti = type >= 0 ? nb_type_get(type) : NULL;
    return ti && ti->weight_type;
}

nb_status nb_quant_plan(const nb_gguf *g, const nb_quant_params *p, nb_qplan **out, int *ftype) {
    double bpw = 0;
    const recipe *r = p->recipe ? find_recipe(p->recipe, &bpw) : NULL;
    if (!r)
        return nb_fail(NB_ERR_INVALID_ARG, "unknown recipe '%s' (q8_0 q4_0 q4_k_m mxfp4 nvfp4 mxfp4_m "
                       "nvfp4_m nvfp4_2l auto:BPW)", p->recipe ? p->recipe : "(null)");
    if ((p->pure_type >= 0 && !check_type_arg(p->pure_type)) || (p->embed_type >= 0 && !check_type_arg(p->embed_type)))
        return nb_fail(NB_ERR_INVALID_ARG, "--pure / --embed-type names a type nibble does not write");
    int64_t n = nb_gguf_tensor_count(g);
    nb_qplan *plan = calloc(n ? (size_t)n : 1, sizeof *plan);
    if (!plan) return nb_fail(NB_ERR_NOMEM, "plan of %lld tensors", (long long)n);
    state st = {.r = r, .arch = "", .n_layer = 0, .tied = 1};
    const char *arch = NULL;
    if (!nb_gguf_get_string(g, "general.architecture", &arch)) st.arch = arch;
    nb_gguf_value v;
    if (!nb_gguf_kv_value(g, nb_gguf_find_arch_key(g, "block_count", NULL, 0), &v) && v.type == NB_GGUF_U32)
        st.n_layer = (int)v.v.u;
    if (!nb_gguf_kv_value(g, nb_gguf_find_arch_key(g, "expert_count", NULL, 0), &v) && v.type == NB_GGUF_U32)
        st.n_expert = (int)v.v.u;
    for (int64_t i = 0; i < n; i++) {
        plan[i].t = nb_gguf_tensor_at(g, i);
        if (!strcmp(plan[i].t->name, "output.weight")) st.tied = 0;
        if (is_attn_v(category_of(plan[i].t->name))) st.n_attn_v++;
    }
    if (!st.n_layer) /* no block_count: count the layers the names show */
        for (int64_t i = 0; i < n; i++)
            if (layer_of(plan[i].t->name) >= st.n_layer) st.n_layer = layer_of(plan[i].t->name) + 1;
    qsort(plan, (size_t)n, sizeof *plan, by_llama_order);
    overrides ov;
    nb_status s = overrides_compile(p, &ov);
    if (s) {
        free(plan);
        return s;
    }
    for (int64_t i = 0; i < n; i++) {
        const nb_gguf_tensor *t = plan[i].t;
        plan[i].type = t->type;
        if (!(plan[i].quantizable = allows_quantization(t))) continue;
        enum category cat = category_of(t->name);
        int type;
        if (p->embed_type >= 0 && (cat == C_TOKEN_EMBD || cat == C_OUTPUT)) {
            type = p->embed_type;
            plan[i].fixed = 1;
        } else {
            int manual = override_type(&ov, t->name);
            plan[i].fixed = manual >= 0 || p->pure_type >= 0;
            type = manual >= 0 ? manual : p->pure_type >= 0 ? p->pure_type : recipe_type(&st, t, cat);
        }
        plan[i].type = fallback(type, t->ne[0]);
        plan[i].two_level = plan[i].type == NB_TYPE_NVFP4 && (r->two_level || p->two_level);
    }
    overrides_free(&ov);
    if (r->kind == R_AUTO && (s = nb_quant_auto(g, p, bpw, plan, n))) {
        free(plan);
        return s;
    }
    *out = plan;
    *ftype = r->ftype ? nb_ftype_from_name(r->ftype) : -1;
    return NB_OK;
}
