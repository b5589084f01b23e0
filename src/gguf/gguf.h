/*
 * gguf.h: what the GGUF reader keeps after validating a file (shared by reader.c, which builds it,
 * and meta.c, which answers look-ups from it).
 *
 * File layout (little endian, no padding between fields):
 *   "GGUF" | u32 version | i64 n_tensors | i64 n_kv
 *   n_kv x      { string key | u32 value type | value }
 *   n_tensors x { string name | u32 n_dims | i64 ne[n_dims] | u32 type | u64 offset }
 *   padding to general.alignment | data section (tensor offsets are relative to its start)
 * string = u64 length + bytes (no NUL); array value = u32 element type + u64 count + elements.
 *
 * Every position below is a byte offset into the mapping and has been bounds-checked by the
 * reader, so meta.c reads values without checking again.
 */
#ifndef NB_GGUF_GGUF_H
#define NB_GGUF_GGUF_H

#include <string.h>

#include "nibble.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader and writer assume a little-endian host"
#endif

typedef struct nb_gguf_kv {
    char *key;           /* NUL-terminated copy */
    nb_gguf_vtype type;
    nb_gguf_vtype elem;  /* ARRAY: element type */
    uint64_t count;      /* ARRAY: element count */
    uint64_t pos;        /* scalar: the value; ARRAY: the first element */
    char *str;           /* STRING: NUL-terminated copy */
    uint64_t str_len;
    uint64_t *str_pos;   /* ARRAY of STRING: where element i's bytes start (its u64 length precedes) */
} nb_gguf_kv;

typedef struct nb_gguf_trec {
    nb_gguf_tensor pub;
    char name[NB_GGUF_MAX_NAME + 1];
} nb_gguf_trec;

/* Open-addressing hash of names -> index, so look-ups and duplicate checks stay linear even for
 * files with very many keys or tensors. Slots hold index + 1; 0 is empty. */
typedef struct nb_gguf_index {
    int64_t *slot;
    uint64_t mask;
} nb_gguf_index;

struct nb_gguf {
    const uint8_t *base; /* the file bytes */
    uint64_t size;
    void *map;           /* non-NULL when we mapped a file (unmapped on close) */
    size_t map_len;
    uint32_t version, alignment;
    uint64_t data_offset;
    int64_t n_kv, n_tensors, n_unsupported;
    nb_gguf_kv *kv;
    nb_gguf_trec *tensor;
    nb_gguf_index kv_index, tensor_index;
};

static inline uint64_t nb_gguf_rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint32_t nb_gguf_rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Bytes one value of a scalar type takes; 0 for STRING and ARRAY (variable) and unknown types. */
size_t nb_gguf_scalar_size(uint32_t type);

nb_status nb_gguf_index_init(nb_gguf_index *ix, int64_t n);
void nb_gguf_index_free(nb_gguf_index *ix);
/* Find `name` among names[0..] through `name_of`; returns the index or -1. */
int64_t nb_gguf_index_find(const nb_gguf_index *ix, const char *name,
                           const char *(*name_of)(const nb_gguf *, int64_t), const nb_gguf *g);
/* Insert index i (whose name is name_of(g, i)); returns the earlier index with that name (a
 * duplicate, nothing inserted) or -1. */
int64_t nb_gguf_index_insert(nb_gguf_index *ix, int64_t i,
                             const char *(*name_of)(const nb_gguf *, int64_t), const nb_gguf *g);

const char *nb_gguf_kv_name_of(const nb_gguf *g, int64_t i);
const char *nb_gguf_tensor_name_of(const nb_gguf *g, int64_t i);

#endif
