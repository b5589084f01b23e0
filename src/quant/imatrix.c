/*
 * imatrix.c: importance statistics of weight matrices (nibble.h: nb_imatrix_*).
 *
 * For each matrix, sum over tokens of x_i^2 per input column i and the number of tokens, gathered
 * by nb_imatrix_observe, the runtime's observer (nb_ctx_set_observer), which sees every matrix
 * product's input before it runs. The importance of column i is the mean, sum/count: the expected
 * x_i^2, so sum_i imp_i * e_i^2 is the expected squared error a weight row's errors e add to its
 * output. File: llama.cpp's GGUF imatrix layout (nibble.h), so either tool reads the other's files;
 * a matrix stored for several experts (ne[1] > 1) is skipped on load, as nibble runs no experts.
 * nb_imatrix_collect is llama-imatrix's loop over a text's chunks that feeds the observer.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/context.h"
#include "nibble.h"

typedef struct entry {
    char name[NB_GGUF_MAX_NAME + 1];
    int64_t n_in;
    double *sum;    /* n_in sums of x^2 */
    float *mean;    /* n_in means, as of the last end_chunk / load */
    double count;   /* tokens seen */
} entry;

struct nb_imatrix {
    entry *e;
    int64_t n, cap;
    int64_t last;      /* the entry the previous call used: the runtime calls in a fixed cycle */
    uint32_t chunks;
    nb_status err;
    char err_name[NB_GGUF_MAX_NAME + 1];
};

nb_status nb_imatrix_create(nb_imatrix **out) {
    if (!out) return nb_fail(NB_ERR_INVALID_ARG, "imatrix: NULL output");
    *out = calloc(1, sizeof **out);
    return *out ? NB_OK : nb_fail(NB_ERR_NOMEM, "imatrix");
}

void nb_imatrix_free(nb_imatrix *im) {
    if (!im) return;
    for (int64_t i = 0; i < im->n; i++) {
        free(im->e[i].sum);
        free(im->e[i].mean);
    }
    free(im->e);
    free(im);
}

static entry *lookup(const nb_imatrix *im, const char *name) {
    for (int64_t i = 0; i < im->n; i++)
        if (!strcmp(im->e[i].name, name)) return &im->e[i];
    return NULL;
}

/* A new entry of width n_in, or NULL (allocation failure or a name too long). */
static entry *add(nb_imatrix *im, const char *name, int64_t n_in) {
    if (strlen(name) > NB_GGUF_MAX_NAME || n_in <= 0) return NULL;
    if (im->n == im->cap) {
        int64_t cap = im->cap ? im->cap * 2 : 64;
        entry *e = realloc(im->e, (size_t)cap * sizeof *e);
        if (!e) return NULL;
        im->e = e;
        im->cap = cap;
    }
    entry *e = &im->e[im->n];
    memset(e, 0, sizeof *e);
    strcpy(e->name, name);
    e->n_in = n_in;
    e->sum = calloc((size_t)n_in, sizeof *e->sum);
    e->mean = calloc((size_t)n_in, sizeof *e->mean);
    if (!e->sum || !e->mean) {
        free(e->sum);
        free(e->mean);
        return NULL;
    }
    im->n++;
    return e;
}

static void remember(nb_imatrix *im, nb_status s, const char *name) {
    if (im->err) return;
    im->err = s;
    snprintf(im->err_name, sizeof im->err_name, "%s", name);
}

void nb_imatrix_observe(void *user, const char *tensor, const float *x, int64_t n_tok, int64_t n_in) {
    nb_imatrix *im = user;
    if (!im || !tensor || !x || n_tok <= 0 || n_in <= 0 || im->err) return;
    entry *e = im->last < im->n && !strcmp(im->e[im->last].name, tensor) ? &im->e[im->last] : lookup(im, tensor);
    if (!e && !(e = add(im, tensor, n_in))) return remember(im, NB_ERR_NOMEM, tensor);
    if (e->n_in != n_in) return remember(im, NB_ERR_FORMAT, tensor);
    im->last = e - im->e;
    for (int64_t t = 0; t < n_tok; t++) {
        const float *row = x + t * n_in;
        for (int64_t i = 0; i < n_in; i++) e->sum[i] += (double)row[i] * row[i];
    }
    e->count += (double)n_tok;
}

static void refresh_means(nb_imatrix *im) {
    for (int64_t k = 0; k < im->n; k++) {
        entry *e = &im->e[k];
        for (int64_t i = 0; i < e->n_in; i++) e->mean[i] = e->count > 0 ? (float)(e->sum[i] / e->count) : 0.0f;
    }
}

void nb_imatrix_end_chunk(nb_imatrix *im) {
    if (!im) return;
    im->chunks++;
    refresh_means(im);
}

nb_status nb_imatrix_status(const nb_imatrix *im) {
    if (!im) return nb_fail(NB_ERR_INVALID_ARG, "imatrix: NULL");
    if (im->err == NB_ERR_FORMAT)
        return nb_fail(NB_ERR_FORMAT, "imatrix: tensor '%s' was observed with two different widths", im->err_name);
    if (im->err) return nb_fail(im->err, "imatrix: no memory for the statistics of '%s'", im->err_name);
    return NB_OK;
}

int64_t nb_imatrix_count(const nb_imatrix *im) { return im ? im->n : 0; }

const float *nb_imatrix_find(const nb_imatrix *im, const char *tensor, int64_t *n_in) {
    const entry *e = im && tensor ? lookup(im, tensor) : NULL;
    if (!e || e->count <= 0) return NULL;
    if (n_in) *n_in = e->n_in;
    return e->mean;
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(const entry *const *)a)->name, (*(const entry *const *)b)->name);
}

nb_status nb_imatrix_save(const nb_imatrix *im, const char *path, const char *dataset, uint32_t chunk_size) {
    if (!im || !path) return nb_fail(NB_ERR_INVALID_ARG, "imatrix save: NULL imatrix or path");
    nb_status s = nb_imatrix_status(im);
    if (s) return s;
    const entry **order = malloc((size_t)(im->n ? im->n : 1) * sizeof *order);
    float *vals = NULL;
    int64_t total = 0;
    for (int64_t i = 0; i < im->n; i++) total += im->e[i].n_in + 1;
    if (!order || !(vals = malloc((size_t)(total ? total : 1) * sizeof *vals))) {
        free(order);
        return nb_fail(NB_ERR_NOMEM, "imatrix save: %lld value%s", (long long)total, nb_plural(total));
    }
    for (int64_t i = 0; i < im->n; i++) order[i] = &im->e[i];
    qsort(order, (size_t)im->n, sizeof *order, by_name);
    nb_gguf_writer *w = NULL;
    const char *ds[1] = {dataset ? dataset : ""};
    s = nb_gguf_writer_create(&w);
    if (!s) s = nb_gguf_writer_set_string(w, "general.type", "imatrix");
    if (!s) s = nb_gguf_writer_set_array(w, "imatrix.datasets", NB_GGUF_STRING, ds, dataset ? 1 : 0);
    if (!s) s = nb_gguf_writer_set_u32(w, "imatrix.chunk_count", im->chunks);
    if (!s) s = nb_gguf_writer_set_u32(w, "imatrix.chunk_size", chunk_size);
    float *at = vals;
    for (int64_t i = 0; i < im->n && !s; i++) {
        const entry *e = order[i];
        if (e->count <= 0) continue;
        char name[NB_GGUF_MAX_NAME + 16];
        const int64_t ne_sum[2] = {e->n_in, 1}, ne_cnt[2] = {1, 1};
        for (int64_t j = 0; j < e->n_in; j++) at[j] = (float)e->sum[j];
        at[e->n_in] = (float)e->count;
        snprintf(name, sizeof name, "%s.in_sum2", e->name);
        s = nb_gguf_writer_add_tensor(w, name, NB_TYPE_F32, 2, ne_sum, at);
        snprintf(name, sizeof name, "%s.counts", e->name);
        if (!s) s = nb_gguf_writer_add_tensor(w, name, NB_TYPE_F32, 2, ne_cnt, at + e->n_in);
        at += e->n_in + 1;
    }
    if (!s) s = nb_gguf_writer_write(w, path);
    nb_gguf_writer_free(w);
    free(vals);
    free(order);
    return s;
}

nb_status nb_imatrix_load(const char *path, nb_imatrix **out) {
    if (!out) return nb_fail(NB_ERR_INVALID_ARG, "imatrix load: NULL output");
    *out = NULL;
    nb_gguf *g = NULL;
    nb_status s = nb_gguf_open(path, &g);
    if (s) return s;
    nb_imatrix *im = NULL;
    const char *type = NULL;
    if (nb_gguf_get_string(g, "general.type", &type) || strcmp(type, "imatrix"))
        s = nb_fail(NB_ERR_FORMAT, "imatrix load: '%s' has no general.type = \"imatrix\"", path);
    if (!s) s = nb_imatrix_create(&im);
    uint32_t chunks = 0;
    if (!s && !nb_gguf_get_u32(g, "imatrix.chunk_count", &chunks)) im->chunks = chunks;
    for (int64_t i = 0; i < nb_gguf_tensor_count(g) && !s; i++) {
        const nb_gguf_tensor *t = nb_gguf_tensor_at(g, i);
        size_t len = strlen(t->name);
        static const char suffix[] = ".in_sum2";
        if (len <= sizeof suffix - 1 || strcmp(t->name + len - (sizeof suffix - 1), suffix)) continue;
        char base[NB_GGUF_MAX_NAME + 1], cname[NB_GGUF_MAX_NAME + 16];
        snprintf(base, sizeof base, "%.*s", (int)(len - (sizeof suffix - 1)), t->name);
        snprintf(cname, sizeof cname, "%s.counts", base);
        const nb_gguf_tensor *c = nb_gguf_find_tensor(g, cname);
        if (t->type != NB_TYPE_F32 || !c || c->type != NB_TYPE_F32 || c->ne[0] != 1) {
            s = nb_fail(NB_ERR_FORMAT, "imatrix load: '%s' needs F32 '%s' and '%s'", path, t->name, cname);
            break;
        }
        if (t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1) continue; /* expert matrices */
        float count;
        memcpy(&count, c->data, sizeof count);
        entry *e = add(im, base, t->ne[0]);
        if (!e) {
            s = nb_fail(NB_ERR_NOMEM, "imatrix load: entry '%s'", base);
            break;
        }
        if (!isfinite(count) || count < 0) {
            s = nb_fail(NB_ERR_FORMAT, "imatrix load: '%s' = %g is not a count", cname, count);
            break;
        }
        const float *sum = t->data;
        for (int64_t j = 0; j < e->n_in; j++) {
            float v;
            memcpy(&v, sum + j, sizeof v);
            if (!isfinite(v) || v < 0) {
                s = nb_fail(NB_ERR_FORMAT, "imatrix load: '%s' element %lld = %g", t->name, (long long)j, v);
                break;
            }
            e->sum[j] = v;
        }
        e->count = count;
    }
    nb_gguf_close(g);
    if (s) {
        nb_imatrix_free(im);
        return s;
    }
    refresh_means(im);
    *out = im;
    return NB_OK;
}

nb_status nb_imatrix_collect(nb_ctx *c, nb_imatrix *im, const int32_t *tokens, int64_t n_tokens,
                             const nb_imatrix_params *p) {
    if (!c || !im || !tokens || !p) return nb_fail(NB_ERR_INVALID_ARG, "imatrix collect: NULL argument");
    if (p->n_ctx < 1 || p->n_ctx > nb_ctx_n_ctx(c) || p->n_chunks < 1 || n_tokens / p->n_ctx < p->n_chunks)
        return nb_fail(NB_ERR_INVALID_ARG, "imatrix collect: %d chunk%s of %d tokens (the context holds %d) from %lld",
                       p->n_chunks, nb_plural(p->n_chunks), p->n_ctx, nb_ctx_n_ctx(c), (long long)n_tokens);
    const nb_tokenizer *tok = nb_model_tokenizer(nb_ctx_model(c));
    const int32_t bos = nb_tokenizer_add_bos(tok) ? nb_tokenizer_bos(tok) : -1;
    const int slice = p->process_output ? NB_IMATRIX_OUTPUT_SLICE : p->n_ctx;
    int32_t *chunk = malloc((size_t)p->n_ctx * sizeof *chunk);
    float *logits = NULL;
    if (!chunk || (p->process_output &&
                   !(logits = malloc((size_t)slice * (size_t)nb_model_get_info(nb_ctx_model(c))->n_vocab * sizeof *logits)))) {
        free(chunk);
        return nb_fail(NB_ERR_NOMEM, "imatrix collect: a chunk's ids and %d logits rows", slice);
    }
    nb_status s = NB_OK;
    nb_ctx_set_observer(c, nb_imatrix_observe, im);
    for (int k = 0; k < p->n_chunks; k++) {
        memcpy(chunk, tokens + (size_t)k * (size_t)p->n_ctx, (size_t)p->n_ctx * sizeof *chunk);
        if (bos >= 0) chunk[0] = bos;
        nb_ctx_reset(c);
        for (int at = 0; at < p->n_ctx && !s; at += slice)
            s = nb_ctx_eval(c, chunk + at, p->n_ctx - at < slice ? p->n_ctx - at : slice, logits, logits != NULL);
        if (s) break;
        nb_imatrix_end_chunk(im);
        if (p->progress) p->progress(p->user, k + 1, p->n_chunks);
    }
    nb_ctx_set_observer(c, NULL, NULL);
    free(logits);
    free(chunk);
    return s;
}
