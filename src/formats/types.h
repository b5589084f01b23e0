/*
 * types.h: the type table. One row per ggml type id: every id has its ggml name, and the types
 * nibble knows add their public info, reference codec and what the recipes, inspect and explain
 * need to know about them. Adding a format means its codec file in src/formats/, one row in
 * types.c and its kernel rows in src/kernels/.
 */
#ifndef NB_FORMATS_TYPES_H
#define NB_FORMATS_TYPES_H

#include "nibble.h"


typedef void (*nb_quantize_fn)(const float *x, void *y, int64_t k);
typedef void (*nb_dequantize_fn)(const void *x, float *y, int64_t k);

/* Row flags. */
#define NB_TYPE_KQUANT 1u  /* ggml's K-quant weights (q2_K..q6_K): a file holding them was made by a
                              K-quant recipe, so legacy types on rows of other lengths are fallbacks */
#define NB_TYPE_RETIRED 2u /* an id ggml assigned once and withdrew: no file should hold it any more */

typedef struct nb_type_traits {
    nb_type_info info;  /* types nibble has no codec for: name, id and block geometry (0 where
                           unknown), weight_type 0 */
    nb_quantize_fn quantize_ref; /* NULL for types nibble has no codec for */
    nb_dequantize_fn dequantize;
    unsigned flags;     /* NB_TYPE_* */
    /* The type nibble's recipes write instead when a row is not a multiple of the block
     * (llama.cpp's tensor_type_fallback, except that q5_K takes q5_0 for llama.cpp's q5_1), or -1. */
    int fallback;
    /* The K-quant type llama.cpp's recipes wanted when they wrote this one instead on a row that is
     * not a multiple of 256, or -1; the first when several fall back to it. Older llama.cpp wrote
     * iq4_nl for q2_K and q3_K, today's writes q4_0. */
    int fallback_of;
    const char *layout; /* the bytes of a block in one line, for `nibble explain` */
} nb_type_traits;

/* Row for an id nibble has a codec for, or NULL (no error recorded). */
const nb_type_traits *nb_type_traits_get(int id);
/* Row for any id ggml ever assigned, or NULL (no error recorded). */
const nb_type_traits *nb_type_row(int id);

/* The general.file_type id of a name as nb_ftype_name() gives it, or -1. */
int nb_ftype_from_name(const char *name);

/* The checks nb_quantize() makes before it quantizes (known type, whole blocks, non-NULL buffers,
 * finite input), with failures worded "<what> <type>: ..."; shared with the optional quantizers.
 * Stores the type's row in *out when out is not NULL. */
nb_status nb_quantize_check(const char *what, int id, const float *x, const void *dst, int64_t n,
                            const nb_type_traits **out);

#endif
