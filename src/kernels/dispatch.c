/*
 * dispatch.c: picks each weight type's kernel for a kernel set. The per-ISA tables are const and
 * may be partial; once, at first use, they are merged field by field into one complete table per
 * set (AVX-512 over AVX2 over ref), so a set that lacks a type or a route falls back to the next
 * lower set. A set the CPU cannot run is never returned: the request is lowered to nb_isa_best(),
 * and the AVX-512 kernels (VNNI) are merged only when the CPU has VNNI. Builds for other CPUs
 * (the Makefile compiles src/kernels/x86/ for x86 only) have the reference set alone.
 */
#include <pthread.h>

#include "base/error.h"
#include "formats/codes.h"
#include "kernels/kernels.h"

float nb_e8m0_half_table[256];
float nb_ue4m3_half_table[256][2];

static nb_kernel merged[3][NB_KERNEL_TYPES];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

#if NB_X86_SETS
static void overlay(nb_kernel *dst, const nb_kernel *src) {
    if (src->mm) {
        dst->act_type = src->act_type;
        dst->mm = src->mm;
        dst->name = src->name;
        dst->rows_per_tile = src->rows_per_tile;
        dst->mm_small = src->mm_small; /* it reads mm's activation type */
        dst->small_max = src->small_max;
        dst->small_kt = src->small_kt;
        dst->mm_solo = src->mm_solo; /* the same order as mm */
    }
    if (src->mm_f32) {
        dst->mm_f32 = src->mm_f32;
        dst->name_f32 = src->name_f32;
    }
    if (src->mm_vec) dst->mm_vec = src->mm_vec;
    if (src->mm_block) {
        dst->mm_block = src->mm_block;
        dst->block_min = src->block_min;
        dst->block_act = src->block_act;
        dst->name_block = src->name_block;
    }
    if (src->mm_batch) {
        dst->mm_batch = src->mm_batch;
        dst->batch_min = src->batch_min;
        dst->batch_group = src->batch_group;
    }
}
#endif

static void fill_tables(void) {
    for (int i = 0; i < 256; i++) {
        nb_e8m0_half_table[i] = nb_e8m0_to_fp32_half((uint8_t)i);
        nb_ue4m3_half_table[i][0] = nb_ue4m3_half_table[i][1] = nb_ue4m3_to_fp32_half((uint8_t)i);
    }
    for (int t = 0; t < NB_KERNEL_TYPES; t++) {
        merged[NB_ISA_REF][t] = nb_kernels_ref[t];
        merged[NB_ISA_AVX2][t] = nb_kernels_ref[t];
#if NB_X86_SETS
        overlay(&merged[NB_ISA_AVX2][t], &nb_kernels_avx2[t]);
#endif
        merged[NB_ISA_AVX512][t] = merged[NB_ISA_AVX2][t];
#if NB_X86_SETS
        if (nb_cpu()->avx512vnni) overlay(&merged[NB_ISA_AVX512][t], &nb_kernels_avx512[t]);
#endif
    }
}

void nb_kernel_tables_init(void) { pthread_once(&tables_once, fill_tables); }

/* Entry i of a set's merged table (a GGUF type id or NB_KERNEL_Q4_0_X8), NULL without kernel. */
static const nb_kernel *kernel_at(nb_isa isa, int i) {
    nb_kernel_tables_init();
    if (isa > nb_isa_best()) isa = nb_isa_best();
    if (isa < NB_ISA_REF) isa = NB_ISA_REF;
    return merged[isa][i].mm ? &merged[isa][i] : NULL;
}

const nb_kernel *nb_kernel_get(nb_isa isa, int wtype) {
    return wtype < 0 || wtype >= NB_KERNEL_GGUF_TYPES ? NULL : kernel_at(isa, wtype);
}

const nb_kernel *nb_kernel_matrix(nb_isa isa, int wtype, int64_t n_out) {
    if (wtype == NB_TYPE_Q4_0 && n_out > 0 && n_out % 8 == 0) return kernel_at(isa, NB_KERNEL_Q4_0_X8);
    return nb_kernel_get(isa, wtype);
}

const nb_act_set *nb_act_get(nb_isa isa) {
    if (isa > nb_isa_best()) isa = nb_isa_best();
#if NB_X86_SETS
    return isa >= NB_ISA_AVX512 ? &nb_act_avx512 : isa >= NB_ISA_AVX2 ? &nb_act_avx2 : &nb_act_ref;
#else
    return &nb_act_ref;
#endif
}

void nb_round_fp16(float *x, int64_t n) { nb_act_get(nb_isa_active())->round_f16(x, n); }
void nb_to_fp16(const float *x, uint16_t *h, int64_t n) { nb_act_get(nb_isa_active())->to_f16(x, h, n); }
double nb_softmax_exp(const float *x, float *y, int64_t n, float max) {
    return nb_act_get(nb_isa_active())->softmax_exp(x, y, n, max);
}
float nb_vec_max(const float *x, int64_t n) { return nb_act_get(nb_isa_active())->vec_max(x, n); }
void nb_vec_scale(float *x, int64_t n, float a) { nb_act_get(nb_isa_active())->vec_scale(x, n, a); }
void nb_swiglu(float *g, const float *u, int64_t n) { nb_act_get(nb_isa_active())->swiglu(g, u, n); }
void nb_geglu(float *g, const float *u, int64_t n) { nb_act_get(nb_isa_active())->geglu(g, u, n); }
void nb_rmsnorm(float *y, const float *x, const float *w, int rows, int n, float eps) {
    nb_act_get(nb_isa_active())->rmsnorm(y, x, w, rows, n, eps);
}
void nb_rope(float *x, int heads, int D, int n_rot, const float *cs, int neox) {
    nb_act_get(nb_isa_active())->rope(x, heads, D, n_rot, cs, neox);
}
void nb_attn_pv(int vtype, const void *v, size_t vs, int nk, int D, const float *p, size_t ldp, int rows, float *acc) {
    nb_act_get(nb_isa_active())->attn_pv(vtype, v, vs, nk, D, p, ldp, rows, acc);
}
void nb_attn_qk(int ktype, const void *k, size_t ks, int nk, int D, const float *qp, int rows, float *s, size_t lds) {
    nb_act_get(nb_isa_active())->attn_qk(ktype, k, ks, nk, D, qp, rows, s, lds);
}

const char *nb_matmul_kernel_name(int wtype, nb_route route) { return nb_matmul_matrix_kernel_name(wtype, 0, route); }

const char *nb_matmul_matrix_kernel_name(int wtype, int64_t n_out, nb_route route) {
    if (route != NB_ROUTE_QUANT && route != NB_ROUTE_F32 && route != NB_ROUTE_BLOCK) {
        nb_fail(NB_ERR_INVALID_ARG, "matmul kernel name: route %d is not NB_ROUTE_QUANT, NB_ROUTE_F32 or NB_ROUTE_BLOCK",
                (int)route);
        return NULL;
    }
    const nb_kernel *k = nb_kernel_matrix(nb_isa_active(), wtype, n_out);
    if (!k) {
        nb_fail(NB_ERR_UNSUPPORTED, "no matmul kernel for weight type %d (%s)", wtype, nb_type_name(wtype));
        return NULL;
    }
    return route == NB_ROUTE_F32 ? k->name_f32 : route == NB_ROUTE_BLOCK && k->mm_block ? k->name_block : k->name;
}
