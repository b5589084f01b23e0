/*
 * logprobs.h: the file `nibble perplexity --save-logits` writes and `--kld` reads: a base model's
 * next-token distributions at every scored position, kept as the top K log-probabilities plus the
 * probability mass of everything else, so KL divergence can be computed later without the base.
 *
 * Byte layout (little endian, no padding beyond what is shown):
 *
 *   header, 64 bytes
 *     0  char[8] magic "NBLPROB1"
 *     8  u32     version = 1
 *    12  u32     n_vocab      vocabulary of the model that wrote it
 *    16  u32     n_ctx        window length in tokens (>= 4)
 *    20  u32     n_chunks     windows (>= 1)
 *    24  u32     top_k        K, 1 .. NB_LPROB_MAX_TOP_K, <= n_vocab
 *    28  u32     first        first scored position = n_ctx / 2
 *    32  u8[32]  zero
 *   tokens: i32[n_chunks * n_ctx], the text's tokens window after window, as tokenized (the BOS that
 *     replaces each window's first token during evaluation is not written here)
 *   records: n_chunks * (n_ctx - 1 - first) of them, window after window, position after position;
 *     the record of position j of window c describes the distribution that predicts
 *     tokens[c*n_ctx + j + 1]. Each record is 24 + 8*K bytes:
 *     0  u32 token         that next token (must equal the tokens array)
 *     4  u32 zero
 *     8  f64 nll           -ln p(token), from the full distribution
 *    16  f64 tail          1 - (sum of the K kept probabilities), in [0, 1]
 *    24  K x { u32 id; f32 logprob }  the K most probable ids, by log-probability descending, equal
 *                          values by ascending id; ln p(id) <= 0
 *
 * A file is written to `path.tmp.XXXXXX` and renamed over `path` only when complete. The reader
 * checks the size of the file against the header before anything is read, and every record as it
 * reads it (ids in the vocabulary and in order, finite values in range, token as the array says).
 */
#ifndef NB_QUANT_LOGPROBS_H
#define NB_QUANT_LOGPROBS_H

#include <stdint.h>
#include <stdio.h>

#include "base/atomic.h"
#include "nibble.h"

#define NB_LPROB_MAGIC "NBLPROB1"
#define NB_LPROB_VERSION 1u
#define NB_LPROB_HEADER_BYTES 64u
#define NB_LPROB_MAX_TOP_K 1024
#define NB_LPROB_MAX_CTX (1 << 20)
#define NB_LPROB_MAX_CHUNKS (1 << 24)

typedef struct nb_lprob_entry {
    uint32_t id;
    float logprob;
} nb_lprob_entry;

/* One scored position. */
typedef struct nb_lprob_record {
    int32_t token;         /* the token that followed */
    double nll;            /* -ln p(token) */
    double tail;           /* probability outside the kept K */
    nb_lprob_entry *top;   /* [top_k] most probable first */
} nb_lprob_record;

typedef struct nb_lprob_header {
    int n_vocab, n_ctx, n_chunks, top_k, first;
} nb_lprob_header;

/* Records per window: positions first .. n_ctx-2 (the last position predicts past the window). */
static inline int nb_lprob_scored(const nb_lprob_header *h) { return h->n_ctx - 1 - h->first; }

typedef struct nb_lprob_file {
    FILE *f;               /* reader */
    char *path;            /* for messages */
    nb_atomic_file out;    /* writer: out.f is open until finished or closed */
    nb_lprob_header h;
    int32_t *tokens;       /* reader: [n_chunks * n_ctx] */
    uint8_t *buf;          /* one record's bytes */
    size_t rec_bytes;
    int64_t next;          /* records read or written so far */
} nb_lprob_file;

/* Writer: creates the temporary file and writes the header and tokens (n_chunks * n_ctx of them).
 * h->first must be n_ctx / 2. */
nb_status nb_lprob_create(const char *path, const nb_lprob_header *h, const int32_t *tokens, nb_lprob_file **out);
/* Appends the next record (in file order; top holds h.top_k entries). */
nb_status nb_lprob_write(nb_lprob_file *w, const nb_lprob_record *r);
/* Checks that every record was written, syncs, closes and renames over the target. */
nb_status nb_lprob_finish(nb_lprob_file *w);

/* Reader: validates the header and size and loads the tokens. */
nb_status nb_lprob_open(const char *path, nb_lprob_file **out);
/* Reads and validates the next record into r (r->top must hold h.top_k entries). */
nb_status nb_lprob_read(nb_lprob_file *rd, nb_lprob_record *r);

/* Closes a reader, or abandons a writer (its temporary file is removed). NULL is a no-op. */
void nb_lprob_close(nb_lprob_file *f);

#endif
