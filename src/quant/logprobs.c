/*
 * logprobs.c: writer and reader of the base-distribution file (layout in logprobs.h).
 * Fields are copied with memcpy, so the host must be little endian, as every target of nibble is.
 */
#include "quant/logprobs.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/checked.h"
#include "base/error.h"

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Header limits shared by writer and reader; `what` names the file in the message. */
static nb_status check_header(const nb_lprob_header *h, const char *what) {
    if (h->n_vocab < 1 || h->n_vocab > NB_VOCAB_MAX_TOKENS)
        return nb_fail(NB_ERR_FORMAT, "%s: n_vocab %d outside [1, %d]", what, h->n_vocab, NB_VOCAB_MAX_TOKENS);
    if (h->n_ctx < 4 || h->n_ctx > NB_LPROB_MAX_CTX)
        return nb_fail(NB_ERR_FORMAT, "%s: n_ctx %d outside [4, %d]", what, h->n_ctx, NB_LPROB_MAX_CTX);
    if (h->n_chunks < 1 || h->n_chunks > NB_LPROB_MAX_CHUNKS)
        return nb_fail(NB_ERR_FORMAT, "%s: n_chunks %d outside [1, %d]", what, h->n_chunks, NB_LPROB_MAX_CHUNKS);
    if (h->top_k < 1 || h->top_k > NB_LPROB_MAX_TOP_K || h->top_k > h->n_vocab)
        return nb_fail(NB_ERR_FORMAT, "%s: top_k %d outside [1, min(%d, n_vocab %d)]", what, h->top_k,
                       NB_LPROB_MAX_TOP_K, h->n_vocab);
    if (h->first != h->n_ctx / 2)
        return nb_fail(NB_ERR_FORMAT, "%s: first scored position %d is not n_ctx/2 = %d", what, h->first, h->n_ctx / 2);
    return NB_OK;
}

static nb_status alloc_file(const nb_lprob_header *h, nb_lprob_file **out) {
    nb_lprob_file *f = calloc(1, sizeof *f);
    if (!f) return nb_fail(NB_ERR_NOMEM, "logprobs: file state");
    f->h = *h;
    f->rec_bytes = 24 + 8 * (size_t)h->top_k;
    if (!(f->buf = malloc(f->rec_bytes))) {
        free(f);
        return nb_fail(NB_ERR_NOMEM, "logprobs: record buffer for K=%d", h->top_k);
    }
    *out = f;
    return NB_OK;
}

static int64_t total_records(const nb_lprob_header *h) { return (int64_t)h->n_chunks * nb_lprob_scored(h); }

/* ---------------------------------------------------------------- writer */

nb_status nb_lprob_create(const char *path, const nb_lprob_header *h, const int32_t *tokens, nb_lprob_file **out) {
    *out = NULL;
    if (!path || !h || !tokens) return nb_fail(NB_ERR_INVALID_ARG, "logprobs: NULL path, header or tokens");
    nb_status s = check_header(h, path);
    if (s) return s;
    nb_lprob_file *w;
    if ((s = alloc_file(h, &w))) return s;
    if (!(w->path = strdup(path))) {
        nb_lprob_close(w);
        return nb_fail(NB_ERR_NOMEM, "logprobs: name '%s'", path);
    }
    if ((s = nb_atomic_open(&w->out, path, "logprobs"))) {
        nb_lprob_close(w);
        return s;
    }
    uint8_t head[NB_LPROB_HEADER_BYTES] = {0};
    memcpy(head, NB_LPROB_MAGIC, 8);
    put_u32(head + 8, NB_LPROB_VERSION);
    put_u32(head + 12, (uint32_t)h->n_vocab);
    put_u32(head + 16, (uint32_t)h->n_ctx);
    put_u32(head + 20, (uint32_t)h->n_chunks);
    put_u32(head + 24, (uint32_t)h->top_k);
    put_u32(head + 28, (uint32_t)h->first);
    const size_t n_tok = (size_t)h->n_chunks * (size_t)h->n_ctx;
    if (fwrite(head, 1, sizeof head, w->out.f) != sizeof head ||
        fwrite(tokens, sizeof(int32_t), n_tok, w->out.f) != n_tok) {
        s = nb_fail(NB_ERR_IO, "logprobs: writing the header of '%s': %s", path, strerror(errno));
        nb_lprob_close(w);
        return s;
    }
    *out = w;
    return NB_OK;
}

nb_status nb_lprob_write(nb_lprob_file *w, const nb_lprob_record *r) {
    if (!w || !w->out.f || !r) return nb_fail(NB_ERR_INVALID_ARG, "logprobs: write on a NULL or read-only file");
    if (w->next >= total_records(&w->h))
        return nb_fail(NB_ERR_RANGE, "logprobs: '%s' already holds all %lld records", w->path,
                       (long long)total_records(&w->h));
    memset(w->buf, 0, w->rec_bytes);
    put_u32(w->buf, (uint32_t)r->token);
    memcpy(w->buf + 8, &r->nll, 8);
    memcpy(w->buf + 16, &r->tail, 8);
    for (int k = 0; k < w->h.top_k; k++) {
        put_u32(w->buf + 24 + 8 * (size_t)k, r->top[k].id);
        memcpy(w->buf + 28 + 8 * (size_t)k, &r->top[k].logprob, 4);
    }
    if (fwrite(w->buf, 1, w->rec_bytes, w->out.f) != w->rec_bytes)
        return nb_fail(NB_ERR_IO, "logprobs: writing record %lld of '%s': %s", (long long)w->next, w->path,
                       strerror(errno));
    w->next++;
    return NB_OK;
}

nb_status nb_lprob_finish(nb_lprob_file *w) {
    if (!w || !w->out.f) return nb_fail(NB_ERR_INVALID_ARG, "logprobs: finish on a NULL or read-only file");
    nb_status s;
    if (w->next != total_records(&w->h))
        s = nb_fail(NB_ERR_RANGE, "logprobs: '%s' got %lld of its %lld records", w->path, (long long)w->next,
                    (long long)total_records(&w->h));
    else
        s = nb_atomic_commit(&w->out, "logprobs");
    nb_lprob_close(w);
    return s;
}

/* ---------------------------------------------------------------- reader */

nb_status nb_lprob_open(const char *path, nb_lprob_file **out) {
    *out = NULL;
    if (!path) return nb_fail(NB_ERR_INVALID_ARG, "logprobs: NULL path");
    FILE *f = fopen(path, "rb");
    if (!f) return nb_fail(NB_ERR_IO, "logprobs: cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    uint8_t head[NB_LPROB_HEADER_BYTES];
    const size_t got = fread(head, 1, sizeof head, f);
    if (got < 8 || memcmp(head, NB_LPROB_MAGIC, 8) != 0) {
        fclose(f);
        return nb_fail(NB_ERR_FORMAT, "logprobs: '%s' does not start with \"%s\" (not a --save-logits file)", path,
                       NB_LPROB_MAGIC);
    }
    if (got < sizeof head || fstat(fileno(f), &st) != 0) {
        fclose(f);
        return nb_fail(NB_ERR_FORMAT, "logprobs: '%s' is shorter than its %u-byte header", path, NB_LPROB_HEADER_BYTES);
    }
    if (get_u32(head + 8) != NB_LPROB_VERSION) {
        fclose(f);
        return nb_fail(NB_ERR_UNSUPPORTED, "logprobs: '%s' has version %u; this nibble reads %u", path,
                       get_u32(head + 8), NB_LPROB_VERSION);
    }
    uint32_t raw[5];
    for (int i = 0; i < 5; i++) raw[i] = get_u32(head + 12 + 4 * i);
    nb_lprob_header h;
    for (int i = 0; i < 5; i++)
        if (raw[i] > INT32_MAX) {
            fclose(f);
            return nb_fail(NB_ERR_FORMAT, "logprobs: '%s': header field at offset %d is %u", path, 12 + 4 * i, raw[i]);
        }
    h.n_vocab = (int)raw[0], h.n_ctx = (int)raw[1], h.n_chunks = (int)raw[2], h.top_k = (int)raw[3];
    h.first = (int)raw[4];
    nb_status s = check_header(&h, path);
    if (s) {
        fclose(f);
        return s;
    }
    /* expected size: header + tokens + records, all checked */
    uint64_t n_tok, tok_bytes, recs, rec_bytes = 24 + 8 * (uint64_t)h.top_k, rec_total, size;
    if (!nb_mul_u64((uint64_t)h.n_chunks, (uint64_t)h.n_ctx, &n_tok) || !nb_mul_u64(n_tok, 4, &tok_bytes) ||
        !nb_mul_u64((uint64_t)h.n_chunks, (uint64_t)nb_lprob_scored(&h), &recs) ||
        !nb_mul_u64(recs, rec_bytes, &rec_total) || !nb_add_u64(NB_LPROB_HEADER_BYTES, tok_bytes, &size) ||
        !nb_add_u64(size, rec_total, &size)) {
        fclose(f);
        return nb_fail(NB_ERR_OVERFLOW, "logprobs: '%s': size of %d window%s of %d overflows", path, h.n_chunks,
                           nb_plural(h.n_chunks), h.n_ctx);
    }
    if ((uint64_t)st.st_size != size) {
        fclose(f);
        return nb_fail(NB_ERR_FORMAT, "logprobs: '%s' is %lld bytes; its header (%d window%s of %d, K=%d) says %llu",
                       path, (long long)st.st_size, h.n_chunks, nb_plural(h.n_chunks), h.n_ctx, h.top_k, (unsigned long long)size);
    }
    nb_lprob_file *rd;
    if ((s = alloc_file(&h, &rd))) {
        fclose(f);
        return s;
    }
    rd->f = f;
    if (!(rd->path = strdup(path)) || !(rd->tokens = malloc(tok_bytes))) {
        nb_lprob_close(rd);
        return nb_fail(NB_ERR_NOMEM, "logprobs: %llu tokens of '%s'", (unsigned long long)n_tok, path);
    }
    if (fread(rd->tokens, 4, n_tok, f) != n_tok) {
        nb_lprob_close(rd);
        return nb_fail(NB_ERR_IO, "logprobs: reading the tokens of '%s'", path);
    }
    for (uint64_t i = 0; i < n_tok; i++)
        if (rd->tokens[i] < 0 || rd->tokens[i] >= h.n_vocab) {
            s = nb_fail(NB_ERR_FORMAT, "logprobs: '%s': token %d at index %llu outside the vocabulary [0, %d)", path,
                        rd->tokens[i], (unsigned long long)i, h.n_vocab);
            nb_lprob_close(rd);
            return s;
        }
    *out = rd;
    return NB_OK;
}

nb_status nb_lprob_read(nb_lprob_file *rd, nb_lprob_record *r) {
    if (!rd || rd->out.f || !r) return nb_fail(NB_ERR_INVALID_ARG, "logprobs: read on a NULL or write-only file");
    const nb_lprob_header *h = &rd->h;
    const int64_t i = rd->next;
    if (i >= total_records(h))
        return nb_fail(NB_ERR_RANGE, "logprobs: '%s' has only %lld record%s", rd->path, (long long)total_records(h),
                      nb_plural((long long)total_records(h)));
    if (fread(rd->buf, 1, rd->rec_bytes, rd->f) != rd->rec_bytes)
        return nb_fail(NB_ERR_IO, "logprobs: reading record %lld of '%s'", (long long)i, rd->path);
    const int64_t chunk = i / nb_lprob_scored(h), pos = h->first + i % nb_lprob_scored(h);
    const int32_t expect = rd->tokens[chunk * h->n_ctx + pos + 1];
    const uint32_t token = get_u32(rd->buf);
    memcpy(&r->nll, rd->buf + 8, 8);
    memcpy(&r->tail, rd->buf + 16, 8);
    if (token != (uint32_t)expect)
        return nb_fail(NB_ERR_FORMAT, "logprobs: '%s' record %lld (window %lld, position %lld): token %u, the tokens say %d",
                       rd->path, (long long)i, (long long)chunk, (long long)pos, token, expect);
    if (!isfinite(r->nll) || r->nll < 0 || !(r->tail >= 0 && r->tail <= 1))
        return nb_fail(NB_ERR_FORMAT, "logprobs: '%s' record %lld: nll %g must be finite >= 0, tail %g in [0, 1]",
                       rd->path, (long long)i, r->nll, r->tail);
    r->token = expect;
    for (int k = 0; k < h->top_k; k++) {
        nb_lprob_entry *e = &r->top[k];
        e->id = get_u32(rd->buf + 24 + 8 * (size_t)k);
        memcpy(&e->logprob, rd->buf + 28 + 8 * (size_t)k, 4);
        const int bad_order = k > 0 && (e->logprob > e[-1].logprob || (e->logprob == e[-1].logprob && e->id <= e[-1].id));
        if (e->id >= (uint32_t)h->n_vocab || !isfinite(e->logprob) || e->logprob > 0 || bad_order)
            return nb_fail(NB_ERR_FORMAT,
                           "logprobs: '%s' record %lld entry %d: id %u (vocabulary %d), logprob %g: must be finite, "
                           "<= 0 and in descending order",
                           rd->path, (long long)i, k, e->id, h->n_vocab, (double)e->logprob);
    }
    rd->next++;
    return NB_OK;
}

void nb_lprob_close(nb_lprob_file *f) {
    if (!f) return;
    if (f->f) fclose(f->f);
    nb_atomic_abort(&f->out); /* an unfinished writer leaves no file behind */
    free(f->path);
    free(f->tokens);
    free(f->buf);
    free(f);
}
