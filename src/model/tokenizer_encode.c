/*
 * tokenizer_encode.c: text -> token ids: the special split and the SentencePiece merge of
 * tokenizer.h (BPE fragments go to tokenizer_bpe.c). All scratch memory is per call, so one
 * tokenizer serves any number of threads.
 */
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "base/error.h"
#include "model/tokenizer.h"

/* A piece of the input: raw text still to be encoded (id < 0), or a special token already split
 * out (id >= 0). */
typedef struct frag {
    size_t off, len;
    int32_t id;
} frag;

/* A symbol of the merge: a run of bytes of the escaped text, linked to its living neighbours. */
typedef struct sym {
    int32_t prev, next; /* -1 at the ends */
    uint32_t off, n;    /* n = 0 once merged into its left neighbour */
} sym;

/* A candidate merge of symbols left and right, whose joined text (size bytes) is a token of the
 * given score. It is stale once either side changed, which its size then no longer matches. */
typedef struct bigram {
    float score;
    int32_t left, right;
    uint32_t size;
} bigram;

typedef struct scratch {
    frag *fa, *fb;
    size_t fa_cap, fb_cap;
    char *esc;
    size_t esc_cap;
    sym *syms;
    size_t syms_cap;
    bigram *heap;
    size_t heap_cap, heap_n;
    int32_t *ranks;
    uint8_t *seen;
} scratch;

nb_status nb_tok_reserve(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return NB_OK;
    uint64_t n = *cap ? *cap : 64, bytes;
    while (n < need) n *= 2;
    if (!nb_mul_u64(n, elem, &bytes) || bytes > SIZE_MAX)
        return nb_fail(NB_ERR_OVERFLOW, "nb_tokenize: scratch of %zu elements", need);
    void *q = realloc(*p, (size_t)bytes);
    if (!q) return nb_fail(NB_ERR_NOMEM, "nb_tokenize: scratch of %llu bytes", (unsigned long long)bytes);
    *p = q;
    *cap = (size_t)n;
    return NB_OK;
}

/* ------------------------------------------------------------ step 1: special split */

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Ranks (priority order) of the specials that occur anywhere in the text and may be split out. */
static int32_t present_specials(const nb_tokenizer *t, const char *text, size_t len, int parse_special,
                                scratch *w) {
    int32_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t node = t->root[(uint8_t)text[i]];
        for (size_t j = i; node >= 0;) {
            const nb_trie_node *nd = &t->trie[node];
            if (nd->rank >= 0 && !w->seen[nd->rank] &&
                (parse_special || !(t->tok[t->special[nd->rank]].attr & NB_TA_HIDDEN))) {
                w->seen[nd->rank] = 1;
                w->ranks[n++] = nd->rank;
            }
            if (++j == len) break;
            uint8_t c = (uint8_t)text[j];
            for (node = nd->child; node >= 0 && t->trie[node].byte != c; node = t->trie[node].sibling) {
            }
        }
    }
    qsort(w->ranks, (size_t)n, sizeof *w->ranks, cmp_i32);
    return n;
}

static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Cuts every raw fragment at each leftmost non-overlapping occurrence of each present special, in
 * priority order, exactly as llama.cpp's partition does one token at a time. */
static nb_status split_specials(const nb_tokenizer *t, const char *text, size_t len, int parse_special,
                                scratch *w, size_t *n_frag) {
    nb_status s;
    if ((s = nb_tok_reserve((void **)&w->fa, &w->fa_cap, 1, sizeof(frag)))) return s;
    w->fa[0] = (frag){0, len, -1};
    size_t n = 1;
    if (t->n_special == 0 || len == 0) {
        *n_frag = len ? 1 : 0;
        return NB_OK;
    }
    w->ranks = malloc((size_t)t->n_special * sizeof *w->ranks);
    w->seen = calloc((size_t)t->n_special, 1);
    if (!w->ranks || !w->seen) return nb_fail(NB_ERR_NOMEM, "nb_tokenize: special-token scratch");
    int32_t n_present = present_specials(t, text, len, parse_special, w);
    for (int32_t r = 0; r < n_present; r++) {
        int32_t id = t->special[w->ranks[r]];
        const nb_tok *k = &t->tok[id];
        size_t m = 0;
        for (size_t f = 0; f < n; f++) {
            frag fr = w->fa[f];
            /* at most two fragments per occurrence plus the tail */
            size_t most = fr.id >= 0 ? 1 : 2 * (fr.len / k->len) + 1;
            if ((s = nb_tok_reserve((void **)&w->fb, &w->fb_cap, m + most, sizeof(frag)))) return s;
            if (fr.id >= 0) {
                w->fb[m++] = fr;
                continue;
            }
            size_t off = fr.off, end = fr.off + fr.len;
            while (off < end) {
                const char *hit = end - off >= k->len ? memmem(text + off, end - off, k->text, k->len) : NULL;
                if (!hit) {
                    w->fb[m++] = (frag){off, end - off, -1};
                    break;
                }
                size_t at = (size_t)(hit - text), left = at;
                if (k->attr & NB_TA_LSTRIP)
                    while (left > off && is_space(text[left - 1])) left--;
                if (left > off) w->fb[m++] = (frag){off, left - off, -1};
                w->fb[m++] = (frag){at, k->len, id};
                off = at + k->len;
                if (k->attr & NB_TA_RSTRIP)
                    while (off < end && is_space(text[off])) off++;
            }
        }
        frag *tf = w->fa;
        size_t tc = w->fa_cap;
        w->fa = w->fb, w->fa_cap = w->fb_cap;
        w->fb = tf, w->fb_cap = tc;
        n = m;
    }
    *n_frag = n;
    return NB_OK;
}

/* ------------------------------------------------------------ steps 2-4: merge */

/* Max-heap order: higher score first, then the leftmost pair (llama.cpp's priority queue). */
static int before(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(scratch *w, bigram b) {
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&b, &w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = b;
}

static bigram heap_pop(scratch *w) {
    bigram top = w->heap[0], last = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

static void try_pair(const nb_tokenizer *t, scratch *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const sym *l = &w->syms[left];
    uint32_t size = l->n + w->syms[right].n;
    int32_t id = nb_tok_lookup(t, w->esc + l->off, size);
    if (id >= 0) heap_push(w, (bigram){t->tok[id].score, left, right, size});
}

/* Encodes one raw fragment (with an optional leading space) onto o. */
static nb_status encode_raw(const nb_tokenizer *t, const char *text, size_t len, int space_prefix, scratch *w,
                            nb_ids_out *o) {
    /* ' ' -> U+2581 (3 bytes); len <= NB_TOKENIZE_MAX_BYTES keeps 3 * len + 3 within int32 */
    size_t n_esc = 0;
    nb_status s;
    if ((s = nb_tok_reserve((void **)&w->esc, &w->esc_cap, 3 * len + 3, 1))) return s;
    for (size_t i = 0; i < len + (size_t)!!space_prefix; i++) {
        char c = space_prefix ? (i == 0 ? ' ' : text[i - 1]) : text[i];
        if (c == ' ') {
            memcpy(w->esc + n_esc, "\xe2\x96\x81", 3);
            n_esc += 3;
        } else {
            w->esc[n_esc++] = c;
        }
    }
    if ((s = nb_tok_reserve((void **)&w->syms, &w->syms_cap, n_esc, sizeof(sym)))) return s;
    if ((s = nb_tok_reserve((void **)&w->heap, &w->heap_cap, 3 * n_esc, sizeof(bigram)))) return s;
    /* UTF-8 characters by the lead byte's high nibble, as llama.cpp: 0-B one byte, C-D two, E
     * three, F four, clipped at the end of the text */
    static const uint8_t utf8_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    int32_t n_sym = 0;
    for (size_t off = 0; off < n_esc;) {
        size_t cl = utf8_len[(uint8_t)w->esc[off] >> 4];
        if (cl > n_esc - off) cl = n_esc - off;
        w->syms[n_sym] = (sym){n_sym - 1, off + cl == n_esc ? -1 : n_sym + 1, (uint32_t)off, (uint32_t)cl};
        n_sym++;
        off += cl;
    }
    /* Every merge removes a symbol and queues at most two pairs: the heap needs < 3 * n_sym. */
    w->heap_n = 0;
    for (int32_t i = 1; i < n_sym; i++) try_pair(t, w, i - 1, i);
    while (w->heap_n) {
        bigram b = heap_pop(w);
        sym *l = &w->syms[b.left], *r = &w->syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->syms[r->next].prev = b.left;
        try_pair(t, w, l->prev, b.left);
        try_pair(t, w, b.left, l->next);
    }
    for (int32_t i = 0; i != -1 && n_sym; i = w->syms[i].next) {
        const sym *y = &w->syms[i];
        int32_t id = nb_tok_lookup(t, w->esc + y->off, y->n);
        if (id >= 0) {
            nb_ids_emit(o, id);
            continue;
        }
        for (uint32_t j = 0; j < y->n; j++) {
            uint8_t c = (uint8_t)w->esc[y->off + j];
            int32_t b = t->byte_tok[c] >= 0 ? t->byte_tok[c] : t->unk;
            if (b < 0)
                return nb_fail(NB_ERR_UNSUPPORTED, "nb_tokenize: byte 0x%02X has no token and there is no unk token",
                               c);
            nb_ids_emit(o, b);
        }
    }
    return NB_OK;
}

/* ------------------------------------------------------------ entry point */

nb_status nb_tokenize(const nb_tokenizer *t, const char *text, size_t len, int add_special,
                      int parse_special, int32_t *ids, size_t cap, size_t *n_out) {
    if (!t || !n_out || (!text && len) || (!ids && cap))
        return nb_fail(NB_ERR_INVALID_ARG, "nb_tokenize: NULL argument");
    *n_out = 0;
    if (len > NB_TOKENIZE_MAX_BYTES)
        return nb_fail(NB_ERR_RANGE, "nb_tokenize: %zu bytes of text, limit %u", len, NB_TOKENIZE_MAX_BYTES);
    scratch w = {0};
    nb_ids_out o = {ids, cap, 0};
    nb_bpe_scratch *bw = NULL;
    size_t n_frag = 0;
    nb_status s = split_specials(t, text, len, parse_special, &w, &n_frag);
    if (!s) {
        if (add_special && t->add_bos) nb_ids_emit(&o, t->bos);
        int prev_special = 1; /* the first raw fragment gets the space prefix, as after a special */
        for (size_t f = 0; f < n_frag && !s; f++) {
            const frag *fr = &w.fa[f];
            if (fr->id >= 0) {
                nb_ids_emit(&o, fr->id);
                prev_special = 1;
            } else {
                s = t->bpe ? nb_bpe_encode(t, text + fr->off, fr->len, &bw, &o)
                           : encode_raw(t, text + fr->off, fr->len, t->add_space_prefix && prev_special, &w, &o);
                prev_special = 0;
            }
        }
        if (!s && add_special && t->add_eos) nb_ids_emit(&o, t->eos);
    }
    free(w.fa), free(w.fb), free(w.esc), free(w.syms), free(w.heap), free(w.ranks), free(w.seen);
    nb_bpe_scratch_free(bw);
    if (s) return s;
    *n_out = o.n;
    if (o.n > cap) return nb_fail(NB_ERR_RANGE, "nb_tokenize: %zu token%s, buffer holds %zu", o.n, nb_plural((long long)o.n), cap);
    return NB_OK;
}
