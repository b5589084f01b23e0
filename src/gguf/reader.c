/*
 * reader.c: maps a GGUF file read-only and validates all of it before anything is used (layout in
 * gguf.h). Every size, count, length and offset in the file is hostile until checked: counts are
 * bounded by the bytes left before anything is allocated, sums and products go through
 * base/checked.h, and a refusal names the field, its byte offset and the limit it broke. Known
 * attacks on GGUF readers (overflowing counts, sizes and padding; array element types a reader did
 * not expect; shapes whose byte size wraps) are each a case in tests/corpus/bad/.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/checked.h"
#include "base/error.h"
#include "formats/types.h"
#include "gguf/gguf.h"

/* The smallest a key/value pair and a tensor info can be, to bound counts by the bytes left:
 * kv = u64 key length + 1 key byte + u32 type + 1 value byte; tensor = u64 name length + 1 name
 * byte + u32 n_dims + one i64 + u32 type + u64 offset. */
#define MIN_KV_BYTES 14u
#define MIN_TENSOR_BYTES 33u

typedef struct cursor {
    const uint8_t *base;
    uint64_t pos, size;
    char ctx[NB_GGUF_MAX_KEY + 32]; /* what is being read, e.g. " of tensor 'x'", for messages */
} cursor;

static uint64_t left(const cursor *c) { return c->size - c->pos; }

/* Reads `n` bytes' worth of field `what` at the cursor (n <= 8), or fails naming it. */
static nb_status need(const cursor *c, uint64_t n, const char *what) {
    if (left(c) < n)
        return nb_fail(NB_ERR_FORMAT, "gguf: %s%s at offset %llu: needs %llu bytes, file ends after %llu",
                       what, c->ctx, (unsigned long long)c->pos, (unsigned long long)n, (unsigned long long)left(c));
    return NB_OK;
}

static nb_status rd_u32(cursor *c, const char *what, uint32_t *v) {
    nb_status s = need(c, 4, what);
    if (s) return s;
    *v = nb_gguf_rd32(c->base + c->pos);
    c->pos += 4;
    return NB_OK;
}

static nb_status rd_u64(cursor *c, const char *what, uint64_t *v) {
    nb_status s = need(c, 8, what);
    if (s) return s;
    *v = nb_gguf_rd64(c->base + c->pos);
    c->pos += 8;
    return NB_OK;
}

/* A string's length field and bytes: on success *at is where the bytes start and the cursor is
 * past them. `limit` bounds the length beyond what the file holds (0: no extra bound). */
static nb_status rd_str(cursor *c, const char *what, uint64_t limit, uint64_t *at, uint64_t *len) {
    uint64_t start = c->pos, n;
    nb_status s = rd_u64(c, what, &n);
    if (s) return s;
    if (limit && n > limit)
        return nb_fail(NB_ERR_FORMAT, "gguf: %s%s at offset %llu: length %llu exceeds the limit %llu", what,
                       c->ctx, (unsigned long long)start, (unsigned long long)n, (unsigned long long)limit);
    if (n > left(c))
        return nb_fail(NB_ERR_FORMAT, "gguf: %s%s at offset %llu: length %llu runs past the end of the file (%llu bytes left)",
                       what, c->ctx, (unsigned long long)start, (unsigned long long)n, (unsigned long long)left(c));
    *at = c->pos;
    *len = n;
    c->pos += n;
    return NB_OK;
}

static char *copy_str(const uint8_t *p, uint64_t n) {
    char *s = malloc(n + 1); /* n is at most the file size, which was mapped, so n + 1 fits */
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

/* --------------------------------------------------------------- header */

static nb_status parse_header(cursor *c, nb_gguf *g, uint64_t *n_tensors, uint64_t *n_kv) {
    uint32_t version;
    nb_status s = need(c, 4, "magic");
    if (s) return s;
    c->pos = 4;
    if (memcmp(c->base, "GGUF", 4))
        return nb_fail(NB_ERR_FORMAT, "gguf: magic at offset 0: expected \"GGUF\" (47 47 55 46), found %02x %02x %02x %02x",
                       c->base[0], c->base[1], c->base[2], c->base[3]);
    if ((s = rd_u32(c, "version", &version))) return s;
    if (version == 1)
        return nb_fail(NB_ERR_UNSUPPORTED, "gguf: version at offset 4: GGUF v1 is not supported (versions 2 and 3 are)");
    if (version != 2 && version != 3) {
        uint32_t swapped = __builtin_bswap32(version);
        if (swapped >= 1 && swapped <= 3)
            return nb_fail(NB_ERR_UNSUPPORTED,
                           "gguf: version at offset 4: %u is version %u byte-swapped: the file looks big-endian, "
                           "nibble reads little-endian GGUF only",
                           version, swapped);
        return nb_fail(NB_ERR_UNSUPPORTED, "gguf: version at offset 4: unknown version %u (versions 2 and 3 are supported)",
                       version);
    }
    g->version = version;
    if ((s = rd_u64(c, "n_tensors", n_tensors))) return s;
    if ((s = rd_u64(c, "n_kv", n_kv))) return s;
    /* Bound both counts by the bytes after the header before anything is allocated from them. */
    if (*n_tensors > left(c) / MIN_TENSOR_BYTES)
        return nb_fail(NB_ERR_FORMAT, "gguf: n_tensors at offset 8: %lld tensor%s need%s at least %u bytes each, %llu bytes left (limit %llu)",
                       (long long)*n_tensors, nb_plural(*n_tensors), *n_tensors == 1 ? "s" : "", MIN_TENSOR_BYTES, (unsigned long long)left(c),
                       (unsigned long long)(left(c) / MIN_TENSOR_BYTES));
    if (*n_kv > left(c) / MIN_KV_BYTES)
        return nb_fail(NB_ERR_FORMAT, "gguf: n_kv at offset 16: %lld key%s need%s at least %u bytes each, %llu bytes left (limit %llu)",
                       (long long)*n_kv, nb_plural(*n_kv), *n_kv == 1 ? "s" : "", MIN_KV_BYTES, (unsigned long long)left(c),
                       (unsigned long long)(left(c) / MIN_KV_BYTES));
    return NB_OK;
}

/* ------------------------------------------------------------- metadata */

/* Checks `count` scalars of `type` starting at the cursor and steps over them. */
static nb_status skip_scalars(cursor *c, const nb_gguf_kv *e, uint32_t type, uint64_t count) {
    uint64_t start = c->pos, bytes;
    if (!nb_mul_u64(count, nb_gguf_scalar_size(type), &bytes) || bytes > left(c))
        return nb_fail(NB_ERR_FORMAT, "gguf: value of key '%s' at offset %llu: %llu x %s needs more than the %llu bytes left",
                       e->key, (unsigned long long)start, (unsigned long long)count, nb_gguf_vtype_name(type),
                       (unsigned long long)left(c));
    if (type == NB_GGUF_BOOL)
        for (uint64_t i = 0; i < count; i++)
            if (c->base[start + i] > 1)
                return nb_fail(NB_ERR_FORMAT, "gguf: value of key '%s' at offset %llu: bool byte %u (must be 0 or 1)",
                               e->key, (unsigned long long)(start + i), c->base[start + i]);
    c->pos += bytes;
    return NB_OK;
}

static nb_status parse_array(cursor *c, nb_gguf_kv *e) {
    uint64_t at = c->pos;
    uint32_t elem;
    nb_status s = rd_u32(c, "array element type", &elem);
    if (s) return s;
    if (elem == NB_GGUF_ARRAY)
        return nb_fail(NB_ERR_FORMAT, "gguf: array element type of key '%s' at offset %llu: nested arrays are not allowed",
                       e->key, (unsigned long long)at);
    if (elem > NB_GGUF_F64)
        return nb_fail(NB_ERR_FORMAT, "gguf: array element type of key '%s' at offset %llu: unknown type %u (0..12)",
                       e->key, (unsigned long long)at, elem);
    e->elem = (nb_gguf_vtype)elem;
    if ((s = rd_u64(c, "array count", &e->count))) return s;
    e->pos = c->pos;
    if (elem != NB_GGUF_STRING) return skip_scalars(c, e, elem, e->count);
    /* Each string takes at least its 8-byte length: bound the count before allocating positions. */
    if (e->count > left(c) / 8)
        return nb_fail(NB_ERR_FORMAT, "gguf: array count of key '%s' at offset %llu: %llu strings need at least 8 bytes each, %llu bytes left",
                       e->key, (unsigned long long)(c->pos - 8), (unsigned long long)e->count,
                       (unsigned long long)left(c));
    e->str_pos = malloc((e->count ? e->count : 1) * sizeof *e->str_pos);
    if (!e->str_pos)
        return nb_fail(NB_ERR_NOMEM, "gguf: key '%s': positions of %llu strings", e->key, (unsigned long long)e->count);
    for (uint64_t i = 0; i < e->count; i++) {
        uint64_t len;
        uint64_t elem_at = c->pos;
        if (rd_str(c, "string", 0, &e->str_pos[i], &len)) {
            /* name the element only now: formatting it for every element would cost more than the parse */
            c->pos = elem_at;
            snprintf(c->ctx, sizeof c->ctx, " (element %llu of key '%s')", (unsigned long long)i, e->key);
            return rd_str(c, "string", 0, &e->str_pos[i], &len);
        }
    }
    return NB_OK;
}

static nb_status parse_kv(cursor *c, nb_gguf *g, int64_t i) {
    nb_gguf_kv *e = &g->kv[i];
    uint64_t key_at = c->pos, at, len;
    uint32_t type;
    snprintf(c->ctx, sizeof c->ctx, " of kv %lld", (long long)i);
    nb_status s = rd_str(c, "key", NB_GGUF_MAX_KEY, &at, &len);
    if (s) return s;
    if (len == 0 || memchr(c->base + at, 0, len))
        return nb_fail(NB_ERR_FORMAT, "gguf: key of kv %lld at offset %llu: %s", (long long)i,
                       (unsigned long long)key_at, len ? "contains a NUL byte" : "empty key");
    if (!(e->key = copy_str(c->base + at, len))) return nb_fail(NB_ERR_NOMEM, "gguf: key of kv %lld", (long long)i);
    snprintf(c->ctx, sizeof c->ctx, " of key '%s'", e->key);
    int64_t dup = nb_gguf_index_insert(&g->kv_index, i, nb_gguf_kv_name_of, g);
    if (dup >= 0)
        return nb_fail(NB_ERR_FORMAT, "gguf: key of kv %lld at offset %llu: duplicate key '%s' (first is kv %lld)",
                       (long long)i, (unsigned long long)key_at, e->key, (long long)dup);
    uint64_t type_at = c->pos;
    if ((s = rd_u32(c, "value type", &type))) return s;
    if (type > NB_GGUF_F64)
        return nb_fail(NB_ERR_FORMAT, "gguf: value type of key '%s' at offset %llu: unknown type %u (0..12)", e->key,
                       (unsigned long long)type_at, type);
    e->type = (nb_gguf_vtype)type;
    e->pos = c->pos;
    if (type == NB_GGUF_ARRAY) return parse_array(c, e);
    if (type != NB_GGUF_STRING) return skip_scalars(c, e, type, 1);
    if ((s = rd_str(c, "string value", 0, &at, &len))) return s;
    e->str_len = len;
    if (!(e->str = copy_str(c->base + at, len))) return nb_fail(NB_ERR_NOMEM, "gguf: value of key '%s'", e->key);
    return NB_OK;
}

static nb_status read_alignment(nb_gguf *g) {
    int64_t kv = nb_gguf_find_key(g, "general.alignment");
    g->alignment = NB_GGUF_DEFAULT_ALIGNMENT;
    if (kv < 0) return NB_OK;
    const nb_gguf_kv *e = &g->kv[kv];
    if (e->type != NB_GGUF_U32)
        return nb_fail(NB_ERR_FORMAT, "gguf: general.alignment at offset %llu: type %s, must be u32",
                       (unsigned long long)e->pos, nb_gguf_vtype_name(e->type));
    uint32_t a = nb_gguf_rd32(g->base + e->pos);
    if (a == 0 || (a & (a - 1)) || a > NB_GGUF_MAX_ALIGNMENT)
        return nb_fail(NB_ERR_FORMAT, "gguf: general.alignment at offset %llu: %u is not a power of two in 1..%u",
                       (unsigned long long)e->pos, a, NB_GGUF_MAX_ALIGNMENT);
    g->alignment = a;
    return NB_OK;
}

/* -------------------------------------------------------------- tensors */

/* Block geometry and support of a tensor's type id, or a refusal naming the tensor and the type. */
static nb_status tensor_type(unsigned flags, const char *name, uint64_t at, uint32_t id, int *elems, int *bytes,
                             int *supported) {
    const nb_type_traits *t = id <= 255 ? nb_type_row((int)id) : NULL;
    *elems = t ? t->info.block_elems : 0;
    *bytes = t ? t->info.block_bytes : 0;
    *supported = t && t->info.weight_type; /* Q8_K has a codec but holds activations, never weights */
    if (*supported) return NB_OK;
    if (t && (t->flags & NB_TYPE_RETIRED))
        return nb_fail(NB_ERR_UNSUPPORTED, "gguf: type of tensor '%s' at offset %llu: id %u (%s) was retired by ggml",
                       name, (unsigned long long)at, id, nb_type_name((int)id));
    if (!*elems)
        return nb_fail(NB_ERR_FORMAT, "gguf: type of tensor '%s' at offset %llu: unknown type id %u", name,
                       (unsigned long long)at, id);
    if (!(flags & NB_GGUF_LIST_UNSUPPORTED))
        return nb_fail(NB_ERR_UNSUPPORTED, "gguf: tensor '%s' (type at offset %llu) has type %s (id %u), which nibble cannot run",
                       name, (unsigned long long)at, nb_type_name((int)id), id);
    return NB_OK;
}

static nb_status parse_tensor(cursor *c, nb_gguf *g, unsigned flags, int64_t i) {
    nb_gguf_trec *r = &g->tensor[i];
    nb_gguf_tensor *t = &r->pub;
    uint64_t name_at = c->pos, at, len, ne, offset;
    uint32_t n_dims, id;
    t->name = r->name;
    snprintf(c->ctx, sizeof c->ctx, " of tensor %lld", (long long)i);
    nb_status s = rd_str(c, "name", NB_GGUF_MAX_NAME, &at, &len);
    if (s) return s;
    if (len == 0 || memchr(c->base + at, 0, len))
        return nb_fail(NB_ERR_FORMAT, "gguf: name of tensor %lld at offset %llu: %s", (long long)i,
                       (unsigned long long)name_at, len ? "contains a NUL byte" : "empty name");
    memcpy(r->name, c->base + at, len);
    r->name[len] = '\0';
    snprintf(c->ctx, sizeof c->ctx, " of tensor '%s'", r->name);
    int64_t dup = nb_gguf_index_insert(&g->tensor_index, i, nb_gguf_tensor_name_of, g);
    if (dup >= 0)
        return nb_fail(NB_ERR_FORMAT, "gguf: name of tensor %lld at offset %llu: duplicate tensor name '%s' (first is tensor %lld)",
                       (long long)i, (unsigned long long)name_at, r->name, (long long)dup);
    uint64_t dims_at = c->pos;
    if ((s = rd_u32(c, "n_dims", &n_dims))) return s;
    if (n_dims < 1 || n_dims > NB_GGUF_MAX_DIMS)
        return nb_fail(NB_ERR_FORMAT, "gguf: n_dims of tensor '%s' at offset %llu: %u (must be 1..%d)", r->name,
                       (unsigned long long)dims_at, n_dims, NB_GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    uint64_t nelem = 1;
    for (int d = 0; d < NB_GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= t->n_dims) continue;
        uint64_t ne_at = c->pos;
        if ((s = rd_u64(c, "ne", &ne))) return s;
        if ((int64_t)ne <= 0)
            return nb_fail(NB_ERR_FORMAT, "gguf: ne[%d] of tensor '%s' at offset %llu: %lld (must be > 0)", d, r->name,
                           (unsigned long long)ne_at, (long long)ne);
        if (!nb_mul_u64(nelem, ne, &nelem) || nelem > INT64_MAX)
            return nb_fail(NB_ERR_OVERFLOW, "gguf: ne[%d] of tensor '%s' at offset %llu: element count overflows (limit 2^63-1)",
                           d, r->name, (unsigned long long)ne_at);
        t->ne[d] = (int64_t)ne;
    }
    uint64_t type_at = c->pos;
    if ((s = rd_u32(c, "type", &id))) return s;
    int elems, bytes, supported;
    if ((s = tensor_type(flags, r->name, type_at, id, &elems, &bytes, &supported))) return s;
    t->type = (int)id;
    t->supported = supported;
    g->n_unsupported += !supported;
    if (t->ne[0] % elems)
        return nb_fail(NB_ERR_FORMAT, "gguf: ne[0] of tensor '%s' at offset %llu: row length %lld is not a multiple of the %s block length %d",
                       r->name, (unsigned long long)dims_at + 4, (long long)t->ne[0], nb_type_name((int)id), elems);
    if (!nb_mul_u64(nelem / (uint64_t)elems, (uint64_t)bytes, &t->bytes))
        return nb_fail(NB_ERR_OVERFLOW, "gguf: byte size of tensor '%s' (shape at offset %llu) overflows: %llu elements of %s (limit 2^64-1 bytes)",
                       r->name, (unsigned long long)dims_at + 4, (unsigned long long)nelem, nb_type_name((int)id));
    uint64_t off_at = c->pos;
    if ((s = rd_u64(c, "offset", &offset))) return s;
    if (offset % g->alignment)
        return nb_fail(NB_ERR_FORMAT, "gguf: offset of tensor '%s' at offset %llu: %llu is not a multiple of the alignment %u",
                       r->name, (unsigned long long)off_at, (unsigned long long)offset, g->alignment);
    t->offset = offset;
    return NB_OK;
}

/* parse_tensor checked the element count, so the product cannot overflow */
int64_t nb_gguf_tensor_rows(const nb_gguf_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

static int by_offset(const void *a, const void *b) {
    const nb_gguf_tensor *x = *(const nb_gguf_tensor *const *)a, *y = *(const nb_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The data section lies inside the file; each tensor inside it; no two tensors share bytes. */
static nb_status place_tensors(nb_gguf *g, uint64_t infos_end) {
    if (!nb_align_u64(infos_end, g->alignment, &g->data_offset))
        return nb_fail(NB_ERR_OVERFLOW, "gguf: data section offset overflows aligning %llu", (unsigned long long)infos_end);
    if (g->n_tensors == 0) return NB_OK;
    if (g->data_offset > g->size)
        return nb_fail(NB_ERR_FORMAT, "gguf: data section at offset %llu starts past the end of the file (%llu bytes)",
                       (unsigned long long)g->data_offset, (unsigned long long)g->size);
    uint64_t data_size = g->size - g->data_offset;
    const nb_gguf_tensor **order = malloc((size_t)g->n_tensors * sizeof *order);
    if (!order) return nb_fail(NB_ERR_NOMEM, "gguf: sorting %lld tensors", (long long)g->n_tensors);
    for (int64_t i = 0; i < g->n_tensors; i++) {
        nb_gguf_tensor *t = &g->tensor[i].pub;
        if (t->offset > data_size || t->bytes > data_size - t->offset) {
            free(order);
            return nb_fail(NB_ERR_FORMAT, "gguf: data of tensor '%s': offset %llu + %llu bytes ends past the data section (%llu bytes at file offset %llu)",
                           t->name, (unsigned long long)t->offset, (unsigned long long)t->bytes,
                           (unsigned long long)data_size, (unsigned long long)g->data_offset);
        }
        t->data = g->base + g->data_offset + t->offset;
        order[i] = t;
    }
    qsort(order, (size_t)g->n_tensors, sizeof *order, by_offset);
    for (int64_t i = 1; i < g->n_tensors; i++)
        if (order[i - 1]->offset + order[i - 1]->bytes > order[i]->offset) {
            nb_status s = nb_fail(NB_ERR_FORMAT, "gguf: data of tensor '%s' at offset %llu overlaps tensor '%s' (offset %llu, %llu bytes)",
                                  order[i]->name, (unsigned long long)order[i]->offset, order[i - 1]->name,
                                  (unsigned long long)order[i - 1]->offset, (unsigned long long)order[i - 1]->bytes);
            free(order);
            return s;
        }
    free(order);
    return NB_OK;
}

/* ---------------------------------------------------------------- entry */

static nb_status parse_all(nb_gguf *g, unsigned flags) {
    cursor c = {.base = g->base, .size = g->size};
    uint64_t n_tensors, n_kv;
    nb_status s = parse_header(&c, g, &n_tensors, &n_kv);
    if (s) return s;
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->tensor = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensor);
    if (!g->kv || !g->tensor)
        return nb_fail(NB_ERR_NOMEM, "gguf: tables for %llu keys and %llu tensors", (unsigned long long)n_kv,
                       (unsigned long long)n_tensors);
    if ((s = nb_gguf_index_init(&g->kv_index, (int64_t)n_kv))) return s;
    if ((s = nb_gguf_index_init(&g->tensor_index, (int64_t)n_tensors))) return s;
    for (uint64_t i = 0; i < n_kv; i++) {
        g->n_kv = (int64_t)i + 1; /* so close() frees what this entry allocated, even on failure */
        if ((s = parse_kv(&c, g, (int64_t)i))) return s;
    }
    if ((s = read_alignment(g))) return s;
    for (uint64_t i = 0; i < n_tensors; i++) {
        g->n_tensors = (int64_t)i + 1;
        if ((s = parse_tensor(&c, g, flags, (int64_t)i))) return s;
    }
    return place_tensors(g, c.pos);
}

nb_status nb_gguf_parse_ex(const void *data, size_t len, unsigned flags, nb_gguf **out) {
    if (!out) return nb_fail(NB_ERR_INVALID_ARG, "gguf: NULL output handle");
    *out = NULL;
    if (!data && len) return nb_fail(NB_ERR_INVALID_ARG, "gguf: NULL buffer of %zu bytes", len);
    if (flags & ~(unsigned)NB_GGUF_LIST_UNSUPPORTED)
        return nb_fail(NB_ERR_INVALID_ARG, "gguf: unknown open flags 0x%x", flags);
    nb_gguf *g = calloc(1, sizeof *g);
    if (!g) return nb_fail(NB_ERR_NOMEM, "gguf: handle");
    g->base = data;
    g->size = len;
    nb_status s = parse_all(g, flags);
    if (s) {
        nb_gguf_close(g);
        return s;
    }
    *out = g;
    return NB_OK;
}

nb_status nb_gguf_parse(const void *data, size_t len, nb_gguf **out) { return nb_gguf_parse_ex(data, len, 0, out); }

#define HUGE_SPAN ((uintptr_t)2 << 20)

/* The whole 2 MiB spans of a mapping of len bytes at map: [*lo, *hi), empty when none fits. */
static void huge_spans(const void *map, size_t len, uintptr_t *lo, uintptr_t *hi) {
    const uintptr_t b = (uintptr_t)map;
    *lo = (b + HUGE_SPAN - 1) & ~(HUGE_SPAN - 1);
    *hi = (b + len) & ~(HUGE_SPAN - 1);
    if (*hi < *lo) *hi = *lo;
}

/* FilePmdMapped of the mapping that starts at map (bytes the kernel maps with 2 MiB page-table
 * entries), read from /proc/self/smaps; -1 when that is not available. */
static int64_t pmd_mapped_bytes(const void *map) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[4096], head[32];
    const int hn = snprintf(head, sizeof head, "%lx-", (unsigned long)(uintptr_t)map);
    int64_t bytes = -1;
    int ours = 0;
    long long kb;
    while (fgets(line, sizeof line, f)) {
        if (!ours) ours = !strncmp(line, head, (size_t)hn);
        else if (sscanf(line, "FilePmdMapped: %lld kB", &kb) == 1) {
            bytes = (int64_t)kb * 1024;
            break;
        } else if (!strncmp(line, "VmFlags:", 8)) break; /* the mapping's last field: none given */
    }
    fclose(f);
    return bytes;
}

/* The share of a mapping's whole 2 MiB spans mapped in 2 MiB pages; -1 when unknown. */
static double huge_share(const void *map, size_t len) {
    uintptr_t lo, hi;
    huge_spans(map, len, &lo, &hi);
    const int64_t pmd = pmd_mapped_bytes(map);
    if (hi == lo || pmd < 0) return -1;
    return pmd >= (int64_t)(hi - lo) ? 1.0 : (double)pmd / (double)(hi - lo);
}

double nb_gguf_huge_share(const nb_gguf *g) { return g && g->map ? huge_share(g->map, g->map_len) : -1; }

/* The file read-only at addr (NULL: where the kernel likes; else MAP_FIXED, replacing what is
 * there), with a hint, failure ignored: pages the mapping faults in from disk come in 2 MiB folios
 * where the kernel and file system allow it. Pages already cached stay as they are;
 * NB_GGUF_RESIDENT (make_resident) mends those. */
static void *map_file(int fd, size_t n, void *addr) {
    void *map = mmap(addr, n, PROT_READ, MAP_PRIVATE | (addr ? MAP_FIXED : 0), fd, 0);
#ifdef MADV_HUGEPAGE
    if (map != MAP_FAILED) (void)madvise(map, n, MADV_HUGEPAGE);
#endif
    return map;
}

/* Drops the cached pages of the file's bytes [off, off + len) that no other process maps and that
 * are clean, so that they are read again on the next fault. The mapping of n bytes at m is first
 * replaced by an inaccessible one (it keeps the address; a page still mapped is never dropped).
 * The kernel's fadvise then drains every CPU's page batches before it gives up on a page, where
 * MADV_PAGEOUT drains only the calling CPU's: a page another CPU's batch held stayed in its 4 KiB
 * folio, and a run in CI left a quarter of the spans so. */
static int drop_cached(int fd, void *m, size_t n, size_t off, size_t len) {
    if (mmap(m, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
        return -1;
    (void)posix_fadvise(fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
    return 0;
}

/* NB_GGUF_RESIDENT, once the file is valid: the whole file faulted in, in 2 MiB pages where the
 * kernel allows. Pages cached before a mapping's hint (the file was just written, copied, or
 * read() by another program) sit in 4 KiB folios and stay so: decode then takes a TLB miss every
 * 4 KiB of every weight, which slows 1-thread decode (docs/BENCHMARKS.md). When under
 * 90 % of the file's whole 2 MiB spans come in 2 MiB pages, its pages are dropped from the cache
 * (drop_cached) and faulted in again, which readahead does in 2 MiB folios: one re-read, after
 * which every run finds them so. When none come so, the last two spans are tried first, so that a
 * file system without large folios does not pay a re-read each run. Each faulting-in goes through
 * a fresh mapping at the same address (the tensors' pointers stay valid): a range once mapped in
 * 4 KiB pages keeps its page table, and a fault there fills that table page by page even when the
 * folio behind it is 2 MiB. Only a failed remap is an error (the old mapping may be gone); the
 * rest is best effort. */
static nb_status make_resident(int fd, size_t n, void *map, const char *path) {
#ifdef MADV_POPULATE_READ
    uint8_t *const m = map;
    const size_t tail = 2 * HUGE_SPAN;
    uintptr_t lo, hi;
    huge_spans(m, n, &lo, &hi);
    if (map_file(fd, n, m) == MAP_FAILED) goto remap_failed;
    (void)madvise(m, n, MADV_POPULATE_READ);
    const double have = hi - lo >= 2 * tail ? huge_share(m, n) : 1; /* too small to matter */
    if (have < 0 || have >= 0.9) return NB_OK;
    if (have == 0) { /* the trial */
        const size_t off = hi - tail - (uintptr_t)m;
        if (drop_cached(fd, m, n, off, tail) || map_file(fd, n, m) == MAP_FAILED) goto remap_failed;
        (void)madvise(m + off, tail, MADV_POPULATE_READ);
        const int can = huge_share(m, n) > 0;
        if (!can) {
            (void)madvise(m, n, MADV_POPULATE_READ);
            return NB_OK;
        }
    }
    if (drop_cached(fd, m, n, 0, n) || map_file(fd, n, m) == MAP_FAILED) goto remap_failed;
    (void)madvise(m, n, MADV_POPULATE_READ);
    return NB_OK;
remap_failed:
    return nb_fail(NB_ERR_IO, "gguf: cannot map '%s' again (%zu bytes): %s", path, n, strerror(errno));
#else
    (void)fd, (void)n, (void)map, (void)path;
    return NB_OK;
#endif
}

nb_status nb_gguf_open_ex(const char *path, unsigned flags, nb_gguf **out) {
    if (!path || !out) return nb_fail(NB_ERR_INVALID_ARG, "gguf: NULL path or output handle");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nb_fail(NB_ERR_IO, "gguf: cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return nb_fail(NB_ERR_IO, "gguf: '%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return nb_fail(NB_ERR_FORMAT, "gguf: '%s' is empty (a GGUF header needs 24 bytes)", path);
    }
    size_t n = (size_t)st.st_size;
    void *map = map_file(fd, n, NULL);
    if (map == MAP_FAILED) {
        const int err = errno;
        close(fd);
        return nb_fail(NB_ERR_IO, "gguf: cannot map '%s' (%zu bytes): %s", path, n, strerror(err));
    }
    nb_gguf *g = NULL;
    nb_status s = nb_gguf_parse_ex(map, n, flags & ~(unsigned)NB_GGUF_RESIDENT, &g);
    if (s) { /* the parser's message says where in the bytes; name the file too, once */
        const char *why = nb_last_error();
        s = nb_fail(s, "gguf: '%s': %s", path, strncmp(why, "gguf: ", 6) ? why : why + 6);
    } else if (flags & NB_GGUF_RESIDENT) {
        s = make_resident(fd, n, map, path);
    }
    close(fd); /* the mapping keeps the file alive */
    if (s) {
        nb_gguf_close(g);
        munmap(map, n);
        return s;
    }
    g->map = map;
    g->map_len = n;
    *out = g;
    return NB_OK;
}

nb_status nb_gguf_open(const char *path, nb_gguf **out) { return nb_gguf_open_ex(path, 0, out); }

void nb_gguf_close(nb_gguf *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].str);
        free(g->kv[i].str_pos);
    }
    free(g->kv);
    free(g->tensor);
    nb_gguf_index_free(&g->kv_index);
    nb_gguf_index_free(&g->tensor_index);
    if (g->map) munmap(g->map, g->map_len);
    free(g);
}
