/*
 * matmul.c: nb_matmul, the runtime's entry to the kernels (contract in nibble.h).
 *
 * Steps: check the shapes against the type; quantize the activation rows once into the pool's
 * scratch (Q8_0, Q8_1, Q8_K or the Q8_0X variants of the unsigned-code kernels, by the kernel's
 * act_type; kernels.h gives the llama.cpp rules); split the output rows over the pool's
 * threads; each thread walks its rows in panels small enough to stay in L2 and hands each panel
 * with all tokens to the ISA's tile kernel, which reuses every decoded weight block across
 * several tokens in registers (GEMM) or shares activation loads across rows (GEMV).
 */
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/error.h"
#include "base/threads.h"
#include "formats/blocks.h"
#include "kernels/kernels.h"

/* Chunks a thread of a batch's rows (nb_pool_for_locked's split). */
#define NB_POOL_SPLIT 4

/* Weight bytes per panel: a panel is re-read once per token tile, so it should fit in L2. */
#define NB_PANEL_BYTES (64 * 1024)

size_t nb_act_row_bytes(int act_type, int64_t n) {
    switch (act_type) {
    case NB_TYPE_Q8_0: return (size_t)(n / NB_QK8_0) * sizeof(nb_block_q8_0);
    case NB_TYPE_Q8_1: return (size_t)(n / NB_QK8_1) * sizeof(nb_block_q8_1);
    case NB_TYPE_Q8_K: return (size_t)(n / NB_QK_K) * sizeof(nb_block_q8_k);
    case NB_ACT_Q8_0X:
    case NB_ACT_Q8_0X_MX:
    case NB_ACT_Q8_0X_NV: return (size_t)(n / NB_QK8_0) * sizeof(nb_block_q8_0x);
    default: return (size_t)n * sizeof(float);
    }
}

/* Q8_0X blocks into NB_ACT_Q8_0X_NV's order: bytes 8-15 trade places with 16-23, nc[2,3] with
 * nc[4,5]. */
static void nv_order(nb_block_q8_0x *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        int8_t q[8];
        int32_t c[2];
        memcpy(q, b[i].qs + 8, 8);
        memcpy(b[i].qs + 8, b[i].qs + 16, 8);
        memcpy(b[i].qs + 16, q, 8);
        memcpy(c, b[i].nc + 2, sizeof c);
        memcpy(b[i].nc + 2, b[i].nc + 4, sizeof c);
        memcpy(b[i].nc + 4, c, sizeof c);
    }
}

/* NB_ACT_Q8_0X_MX's corrections: nc[k] += nc[k+4], the groups whose codes MXFP4's nibble split
 * puts in one lane; then nc[4] and nc[5], the pair sums (nc[0] + nc[1]) >> 3 and (nc[2] + nc[3]) >> 3
 * (kernels.h). */
static void fold_nc(nb_block_q8_0x *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        for (int k = 0; k < 4; k++) b[i].nc[k] += b[i].nc[k + 4];
        b[i].nc[4] = (b[i].nc[0] + b[i].nc[1]) >> 3;
        b[i].nc[5] = (b[i].nc[2] + b[i].nc[3]) >> 3;
        b[i].nc[6] = b[i].nc[7] = 0;
    }
}

/* The halves' corrections ns of Q8_0X blocks (element order: before fold_nc or nv_order). */
static void half_sums(nb_block_q8_0x *b, int64_t nb) {
    for (int64_t i = 0; i < nb; i++)
        for (int h = 0; h < 2; h++) b[i].ns[h] = b[i].nc[4 * h] + b[i].nc[4 * h + 1] + b[i].nc[4 * h + 2] + b[i].nc[4 * h + 3];
}

static void act_row(const nb_act_set *q, int act_type, const float *x, void *dst, int64_t n) {
    switch (act_type) {
    case NB_TYPE_Q8_K: q->q8_k(x, dst, n); break;
    case NB_TYPE_Q8_1: q->q8_1(x, dst, n); break;
    case NB_ACT_Q8_0X:
        q->q8_0x(x, dst, n);
        half_sums(dst, n / NB_QK8_0);
        break;
    case NB_ACT_Q8_0X_MX:
        q->q8_0x(x, dst, n);
        half_sums(dst, n / NB_QK8_0);
        fold_nc(dst, n / NB_QK8_0);
        break;
    case NB_ACT_Q8_0X_NV:
        q->q8_0x(x, dst, n);
        half_sums(dst, n / NB_QK8_0);
        nv_order(dst, n / NB_QK8_0);
        break;
    default: q->q8_0(x, dst, n);
    }
}

void nb_quantize_act(nb_isa isa, int act_type, const float *x, void *dst, int64_t n) {
    act_row(nb_act_get(isa), act_type, x, dst, n);
}

typedef struct {
    const nb_kernel *k;
    const nb_act_set *aq_set;
    nb_mm_fn mm, mm_batch;
    int act_type;
    int64_t n_in, n_out, n_tok, n_bat; /* the first n_bat tokens go through mm_batch */
    const float *x;
    const uint8_t *w;
    size_t w_row;
    const uint8_t *a;
    size_t a_row;
    uint8_t *aq; /* quantized activations being written */
    float *y;
    int64_t panel;
} job;

/* NB_ACT_Q8_KT group G of the Q8_K rows at a (as bytes apart, nb blocks each) into dst. */
static void kt_group(const uint8_t *a, size_t as, int64_t G, int64_t nb, nb_block_q8_kt *dst) {
    for (int64_t i = 0; i < nb; i++) {
        nb_block_q8_kt *o = dst + i;
        for (int t = 0; t < 8; t++) {
            const nb_block_q8_k *b = (const nb_block_q8_k *)(a + (size_t)(8 * G + t) * as) + i;
            for (int g = 0; g < 8; g++)
                for (int k = 0; k < 8; k++) memcpy(o->qs[g][k] + 4 * t, b->qs + 32 * g + 4 * k, 4);
            for (int m = 0; m < 8; m++)
                o->bp[m][t] = (int32_t)((uint32_t)(uint16_t)b->bsums[2 * m] | (uint32_t)(uint16_t)b->bsums[2 * m + 1] << 16);
            o->d[t] = b->d;
        }
    }
}

static void quantize_rows(void *ctx, int64_t b, int64_t e) {
    job *j = ctx;
    for (int64_t t = b; t < e; t++)
        act_row(j->aq_set, j->act_type, j->x + t * j->n_in, j->aq + (size_t)t * j->a_row, j->n_in);
}

static void run_rows(void *ctx, int64_t b, int64_t e) {
    job *j = ctx;
    for (int64_t r = b; r < e; r += j->panel) {
        int64_t nr = e - r < j->panel ? e - r : j->panel;
        const uint8_t *w = j->w + (size_t)r * j->w_row;
        if (j->n_bat) j->mm_batch(j->n_in, w, j->w_row, j->a, j->a_row, nr, j->n_bat, j->y + r, (size_t)j->n_out);
        if (j->n_tok > j->n_bat)
            j->mm(j->n_in, w, j->w_row, j->a + (size_t)j->n_bat * j->a_row, j->a_row, nr, j->n_tok - j->n_bat,
                  j->y + (size_t)j->n_bat * (size_t)j->n_out + r, (size_t)j->n_out);
    }
}

nb_status nb_matmul_isa(nb_isa isa, nb_pool *pool, int wtype, const void *w, size_t w_stride, int64_t n_out,
                        int64_t n_in, const float *x, int64_t n_tok, float *y, nb_route route) {
    /* a weight matrix's rows may choose its kernels (kernels.h); the cache's cells never do */
    const nb_kernel *k = route == NB_ROUTE_CELLS ? nb_kernel_get(isa, wtype) : nb_kernel_matrix(isa, wtype, n_out);
    if (!k) return nb_fail(NB_ERR_UNSUPPORTED, "nb_matmul: no kernel for weight type %d (%s)", wtype, nb_type_name(wtype));
    if (route == NB_ROUTE_CELLS) route = NB_ROUTE_QUANT;
    if (route != NB_ROUTE_QUANT && route != NB_ROUTE_F32 && route != NB_ROUTE_BLOCK && !(route == NB_ROUTE_VEC && k->mm_vec))
        return nb_fail(NB_ERR_INVALID_ARG, "nb_matmul: route %d is not NB_ROUTE_QUANT, NB_ROUTE_F32 or NB_ROUTE_BLOCK",
                       (int)route);
    if (n_out < 0 || n_tok < 0 || n_in <= 0)
        return nb_fail(NB_ERR_RANGE, "nb_matmul: n_out %lld, n_in %lld, n_tok %lld (need n_in > 0, others >= 0)",
                       (long long)n_out, (long long)n_in, (long long)n_tok);
    const nb_type_traits *tr = nb_type_traits_get(wtype);
    if (n_in % tr->info.block_elems)
        return nb_fail(NB_ERR_INVALID_ARG, "nb_matmul: n_in %lld is not a multiple of %s's block length %d",
                       (long long)n_in, tr->info.name, tr->info.block_elems);
    if (n_out == 0 || n_tok == 0) return NB_OK;
    if (!w || !x || !y) return nb_fail(NB_ERR_INVALID_ARG, "nb_matmul: NULL %s", !w ? "weights" : !x ? "x" : "y");
    uint64_t w_row, y_elems, a_total;
    if (!nb_mul_u64((uint64_t)(n_in / tr->info.block_elems), (uint64_t)tr->info.block_bytes, &w_row) ||
        !nb_mul_u64(w_row, (uint64_t)n_out, &a_total) || !nb_mul_u64((uint64_t)n_out, (uint64_t)n_tok, &y_elems) ||
        a_total > SIZE_MAX || y_elems > SIZE_MAX / sizeof(float))
        return nb_fail(NB_ERR_OVERFLOW, "nb_matmul: %lld x %lld x %lld overflows", (long long)n_out, (long long)n_in,
                       (long long)n_tok);
    if (w_stride && w_stride < w_row)
        return nb_fail(NB_ERR_INVALID_ARG, "nb_matmul: row stride %zu is shorter than a row (%llu bytes)", w_stride,
                       (unsigned long long)w_row);
    if (w_stride) {
        uint64_t span; /* bytes from the first row's start to the last row's end */
        if (!nb_mul_u64(w_stride, (uint64_t)(n_out - 1), &span) || !nb_add_u64(span, w_row, &span) || span > SIZE_MAX)
            return nb_fail(NB_ERR_OVERFLOW, "nb_matmul: %lld rows %zu bytes apart overflow", (long long)n_out, w_stride);
        w_row = w_stride;
    }

    int64_t kt = 0; /* NB_ACT_Q8_KT groups (kernels.h, small_kt) */
    job j = {.k = k, .aq_set = nb_act_get(isa), .n_in = n_in, .n_out = n_out, .n_tok = n_tok, .x = x, .w = w, .w_row = (size_t)w_row, .y = y};
    /* the block order where the type has one and the product is large enough, else llama.cpp's */
    if (route == NB_ROUTE_BLOCK && !(k->mm_block && n_tok >= k->block_min)) route = NB_ROUTE_QUANT;
    j.act_type = route == NB_ROUTE_QUANT ? k->act_type : route == NB_ROUTE_BLOCK ? k->block_act : NB_TYPE_F32;
    j.mm = route == NB_ROUTE_QUANT ? k->mm : route == NB_ROUTE_F32 ? k->mm_f32 : route == NB_ROUTE_BLOCK ? k->mm_block : k->mm_vec;
    /* a small batch goes to its own kernel in one piece (kernels.h: the orders of mm and mm_batch;
     * NB_ROUTE_BLOCK's below NB_BLOCK_MIN tokens: mm_block's row or token lanes) */
    const int small_block = route == NB_ROUTE_BLOCK && n_tok < NB_BLOCK_MIN;
    const int small_quant = route == NB_ROUTE_QUANT && k->mm_small && n_tok >= 2 && n_tok <= k->small_max;
    if (small_quant) {
        j.mm = k->mm_small;
        if (k->small_kt) kt = n_tok / 8;
    } else if (route == NB_ROUTE_QUANT && k->mm_batch && n_tok >= k->batch_min) {
        j.mm_batch = k->mm_batch;
        j.n_bat = n_tok - n_tok % k->batch_group;
    } else if (route == NB_ROUTE_QUANT && k->mm_solo && n_tok == 1 && nb_pool_threads(pool) == 1) {
        j.mm = k->mm_solo;
    }
    /* panels exist to reuse weights across token tiles; one token (GEMV) and a small batch stream a
     * thread's rows in one piece, so that a kernel may spread its rows over distant parts of them */
    j.panel = n_tok == 1 || small_quant || small_block ? n_out : (int64_t)(NB_PANEL_BYTES / j.w_row);
    /* whole tiles (4 rows, or the kernel's row multiple: the AVX2 GEMM panels take 8) */
    const int64_t tile = k->rows_per_tile > 4 ? k->rows_per_tile : 4;
    j.panel = j.panel < tile ? tile : j.panel - j.panel % tile;

    void *heap = NULL;
    if (j.act_type == NB_TYPE_F32) {
        j.a = (const uint8_t *)x;
        j.a_row = (size_t)n_in * sizeof(float);
        if (pool) nb_pool_lock_scratch(pool, 0);
    } else {
        j.a_row = nb_act_row_bytes(j.act_type, n_in);
        if (!nb_mul_u64(j.a_row, (uint64_t)n_tok, &a_total) || a_total > SIZE_MAX)
            return nb_fail(NB_ERR_OVERFLOW, "nb_matmul: activation scratch %zu x %lld", j.a_row, (long long)n_tok);
        /* a small_kt kernel's groups after the rows, from a multiple of 64 bytes */
        uint64_t kt_off = 0, kt_bytes = 0;
        if (kt && (!nb_align_u64(a_total, 64, &kt_off) ||
                   !nb_mul_u64((uint64_t)kt * (uint64_t)(n_in / NB_QK_K), sizeof(nb_block_q8_kt), &kt_bytes) ||
                   !nb_add_u64(kt_off, kt_bytes, &a_total) || a_total > SIZE_MAX))
            return nb_fail(NB_ERR_OVERFLOW, "nb_matmul: activation scratch of %lld token groups", (long long)kt);
        void *buf = pool ? nb_pool_lock_scratch(pool, (size_t)a_total) : (heap = malloc((size_t)a_total));
        if (!buf) return nb_fail(NB_ERR_NOMEM, "nb_matmul: %llu bytes of activation scratch", (unsigned long long)a_total);
        j.aq = buf;
        j.a = buf;
        nb_pool_for_locked(pool, n_tok, 1, 1, quantize_rows, &j);
        for (int64_t G = 0; G < kt; G++)
            kt_group(j.a, j.a_row, G, n_in / NB_QK_K, (nb_block_q8_kt *)(j.aq + kt_off) + G * (n_in / NB_QK_K));
    }
    int64_t grain = k->rows_per_tile > 0 ? k->rows_per_tile : 1;
    /* a GEMV streams each thread's rows in one piece; batches, bound by computation, are claimed
     * in NB_POOL_SPLIT pieces a thread (threads.h) */
    nb_pool_for_locked(pool, n_out, grain, n_tok > 1 ? NB_POOL_SPLIT : 1, run_rows, &j);
    if (pool) nb_pool_unlock(pool);
    free(heap);
    return NB_OK;
}

nb_status nb_matmul_ex(nb_pool *pool, int wtype, const void *w, size_t w_stride, int64_t n_out, int64_t n_in,
                       const float *x, int64_t n_tok, float *y, nb_route route) {
    return nb_matmul_isa(nb_isa_active(), pool, wtype, w, w_stride, n_out, n_in, x, n_tok, y, route);
}

nb_status nb_matmul_route(nb_pool *pool, int wtype, const void *w, int64_t n_out, int64_t n_in, const float *x,
                          int64_t n_tok, float *y, nb_route route) {
    if (route != NB_ROUTE_QUANT && route != NB_ROUTE_F32 && route != NB_ROUTE_BLOCK) /* NB_ROUTE_VEC: api.h */
        return nb_fail(NB_ERR_INVALID_ARG, "nb_matmul: route %d is not NB_ROUTE_QUANT, NB_ROUTE_F32 or NB_ROUTE_BLOCK",
                       (int)route);
    return nb_matmul_ex(pool, wtype, w, 0, n_out, n_in, x, n_tok, y, route);
}

nb_status nb_matmul_strided(nb_pool *pool, int wtype, const void *w, size_t w_stride, int64_t n_out, int64_t n_in,
                            const float *x, int64_t n_tok, float *y) {
    return nb_matmul_ex(pool, wtype, w, w_stride, n_out, n_in, x, n_tok, y, NB_ROUTE_QUANT);
}

nb_status nb_matmul(nb_pool *pool, int wtype, const void *w, int64_t n_out, int64_t n_in, const float *x,
                    int64_t n_tok, float *y) {
    return nb_matmul_route(pool, wtype, w, n_out, n_in, x, n_tok, y, NB_ROUTE_QUANT);
}
