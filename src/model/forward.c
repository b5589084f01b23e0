/*
 * forward.c: the decoder's forward pass, a batch of tokens at a time, for every family from its
 * nb_arch description (model.h), and the context (KV cache + activation arena) it runs in.
 *
 *   x = token_embd[tok] * embd_scale
 *   per layer:  h = rmsnorm(x) * attn_norm
 *               q, k, v = h Wq + bq, h Wk + bk, h Wv + bv     (or one fused h Wqkv, split)
 *               q, k = rmsnorm per head * q_norm / k_norm      (families with head norms)
 *               q, k = rope(q, k, pos)                         (NORM or NEOX, factors, scale)
 *               q *= attn_scale                                (q_prescale families)
 *               s = K q;  s = cap * tanh(s / cap)              (attention softcap)
 *               o = softmax(s * (q_prescale ? 1 : attn_scale)) V Wo + bo   (causal; local
 *                   layers see the last `sliding_window` positions only)
 *               x += post_attn_norm ? rmsnorm(o) * post_attn_norm : o
 *               h = rmsnorm(x) * ffn_norm
 *               o = (act(h Wgate + bg) * (h Wup + bu)) Wdown + bd   (or a fused gate | up)
 *               x += post_ffw_norm ? rmsnorm(o) * post_ffw_norm : o
 *   logits = (rmsnorm(x) * output_norm) Wout + bout;  logits = cap * tanh(logits / cap)
 *
 * Each step is the operation llama.cpp's graph for the family performs, in its order, so that
 * logits can be compared bit for bit. Shapes are row-major (token, width). Every product is
 * nb_matmul on the tensor's own type.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/error.h"
#include "base/threads.h"
#include "kernels/api.h"
#include "model/context.h"
#include "model/kvcache.h"
#include "model/model.h"

/* ------------------------------------------------------------ small ops */

/* How a layer rotates (qk_prepare fills it per layer). */
typedef struct rope_par {
    int n_rot;
    float base, freq_scale, mscale, ext; /* ext: YaRN's ext_factor, 0 off */
    float corr[2];                       /* YaRN: the dimensions its ramp runs between */
    const float *ff;                     /* frequency factors or NULL */
} rope_par;

/* ggml_rope_yarn_corr_dims: the dimensions whose wavelength fits beta_fast (32) and beta_slow (1)
 * times into the original context, floored / ceiled into [0, n_rot - 1]. */
static void yarn_corr_dims(rope_par *r, int n_ctx_orig) {
    const float beta[2] = {32.0f, 1.0f};
    for (int k = 0; k < 2; k++) {
        const float d = (float)r->n_rot * logf((float)n_ctx_orig / (beta[k] * 2 * (float)M_PI)) / (2 * logf(r->base));
        r->corr[k] = k ? fminf((float)(r->n_rot - 1), ceilf(d)) : fmaxf(0.0f, floorf(d));
    }
}

/* Rotation angles of a position as ggml's rope cache holds them: theta_i = pos * base^(-2i/n_rot)
 * by repeated multiplication in float, divided by the factor ff[i] when there are factors
 * (extrapolated), times freq_scale (interpolated); YaRN mixes the two by its ramp and grows the
 * magnitude. cs[2i] = cos * mscale, cs[2i+1] = sin * mscale. */
static void rope_angles(float *cs, const rope_par *r, int pos) {
    const float step = powf(r->base, -2.0f / (float)r->n_rot);
    float theta = (float)pos;
    for (int i = 0; i < r->n_rot / 2; i++) {
        const float extrap = r->ff ? theta / r->ff[i] : theta, interp = r->freq_scale * extrap;
        float t = interp, ms = r->mscale;
        if (r->ext) {
            const float y = ((float)i - r->corr[0]) / fmaxf(0.001f, r->corr[1] - r->corr[0]);
            const float mix = (1 - fminf(1, fmaxf(0, y))) * r->ext;
            t = fmaf(interp, 1 - mix, extrap * mix);
            ms *= fmaf(0.1f, logf(1.0f / r->freq_scale), 1.0f);
        }
        cs[2 * i] = cosf(t) * ms, cs[2 * i + 1] = sinf(t) * ms;
        theta *= step;
    }
}

/* How layer il rotates (the frequency factors are each context's: long_rope). */
static rope_par layer_rope(const nb_model *m, int il) {
    const nb_model_info *in = &m->info;
    const nb_arch *a = &m->arch;
    const int sliding = m->layers[il].sliding;
    rope_par r = {.n_rot = in->n_rot, .base = sliding ? in->rope_base_local : in->rope_base,
                  .freq_scale = sliding ? a->rope_freq_scale_local : a->rope_freq_scale,
                  .mscale = a->rope_attn_factor, .ext = a->rope_ext_factor};
    if (r.ext) yarn_corr_dims(&r, a->n_ctx_orig);
    return r;
}

/* ------------------------------------------------------------ context */

/* Defined here, the only file that reads it: other layers go through model/context.h. */
struct nb_ctx {
    const nb_model *m;
    nb_pool *pool;
    int own_pool;
    int n_ctx, n_batch;
    int fused;                   /* 1: fused attention (online softmax, V rows); 0: llama.cpp's unfused order */
    int pos;                     /* tokens already in the cache */
    nb_kv kv;                    /* zero until written */
    uint8_t *mem;                /* the mapping: KV cache, then the arena */
    int long_rope;               /* n_ctx past the original context: LongRoPE's long factors */
    nb_route route;              /* of the weight products: NB_ROUTE_QUANT, or NB_ROUTE_BLOCK (fast_prefill) */
    int fast_batch;              /* nb_ctx_params.fast_batch */
    /* activation arena, (n_batch, width) each; t holds a fused product before its split */
    float *x, *h, *q, *k, *v, *att, *o, *g, *u, *t;
    float *scores;               /* (n_threads, ATT_SCRATCH): scores, rounded queries */
    nb_observer_fn observer;     /* optional: sees every matmul input */
    void *observer_user;
    size_t arena_bytes;          /* KV cache plus arena, allocated once */
};

/* Per-thread attention scratch. Unfused: a block of T = att_tokens tokens' G query heads, their
 * score rows of n_cells, and their rounded queries (then their outputs). Fused: a tile of
 * FA_TOKENS tokens' G query heads (rows), their scores against FA_KEYS keys, their accumulators
 * and running maximum and sum, and the rows packed for nb_attn_qk. */
#define ATT_SCRATCH(T, G, n_cells, D) ((size_t)(T) * (size_t)(G) * ((size_t)(n_cells) + (size_t)(D)))
/* Tokens per unfused attention block: ATT_ROWS query rows (at most n_batch tokens). Blocks of 16
 * tokens (64 rows) on Gemma 3 270M's 4 query heads per kv head measured 0.96x its per-token
 * products at 1 thread (their extra cells past each row's own cost more than the rows share), 8
 * tokens 1.07x; Qwen3's 2 heads take 16. */
enum { ATT_ROWS = 32 };
static int att_tokens(int n_batch, int G) {
    const int t = ATT_ROWS / G > 1 ? ATT_ROWS / G : 1;
    return n_batch < t ? n_batch : t;
}
/* FA_TOKENS: a unit's keys and values are converted to f32 once for its rows, so 32 tokens share
 * each conversion where 16 did (bench_attn --tokens 16 / 32, from memory, Zen 4: scores 1.05-1.24x,
 * value sums 1.08-1.29x; docs/BENCHMARKS.md, stop 60), for a diagonal block's few more masked keys. */
enum { FA_TOKENS = 32, FA_KEYS = 128, FA_SPLIT = 64, FA_PARTS = 8 };
#define FA_SCRATCH(G, D) \
    ((size_t)FA_TOKENS * (size_t)(G) * (2 * (size_t)(D) + FA_KEYS + 2) + NB_ATTN_QK_PACKED(FA_TOKENS * (G), D))
/* After the threads' scratch: a split decode's parts, per kv head FA_PARTS of G rows. */
#define FA_SLOTS(HK, G, D) ((size_t)(HK) * FA_PARTS * (size_t)(G) * ((size_t)(D) + 2))

nb_ctx_params nb_ctx_default_params(void) {
    nb_ctx_params p = {.n_ctx = 4096, .n_batch = 512, .type_k = NB_TYPE_F16, .type_v = NB_TYPE_F16,
                       .flash_attn = NB_FA_AUTO, .swa_full = 0, .fast_prefill = 0, .fast_batch = 0, .n_threads = 0,
                       .pool = NULL};
    return p;
}

/* Where everything of a context goes: the KV cache (K, then V) and the activation arena after it,
 * one mapping of `total` bytes. nb_ctx_create allocates exactly this and nb_ctx_estimate reports
 * it; the parameters are checked here. */
enum { N_BUFS = 11 }; /* x, h, q, k, v, att, o, g, u, t, scores */
typedef struct ctx_layout {
    int n_ctx, n_batch, fused;
    nb_kv kv;
    size_t floats[N_BUFS];       /* each activation buffer, in floats */
    size_t total;
} ctx_layout;

static size_t aligned64(size_t floats) { return (floats * 4 + 63) & ~(size_t)63; }

static nb_status ctx_layout_of(const nb_model *m, const nb_ctx_params *p, int n_threads, ctx_layout *l) {
    const nb_model_info *in = &m->info;
    if (p->n_ctx < 1 || p->n_ctx > in->n_ctx_train)
        return nb_fail(NB_ERR_RANGE, "context: n_ctx %d is outside [1, %d] (the model's training context)", p->n_ctx,
                       in->n_ctx_train);
    if (p->n_batch < 1 || p->n_batch > 4096) return nb_fail(NB_ERR_RANGE, "context: n_batch %d is outside [1, 4096]", p->n_batch);
    l->n_ctx = p->n_ctx;
    l->n_batch = p->n_batch < p->n_ctx ? p->n_batch : p->n_ctx;
    if (p->flash_attn != NB_FA_AUTO && p->flash_attn != NB_FA_OFF && p->flash_attn != NB_FA_ON)
        return nb_fail(NB_ERR_INVALID_ARG, "context: flash_attn %d is none of auto (-1), off (0), on (1)", p->flash_attn);
    /* auto: the fused attention where V cells are quantized (llama.cpp's unfused order cannot take them) */
    l->fused = p->flash_attn == NB_FA_ON ||
               (p->flash_attn == NB_FA_AUTO && p->type_v != NB_TYPE_F16 && p->type_v != NB_TYPE_F32);
    nb_status s = nb_kv_plan(&l->kv, m, l->n_ctx, l->n_batch, p->type_k, p->type_v, l->fused, p->swa_full);
    if (s) return s;
    /* sizes: the model's hyperparameters are bounded at load, n_ctx and n_batch here */
    const size_t B = (size_t)l->n_batch, E = in->n_embd, D = in->head_dim, F = in->n_ff;
    const size_t Q = (size_t)in->n_head * D, KV = (size_t)in->n_head_kv * D, G = (size_t)(in->n_head / in->n_head_kv);
    size_t fused = 0;
    for (int il = 0; il < in->n_layer; il++) {
        if (m->layers[il].wqkv.name && fused < Q + 2 * KV) fused = Q + 2 * KV;
        if (!m->layers[il].gate.name && fused < 2 * F) fused = 2 * F;
    }
    const size_t att = l->fused ? FA_SCRATCH(G, D) : ATT_SCRATCH(att_tokens(l->n_batch, (int)G), G, l->kv.n_cells, D);
    const size_t floats[N_BUFS] = {B * E, B * E, B * Q, B * KV, B * KV, B * Q, B * E, B * F, B * F, B * fused,
                                   (size_t)n_threads * att + (l->fused ? FA_SLOTS(in->n_head_kv, G, D) : 0)};
    memcpy(l->floats, floats, sizeof floats);
    l->total = l->kv.bytes;
    for (int i = 0; i < N_BUFS; i++) l->total += aligned64(l->floats[i]);
    return NB_OK;
}

nb_status nb_ctx_estimate(const nb_model *m, const nb_ctx_params *p, size_t *kv_bytes, size_t *total_bytes) {
    const nb_ctx_params d = p ? *p : nb_ctx_default_params();
    ctx_layout l;
    nb_status s = ctx_layout_of(m, &d, d.pool ? nb_pool_threads(d.pool) : nb_pool_default_threads(d.n_threads), &l);
    if (s) return s;
    if (kv_bytes) *kv_bytes = l.kv.k_bytes + l.kv.v_bytes;
    if (total_bytes) *total_bytes = l.total;
    return NB_OK;
}

nb_status nb_ctx_create(const nb_model *m, const nb_ctx_params *p, nb_ctx **out) {
    *out = NULL;
    const nb_ctx_params d = p ? *p : nb_ctx_default_params();
    ctx_layout l;
    nb_status s = ctx_layout_of(m, &d, 1, &l); /* the parameters checked before a pool starts */
    if (s) return s;
    nb_ctx *c = calloc(1, sizeof *c);
    if (!c) return nb_fail(NB_ERR_NOMEM, "context: out of memory");
    c->m = m;
    if (d.pool) {
        c->pool = d.pool;
    } else if ((s = nb_pool_create(d.n_threads, &c->pool))) {
        free(c);
        return s;
    } else {
        c->own_pool = 1;
    }
    ctx_layout_of(m, &d, nb_pool_threads(c->pool), &l);
    c->n_ctx = l.n_ctx;
    c->n_batch = l.n_batch;
    c->fused = l.fused;
    c->kv = l.kv;
    c->long_rope = d.n_ctx > m->arch.n_ctx_orig; /* llama.cpp: n_ctx_seq > n_ctx_orig_yarn */
    c->route = d.fast_prefill ? NB_ROUTE_BLOCK : NB_ROUTE_QUANT;
    c->fast_batch = d.fast_batch != 0;
    c->arena_bytes = l.total;
    /* anonymous pages: zero until written (attention reads cells past the last position, weighted
     * 0, so they must hold finite values) and resident only once touched */
    uint8_t *mem = mmap(NULL, l.total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        nb_ctx_free(c);
        return nb_fail(NB_ERR_NOMEM, "context: cannot allocate %zu bytes for n_ctx %d", l.total, d.n_ctx);
    }
    c->mem = mem;
    nb_kv_place(&c->kv, mem);
    float **bufs[N_BUFS] = {&c->x, &c->h, &c->q, &c->k, &c->v, &c->att, &c->o, &c->g, &c->u, &c->t, &c->scores};
    uint8_t *cur = mem + l.kv.bytes;
    for (int i = 0; i < N_BUFS; i++) {
        *bufs[i] = (float *)cur;
        cur += aligned64(l.floats[i]);
    }
    *out = c;
    return NB_OK;
}

void nb_ctx_free(nb_ctx *c) {
    if (!c) return;
    if (c->own_pool) nb_pool_destroy(c->pool);
    if (c->mem) munmap(c->mem, c->arena_bytes);
    free(c);
}

void nb_ctx_set_observer(nb_ctx *c, nb_observer_fn fn, void *user) {
    c->observer = fn;
    c->observer_user = user;
}

const nb_model *nb_ctx_model(const nb_ctx *c) { return c->m; }
nb_pool *nb_ctx_pool(const nb_ctx *c) { return c->pool; }
int nb_ctx_pos(const nb_ctx *c) { return c->pos; }
int nb_ctx_n_ctx(const nb_ctx *c) { return c->n_ctx; }
void nb_ctx_reset(nb_ctx *c) { c->pos = 0; }

nb_status nb_ctx_truncate(nb_ctx *c, int n) {
    if (n < 0 || n > c->pos) return nb_fail(NB_ERR_RANGE, "context: cannot keep %d positions of %d", n, c->pos);
    /* the cells past it are rewritten before attention reads them with a weight; a ring that has
     * overwritten the window before n keeps nothing */
    c->pos = nb_kv_reusable(&c->kv, c->m->info.sliding_window, n);
    return NB_OK;
}
size_t nb_ctx_memory(const nb_ctx *c) { return c->arena_bytes; }

/* The newest position below n that ring cell `cell` of R takes (negative: none). */
static int ring_newest(int n, int cell, int R) { return (n - 1) - ((n - 1 - cell) % R + R) % R; }

/* Moves layer il's cached rows for a shift: global layers' positions from keep + d down by d,
 * their keys rotated by -d (cs); a ring's cells each take the row src[cell] names (-1: none),
 * rotated when it moves. k, v: scratch of R x head_dim floats each (one row for global layers). */
static void shift_layer(nb_ctx *c, int il, int keep, int d, const float *cs, const int32_t *src, float *k, float *v) {
    nb_kv *kv = &c->kv;
    const nb_model *m = c->m;
    const int D = m->info.head_dim, R = kv->n_ring;
    for (int g = 0; g < m->info.n_head_kv; g++) {
        if (!kv->ring[il]) {
            for (int p = keep + d; p < c->pos; p++) {
                nb_kv_load(kv, il, g, p, k, v);
                nb_rope(k, 1, D, m->info.n_rot, cs, m->arch.rope == NB_ROPE_NEOX);
                nb_kv_store(kv, il, g, p - d, k, v);
            }
            continue;
        }
        for (int cell = 0; cell < R; cell++) nb_kv_load(kv, il, g, cell, k + (size_t)cell * D, v + (size_t)cell * D);
        const int npos = c->pos - d;
        for (int cell = 0; cell < R; cell++) {
            if (src[cell] < 0) continue;
            const int q = ring_newest(npos, cell, R);
            float *kk = k + (size_t)src[cell] * D;
            if (q >= keep) nb_rope(kk, 1, D, m->info.n_rot, cs, m->arch.rope == NB_ROPE_NEOX);
            nb_kv_store(kv, il, g, q, kk, v + (size_t)src[cell] * D);
        }
    }
}

nb_status nb_ctx_shift(nb_ctx *c, int keep, int n_discard) {
    if (keep < 0 || n_discard < 1 || n_discard > c->pos - keep)
        return nb_fail(NB_ERR_RANGE, "context shift: cannot drop %d position%s after the first %d of %d", n_discard,
                       nb_plural(n_discard), keep, c->pos);
    nb_kv *kv = &c->kv;
    const int D = c->m->info.head_dim, R = kv->n_ring, d = n_discard, npos = c->pos - d;
    const size_t rows = R ? (size_t)R : 1;
    float *k = malloc(sizeof(float) * rows * (size_t)D * 2);
    int32_t *src = R ? malloc(sizeof(int32_t) * (size_t)R) : NULL;
    if (!k || (R && !src)) {
        free(k), free(src);
        return nb_fail(NB_ERR_NOMEM, "context shift: out of memory");
    }
    for (int cell = 0; cell < R; cell++) { /* the newest position each ring cell takes, and where it was */
        const int q = ring_newest(npos, cell, R), o = q < keep ? q : q + d;
        src[cell] = q >= 0 && kv->ring_pos[o % R] == o ? o % R : -1;
    }
    for (int il = 0; il < c->m->info.n_layer; il++) {
        rope_par r = layer_rope(c->m, il);
        r.ff = c->long_rope ? c->m->layers[il].rope_long : c->m->layers[il].rope_factors;
        float cs[NB_MAX_HEAD_DIM];
        rope_angles(cs, &r, -d);
        for (int i = 0; i < r.n_rot / 2; i++) { /* a pure rotation: without YaRN's magnitude */
            const float h = hypotf(cs[2 * i], cs[2 * i + 1]);
            cs[2 * i] /= h, cs[2 * i + 1] /= h;
        }
        shift_layer(c, il, keep, d, cs, src, k, k + rows * (size_t)D);
    }
    for (int cell = 0; cell < R; cell++) {
        kv->ring_pos[cell] = src[cell] >= 0 ? ring_newest(npos, cell, R) : -1;
    }
    free(k), free(src);
    c->pos = npos;
    return NB_OK;
}

/* ------------------------------------------------------------ forward */

/* One sequence of a batch: its context (positions, KV cache), its tokens, and which rows of the
 * stacked activations are its. */
typedef struct seq {
    nb_ctx *c;
    const int32_t *tok;
    int n;         /* tokens, at positions c->pos .. c->pos + n - 1 */
    int row0;      /* its first row in the batch */
    int first;     /* logits for its tokens [first, n) (n: none) */
} seq;

/* A forward pass over the rows of every sequence: matrix products run over all rows at once in
 * the arena context's activation buffers (a: the first sequence's context); positions, the KV
 * cache, RoPE and attention are each row's sequence's. */
typedef struct batch {
    nb_ctx *a;
    const seq *s;
    int n_seq;
    int n;         /* rows: every sequence's tokens */
    int il;        /* layer */
} batch;

/* The sequence that holds row t, searching from sequence i. */
static const seq *seq_of(const batch *b, int i, int64_t t) {
    while (t >= b->s[i].row0 + b->s[i].n) i++;
    return &b->s[i];
}

/* Per token: q/k head norms, RoPE, q's scale; store k and v at the token's position. */
static void qk_prepare(void *arg, int64_t t0, int64_t t1) {
    const batch *b = arg;
    const nb_model *m = b->a->m;
    const nb_model_info *in = &m->info;
    const nb_arch *a = &m->arch;
    const nb_layer *L = &m->layers[b->il];
    const int D = in->head_dim, HQ = in->n_head, HK = in->n_head_kv;
    rope_par r = layer_rope(m, b->il);
    float cs[NB_MAX_HEAD_DIM]; /* the position's angles, shared by its heads */
    const seq *sq = seq_of(b, 0, t0);
    for (int64_t t = t0; t < t1; t++) {
        sq = seq_of(b, (int)(sq - b->s), t);
        nb_ctx *c = sq->c;
        const int pos = c->pos + (int)(t - sq->row0);
        float *q = b->a->q + t * HQ * D, *k = b->a->k + t * HK * D, *v = b->a->v + t * HK * D;
        r.ff = c->long_rope ? L->rope_long : L->rope_factors;
        rope_angles(cs, &r, pos);
        if (L->q_norm) nb_rmsnorm(q, q, L->q_norm, HQ, D, in->rms_eps);
        if (L->k_norm) nb_rmsnorm(k, k, L->k_norm, HK, D, in->rms_eps);
        nb_rope(q, HQ, D, in->n_rot, cs, a->rope == NB_ROPE_NEOX);
        nb_rope(k, HK, D, in->n_rot, cs, a->rope == NB_ROPE_NEOX);
        for (int i = 0; a->q_prescale && i < HQ * D; i++) q[i] *= a->attn_scale;
        for (int g = 0; g < HK; g++) nb_kv_store(&c->kv, b->il, g, pos, k + g * D, v + g * D);
        if (b->il == 0) nb_kv_mark(&c->kv, pos); /* stored in every ring layer before it attends */
    }
}

/* The first position token t of a sequence sees in layer il (its window's start, or 0). */
static int window_lo(const nb_ctx *c, int il, int pos) {
    const int w = c->m->info.sliding_window;
    return c->m->layers[il].sliding && pos - w + 1 > 0 ? pos - w + 1 : 0;
}

/* Scores of one query row against nk keys: the softcap and the scale, and -inf where the key is
 * not visible. Key j is position p0 + j, or with by_cell whatever position its cell holds (a ring
 * that has wrapped); cells: the positions the keys' cells hold, NULL when each holds its key (a
 * global layer, or a run of ring cells run_cells found whole), so that only the ends outside
 * lo .. pos are masked; else a key is also masked where its cell holds another position. */
static void scores_finish(const nb_ctx *c, float *s, int nk, int p0, int lo, int pos, const int32_t *cells, int by_cell) {
    const nb_arch *a = &c->m->arch;
    if (a->attn_softcap)
        for (int j = 0; j < nk; j++) s[j] = tanhf(s[j] * (1.0f / a->attn_softcap)) * a->attn_softcap;
    if (!a->q_prescale) nb_vec_scale(s, nk, a->attn_scale);
    if (!cells) { /* keys p0 .. p0+nk-1 in order: mask both ends */
        for (int j = 0; j < nk && p0 + j < lo; j++) s[j] = -INFINITY;
        for (int j = pos + 1 - p0 > 0 ? pos + 1 - p0 : 0; j < nk; j++) s[j] = -INFINITY;
        return;
    }
    for (int j = 0; j < nk; j++) {
        const int p = by_cell ? cells[j] : p0 + j;
        if (p < lo || p > pos || cells[j] != p) s[j] = -INFINITY;
    }
}

/* NULL when layer il is no ring or its nk cells from cell0 hold positions p0 .. p0+nk-1, else
 * those cells' positions (scores_finish's cells). */
static const int32_t *run_cells(const nb_kv *kv, int il, int cell0, int p0, int nk) {
    if (!kv->ring[il]) return NULL;
    const int32_t *held = kv->ring_pos + cell0;
    for (int j = 0; j < nk; j++)
        if (held[j] != p0 + j) return held;
    return NULL;
}

/* The cells row t (of sequence sq) attends to (attend_block): n from lo32, or all of a ring that has
 * wrapped (a cell holds a position no longer). */
typedef struct cell_span {
    int lo32, n, wrapped;
} cell_span;
static cell_span attend_cells(const batch *b, const seq *sq, int t) {
    const nb_ctx *c = sq->c;
    const int pos = c->pos + t - sq->row0, cells = nb_kv_cells(&c->kv, b->il);
    if (c->kv.ring[b->il] && c->pos + sq->n > cells) return (cell_span){0, cells, 1};
    const int lo32 = window_lo(c, b->il, pos) & ~31;
    return (cell_span){lo32, ((pos + 32) & ~31) - lo32, 0}; /* pos < n_cells */
}

/* The cells of rows t0 .. t0+nt-1 together: from the first row's lo32 to the last row's end. */
static cell_span block_cells(const batch *b, const seq *sq, int t0, int nt) {
    const cell_span first = attend_cells(b, sq, t0), last = attend_cells(b, sq, t0 + nt - 1);
    return (cell_span){first.lo32, last.lo32 + last.n - first.lo32, first.wrapped};
}

/* Unfused attention (llama.cpp's order) of rows t0 .. t0+nt-1 (tokens of sequence sq) against
 * kv head g: scores = K q (nb_matmul over the cached keys, the tokens' G query heads as activation
 * rows), softmax, out = V^T p. With F16 cells the queries and the probabilities are rounded to
 * fp16 first, as llama.cpp does when it multiplies by F16 K and V. The sums follow llama.cpp's
 * (x86 AVX2 build, docs/BENCHMARKS.md "parity"): its products and softmax run over whole chunks
 * of its cache cells (8 and 32), masked cells weighing exactly 0, so a row's cells are lo32..hi32
 * around its visible window lo..pos, rounded out to multiples of 32, the others masked (a ring
 * that has wrapped: all its cells, masked by the positions they hold); its exponential
 * (nb_softmax_exp); and, for a batch of one token, the F16 products in its single-row order
 * (NB_ROUTE_VEC) where batches use 8 lanes. The block's rows share one product of each kind over
 * the cells of them all (the first row's lo32 to the last row's hi32): a score is its own dot
 * whatever is computed beside it, and a row's probabilities outside its own cells are exact
 * zeros, which leave each lane of its value sums as it was (the cells before its lo32 being a
 * multiple of 32, every element keeps its lane). scratch: ATT_SCRATCH floats. A block's ATT_ROWS
 * rows take the AVX-512 set's float panels (floats.h). */
static void attend_block(const batch *b, const seq *sq, nb_pool *pool, int t0, int nt, int g, float *scratch) {
    const nb_ctx *c = sq->c;
    const nb_kv *kv = &c->kv;
    const nb_model_info *in = &c->m->info;
    const int D = in->head_dim, HQ = in->n_head, G = HQ / in->n_head_kv, il = b->il, R = nt * G;
    const cell_span blk = block_cells(b, sq, t0, nt);
    const int lo32 = blk.lo32, nk = blk.n;
    float *scores = scratch, *qr = scratch + (size_t)att_tokens(c->n_batch, G) * G * kv->n_cells;
    const nb_route vec = sq->n == 1 ? NB_ROUTE_VEC : NB_ROUTE_QUANT;
    for (int i = 0; i < nt; i++)
        memcpy(qr + (size_t)i * G * D, b->a->q + ((size_t)(t0 + i) * HQ + (size_t)g * G) * D, sizeof(float) * (size_t)G * D);
    if (kv->type_k == NB_TYPE_F16) nb_round_fp16(qr, (int64_t)R * D);
    nb_matmul_ex(pool, kv->type_k, nb_kv_k(kv, il, g) + (size_t)lo32 * kv->k_row, 0, nk, D, qr, R, scores,
                 kv->type_k == NB_TYPE_F16 ? vec : NB_ROUTE_CELLS);
    for (int r = 0; r < R; r++) {
        const int t = t0 + r / G, pos = c->pos + t - sq->row0;
        const cell_span sp = attend_cells(b, sq, t);
        float *row = scores + (size_t)r * nk, *s = row + (sp.lo32 - lo32);
        const int32_t *cells = kv->ring[il] ? kv->ring_pos + (sp.wrapped ? 0 : sp.lo32) : NULL; /* unwrapped: cell = pos */
        scores_finish(c, s, sp.n, sp.lo32, window_lo(c, il, pos), pos, cells, sp.wrapped);
        const float inv = (float)(1.0 / nb_softmax_exp(s, s, sp.n, nb_vec_max(s, sp.n)));
        for (int j = 0; j < sp.n; j++) s[j] *= inv;
        if (kv->type_v == NB_TYPE_F16) nb_round_fp16(s, sp.n);
        memset(row, 0, sizeof(float) * (size_t)(sp.lo32 - lo32));
        memset(s + sp.n, 0, sizeof(float) * (size_t)(nk - (sp.lo32 - lo32) - sp.n));
    }
    nb_matmul_ex(pool, kv->type_v, nb_kv_v(kv, il, g) + (size_t)lo32 * kv->v_row, (size_t)nb_kv_cells(kv, il) * kv->v_row,
                 D, nk, scores, R, qr, kv->type_v == NB_TYPE_F16 ? vec : NB_ROUTE_CELLS);
    for (int i = 0; i < nt; i++)
        memcpy(b->a->att + ((size_t)(t0 + i) * HQ + (size_t)g * G) * D, qr + (size_t)i * G * D, sizeof(float) * (size_t)G * D);
}

/* ------------------------------------------------------------ fused attention */

/* One work unit of the fused attention: FA_TOKENS (or fewer) consecutive tokens of one sequence,
 * rows r0 .. r1-1 of the batch, against kv head g, over part `part` of n_part of their keys. */
typedef struct fa_item {
    const seq *sq;
    int r0, r1, g, part, n_part;
} fa_item;

/* A tile of one token (decode) splits its keys into parts of FA_SPLIT or more (at most FA_PARTS),
 * so that one sequence's decode step spreads over the threads; how many depends on the keys only,
 * never on the thread count, so neither do the results. */
static int fa_parts(const batch *b, const seq *sq, int r0, int r1) {
    if (r1 - r0 > 1) return 1;
    const int pos = sq->c->pos + r0 - sq->row0, keys = pos + 1 - window_lo(sq->c, b->il, pos);
    const int n = keys / FA_SPLIT;
    return n < 1 ? 1 : n > FA_PARTS ? FA_PARTS : n;
}

/* Unit u of the batch: the sequences' tiles in order, each tile's kv heads, each head's parts.
 * Returns the number of units when u is past the last (it then describes nothing). */
static int64_t fa_unit(const batch *b, int64_t u, fa_item *it) {
    const int HK = b->a->m->info.n_head_kv;
    int64_t n = 0;
    for (int s = 0; s < b->n_seq; s++) {
        const seq *sq = &b->s[s];
        for (int r0 = sq->row0; r0 < sq->row0 + sq->n; r0 += FA_TOKENS) {
            const int r1 = r0 + FA_TOKENS < sq->row0 + sq->n ? r0 + FA_TOKENS : sq->row0 + sq->n;
            const int np = fa_parts(b, sq, r0, r1);
            if (u >= n && u < n + (int64_t)HK * np) {
                *it = (fa_item){sq, r0, r1, (int)((u - n) / np), (int)((u - n) % np), np};
                return u;
            }
            n += (int64_t)HK * np;
        }
    }
    return n;
}

/* Where a split unit leaves its accumulators, maximum and sum: the context's slots after the
 * threads' scratch, one per kv head and part (a sequence has at most one one-token tile). */
static float *fa_slot(const batch *b, const fa_item *it) {
    const nb_model_info *in = &b->a->m->info;
    const size_t G = (size_t)(in->n_head / in->n_head_kv), D = (size_t)in->head_dim;
    return it->sq->c->scores + (size_t)nb_pool_threads(b->a->pool) * FA_SCRATCH(G, D) +
           ((size_t)it->g * FA_PARTS + (size_t)it->part) * G * (D + 2);
}

/* Flash attention of one unit: the keys in blocks of FA_KEYS positions (within one run of ring
 * cells), scores = K q on the cells' own type (queries rounded to fp16 against F16 cells, as
 * llama.cpp's fused attention converts them; a tile of several tokens against F32, F16 or BF16
 * cells by nb_attn_qk, packed once, one token by nb_matmul, and Q8_0 and Q4_0 cells by nb_matmul,
 * which quantizes the queries to Q8_0), then per query row the online softmax: a new maximum
 * rescales the accumulator and the running sum, the block's exponentials (nb_softmax_exp) weigh
 * its value rows (nb_attn_pv). Leaves in `out` the R = tokens x G rows' accumulators (R x D),
 * maxima and sums. */
static void fa_run(const batch *b, const fa_item *it, float *scratch, float *out) {
    const nb_ctx *c = it->sq->c;
    const nb_kv *kv = &c->kv;
    const nb_model_info *in = &c->m->info;
    const int D = in->head_dim, HQ = in->n_head, G = HQ / in->n_head_kv, il = b->il, nt = it->r1 - it->r0, R = nt * G;
    float *qt = scratch, *s = qt + (size_t)FA_TOKENS * G * D, *acc = out, *mx = acc + (size_t)R * D, *l = mx + R;
    float *qp = scratch + (size_t)FA_TOKENS * G * (2 * (size_t)D + FA_KEYS + 2);
    const int packed = nt > 1 && (kv->type_k == NB_TYPE_F16 || kv->type_k == NB_TYPE_F32 || kv->type_k == NB_TYPE_BF16);
    const int pos0 = c->pos + it->r0 - it->sq->row0;
    for (int i = 0; i < nt; i++)
        memcpy(qt + (size_t)i * G * D, b->a->q + ((size_t)(it->r0 + i) * HQ + (size_t)it->g * G) * D, sizeof(float) * (size_t)G * D);
    if (kv->type_k == NB_TYPE_F16) nb_round_fp16(qt, (int64_t)R * D);
    if (packed) nb_attn_pack_q(qt, R, D, qp);
    memset(acc, 0, sizeof(float) * (size_t)R * D);
    for (int r = 0; r < R; r++) mx[r] = -INFINITY, l[r] = 0;
    const int lo = window_lo(c, il, pos0), hi = pos0 + nt; /* keys lo .. hi-1 */
    const int k0 = lo + (int)((int64_t)(hi - lo) * it->part / it->n_part);
    const int k1 = lo + (int)((int64_t)(hi - lo) * (it->part + 1) / it->n_part);
    const int cells = nb_kv_cells(kv, il);
    const uint8_t *K = nb_kv_k(kv, il, it->g), *V = nb_kv_v(kv, il, it->g);
    for (int p0 = k0; p0 < k1;) {
        const int cell0 = nb_kv_cell(kv, il, p0);
        int nk = k1 - p0 < FA_KEYS ? k1 - p0 : FA_KEYS;
        if (nk > cells - cell0) nk = cells - cell0; /* a ring's run ends at its last cell */
        if (packed) nb_attn_qk(kv->type_k, K + (size_t)cell0 * kv->k_row, kv->k_row, nk, D, qp, R, s, (size_t)nk);
        else nb_matmul_ex(NULL, kv->type_k, K + (size_t)cell0 * kv->k_row, 0, nk, D, qt, R, s,
                          kv->type_k == NB_TYPE_F16 && nt == 1 ? NB_ROUTE_VEC : NB_ROUTE_CELLS); /* VEC: prefetching */
        const int32_t *held = run_cells(kv, il, cell0, p0, nk);
        for (int r = 0; r < R; r++) {
            const int pos = pos0 + r / G;
            float *sr = s + (size_t)r * nk;
            scores_finish(c, sr, nk, p0, window_lo(c, il, pos), pos, held, 0);
            const float bm = nb_vec_max(sr, nk);
            if (bm == -INFINITY) { /* nothing visible here: weigh nothing */
                memset(sr, 0, sizeof(float) * (size_t)nk);
                continue;
            }
            const float m_new = bm > mx[r] ? bm : mx[r], alpha = expf(mx[r] - m_new);
            l[r] = l[r] * alpha + (float)nb_softmax_exp(sr, sr, nk, m_new);
            if (alpha != 1.0f) nb_vec_scale(acc + (size_t)r * D, D, alpha);
            mx[r] = m_new;
        }
        nb_attn_pv(kv->type_v, V + (size_t)cell0 * kv->v_row, kv->v_row, nk, D, s, (size_t)nk, R, acc);
        p0 += nk;
    }
}

/* A unit's attention output: its parts (slots `stride` floats apart, in part order) merged, each
 * rescaled to the largest maximum, the accumulators divided by the sum. A unit of one part (every
 * prefill unit, a decode unit of few keys) weighs its part by exp(0) = 1 and its accumulators,
 * sums from +0, are never -0, so the merge is a copy: the row is its accumulators times the
 * inverse sum. */
static void fa_output(const batch *b, const fa_item *it, const float *slot, size_t stride) {
    const nb_model_info *in = &b->a->m->info;
    const int D = in->head_dim, HQ = in->n_head, G = HQ / in->n_head_kv, R = (it->r1 - it->r0) * G;
    for (int r = 0; r < R; r++) {
        float *out = b->a->att + ((size_t)(it->r0 + r / G) * HQ + (size_t)it->g * G + (size_t)(r % G)) * D;
        if (it->n_part == 1) {
            const float lp = slot[(size_t)R * D + R + r];
            memcpy(out, slot + (size_t)r * D, sizeof(float) * (size_t)D);
            nb_vec_scale(out, D, lp > 0 ? 1.0f / lp : 0.0f);
            continue;
        }
        float m = -INFINITY, l = 0;
        for (int p = 0; p < it->n_part; p++) {
            const float mp = slot[(size_t)p * stride + (size_t)R * D + (size_t)r];
            m = mp > m ? mp : m;
        }
        memset(out, 0, sizeof(float) * (size_t)D);
        for (int p = 0; p < it->n_part; p++) {
            const float *acc = slot + (size_t)p * stride, mp = acc[(size_t)R * D + r], lp = acc[(size_t)R * D + R + r];
            if (mp == -INFINITY) continue;
            const float w = expf(mp - m);
            l += lp * w;
            for (int d = 0; d < D; d++) out[d] += acc[(size_t)r * D + d] * w;
        }
        const float inv = l > 0 ? 1.0f / l : 0.0f;
        for (int d = 0; d < D; d++) out[d] *= inv;
    }
}

typedef struct fa_job {
    const batch *b;
    int64_t n_units;
} fa_job;

/* Task i (one per thread) runs units i, i + T, ... on scratch slice i of the unit's context; a
 * unit of one part writes its output at once, a split one leaves its part in its slot. */
static void fa_chunk(void *arg, int64_t i0, int64_t i1) {
    const fa_job *j = arg;
    const nb_model_info *in = &j->b->a->m->info;
    const int64_t T = nb_pool_threads(j->b->a->pool);
    const int G = in->n_head / in->n_head_kv, D = in->head_dim;
    for (int64_t i = i0; i < i1; i++)
        for (int64_t u = i; u < j->n_units; u += T) {
            fa_item it;
            fa_unit(j->b, u, &it);
            float *scratch = it.sq->c->scores + (size_t)i * FA_SCRATCH(G, D);
            float *out = it.n_part > 1 ? fa_slot(j->b, &it) : scratch + (size_t)FA_TOKENS * G * (D + FA_KEYS);
            fa_run(j->b, &it, scratch, out);
            if (it.n_part == 1) fa_output(j->b, &it, out, 0);
        }
}

static nb_status attend_fused(batch *b) {
    const nb_model_info *in = &b->a->m->info;
    const size_t G = (size_t)(in->n_head / in->n_head_kv), D = (size_t)in->head_dim;
    fa_item it;
    fa_job j = {b, fa_unit(b, INT64_MAX, &it)};
    nb_status s = nb_pool_for(b->a->pool, nb_pool_threads(b->a->pool), 1, fa_chunk, &j);
    for (int64_t u = 0; !s && u < j.n_units; u++) { /* the split units, merged in part order */
        fa_unit(b, u, &it);
        if (it.n_part > 1 && it.part == 0) fa_output(b, &it, fa_slot(b, &it), G * (D + 2));
    }
    return s;
}

/* The unfused attention's work items: per sequence its blocks of up to att_tokens tokens, each
 * against each kv head. Calls fn(b, sq, t0, nt, cost, arg) for every block, cost its products'
 * size (rows times cells, plus a fixed share per row: its rounding and softmax setup). */
typedef void (*att_block_fn)(const batch *b, const seq *sq, int t0, int nt, int64_t cost, void *arg);
static void att_blocks(const batch *b, att_block_fn fn, void *arg) {
    const int G = b->a->m->info.n_head / b->a->m->info.n_head_kv;
    for (int i = 0; i < b->n_seq; i++) {
        const seq *sq = &b->s[i];
        const int T = att_tokens(sq->c->n_batch, G);
        for (int t0 = sq->row0; t0 < sq->row0 + sq->n; t0 += T) {
            const int nt = sq->row0 + sq->n - t0 < T ? sq->row0 + sq->n - t0 : T;
            fn(b, sq, t0, nt, (int64_t)nt * (block_cells(b, sq, t0, nt).n + 32), arg);
        }
    }
}

typedef struct att_job {
    int64_t items, total, done; /* items; their cost; that of the items before the block at hand */
    int64_t i0, i1;             /* the chunks this call runs */
    nb_pool *pool;              /* the products' pool when one item runs at a time */
} att_job;

static void att_count(const batch *b, const seq *sq, int t0, int nt, int64_t cost, void *arg) {
    (void)sq, (void)t0, (void)nt;
    att_job *j = arg;
    j->items += b->a->m->info.n_head_kv;
    j->total += cost * b->a->m->info.n_head_kv;
}

/* A block's items (one per kv head) in chunk i of T, the chunk that holds the middle of the
 * item's cost on the line of all items' costs: thread i runs them on scratch slice i of the
 * block's context (every context of a batch shares the pool, so each has a slice per thread).
 * In a prompt a row sees one more key than the row before it: an even split by count left the
 * second of 2 threads 3/4 of the work. */
static void att_run(const batch *b, const seq *sq, int t0, int nt, int64_t cost, void *arg) {
    att_job *j = arg;
    const nb_model_info *in = &b->a->m->info;
    const int64_t T = nb_pool_threads(b->a->pool);
    const int G = in->n_head / in->n_head_kv;
    for (int g = 0; g < in->n_head_kv; g++) {
        const int64_t i = j->pool ? 0 : (j->done + cost * g + cost / 2) * T / j->total;
        if (i < j->i0 || i >= j->i1) continue;
        const size_t slice = ATT_SCRATCH(att_tokens(sq->c->n_batch, G), G, sq->c->kv.n_cells, in->head_dim);
        attend_block(b, sq, j->pool, t0, nt, g, sq->c->scores + (size_t)i * slice);
    }
    j->done += cost * in->n_head_kv;
}

typedef struct att_task {
    const batch *b;
    att_job count; /* att_count's */
} att_task;

static void attend_chunk(void *arg, int64_t i0, int64_t i1) {
    const att_task *k = arg;
    att_job j = k->count;
    j.i0 = i0, j.i1 = i1;
    att_blocks(k->b, att_run, &j);
}

/* Attention for the batch, fused where the arena's context is (every context of a batch is: the
 * caller checks). Unfused: with fewer work items than threads (decode) each item's products use
 * the whole pool; otherwise items are spread over the threads. */
static nb_status attend(batch *b) {
    if (b->a->fused) return attend_fused(b);
    nb_pool *pool = b->a->pool;
    att_task k = {b, {0}};
    att_blocks(b, att_count, &k.count);
    if (k.count.items >= nb_pool_threads(pool)) return nb_pool_for(pool, nb_pool_threads(pool), 1, attend_chunk, &k);
    k.count.i1 = 1, k.count.pool = pool; /* chunk 0 runs everything, each product on the pool */
    att_blocks(b, att_run, &k.count);
    return NB_OK;
}

/* y[t] += bias for n rows of `width` (no bias: nothing). */
static void add_bias(float *y, const float *bias, int n, int64_t width) {
    for (int t = 0; bias && t < n; t++)
        for (int64_t i = 0; i < width; i++) y[t * width + i] += bias[i];
}

/* y (n rows of w->n_out) = x W, times the weight's two-level scale, plus the bias when there is one. */
static nb_status mm(nb_ctx *c, const nb_weight *w, const float *bias, const float *x, int n, float *y) {
    if (c->observer) c->observer(c->observer_user, w->name, x, n, w->n_in);
    nb_status s = nb_matmul_route(c->pool, w->type, w->data, w->n_out, w->n_in, x, n, y, c->route);
    if (s) return s;
    if (w->scale != 1.0f)
        for (size_t i = 0; i < (size_t)n * (size_t)w->n_out; i++) y[i] *= w->scale;
    add_bias(y, bias, n, w->n_out);
    return NB_OK;
}

/* Columns [off, off + width) of n rows of `stride` floats, packed: a fused product's parts. */
static void split_cols(float *dst, const float *src, int n, int stride, int off, int width) {
    for (int t = 0; t < n; t++) memcpy(dst + (size_t)t * width, src + (size_t)t * stride + off, sizeof(float) * (size_t)width);
}

/* Row-wise work between the products: y = rmsnorm(x) * w (no w: y is left alone), then, with
 * `sum`, sum += y: the residual. Each row is computed alone, so splitting the rows over the
 * pool changes no bits; a step of few rows (decode) stays on the calling thread. */
typedef struct rows_job {
    float *y, *sum;
    const float *x, *w;
    int n;
    float eps;
} rows_job;

enum { ROWS_POOL_MIN = 16 }; /* rows from which the pool takes them */

static void rows_task(void *arg, int64_t t0, int64_t t1) {
    const rows_job *j = arg;
    const size_t off = (size_t)t0 * (size_t)j->n, end = (size_t)t1 * (size_t)j->n;
    if (j->w) nb_rmsnorm(j->y + off, j->x + off, j->w, (int)(t1 - t0), j->n, j->eps);
    for (size_t i = off; j->sum && i < end; i++) j->sum[i] += j->y[i];
}

static nb_status rows_run(nb_pool *pool, rows_job j, int rows) {
    if (rows < ROWS_POOL_MIN) {
        rows_task(&j, 0, rows);
        return NB_OK;
    }
    return nb_pool_for(pool, rows, 4, rows_task, &j);
}

/* h = rmsnorm(x) * w, for n rows of width E. */
static nb_status norm(nb_ctx *c, float *h, const float *x, const float *w, int n) {
    return rows_run(c->pool, (rows_job){.y = h, .x = x, .w = w, .n = c->m->info.n_embd, .eps = c->m->info.rms_eps}, n);
}

/* x += post ? rmsnorm(o) * post : o, for n rows. */
static nb_status residual(nb_ctx *c, float *o, const float *post, int n) {
    return rows_run(c->pool, (rows_job){.y = o, .sum = c->x, .x = o, .w = post, .n = c->m->info.n_embd, .eps = c->m->info.rms_eps}, n);
}

typedef struct glu_job {
    const nb_ctx *c;
    int F;
} glu_job;

/* g = act(g) * u, a row at a time (llama.cpp's GLU rows). */
static void glu_rows(void *arg, int64_t t0, int64_t t1) {
    const glu_job *j = arg;
    for (int64_t t = t0; t < t1; t++) {
        float *g = j->c->g + t * j->F;
        const float *u = j->c->u + t * j->F;
        if (j->c->m->arch.act == NB_ACT_SILU) nb_swiglu(g, u, j->F);
        else nb_geglu(g, u, j->F);
    }
}

static nb_status attention_block(batch *b) {
    nb_ctx *c = b->a;
    const int il = b->il, n = b->n;
    const nb_model_info *in = &c->m->info;
    const nb_layer *L = &c->m->layers[il];
    const int QW = in->n_head * in->head_dim, KW = in->n_head_kv * in->head_dim;
    nb_status s = norm(c, c->h, c->x, L->attn_norm, n);
    if (s) return s;
    if (L->wqkv.name) {
        if ((s = mm(c, &L->wqkv, NULL, c->h, n, c->t))) return s;
        split_cols(c->q, c->t, n, QW + 2 * KW, 0, QW);
        split_cols(c->k, c->t, n, QW + 2 * KW, QW, KW);
        split_cols(c->v, c->t, n, QW + 2 * KW, QW + KW, KW);
        add_bias(c->q, L->bq, n, QW);
        add_bias(c->k, L->bk, n, KW);
        add_bias(c->v, L->bv, n, KW);
    } else if ((s = mm(c, &L->wq, L->bq, c->h, n, c->q)) || (s = mm(c, &L->wk, L->bk, c->h, n, c->k)) ||
               (s = mm(c, &L->wv, L->bv, c->h, n, c->v))) {
        return s;
    }
    if ((s = nb_pool_for(c->pool, n, 1, qk_prepare, b)) || (s = attend(b)) ||
        (s = mm(c, &L->wo, L->bo, c->att, n, c->o)))
        return s;
    return residual(c, c->o, L->post_attn_norm, n);
}

static nb_status ffn_block(nb_ctx *c, int il, int n) {
    const nb_model_info *in = &c->m->info;
    const nb_layer *L = &c->m->layers[il];
    const int F = in->n_ff;
    nb_status s = norm(c, c->h, c->x, L->ffn_norm, n);
    if (s) return s;
    if (!L->gate.name) { /* fused gate | up: the first half is the gate */
        if ((s = mm(c, &L->up, NULL, c->h, n, c->t))) return s;
        split_cols(c->g, c->t, n, 2 * F, 0, F);
        split_cols(c->u, c->t, n, 2 * F, F, F);
    } else if ((s = mm(c, &L->gate, L->b_gate, c->h, n, c->g)) || (s = mm(c, &L->up, L->b_up, c->h, n, c->u))) {
        return s;
    }
    glu_job j = {c, F};
    if ((s = nb_pool_for(c->pool, n, 1, glu_rows, &j)) || (s = mm(c, &L->down, L->b_down, c->g, n, c->o))) return s;
    return residual(c, c->o, L->post_ffw_norm, n);
}

/* One forward pass over n_seq sequences, their rows stacked in c's arena (at most its n_batch);
 * each sequence's logits rows (tokens [first, n)) follow the previous sequence's in `logits`.
 * A sequence of one (row, context) is nb_ctx_eval's batch: the same operations on the same rows. */
static nb_status batch_forward(nb_ctx *c, seq *sv, int n_seq, float *logits) {
    const nb_model *m = c->m;
    const nb_model_info *in = &m->info;
    const int E = in->n_embd;
    const nb_weight *emb = &m->token_embd;
    size_t row;
    nb_status s = nb_row_bytes(emb->type, E, &row);
    if (s) return s;
    batch b = {c, sv, n_seq, 0, 0};
    for (int i = 0; i < n_seq; i++) {
        sv[i].row0 = b.n;
        for (int t = 0; t < sv[i].n; t++) {
            float *x = c->x + (size_t)(b.n + t) * E;
            if ((s = nb_dequantize(emb->type, (const uint8_t *)emb->data + row * (size_t)sv[i].tok[t], x, E))) return s;
            for (int k = 0; k < E; k++) x[k] = x[k] * emb->scale * m->arch.embd_scale;
        }
        b.n += sv[i].n;
    }
    for (b.il = 0; b.il < in->n_layer; b.il++)
        if ((s = attention_block(&b)) || (s = ffn_block(c, b.il, b.n))) return s;
    int nl = 0; /* the rows that give logits, gathered in order */
    for (int i = 0; i < n_seq; i++) {
        sv[i].c->pos += sv[i].n;
        if (!logits || sv[i].first >= sv[i].n) continue;
        const int k = sv[i].n - sv[i].first;
        nb_rmsnorm(c->h + (size_t)nl * E, c->x + (size_t)(sv[i].row0 + sv[i].first) * E, m->output_norm, k, E, in->rms_eps);
        nl += k;
    }
    if (!nl) return NB_OK;
    if ((s = mm(c, &m->output, m->b_output, c->h, nl, logits))) return s;
    const float cap = m->arch.final_softcap;
    for (size_t i = 0; cap && i < (size_t)nl * (size_t)in->n_vocab; i++) logits[i] = tanhf(logits[i] * (1.0f / cap)) * cap;
    return NB_OK;
}

/* Refuses (nothing changed) n tokens that would not fit in c or lie outside the vocabulary. */
static nb_status check_tokens(const nb_ctx *c, const int32_t *tokens, int n, const char *what) {
    const nb_model_info *in = &c->m->info;
    if (n < 0 || (n > 0 && !tokens)) return nb_fail(NB_ERR_INVALID_ARG, "%s: %d tokens, NULL array", what, n);
    if (n > c->n_ctx - c->pos)
        return nb_fail(NB_ERR_RANGE, "%s: %d token%s at position %d exceed the context of %d (use a larger -c)", what, n,
                       nb_plural(n), c->pos, c->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= in->n_vocab)
            return nb_fail(NB_ERR_RANGE, "%s: token %d at index %d is outside the vocabulary [0, %d)", what, tokens[i], i,
                           in->n_vocab);
    return NB_OK;
}

nb_status nb_ctx_eval(nb_ctx *c, const int32_t *tokens, int n, float *logits, int all_logits) {
    nb_status s = check_tokens(c, tokens, n, "eval");
    if (s) return s;
    const int n_vocab = c->m->info.n_vocab;
    for (int done = 0; done < n;) {
        const int nb = n - done < c->n_batch ? n - done : c->n_batch;
        const int last = done + nb == n;
        float *dst = NULL;
        seq sq = {c, tokens + done, nb, 0, nb};
        if (logits && all_logits) {
            dst = logits + (size_t)done * n_vocab;
            sq.first = 0;
        } else if (logits && last) {
            dst = logits;
            sq.first = nb - 1;
        }
        if ((s = batch_forward(c, &sq, 1, dst))) return s;
        done += nb;
    }
    return NB_OK;
}

nb_status nb_batch_eval(nb_ctx *const *ctxs, const int32_t *const *tokens, const int *n_tokens, int n_seq, float *logits) {
    if (n_seq < 1 || n_seq > NB_BATCH_MAX_SEQ || !ctxs || !tokens || !n_tokens)
        return nb_fail(NB_ERR_INVALID_ARG, "batch: %d sequences (1 to %d, with arrays)", n_seq, NB_BATCH_MAX_SEQ);
    seq sv[NB_BATCH_MAX_SEQ];
    int n_rows = 0;
    nb_status s;
    for (int i = 0; i < n_seq; i++) {
        nb_ctx *c = ctxs[i];
        if (!c) return nb_fail(NB_ERR_INVALID_ARG, "batch: sequence %d has no context", i);
        if (c->m != ctxs[0]->m || c->pool != ctxs[0]->pool || c->fused != ctxs[0]->fused || c->route != ctxs[0]->route ||
            c->fast_batch != ctxs[0]->fast_batch)
            return nb_fail(NB_ERR_INVALID_ARG, "batch: sequence %d's context has another model, thread pool, "
                           "attention route, fast_prefill or fast_batch than sequence 0's", i);
        for (int j = 0; j < i; j++)
            if (ctxs[j] == c) return nb_fail(NB_ERR_INVALID_ARG, "batch: sequences %d and %d share a context", j, i);
        if (n_tokens[i] < 1) return nb_fail(NB_ERR_INVALID_ARG, "batch: sequence %d has %d tokens (at least 1)", i, n_tokens[i]);
        if ((s = check_tokens(c, tokens[i], n_tokens[i], "batch"))) return s;
        n_rows += n_tokens[i];
        sv[i] = (seq){c, tokens[i], n_tokens[i], 0, logits ? n_tokens[i] - 1 : n_tokens[i]};
    }
    if (n_rows > ctxs[0]->n_batch)
        return nb_fail(NB_ERR_RANGE, "batch: %d tokens exceed the batch size %d of sequence 0's context (its arena "
                       "holds the batch)", n_rows, ctxs[0]->n_batch);
    /* the step's route lives in sequence 0's context (mm reads it) for the step's length */
    nb_ctx *c0 = ctxs[0];
    const nb_route route = c0->route;
    if (n_seq > 1 && c0->fast_batch) c0->route = NB_ROUTE_BLOCK;
    s = batch_forward(c0, sv, n_seq, logits);
    c0->route = route;
    return s;
}
