/*
 * types.c: the type table and the checked public codec entry points.
 */
#include "formats/types.h"

#include <math.h>

#include "base/error.h"
#include "formats/blocks.h"

#define ROW(ID, NAME, ELEMS, BYTES, WEIGHT, FN)                                                  \
    [ID] = {{NAME, ID, ELEMS, BYTES, WEIGHT}, nb_##FN##_quantize_ref, nb_##FN##_dequantize}

static const nb_type_traits table[] = {
    ROW(NB_TYPE_F32, "f32", 1, 4, 1, f32),
    ROW(NB_TYPE_F16, "f16", 1, 2, 1, f16),
    ROW(NB_TYPE_Q4_0, "q4_0", NB_QK4_0, sizeof(nb_block_q4_0), 1, q4_0),
    ROW(NB_TYPE_Q5_0, "q5_0", NB_QK5_0, sizeof(nb_block_q5_0), 1, q5_0),
    ROW(NB_TYPE_Q8_0, "q8_0", NB_QK8_0, sizeof(nb_block_q8_0), 1, q8_0),
    ROW(NB_TYPE_Q4_K, "q4_K", NB_QK_K, sizeof(nb_block_q4_k), 1, q4_k),
    ROW(NB_TYPE_Q5_K, "q5_K", NB_QK_K, sizeof(nb_block_q5_k), 1, q5_k),
    ROW(NB_TYPE_Q6_K, "q6_K", NB_QK_K, sizeof(nb_block_q6_k), 1, q6_k),
    ROW(NB_TYPE_Q8_K, "q8_K", NB_QK_K, sizeof(nb_block_q8_k), 0, q8_k),
    ROW(NB_TYPE_BF16, "bf16", 1, 2, 1, bf16),
    ROW(NB_TYPE_MXFP4, "mxfp4", NB_QK_MXFP4, sizeof(nb_block_mxfp4), 1, mxfp4),
    ROW(NB_TYPE_NVFP4, "nvfp4", NB_QK_NVFP4, sizeof(nb_block_nvfp4), 1, nvfp4),
};

/* ggml's names for every id it ever assigned, so a refusal can say what a file holds. */
static const char *const ggml_names[] = {
    "f32", "f16", "q4_0", "q4_1", "q4_2 (retired)", "q4_3 (retired)", "q5_0", "q5_1", "q8_0",
    "q8_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_K", "iq2_xxs", "iq2_xs", "iq3_xxs",
    "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "i8", "i16", "i32", "i64", "f64", "iq1_m",
    "bf16", "q4_0_4_4 (retired)", "q4_0_4_8 (retired)", "q4_0_8_8 (retired)", "tq1_0", "tq2_0",
    "iq4_nl_4_4 (retired)", "iq4_nl_4_8 (retired)", "iq4_nl_8_8 (retired)", "mxfp4", "nvfp4", "q1_0",
};

const nb_type_traits *nb_type_traits_get(int id) {
    if (id < 0 || (size_t)id >= sizeof table / sizeof table[0] || !table[id].info.name) return NULL;
    return &table[id];
}

const char *nb_type_name(int id) {
    if (id < 0 || (size_t)id >= sizeof ggml_names / sizeof ggml_names[0]) return "unknown";
    return ggml_names[id];
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
