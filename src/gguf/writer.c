/*
 * writer.c: writes GGUF v3 (layout in gguf.h). Metadata is encoded when it is set, so a value the
 * caller frees afterwards is safe; tensor data is borrowed until write. Each tensor starts at a
 * multiple of the alignment and is padded with zeros up to the next one, as ggml writes files.
 * The file goes to `path.tmp.XXXXXX` beside the target (src/base/atomic.h) and is renamed over it only when every byte
 * is written and synced: an interrupted or failed write leaves the old file untouched.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/atomic.h"
#include "base/checked.h"
#include "base/error.h"
#include "formats/types.h"
#include "gguf/gguf.h"

typedef struct bytes {
    uint8_t *p;
    size_t len, cap;
} bytes;

typedef struct wkv {
    char *key;
    bytes val; /* u32 type + encoded value */
} wkv;

typedef struct wtensor {
    char name[NB_GGUF_MAX_NAME + 1];
    int type, n_dims;
    int64_t ne[NB_GGUF_MAX_DIMS];
    uint64_t size;
    const void *data;
} wtensor;

struct nb_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
};

static nb_status put(bytes *b, const void *p, size_t n) {
    if (n > SIZE_MAX - b->len) return nb_fail(NB_ERR_OVERFLOW, "gguf writer: value of %zu bytes", n);
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n) cap = cap > SIZE_MAX / 2 ? b->len + n : cap * 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) return nb_fail(NB_ERR_NOMEM, "gguf writer: value of %zu bytes", b->len + n);
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, p, n);
    b->len += n;
    return NB_OK;
}

static nb_status put_u32(bytes *b, uint32_t v) { return put(b, &v, 4); }
static nb_status put_u64(bytes *b, uint64_t v) { return put(b, &v, 8); }

static nb_status put_str(bytes *b, const char *s, uint64_t n) {
    nb_status st = put_u64(b, n);
    return st ? st : put(b, s, (size_t)n);
}

/* Grows an array of `size`-byte items to hold one more. */
static nb_status grow(void **items, size_t *cap, size_t n, size_t size) {
    if (n < *cap) return NB_OK;
    size_t c = *cap ? *cap * 2 : 16;
    void *q = realloc(*items, c * size);
    if (!q) return nb_fail(NB_ERR_NOMEM, "gguf writer: table of %zu entries", c);
    *items = q;
    *cap = c;
    return NB_OK;
}

nb_status nb_gguf_writer_create(nb_gguf_writer **out) {
    if (!out) return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: NULL output");
    *out = calloc(1, sizeof **out);
    return *out ? NB_OK : nb_fail(NB_ERR_NOMEM, "gguf writer");
}

void nb_gguf_writer_free(nb_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val.p);
    }
    free(w->kv);
    free(w->t);
    free(w);
}

/* The entry for `key`: the existing one (its old value dropped) or a new one at the end. */
static nb_status kv_slot(nb_gguf_writer *w, const char *key, bytes **val) {
    if (!w || !key) return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: NULL writer or key");
    size_t n = strlen(key);
    if (n == 0 || n > NB_GGUF_MAX_KEY)
        return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: key '%.40s' has %zu bytes (must be 1..%d)", key, n,
                       NB_GGUF_MAX_KEY);
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            w->kv[i].val.len = 0;
            *val = &w->kv[i].val;
            return NB_OK;
        }
    nb_status s = grow((void **)&w->kv, &w->cap_kv, w->n_kv, sizeof *w->kv);
    if (s) return s;
    wkv *e = &w->kv[w->n_kv];
    memset(e, 0, sizeof *e);
    if (!(e->key = malloc(n + 1))) return nb_fail(NB_ERR_NOMEM, "gguf writer: key '%s'", key);
    memcpy(e->key, key, n + 1);
    w->n_kv++;
    *val = &e->val;
    return NB_OK;
}

/* The value itself, without its type tag. */
static nb_status put_scalar(bytes *b, const char *key, const nb_gguf_value *v) {
    uint8_t x8;
    uint16_t x16;
    uint32_t x32;
    float f32;
    switch (v->type) {
    case NB_GGUF_U8: case NB_GGUF_I8:
        x8 = (uint8_t)(v->type == NB_GGUF_U8 ? v->v.u : (uint64_t)v->v.i);
        return put(b, &x8, 1);
    case NB_GGUF_BOOL:
        if (v->v.u > 1) return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: key '%s': bool %llu (must be 0 or 1)", key,
                                       (unsigned long long)v->v.u);
        x8 = (uint8_t)v->v.u;
        return put(b, &x8, 1);
    case NB_GGUF_U16: case NB_GGUF_I16:
        x16 = (uint16_t)(v->type == NB_GGUF_U16 ? v->v.u : (uint64_t)v->v.i);
        return put(b, &x16, 2);
    case NB_GGUF_U32: case NB_GGUF_I32:
        x32 = (uint32_t)(v->type == NB_GGUF_U32 ? v->v.u : (uint64_t)v->v.i);
        return put(b, &x32, 4);
    case NB_GGUF_F32:
        f32 = (float)v->v.f;
        return put(b, &f32, 4);
    case NB_GGUF_U64: return put_u64(b, v->v.u);
    case NB_GGUF_I64: return put_u64(b, (uint64_t)v->v.i);
    case NB_GGUF_F64: return put(b, &v->v.f, 8);
    case NB_GGUF_STRING:
        if (!v->v.str.ptr && v->v.str.len) return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: key '%s': NULL string", key);
        return put_str(b, v->v.str.ptr, v->v.str.len);
    case NB_GGUF_ARRAY: break;
    }
    return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: key '%s': value type %d is not a scalar type", key, (int)v->type);
}

/* The encoded array (type tag, element type, count, elements). */
static nb_status encode_array(bytes *b, const char *key, nb_gguf_vtype elem, const void *data, uint64_t count) {
    nb_status s = put_u32(b, NB_GGUF_ARRAY);
    if (!s) s = put_u32(b, (uint32_t)elem);
    if (!s) s = put_u64(b, count);
    if (s) return s;
    if (elem == NB_GGUF_STRING) {
        const char *const *strs = data;
        for (uint64_t i = 0; i < count && !s; i++) {
            if (!strs[i])
                return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: key '%s': element %llu is NULL", key,
                               (unsigned long long)i);
            s = put_str(b, strs[i], strlen(strs[i]));
        }
        return s;
    }
    uint64_t n;
    if (!nb_mul_u64(count, nb_gguf_scalar_size(elem), &n) || n > SIZE_MAX)
        return nb_fail(NB_ERR_OVERFLOW, "gguf writer: key '%s': %llu elements", key, (unsigned long long)count);
    if (elem == NB_GGUF_BOOL)
        for (uint64_t i = 0; i < count; i++)
            if (((const uint8_t *)data)[i] > 1)
                return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: key '%s': bool element %llu is %u (must be 0 or 1)",
                               key, (unsigned long long)i, ((const uint8_t *)data)[i]);
    return put(b, data, (size_t)n);
}

/* Encodes a scalar (v) or an array (data, elem, count) aside, then stores it under key: a refused
 * value leaves the writer as it was, including any earlier value of the key. */
static nb_status store(nb_gguf_writer *w, const char *key, const nb_gguf_value *v, const void *data,
                       nb_gguf_vtype elem, uint64_t count) {
    bytes enc = {0}, *slot = NULL;
    nb_status s = v ? put_u32(&enc, (uint32_t)v->type) : NB_OK;
    if (!s) s = v ? put_scalar(&enc, key ? key : "", v) : encode_array(&enc, key ? key : "", elem, data, count);
    if (!s) s = kv_slot(w, key, &slot);
    if (s) {
        free(enc.p);
        return s;
    }
    free(slot->p);
    *slot = enc;
    return NB_OK;
}

nb_status nb_gguf_writer_set(nb_gguf_writer *w, const char *key, const nb_gguf_value *v) {
    if (!v) return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: NULL value");
    if ((unsigned)v->type > NB_GGUF_F64 || v->type == NB_GGUF_ARRAY)
        return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: key '%s': value type %d is not a scalar type", key ? key : "",
                       (int)v->type);
    if (key && !strcmp(key, "general.alignment") &&
        (v->type != NB_GGUF_U32 || !v->v.u || (v->v.u & (v->v.u - 1)) || v->v.u > NB_GGUF_MAX_ALIGNMENT))
        return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: general.alignment must be a u32 power of two in 1..%u",
                       NB_GGUF_MAX_ALIGNMENT);
    return store(w, key, v, NULL, NB_GGUF_U8, 0);
}

#define SETTER(FN, CTYPE, VT, FIELD, CAST)                                    \
    nb_status FN(nb_gguf_writer *w, const char *key, CTYPE x) {               \
        nb_gguf_value v = {.type = VT};                                       \
        v.v.FIELD = (CAST)x;                                                  \
        return nb_gguf_writer_set(w, key, &v);                                \
    }

SETTER(nb_gguf_writer_set_u32, uint32_t, NB_GGUF_U32, u, uint64_t)
SETTER(nb_gguf_writer_set_i32, int32_t, NB_GGUF_I32, i, int64_t)
SETTER(nb_gguf_writer_set_u64, uint64_t, NB_GGUF_U64, u, uint64_t)
SETTER(nb_gguf_writer_set_f32, float, NB_GGUF_F32, f, double)
SETTER(nb_gguf_writer_set_bool, int, NB_GGUF_BOOL, u, uint64_t)

nb_status nb_gguf_writer_set_string(nb_gguf_writer *w, const char *key, const char *str) {
    if (!str) return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: key '%s': NULL string", key ? key : "");
    nb_gguf_value v = {.type = NB_GGUF_STRING};
    v.v.str.ptr = str;
    v.v.str.len = strlen(str);
    return nb_gguf_writer_set(w, key, &v);
}

nb_status nb_gguf_writer_set_array(nb_gguf_writer *w, const char *key, nb_gguf_vtype elem, const void *data,
                                   uint64_t count) {
    if ((unsigned)elem > NB_GGUF_F64 || elem == NB_GGUF_ARRAY)
        return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: key '%s': array element type %d (nested or unknown)",
                       key ? key : "", (int)elem);
    if (count && !data) return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: key '%s': NULL array", key ? key : "");
    if (key && !strcmp(key, "general.alignment"))
        return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: general.alignment must be a u32, not an array");
    return store(w, key, NULL, data, elem, count);
}

nb_status nb_gguf_writer_add_tensor(nb_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
                                    const void *data) {
    if (!w || !name || !ne || !data) return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: NULL writer, name, shape or data");
    size_t len = strlen(name);
    if (len == 0 || len > NB_GGUF_MAX_NAME)
        return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: tensor name '%.70s' has %zu bytes (must be 1..%d)", name, len,
                       NB_GGUF_MAX_NAME);
    for (size_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: duplicate tensor name '%s'", name);
    const nb_type_info *info = nb_type_get(type);
    if (!info || !info->weight_type)
        return nb_fail(NB_ERR_UNSUPPORTED, "gguf writer: tensor '%s': type %s (id %d) is not a weight type nibble writes",
                       name, nb_type_name(type), type);
    if (n_dims < 1 || n_dims > NB_GGUF_MAX_DIMS)
        return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: tensor '%s': n_dims %d (must be 1..%d)", name, n_dims,
                       NB_GGUF_MAX_DIMS);
    wtensor t = {.type = type, .n_dims = n_dims, .data = data};
    memcpy(t.name, name, len + 1);
    uint64_t rows = 1;
    for (int d = 0; d < NB_GGUF_MAX_DIMS; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] <= 0)
            return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: tensor '%s': ne[%d] = %lld (must be > 0)", name, d,
                           (long long)t.ne[d]);
        if (d > 0 && !nb_mul_u64(rows, (uint64_t)t.ne[d], &rows))
            return nb_fail(NB_ERR_OVERFLOW, "gguf writer: tensor '%s': shape overflows", name);
    }
    size_t row;
    nb_status s = nb_row_bytes(type, t.ne[0], &row);
    if (s) return nb_fail(s, "gguf writer: tensor '%s': row length %lld is not a multiple of the %s block length %d",
                          name, (long long)t.ne[0], info->name, info->block_elems);
    if (!nb_mul_u64(rows, row, &t.size)) return nb_fail(NB_ERR_OVERFLOW, "gguf writer: tensor '%s': byte size overflows", name);
    if ((s = grow((void **)&w->t, &w->cap_t, w->n_t, sizeof *w->t))) return s;
    w->t[w->n_t++] = t;
    return NB_OK;
}

/* ---------------------------------------------------------------- write */

static uint32_t alignment_of(const nb_gguf_writer *w) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, "general.alignment")) return nb_gguf_rd32(w->kv[i].val.p + 4);
    return NB_GGUF_DEFAULT_ALIGNMENT;
}

/* Everything before the data section, padded to the alignment; the tensors' offsets follow from
 * their order and padded sizes. */
static nb_status encode_head(const nb_gguf_writer *w, uint32_t align, bytes *h) {
    nb_status s = put(h, "GGUF", 4);
    if (!s) s = put_u32(h, 3);
    if (!s) s = put_u64(h, w->n_t);
    if (!s) s = put_u64(h, w->n_kv);
    for (size_t i = 0; i < w->n_kv && !s; i++) {
        s = put_str(h, w->kv[i].key, strlen(w->kv[i].key));
        if (!s) s = put(h, w->kv[i].val.p, w->kv[i].val.len);
    }
    uint64_t offset = 0, padded;
    for (size_t i = 0; i < w->n_t && !s; i++) {
        const wtensor *t = &w->t[i];
        s = put_str(h, t->name, strlen(t->name));
        if (!s) s = put_u32(h, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims && !s; d++) s = put_u64(h, (uint64_t)t->ne[d]);
        if (!s) s = put_u32(h, (uint32_t)t->type);
        if (!s) s = put_u64(h, offset);
        if (!s && (!nb_align_u64(t->size, align, &padded) || !nb_add_u64(offset, padded, &offset)))
            s = nb_fail(NB_ERR_OVERFLOW, "gguf writer: data section overflows at tensor '%s'", t->name);
    }
    static const uint8_t zeros[256];
    while (!s && h->len % align) {
        size_t pad = align - h->len % align;
        s = put(h, zeros, pad < sizeof zeros ? pad : sizeof zeros);
    }
    return s;
}

/* Writes `n` bytes, then zeros up to the next multiple of the alignment. */
static int write_padded(FILE *f, const void *p, uint64_t n, uint32_t align) {
    static const uint8_t zeros[256];
    if (n && fwrite(p, 1, (size_t)n, f) != n) return 0;
    for (uint64_t pad = (align - n % align) % align; pad;) {
        size_t k = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        if (fwrite(zeros, 1, k, f) != k) return 0;
        pad -= k;
    }
    return 1;
}

nb_status nb_gguf_writer_write(nb_gguf_writer *w, const char *path) {
    if (!w || !path) return nb_fail(NB_ERR_INVALID_ARG, "gguf writer: NULL writer or path");
    uint32_t align = alignment_of(w);
    bytes head = {0};
    nb_status s = encode_head(w, align, &head);
    if (s) {
        free(head.p);
        return s;
    }
    nb_atomic_file out;
    if ((s = nb_atomic_open(&out, path, "gguf writer"))) {
        free(head.p);
        return s;
    }
    int ok = write_padded(out.f, head.p, head.len, 1);
    for (size_t i = 0; i < w->n_t && ok; i++) ok = write_padded(out.f, w->t[i].data, w->t[i].size, align);
    if (ok) {
        s = nb_atomic_commit(&out, "gguf writer");
    } else {
        s = nb_fail(NB_ERR_IO, "gguf writer: writing '%s' failed: %s", path, strerror(errno));
        nb_atomic_abort(&out);
    }
    free(head.p);
    return s;
}
