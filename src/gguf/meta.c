/*
 * meta.c: look-ups on a validated GGUF file: metadata by key or index (typed, never converting
 * between types), array elements, tensors by name or index, and the name index both use.
 * Everything here reads positions reader.c already bounds-checked.
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "gguf/gguf.h"

static const struct {
    const char *name;
    size_t size;
} vtypes[] = {
    [NB_GGUF_U8] = {"u8", 1},       [NB_GGUF_I8] = {"i8", 1},         [NB_GGUF_U16] = {"u16", 2},
    [NB_GGUF_I16] = {"i16", 2},     [NB_GGUF_U32] = {"u32", 4},       [NB_GGUF_I32] = {"i32", 4},
    [NB_GGUF_F32] = {"f32", 4},     [NB_GGUF_BOOL] = {"bool", 1},     [NB_GGUF_STRING] = {"string", 0},
    [NB_GGUF_ARRAY] = {"array", 0}, [NB_GGUF_U64] = {"u64", 8},       [NB_GGUF_I64] = {"i64", 8},
    [NB_GGUF_F64] = {"f64", 8},
};

size_t nb_gguf_scalar_size(uint32_t type) {
    return type < sizeof vtypes / sizeof vtypes[0] ? vtypes[type].size : 0;
}

const char *nb_gguf_vtype_name(int type) {
    return type >= 0 && (size_t)type < sizeof vtypes / sizeof vtypes[0] ? vtypes[type].name : "unknown";
}

/* ------------------------------------------------------------ name index */

/* FNV-1a: names are short and attacker-chosen collisions only cost time, bounded by the count. */
static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

nb_status nb_gguf_index_init(nb_gguf_index *ix, int64_t n) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap *= 2; /* n is bounded by the file size, so this ends */
    ix->slot = calloc(cap, sizeof *ix->slot);
    if (!ix->slot) return nb_fail(NB_ERR_NOMEM, "gguf: name index of %llu slots", (unsigned long long)cap);
    ix->mask = cap - 1;
    return NB_OK;
}

void nb_gguf_index_free(nb_gguf_index *ix) {
    free(ix->slot);
    ix->slot = NULL;
}

int64_t nb_gguf_index_find(const nb_gguf_index *ix, const char *name,
                           const char *(*name_of)(const nb_gguf *, int64_t), const nb_gguf *g) {
    if (!ix->slot) return -1;
    for (uint64_t h = hash_name(name) & ix->mask;; h = (h + 1) & ix->mask) {
        int64_t s = ix->slot[h];
        if (!s) return -1;
        if (!strcmp(name_of(g, s - 1), name)) return s - 1;
    }
}

int64_t nb_gguf_index_insert(nb_gguf_index *ix, int64_t i,
                             const char *(*name_of)(const nb_gguf *, int64_t), const nb_gguf *g) {
    const char *name = name_of(g, i);
    for (uint64_t h = hash_name(name) & ix->mask;; h = (h + 1) & ix->mask) {
        int64_t s = ix->slot[h];
        if (!s) {
            ix->slot[h] = i + 1;
            return -1;
        }
        if (!strcmp(name_of(g, s - 1), name)) return s - 1;
    }
}

const char *nb_gguf_kv_name_of(const nb_gguf *g, int64_t i) { return g->kv[i].key; }
const char *nb_gguf_tensor_name_of(const nb_gguf *g, int64_t i) { return g->tensor[i].name; }

/* ----------------------------------------------------------- file facts */

uint32_t nb_gguf_version(const nb_gguf *g) { return g->version; }
uint32_t nb_gguf_alignment(const nb_gguf *g) { return g->alignment; }
uint64_t nb_gguf_file_size(const nb_gguf *g) { return g->size; }
uint64_t nb_gguf_data_offset(const nb_gguf *g) { return g->data_offset; }

/* ------------------------------------------------------------- metadata */

int64_t nb_gguf_kv_count(const nb_gguf *g) { return g->n_kv; }

int64_t nb_gguf_find_key(const nb_gguf *g, const char *key) {
    if (!g || !key) return -1;
    return nb_gguf_index_find(&g->kv_index, key, nb_gguf_kv_name_of, g);
}

int64_t nb_gguf_find_arch_key(const nb_gguf *g, const char *suffix, char *key, size_t size) {
    char own[256];
    if (!key) key = own, size = sizeof own;
    if (!g || !suffix || !size) return -1;
    const int64_t a = nb_gguf_find_key(g, "general.architecture");
    const char *arch = a >= 0 && g->kv[a].type == NB_GGUF_STRING ? g->kv[a].str : "";
    const int n = snprintf(key, size, "%s.%s", arch, suffix);
    return n >= 0 && (size_t)n < size ? nb_gguf_find_key(g, key) : -1;
}

const char *nb_gguf_kv_key(const nb_gguf *g, int64_t kv) {
    return g && kv >= 0 && kv < g->n_kv ? g->kv[kv].key : NULL;
}

/* A scalar of `type` stored at p. */
static void read_scalar(nb_gguf_vtype type, const uint8_t *p, nb_gguf_value *out) {
    out->type = type;
    switch (type) {
    case NB_GGUF_U8: case NB_GGUF_BOOL: out->v.u = p[0]; break;
    case NB_GGUF_I8: out->v.i = (int8_t)p[0]; break;
    case NB_GGUF_U16: { uint16_t x; memcpy(&x, p, 2); out->v.u = x; break; }
    case NB_GGUF_I16: { int16_t x; memcpy(&x, p, 2); out->v.i = x; break; }
    case NB_GGUF_U32: out->v.u = nb_gguf_rd32(p); break;
    case NB_GGUF_I32: out->v.i = (int32_t)nb_gguf_rd32(p); break;
    case NB_GGUF_F32: { float x; memcpy(&x, p, 4); out->v.f = x; break; }
    case NB_GGUF_U64: out->v.u = nb_gguf_rd64(p); break;
    case NB_GGUF_I64: out->v.i = (int64_t)nb_gguf_rd64(p); break;
    case NB_GGUF_F64: memcpy(&out->v.f, p, 8); break;
    case NB_GGUF_STRING: case NB_GGUF_ARRAY: break; /* not scalars: callers handle them */
    }
}

static nb_status bad_kv(const nb_gguf *g, int64_t kv) {
    if (!g) return nb_fail(NB_ERR_INVALID_ARG, "gguf: NULL handle");
    return nb_fail(NB_ERR_RANGE, "gguf: metadata index %lld out of range (%lld key%s)", (long long)kv,
                   (long long)g->n_kv, nb_plural(g->n_kv));
}

nb_status nb_gguf_kv_value(const nb_gguf *g, int64_t kv, nb_gguf_value *out) {
    if (!g || kv < 0 || kv >= g->n_kv) return bad_kv(g, kv);
    if (!out) return nb_fail(NB_ERR_INVALID_ARG, "gguf: NULL value");
    const nb_gguf_kv *e = &g->kv[kv];
    out->type = e->type;
    if (e->type == NB_GGUF_STRING) {
        out->v.str.ptr = e->str;
        out->v.str.len = e->str_len;
    } else if (e->type == NB_GGUF_ARRAY) {
        out->v.arr.type = e->elem;
        out->v.arr.count = e->count;
    } else {
        read_scalar(e->type, g->base + e->pos, out);
    }
    return NB_OK;
}

nb_status nb_gguf_arr_value(const nb_gguf *g, int64_t kv, uint64_t i, nb_gguf_value *out) {
    if (!g || kv < 0 || kv >= g->n_kv) return bad_kv(g, kv);
    if (!out) return nb_fail(NB_ERR_INVALID_ARG, "gguf: NULL value");
    const nb_gguf_kv *e = &g->kv[kv];
    if (e->type != NB_GGUF_ARRAY)
        return nb_fail(NB_ERR_FORMAT, "gguf: key '%s' is %s, not an array", e->key, nb_gguf_vtype_name(e->type));
    if (i >= e->count)
        return nb_fail(NB_ERR_RANGE, "gguf: key '%s': element %llu out of range (%llu element%s)", e->key,
                       (unsigned long long)i, (unsigned long long)e->count, nb_plural((long long)e->count));
    if (e->elem == NB_GGUF_STRING) {
        out->type = NB_GGUF_STRING;
        out->v.str.ptr = (const char *)g->base + e->str_pos[i];
        out->v.str.len = nb_gguf_rd64(g->base + e->str_pos[i] - 8);
    } else {
        read_scalar(e->elem, g->base + e->pos + i * nb_gguf_scalar_size(e->elem), out);
    }
    return NB_OK;
}

/* The value of `key`, which must have type `want`. */
static nb_status get_typed(const nb_gguf *g, const char *key, nb_gguf_vtype want, nb_gguf_value *out) {
    if (!g || !key) return nb_fail(NB_ERR_INVALID_ARG, "gguf: NULL handle or key");
    int64_t kv = nb_gguf_find_key(g, key);
    if (kv < 0) return nb_fail(NB_ERR_RANGE, "gguf: key '%s' not found", key);
    if (g->kv[kv].type != want)
        return nb_fail(NB_ERR_FORMAT, "gguf: key '%s' is %s, expected %s", key, nb_gguf_vtype_name(g->kv[kv].type),
                       nb_gguf_vtype_name(want));
    return nb_gguf_kv_value(g, kv, out);
}

#define GETTER(FN, CTYPE, VT, FIELD)                                          \
    nb_status FN(const nb_gguf *g, const char *key, CTYPE *v) {               \
        nb_gguf_value x;                                                      \
        nb_status s = get_typed(g, key, VT, &x);                              \
        if (s) return s;                                                      \
        if (!v) return nb_fail(NB_ERR_INVALID_ARG, "gguf: NULL output");      \
        *v = (CTYPE)x.v.FIELD;                                                \
        return NB_OK;                                                         \
    }

GETTER(nb_gguf_get_u32, uint32_t, NB_GGUF_U32, u)
GETTER(nb_gguf_get_i32, int32_t, NB_GGUF_I32, i)
GETTER(nb_gguf_get_u64, uint64_t, NB_GGUF_U64, u)
GETTER(nb_gguf_get_f32, float, NB_GGUF_F32, f)
GETTER(nb_gguf_get_bool, int, NB_GGUF_BOOL, u)
GETTER(nb_gguf_get_string, const char *, NB_GGUF_STRING, str.ptr)

nb_status nb_gguf_get_array(const nb_gguf *g, const char *key, nb_gguf_vtype elem, int64_t *kv,
                            uint64_t *count) {
    nb_gguf_value x;
    nb_status s = get_typed(g, key, NB_GGUF_ARRAY, &x);
    if (s) return s;
    if (x.v.arr.type != elem)
        return nb_fail(NB_ERR_FORMAT, "gguf: key '%s' is an array of %s, expected an array of %s", key,
                       nb_gguf_vtype_name(x.v.arr.type), nb_gguf_vtype_name(elem));
    if (kv) *kv = nb_gguf_find_key(g, key);
    if (count) *count = x.v.arr.count;
    return NB_OK;
}

/* Element i of array kv, which must hold `want` elements. */
static nb_status arr_typed(const nb_gguf *g, int64_t kv, uint64_t i, nb_gguf_vtype want, nb_gguf_value *out) {
    nb_status s = nb_gguf_arr_value(g, kv, i, out);
    if (s) return s;
    if (g->kv[kv].elem != want)
        return nb_fail(NB_ERR_FORMAT, "gguf: key '%s' is an array of %s, expected an array of %s", g->kv[kv].key,
                       nb_gguf_vtype_name(g->kv[kv].elem), nb_gguf_vtype_name(want));
    return NB_OK;
}

#define ARR_GETTER(FN, CTYPE, VT, FIELD)                                          \
    nb_status FN(const nb_gguf *g, int64_t kv, uint64_t i, CTYPE *v) {            \
        nb_gguf_value x;                                                          \
        nb_status s = arr_typed(g, kv, i, VT, &x);                                \
        if (s) return s;                                                          \
        if (!v) return nb_fail(NB_ERR_INVALID_ARG, "gguf: NULL output");          \
        *v = (CTYPE)x.v.FIELD;                                                    \
        return NB_OK;                                                             \
    }

ARR_GETTER(nb_gguf_arr_u32, uint32_t, NB_GGUF_U32, u)
ARR_GETTER(nb_gguf_arr_i32, int32_t, NB_GGUF_I32, i)
ARR_GETTER(nb_gguf_arr_f32, float, NB_GGUF_F32, f)

nb_status nb_gguf_arr_str(const nb_gguf *g, int64_t kv, uint64_t i, const char **str, size_t *len) {
    nb_gguf_value x;
    nb_status s = arr_typed(g, kv, i, NB_GGUF_STRING, &x);
    if (s) return s;
    if (!str || !len) return nb_fail(NB_ERR_INVALID_ARG, "gguf: NULL output");
    *str = x.v.str.ptr;
    *len = (size_t)x.v.str.len;
    return NB_OK;
}

/* -------------------------------------------------------------- tensors */

int64_t nb_gguf_tensor_count(const nb_gguf *g) { return g ? g->n_tensors : 0; }
int64_t nb_gguf_unsupported_count(const nb_gguf *g) { return g ? g->n_unsupported : 0; }

const nb_gguf_tensor *nb_gguf_tensor_at(const nb_gguf *g, int64_t i) {
    return g && i >= 0 && i < g->n_tensors ? &g->tensor[i].pub : NULL;
}

int nb_gguf_scale_name(const char *weight, char *name, size_t cap) {
    const size_t n = strlen(weight);
    if (n < 7 || strcmp(weight + n - 7, ".weight") || n - 7 + sizeof ".scale" > cap) return 0;
    memcpy(name, weight, n - 7);
    memcpy(name + n - 7, ".scale", sizeof ".scale");
    return 1;
}

const nb_gguf_tensor *nb_gguf_find_tensor(const nb_gguf *g, const char *name) {
    if (!g || !name) return NULL;
    return nb_gguf_tensor_at(g, nb_gguf_index_find(&g->tensor_index, name, nb_gguf_tensor_name_of, g));
}
