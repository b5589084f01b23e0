/*
 * fuzz_tokenizer.c: libFuzzer harness for the tokenizer. The input is split in two at its first
 * 0xFF 0x00 pair: the head lists extra vocabulary entries (NUL-separated; an entry's first byte
 * picks its type and score, so ties, specials and unused tokens all occur), the tail is the text.
 * Extra entries join a fixed base of <unk>/<s>/</s>, U+2581, a few letters and all 256 byte
 * tokens. Creation may refuse the vocabulary; when it accepts, the text is tokenized with every
 * flag combination and must give in-range ids, the same count from a count-only call, and a
 * detokenize whose length matches its count-only call. ASan/UBSan catch the rest.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nibble.h"

#define MAX_EXTRA 64

static void check(int ok) {
    if (!ok) __builtin_trap();
}

static void run_text(const nb_tokenizer *t, const char *text, size_t len) {
    size_t cap = NB_TOKENIZE_MAX_IDS(len); /* the public bound, checked below */
    int32_t *ids = malloc(cap * sizeof *ids);
    check(ids != NULL);
    for (int flags = 0; flags < 4; flags++) {
        int add = flags & 1, special = flags >> 1;
        size_t n = 0, n_count = 0;
        nb_status s = nb_tokenize(t, text, len, add, special, NULL, 0, &n_count);
        check(s == NB_OK || s == NB_ERR_RANGE);
        check(n_count <= cap);
        check(nb_tokenize(t, text, len, add, special, ids, cap, &n) == NB_OK && n == n_count);
        for (size_t i = 0; i < n; i++) check(ids[i] >= 0 && ids[i] < nb_tokenizer_n_tokens(t));
        size_t need = 0, got = 0;
        s = nb_detokenize(t, ids, n, add, special, NULL, 0, &need);
        check(s == NB_OK || s == NB_ERR_RANGE);
        char *out = malloc(need + 1);
        check(out != NULL);
        check(nb_detokenize(t, ids, n, add, special, out, need, &got) == NB_OK && got == need);
        free(out);
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = (const char *)data;
    size_t head = size;
    for (size_t i = 0; i + 1 < size; i++)
        if (data[i] == 0xFF && data[i + 1] == 0) {
            head = i;
            break;
        }
    static const char *const base[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "ab", ("\xe2\x96\x81" "a")};
    enum { N_BASE = sizeof base / sizeof base[0] };
    static char byte_names[256][7];
    nb_token_text texts[N_BASE + 256 + MAX_EXTRA];
    float scores[N_BASE + 256 + MAX_EXTRA];
    int32_t types[N_BASE + 256 + MAX_EXTRA];
    int n = 0;
    for (int i = 0; i < N_BASE; i++, n++) {
        texts[n] = (nb_token_text){base[i], strlen(base[i])};
        scores[n] = -(float)i;
        types[n] = i == 0 ? NB_TOKEN_UNKNOWN : i < 3 ? NB_TOKEN_CONTROL : NB_TOKEN_NORMAL;
    }
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++, n++) {
        char *s = byte_names[b];
        memcpy(s, "<0x", 3);
        s[3] = hex[b >> 4], s[4] = hex[b & 15], s[5] = '>', s[6] = 0;
        texts[n] = (nb_token_text){s, 6};
        scores[n] = 0;
        types[n] = NB_TOKEN_BYTE;
    }
    /* extra entries: first byte = type/score selector, the rest = text */
    static const int32_t pick[] = {NB_TOKEN_NORMAL, NB_TOKEN_NORMAL, NB_TOKEN_NORMAL, NB_TOKEN_CONTROL,
                                   NB_TOKEN_USER_DEFINED, NB_TOKEN_UNUSED, NB_TOKEN_UNKNOWN, NB_TOKEN_UNDEFINED};
    for (size_t i = 0; i < head && n < N_BASE + 256 + MAX_EXTRA;) {
        size_t j = i;
        while (j < head && data[j]) j++;
        if (j > i + 1) {
            uint8_t sel = data[i];
            texts[n] = (nb_token_text){p + i + 1, j - i - 1};
            scores[n] = -(float)(sel >> 3 & 7);
            types[n] = pick[sel & 7];
            n++;
        }
        i = j + 1;
    }
    nb_vocab_desc d = {.n_tokens = n, .texts = texts, .scores = scores, .types = types, .bos_id = 1,
                       .eos_id = 2, .unk_id = 0, .eot_id = -1, .add_bos = 1,
                       .add_eos = size && (data[0] & 0x80), .add_space_prefix = size && (data[0] & 0x40)};
    nb_tokenizer *t = NULL;
    if (nb_tokenizer_create(&d, &t) != NB_OK) return 0;
    size_t off = head + 2 <= size ? head + 2 : size;
    run_text(t, p + off, size - off);
    nb_tokenizer_free(t);
    return 0;
}
