/*
 * types.h: the type table. One row per GGUF type nibble knows: its public info plus its
 * reference codec. Adding a format means one new file in src/formats/ and one row in types.c.
 */
#ifndef NB_FORMATS_TYPES_H
#define NB_FORMATS_TYPES_H

#include "nibble.h"

typedef void (*nb_quantize_fn)(const float *x, void *y, int64_t k);
typedef void (*nb_dequantize_fn)(const void *x, float *y, int64_t k);

typedef struct nb_type_traits {
    nb_type_info info;
    nb_quantize_fn quantize_ref;
    nb_dequantize_fn dequantize;
} nb_type_traits;

/* Row for an id, or NULL when nibble does not know the id (no error recorded). */
const nb_type_traits *nb_type_traits_get(int id);

/* The checks nb_quantize() makes before it quantizes (known type, whole blocks, non-NULL buffers,
 * finite input), with failures worded "<what> <type>: ..."; shared with the optional quantizers.
 * Stores the type's row in *out when out is not NULL. */
nb_status nb_quantize_check(const char *what, int id, const float *x, const void *dst, int64_t n,
                            const nb_type_traits **out);

#endif
