/*
 * types.c: the type table, llama.cpp's file types, and the checked public codec entry points.
 */
#include "formats/types.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "formats/blocks.h"

/* A type nibble has a codec for. */
#define ROW(ID, NAME, ELEMS, BYTES, WEIGHT, FN, FLAGS, FALLBACK, FALLBACK_OF, LAYOUT)                     \
    [ID] = {{NAME, ID, ELEMS, BYTES, WEIGHT}, nb_##FN##_quantize_ref, nb_##FN##_dequantize, FLAGS, FALLBACK,    \
            FALLBACK_OF, LAYOUT}
/* Any other id ggml assigned: its name, so a refusal can say what a file holds, and its block
 * geometry (ggml-common.h), so that the reader can size and bounds-check such a tensor. */
#define GGML(ID, NAME, ELEMS, BYTES, FLAGS, FALLBACK_OF)                                                   \
    [ID] = {{NAME, ID, ELEMS, BYTES, 0}, NULL, NULL, FLAGS, -1, FALLBACK_OF, NULL}
#define NAMED(ID, NAME, ELEMS, BYTES) GGML(ID, NAME, ELEMS, BYTES, 0, -1)
#define RETIRED(ID, NAME) GGML(ID, NAME " (retired)", 0, 0, NB_TYPE_RETIRED, -1)

/* ggml ids nibble has no codec for that the fallback rules name. */
enum { Q2_K = 10, Q3_K = 11, IQ4_NL = 20 };

static const nb_type_traits table[] = {
    ROW(NB_TYPE_F32, "f32", 1, 4, 1, f32, 0, -1, -1, "one element: fp32 [0,4)"),
    ROW(NB_TYPE_F16, "f16", 1, 2, 1, f16, 0, -1, -1, "one element: fp16 [0,2)"),
    ROW(NB_TYPE_Q4_0, "q4_0", NB_QK4_0, sizeof(nb_block_q4_0), 1, q4_0, 0, -1, Q2_K,
        "d fp16 [0,2) | qs 16 B [2,18): byte j = element j (low nibble), j+16 (high)"),
    ROW(NB_TYPE_Q4_1, "q4_1", NB_QK4_1, sizeof(nb_block_q4_1), 1, q4_1, 0, -1, -1,
        "d fp16 [0,2) | m fp16 [2,4) | qs 16 B [4,20) as q4_0; element = q*d + m"),
    RETIRED(4, "q4_2"), RETIRED(5, "q4_3"),
    ROW(NB_TYPE_Q5_0, "q5_0", NB_QK5_0, sizeof(nb_block_q5_0), 1, q5_0, 0, -1, NB_TYPE_Q4_K,
        "d fp16 [0,2) | qh u32 [2,6): bit j = fifth bit of element j | qs 16 B [6,22) as q4_0"),
    ROW(NB_TYPE_Q5_1, "q5_1", NB_QK5_1, sizeof(nb_block_q5_1), 1, q5_1, 0, -1, NB_TYPE_Q5_K,
        "d fp16 [0,2) | m fp16 [2,4) | qh u32 [4,8) as q5_0 | qs 16 B [8,24) as q4_0; element = q*d + m"),
    ROW(NB_TYPE_Q8_0, "q8_0", NB_QK8_0, sizeof(nb_block_q8_0), 1, q8_0, 0, -1, NB_TYPE_Q6_K,
        "d fp16 [0,2) | qs int8 x 32 [2,34): byte j = element j"),
    ROW(NB_TYPE_Q8_1, "q8_1", NB_QK8_1, sizeof(nb_block_q8_1), 0, q8_1, 0, -1, -1,
        "d fp16 [0,2) | s fp16 [2,4): d * sum of qs | qs int8 x 32 [4,36): byte j = element j"),
    GGML(Q2_K, "q2_K", 256, 84, NB_TYPE_KQUANT, -1),
    GGML(Q3_K, "q3_K", 256, 110, NB_TYPE_KQUANT, -1),
    ROW(NB_TYPE_Q4_K, "q4_K", NB_QK_K, sizeof(nb_block_q4_k), 1, q4_k, NB_TYPE_KQUANT, NB_TYPE_Q5_0, -1,
        "d fp16 [0,2) | dmin fp16 [2,4) | scales 12 B [4,16) | qs 128 B [16,144): qs[32c+l] = lanes 64c+l "
        "(low), 64c+32+l (high)"),
    ROW(NB_TYPE_Q5_K, "q5_K", NB_QK_K, sizeof(nb_block_q5_k), 1, q5_k, NB_TYPE_KQUANT, NB_TYPE_Q5_0, -1,
        "d fp16 [0,2) | dmin fp16 [2,4) | scales 12 B [4,16) | qh 32 B [16,48) | qs 128 B [48,176) as q4_K"),
    ROW(NB_TYPE_Q6_K, "q6_K", NB_QK_K, sizeof(nb_block_q6_k), 1, q6_k, NB_TYPE_KQUANT, NB_TYPE_Q8_0, -1,
        "ql 128 B [0,128) | qh 64 B [128,192) | scales int8 x 16 [192,208) | d fp16 [208,210)"),
    ROW(NB_TYPE_Q8_K, "q8_K", NB_QK_K, sizeof(nb_block_q8_k), 0, q8_k, 0, -1, -1,
        "d fp32 [0,4) | qs int8 x 256 [4,260): byte j = element j | bsums int16 x 16 [260,292)"),
    NAMED(16, "iq2_xxs", 256, 66), NAMED(17, "iq2_xs", 256, 74), NAMED(18, "iq3_xxs", 256, 98),
    NAMED(19, "iq1_s", 256, 50), GGML(IQ4_NL, "iq4_nl", 32, 18, 0, Q2_K), NAMED(21, "iq3_s", 256, 110),
    NAMED(22, "iq2_s", 256, 82), NAMED(23, "iq4_xs", 256, 136), NAMED(24, "i8", 1, 1), NAMED(25, "i16", 1, 2),
    NAMED(26, "i32", 1, 4), NAMED(27, "i64", 1, 8), NAMED(28, "f64", 1, 8), NAMED(29, "iq1_m", 256, 56),
    ROW(NB_TYPE_BF16, "bf16", 1, 2, 1, bf16, 0, -1, -1, "one element: bf16 [0,2)"),
    RETIRED(31, "q4_0_4_4"), RETIRED(32, "q4_0_4_8"), RETIRED(33, "q4_0_8_8"), NAMED(34, "tq1_0", 256, 54),
    NAMED(35, "tq2_0", 256, 66), RETIRED(36, "iq4_nl_4_4"), RETIRED(37, "iq4_nl_4_8"), RETIRED(38, "iq4_nl_8_8"),
    ROW(NB_TYPE_MXFP4, "mxfp4", NB_QK_MXFP4, sizeof(nb_block_mxfp4), 1, mxfp4, 0, -1, -1,
        "e E8M0 [0,1) | qs 16 B [1,17): byte j = element j (low nibble), j+16 (high)"),
    ROW(NB_TYPE_NVFP4, "nvfp4", NB_QK_NVFP4, sizeof(nb_block_nvfp4), 1, nvfp4, 0, NB_TYPE_Q8_0, -1,
        "d UE4M3 x 4 [0,4) | qs 32 B [4,36): byte 8s+j = element 16s+j (low), 16s+j+8 (high)"),
    NAMED(41, "q1_0", 0, 0), /* no geometry listed: read as an unknown id */
};
#define N_ROWS (int)(sizeof table / sizeof table[0])
_Static_assert(N_ROWS <= NB_CENSUS_TYPES, "nb_gguf_census counts by id below NB_CENSUS_TYPES");

/* llama.cpp's general.file_type values (llama.h, enum llama_ftype); the gaps were retired. */
static const char *const ftype_names[] = {
    "F32", "F16", "Q4_0", "Q4_1", NULL, NULL, NULL, "Q8_0", "Q5_0", "Q5_1", "Q2_K", "Q3_K_S", "Q3_K_M",
    "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ2_XXS", "IQ2_XS", "Q2_K_S", "IQ3_XS",
    "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ3_M", "IQ2_S", "IQ2_M", "IQ4_XS", "IQ1_M", "BF16", NULL, NULL,
    NULL, "TQ1_0", "TQ2_0", "MXFP4_MOE", "NVFP4",
};
#define N_FTYPES (int)(sizeof ftype_names / sizeof ftype_names[0])

const nb_type_traits *nb_type_row(int id) {
    if (id < 0 || id >= N_ROWS || !table[id].info.name) return NULL;
    return &table[id];
}

const nb_type_traits *nb_type_traits_get(int id) {
    const nb_type_traits *t = nb_type_row(id);
    return t && t->dequantize ? t : NULL;
}

const char *nb_type_name(int id) {
    const nb_type_traits *t = nb_type_row(id);
    return t ? t->info.name : "unknown";
}

const nb_type_info *nb_type_at(int i) {
    for (int id = 0; id < N_ROWS; id++)
        if (table[id].dequantize && i-- == 0) return &table[id].info;
    return NULL;
}

int nb_type_from_name(const char *name) {
    if (!name) return -1;
    for (int id = 0; id < N_ROWS; id++)
        if (table[id].info.weight_type && !strcasecmp(name, table[id].info.name)) return id;
    return -1;
}

const char *nb_ftype_name(int ftype) {
    return ftype >= 0 && ftype < N_FTYPES && ftype_names[ftype] ? ftype_names[ftype] : "unknown";
}

int nb_ftype_from_name(const char *name) {
    for (int i = 0; i < N_FTYPES; i++)
        if (ftype_names[i] && !strcmp(name, ftype_names[i])) return i;
    return -1;
}

int nb_type_fallback_of(int id) {
    const nb_type_traits *t = nb_type_row(id);
    return t ? t->fallback_of : -1;
}

int nb_type_is_kquant(int id) {
    const nb_type_traits *t = nb_type_row(id);
    return t && (t->flags & NB_TYPE_KQUANT);
}

const nb_type_info *nb_type_get(int id) {
    const nb_type_traits *t = nb_type_traits_get(id);
    if (!t) {
        nb_fail(NB_ERR_UNSUPPORTED, "type id %d (%s) is not supported by nibble", id, nb_type_name(id));
        return NULL;
    }
    return &t->info;
}

/* Shared checks of the codec entry points: a known type and a whole number of blocks. */
static nb_status check_row(const char *what, int id, int64_t n, const nb_type_traits **out) {
    const nb_type_traits *t = nb_type_traits_get(id);
    if (!t)
        return nb_fail(NB_ERR_UNSUPPORTED, "%s: type id %d (%s) is not supported by nibble", what, id,
                       nb_type_name(id));
    if (n < 0 || n % t->info.block_elems)
        return nb_fail(NB_ERR_INVALID_ARG, "%s %s: %lld element%s is not a multiple of the block length %d",
                       what, t->info.name, (long long)n, nb_plural(n), t->info.block_elems);
    *out = t;
    return NB_OK;
}

nb_status nb_row_bytes(int id, int64_t n, size_t *bytes) {
    const nb_type_traits *t;
    nb_status s = check_row("row size", id, n, &t);
    if (s) return s;
    uint64_t blocks = (uint64_t)(n / t->info.block_elems), total;
    if (__builtin_mul_overflow(blocks, (uint64_t)t->info.block_bytes, &total) || total > SIZE_MAX)
        return nb_fail(NB_ERR_OVERFLOW, "row size %s: %lld elements overflow", t->info.name, (long long)n);
    *bytes = (size_t)total;
    return NB_OK;
}

nb_status nb_quantize_check(const char *what, int id, const float *x, const void *dst, int64_t n,
                            const nb_type_traits **out) {
    const nb_type_traits *t;
    nb_status s = check_row(what, id, n, &t);
    if (s) return s;
    if (n && (!x || !dst)) return nb_fail(NB_ERR_INVALID_ARG, "%s %s: NULL buffer", what, t->info.name);
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return nb_fail(NB_ERR_NONFINITE, "%s %s: element %lld is %s", what, t->info.name, (long long)i,
                           isnan(x[i]) ? "NaN" : "Inf");
    if (out) *out = t;
    return NB_OK;
}

nb_status nb_quantize(int id, const float *x, void *dst, int64_t n) {
    const nb_type_traits *t;
    nb_status s = nb_quantize_check("quantize", id, x, dst, n, &t);
    if (s) return s;
    t->quantize_ref(x, dst, n);
    return NB_OK;
}

nb_status nb_dequantize(int id, const void *src, float *y, int64_t n) {
    const nb_type_traits *t;
    nb_status s = check_row("dequantize", id, n, &t);
    if (s) return s;
    if (n && (!src || !y)) return nb_fail(NB_ERR_INVALID_ARG, "dequantize %s: NULL buffer", t->info.name);
    t->dequantize(src, y, n);
    return NB_OK;
}
