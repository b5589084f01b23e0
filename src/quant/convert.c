/*
 * convert.c: nb_quantize_model, the driver of `nibble quantize` (contract in nibble.h, rules in
 * quant.h).
 *
 * Flow: plan the output types (recipe.c) -> copy the metadata into a writer -> lay the output
 * tensors out in a scratch file beside the output (created, unlinked at once, mapped shared) ->
 * convert each tensor into its slot, rows split over the pool: each row is decoded from the source
 * mapping into a per-thread buffer and quantized straight into the slot, so memory holds one row
 * per thread and never a whole f32 tensor -> hand the slots to the GGUF writer, which writes the
 * final file under a temporary name and renames it. The scratch file exists because the writer
 * takes whole tensors in memory; with it the model's output lives in page cache, not the heap.
 *
 * Results do not depend on the thread count: every row is converted by the same code whatever
 * chunk it falls in, and per-row error sums are added in row order.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/checked.h"
#include "base/error.h"
#include "formats/fp4.h"
#include "formats/types.h"
#include "quant/quant.h"

#define QUANT_VERSION 2       /* general.quantization_version (ggml's GGML_QNT_VERSION) */
#define SLOT_ALIGN 64         /* scratch slots: any block struct is aligned at this */
#define SLAB_ELEMS (1 << 22)  /* elements per progress step */

nb_quant_params nb_quant_default_params(void) {
    nb_quant_params p;
    memset(&p, 0, sizeof p);
    p.recipe = "q4_k_m";
    p.pure_type = -1;
    p.embed_type = -1;
    return p;
}

/* ------------------------------------------------------------- metadata */

/* Copies key kv of g into w (arrays element by element: the reader hands out values, not bytes). */
static nb_status copy_kv(const nb_gguf *g, int64_t kv, nb_gguf_writer *w) {
    const char *key = nb_gguf_kv_key(g, kv);
    nb_gguf_value v;
    nb_status s = nb_gguf_kv_value(g, kv, &v);
    if (s) return s;
    if (v.type != NB_GGUF_ARRAY) return nb_gguf_writer_set(w, key, &v);
    const nb_gguf_vtype et = v.v.arr.type;
    const uint64_t n = v.v.arr.count;
    if (et == NB_GGUF_ARRAY) return nb_fail(NB_ERR_UNSUPPORTED, "key '%s': nested arrays", key);
    static const size_t esize[] = {1, 1, 2, 2, 4, 4, 4, 1, sizeof(char *), 0, 8, 8, 8};
    if (n > SIZE_MAX / esize[et])
        return nb_fail(NB_ERR_OVERFLOW, "key '%s': %llu elements", key, (unsigned long long)n);
    const size_t bytes = (size_t)n * esize[et];
    void *arr = malloc(bytes ? bytes : 1);
    char *text = NULL;
    if (!arr)
        return nb_fail(NB_ERR_NOMEM, "key '%s': %llu element%s", key, (unsigned long long)n,
                       nb_plural((long long)n));
    if (et == NB_GGUF_STRING) { /* one NUL-terminated copy of all strings, for the writer */
        uint64_t total = 0;
        for (uint64_t i = 0; i < n && !s; i++) {
            const char *str;
            size_t len;
            if (!(s = nb_gguf_arr_str(g, kv, i, &str, &len))) total += len + 1;
        }
        if (!s && !(text = malloc(total ? (size_t)total : 1))) s = nb_fail(NB_ERR_NOMEM, "key '%s'", key);
        char *at = text;
        for (uint64_t i = 0; i < n && !s; i++) {
            const char *str;
            size_t len;
            if ((s = nb_gguf_arr_str(g, kv, i, &str, &len))) break;
            memcpy(at, str, len);
            at[len] = 0;
            ((const char **)arr)[i] = at;
            at += len + 1;
        }
    } else {
        for (uint64_t i = 0; i < n && !s; i++) {
            nb_gguf_value e;
            if ((s = nb_gguf_arr_value(g, kv, i, &e))) break;
            uint8_t *dst = (uint8_t *)arr + i * esize[et];
            uint8_t b8 = (uint8_t)e.v.u;
            uint16_t b16 = (uint16_t)(et == NB_GGUF_U16 ? e.v.u : (uint64_t)e.v.i);
            uint32_t b32 = (uint32_t)(et == NB_GGUF_U32 ? e.v.u : (uint64_t)e.v.i);
            float f = (float)e.v.f;
            switch (et) {
            case NB_GGUF_U8: case NB_GGUF_BOOL: memcpy(dst, &b8, 1); break;
            case NB_GGUF_I8: b8 = (uint8_t)e.v.i; memcpy(dst, &b8, 1); break;
            case NB_GGUF_U16: case NB_GGUF_I16: memcpy(dst, &b16, 2); break;
            case NB_GGUF_U32: case NB_GGUF_I32: memcpy(dst, &b32, 4); break;
            case NB_GGUF_F32: memcpy(dst, &f, 4); break;
            case NB_GGUF_U64: memcpy(dst, &e.v.u, 8); break;
            case NB_GGUF_I64: memcpy(dst, &e.v.i, 8); break;
            case NB_GGUF_F64: memcpy(dst, &e.v.f, 8); break;
            default: break;
            }
        }
    }
    if (!s) s = nb_gguf_writer_set_array(w, key, et, arr, n);
    free(text);
    free(arr);
    return s;
}

/* Every key in file order, then the two llama-quantize sets last (it removes and re-adds them). */
static nb_status copy_metadata(const nb_gguf *g, nb_gguf_writer *w, int ftype) {
    nb_status s = NB_OK;
    for (int64_t kv = 0; kv < nb_gguf_kv_count(g) && !s; kv++) {
        const char *key = nb_gguf_kv_key(g, kv);
        if (!strcmp(key, "general.quantization_version") || !strcmp(key, "general.file_type")) continue;
        s = copy_kv(g, kv, w);
    }
    if (!s) s = nb_gguf_writer_set_u32(w, "general.quantization_version", QUANT_VERSION);
    if (!s && ftype >= 0) s = nb_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype);
    return s;
}

/* ------------------------------------------------------------ conversion */

typedef struct job {
    const nb_gguf_tensor *t;
    const nb_quant_params *p;
    int type;
    const float *imp;          /* importance per column (best mode), or NULL */
    float S;                   /* two-level encode scale, 0 for none */
    size_t src_row, dst_row;
    uint8_t *dst;
    int64_t row0;              /* first row of this slab */
    double *sse, *sx2;         /* per row, when measuring */
    float *amax;               /* per row, for the two-level pre-pass */
    _Atomic int64_t bad_row;   /* lowest row that failed + 1 (0: none) */
    _Atomic int bad_kind;      /* 1 non-finite, 2 out of memory */
} job;

static void mark_bad(job *j, int64_t row, int kind) {
    int64_t cur = atomic_load(&j->bad_row);
    while ((cur == 0 || row + 1 < cur) && !atomic_compare_exchange_weak(&j->bad_row, &cur, row + 1)) {
    }
    atomic_store(&j->bad_kind, kind);
}

static void amax_rows(void *ctx, int64_t b, int64_t e) {
    job *j = ctx;
    const int64_t n = j->t->ne[0];
    float *x = malloc((size_t)n * sizeof *x);
    if (!x) return mark_bad(j, j->row0 + b, 2);
    for (int64_t r = j->row0 + b; r < j->row0 + e; r++) {
        if (!nb_quant_read_row(j->t, r, x)) mark_bad(j, r, 1);
        float m = 0;
        for (int64_t i = 0; i < n; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
        j->amax[r] = m;
    }
    free(x);
}

static void convert_rows(void *ctx, int64_t b, int64_t e) {
    job *j = ctx;
    const int64_t n = j->t->ne[0];
    float *x = malloc((size_t)n * 2 * sizeof *x);
    if (!x) return mark_bad(j, j->row0 + b, 2);
    for (int64_t r = j->row0 + b; r < j->row0 + e; r++) {
        if (!nb_quant_read_row(j->t, r, x)) {
            mark_bad(j, r, 1);
            break;
        }
        uint8_t *q = j->dst + (size_t)r * j->dst_row;
        nb_quant_row(j->type, j->p->mode, x, j->imp, q, n, j->S);
        if (j->sse) {
            j->sse[r] = nb_quant_row_error(j->type, q, x, NULL, j->S > 0 ? 1.0f / j->S : 1.0f, x + n, n);
            double s2 = 0;
            for (int64_t i = 0; i < n; i++) s2 += (double)x[i] * x[i];
            j->sx2[r] = s2;
        }
    }
    free(x);
}

/* Runs fn over the rows in slabs, reporting progress after each. */
static nb_status run_rows(nb_pool *pool, job *j, nb_pool_fn fn, int64_t rows, uint64_t *done, uint64_t total,
                          const nb_quant_params *p, int count_progress) {
    const int64_t slab = SLAB_ELEMS / j->t->ne[0] > 0 ? SLAB_ELEMS / j->t->ne[0] : 1;
    for (int64_t r = 0; r < rows; r += slab) {
        j->row0 = r;
        nb_status s = nb_pool_for(pool, rows - r < slab ? rows - r : slab, 1, fn, j);
        if (s) return s;
        if (atomic_load(&j->bad_row)) break;
        if (count_progress) {
            *done += (uint64_t)(rows - r < slab ? rows - r : slab) * j->src_row;
            if (p->progress) p->progress(p->user, *done, total);
        }
    }
    int64_t bad = atomic_load(&j->bad_row);
    if (!bad) return NB_OK;
    if (atomic_load(&j->bad_kind) == 2)
        return nb_fail(NB_ERR_NOMEM, "tensor '%s': row buffer of %lld float%s", j->t->name,
                       (long long)j->t->ne[0], nb_plural(j->t->ne[0]));
    return nb_fail(NB_ERR_NONFINITE, "tensor '%s': row %lld holds NaN or Inf", j->t->name,
                   (long long)(bad - 1));
}

/* Converts one tensor into dst (and *scale_out for two-level). */
static nb_status convert_tensor(nb_pool *pool, const nb_quant_params *p, const nb_qplan *pl, uint8_t *dst,
                                float *scale_out, uint64_t *done, uint64_t total, nb_quant_report *rep) {
    const nb_gguf_tensor *t = pl->t;
    job j = {.t = t, .p = p, .type = pl->type, .dst = dst};
    const int64_t rows = nb_gguf_tensor_rows(t);
    j.src_row = nb_quant_src_row_bytes(t);
    nb_status s = nb_row_bytes(pl->type, t->ne[0], &j.dst_row);
    if (s) return s;
    if (p->imatrix && p->mode == NB_QMODE_BEST) {
        int64_t n_in = 0;
        const float *imp = nb_imatrix_find(p->imatrix, t->name, &n_in);
        if (imp && n_in == t->ne[0]) j.imp = imp;
    }
    if (p->measure && (!(j.sse = calloc((size_t)rows, sizeof *j.sse)) || !(j.sx2 = calloc((size_t)rows, sizeof *j.sx2)))) {
        free(j.sse);
        return nb_fail(NB_ERR_NOMEM, "error sums of %lld row%s", (long long)rows, nb_plural(rows));
    }
    if (pl->two_level) { /* one encode scale for the whole tensor: its absolute maximum first */
        if (!(j.amax = calloc((size_t)rows, sizeof *j.amax)))
            s = nb_fail(NB_ERR_NOMEM, "row maxima of %lld row%s", (long long)rows, nb_plural(rows));
        if (!s) s = run_rows(pool, &j, amax_rows, rows, done, total, p, 0);
        float amax = 0;
        for (int64_t r = 0; !s && r < rows; r++) amax = j.amax[r] > amax ? j.amax[r] : amax;
        if (!s && !(s = nb_nvfp4_2level_scale(amax, &j.S))) *scale_out = 1.0f / j.S;
    }
    if (!s) s = run_rows(pool, &j, convert_rows, rows, done, total, p, 1);
    if (!s && j.sse) {
        rep->measured = 1;
        for (int64_t r = 0; r < rows; r++) {
            rep->sse += j.sse[r];
            rep->sum_x2 += j.sx2[r];
        }
    }
    free(j.sse);
    free(j.sx2);
    free(j.amax);
    return s;
}

/* ---------------------------------------------------------------- driver */

typedef struct scratch {
    uint8_t *map;
    size_t size;
} scratch;

/* A file of `size` bytes beside `out`, unlinked at once (the kernel frees it on exit), mapped. */
static nb_status scratch_open(const char *out, size_t size, scratch *sc) {
    size_t n = strlen(out);
    char *name = malloc(n + sizeof ".scratch.XXXXXX");
    if (!name) return nb_fail(NB_ERR_NOMEM, "scratch name");
    memcpy(name, out, n);
    memcpy(name + n, ".scratch.XXXXXX", sizeof ".scratch.XXXXXX");
    int fd = mkstemp(name);
    if (fd < 0) {
        nb_status s = nb_fail(NB_ERR_IO, "cannot create a scratch file beside '%s': %s", out, strerror(errno));
        free(name);
        return s;
    }
    unlink(name);
    free(name);
    sc->size = size ? size : 1;
    if (ftruncate(fd, (off_t)sc->size) != 0) {
        nb_status s = nb_fail(NB_ERR_IO, "scratch file of %zu bytes beside '%s': %s", sc->size, out,
                              strerror(errno));
        close(fd);
        return s;
    }
    void *m = mmap(NULL, sc->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return nb_fail(NB_ERR_IO, "mapping %zu scratch bytes: %s", sc->size, strerror(errno));
    sc->map = m;
    return NB_OK;
}

/* Output bytes of each planned tensor and where its slot starts in the scratch file. */
static nb_status layout(const nb_qplan *plan, int64_t n, uint64_t *off, uint64_t *bytes, uint64_t *total) {
    uint64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        size_t row;
        nb_status s = nb_row_bytes(plan[i].type, plan[i].t->ne[0], &row);
        /* its message names the type and the row length; only the tensor is added */
        if (s) return nb_fail(s, "tensor '%s': %s", plan[i].t->name, nb_last_error());
        if (!nb_mul_u64(row, (uint64_t)nb_gguf_tensor_rows(plan[i].t), &bytes[i]) || !nb_align_u64(at, SLOT_ALIGN, &at))
            return nb_fail(NB_ERR_OVERFLOW, "tensor '%s' size", plan[i].t->name);
        off[i] = at;
        /* a two-level tensor's 4-byte scale follows it in its own aligned slot */
        uint64_t extra = plan[i].two_level ? SLOT_ALIGN + 4 : 0;
        if (!nb_add_u64(at, bytes[i] + extra, &at)) return nb_fail(NB_ERR_OVERFLOW, "output size");
    }
    if (at > SIZE_MAX) return nb_fail(NB_ERR_OVERFLOW, "output of %llu bytes", (unsigned long long)at);
    *total = at;
    return NB_OK;
}

static nb_status add_scale_tensor(nb_gguf_writer *w, const char *name, const float *scale) {
    char sname[NB_GGUF_MAX_NAME + 8];
    if (!nb_gguf_scale_name(name, sname, sizeof sname))
        return nb_fail(NB_ERR_INVALID_ARG, "two-level tensor '%s' does not end in .weight", name);
    const int64_t ne[1] = {1};
    return nb_gguf_writer_add_tensor(w, sname, NB_TYPE_F32, 1, ne, scale);
}

static nb_status quantize_open(const nb_gguf *g, const char *out, const nb_quant_params *p, nb_pool *pool) {
    nb_qplan *plan = NULL;
    int ftype = -1;
    nb_status s = nb_output_check(out, "gguf writer"); /* before the work, not after it */
    if (!s) s = nb_quant_plan(g, p, &plan, &ftype);
    if (s) return s;
    const int64_t n = nb_gguf_tensor_count(g);
    uint64_t *off = calloc(n ? (size_t)n : 1, sizeof *off), *bytes = calloc(n ? (size_t)n : 1, sizeof *bytes);
    nb_gguf_writer *w = NULL;
    scratch sc = {0};
    uint64_t total_out = 0, total_src = 0, done = 0;
    if (!off || !bytes) s = nb_fail(NB_ERR_NOMEM, "layout of %lld tensor%s", (long long)n, nb_plural(n));
    if (!s) s = layout(plan, n, off, bytes, &total_out);
    if (!s) s = nb_gguf_writer_create(&w);
    if (!s) s = copy_metadata(g, w, ftype);
    if (!s) s = scratch_open(out, (size_t)total_out, &sc);
    for (int64_t i = 0; i < n; i++) total_src += plan[i].t->bytes;
    for (int64_t i = 0; i < n && !s; i++) {
        const nb_qplan *pl = &plan[i];
        uint8_t *slot = sc.map + off[i];
        float *scale = (float *)(sc.map + off[i] + ((bytes[i] + SLOT_ALIGN - 1) / SLOT_ALIGN) * SLOT_ALIGN);
        nb_quant_report rep = {.name = pl->t->name, .src_type = pl->t->type, .dst_type = pl->type,
                               .n_elem = pl->t->ne[0] * nb_gguf_tensor_rows(pl->t), .bytes = bytes[i]};
        if (pl->type == pl->t->type && !pl->two_level) { /* llama.cpp copies a tensor already in its type */
            memcpy(slot, pl->t->data, (size_t)bytes[i]);
            done += pl->t->bytes;
            if (p->progress) p->progress(p->user, done, total_src);
        } else {
            s = convert_tensor(pool, p, pl, slot, scale, &done, total_src, &rep);
        }
        if (!s) s = nb_gguf_writer_add_tensor(w, pl->t->name, pl->type, pl->t->n_dims, pl->t->ne, slot);
        if (!s && pl->two_level) s = add_scale_tensor(w, pl->t->name, scale);
        if (!s && p->on_tensor) p->on_tensor(p->user, &rep);
    }
    if (!s) s = nb_gguf_writer_write(w, out);
    if (sc.map) munmap(sc.map, sc.size);
    nb_gguf_writer_free(w);
    free(off);
    free(bytes);
    free(plan);
    return s;
}

nb_status nb_quantize_model(const char *in_path, const char *out_path, const nb_quant_params *p) {
    if (!in_path || !out_path || !p) return nb_fail(NB_ERR_INVALID_ARG, "nb_quantize_model: NULL path or params");
    nb_gguf *g = NULL;
    nb_status s = nb_gguf_open(in_path, &g);
    if (s) return s;
    nb_pool *pool = p->pool, *own = NULL;
    if (!pool && !(s = nb_pool_create(p->n_threads, &own))) pool = own;
    if (!s) s = quantize_open(g, out_path, p, pool);
    nb_pool_destroy(own);
    nb_gguf_close(g);
    return s;
}
