/*
 * fuzz_tok.h: what the two tokenizer harnesses (fuzz_tokenizer.c, fuzz_bpe.c) share: the trap on a
 * failed check, where an input's vocabulary ends, and the round every accepted text goes through.
 */
#ifndef NB_FUZZ_TOK_H
#define NB_FUZZ_TOK_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nibble.h"

static void check(int ok) {
    if (!ok) __builtin_trap();
}

/* The input's head (its vocabulary entries) ends at its first 0xFF 0x00 pair, or runs to the end. */
static size_t vocab_end(const uint8_t *data, size_t size) {
    for (size_t i = 0; i + 1 < size; i++)
        if (data[i] == 0xFF && data[i + 1] == 0) return i;
    return size;
}

/* The text tokenized with every flag combination (BOS/EOS added or not, special tokens parsed or
 * not): the ids in range and a count-only call agreeing with the real one (within the public
 * bound); the ids detokenized (special tokens' text shown when `show_special`, else as they were
 * parsed) no longer than its count-only call, exactly as long with `same_len`, and the text itself
 * where `exact` and nothing was added. */
static void tokenize_round(const nb_tokenizer *t, const char *text, size_t len, int show_special, int same_len,
                           int exact) {
    size_t cap = NB_TOKENIZE_MAX_IDS(len);
    int32_t *ids = malloc(cap * sizeof *ids);
    check(ids != NULL);
    for (int flags = 0; flags < 4; flags++) {
        const int add = flags & 1, special = flags >> 1, shown = show_special || special;
        size_t n = 0, n_count = 0;
        nb_status s = nb_tokenize(t, text, len, add, special, NULL, 0, &n_count);
        check(s == NB_OK || s == NB_ERR_RANGE);
        check(n_count <= cap);
        check(nb_tokenize(t, text, len, add, special, ids, cap, &n) == NB_OK && n == n_count);
        for (size_t i = 0; i < n; i++) check(ids[i] >= 0 && ids[i] < nb_tokenizer_n_tokens(t));
        size_t need = 0, got = 0;
        s = nb_detokenize(t, ids, n, add, shown, NULL, 0, &need);
        check(s == NB_OK || s == NB_ERR_RANGE);
        char *out = malloc(need + 1);
        check(out != NULL);
        check(nb_detokenize(t, ids, n, add, shown, out, need, &got) == NB_OK && got <= need);
        check(!same_len || got == need);
        if (exact && !add) check(got == len && !memcmp(out, text, len));
        free(out);
    }
    free(ids);
}

#endif
