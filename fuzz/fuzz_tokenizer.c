/*
 * fuzz_tokenizer.c: libFuzzer harness for the tokenizer. The input is split in two at its first
 * 0xFF 0x00 pair: the head lists extra vocabulary entries (NUL-separated; an entry's first byte
 * picks its type and score, so ties, specials and unused tokens all occur), the tail is the text.
 * Extra entries join a fixed base of <unk>/<s>/</s>, U+2581, a few letters and all 256 byte
 * tokens. Creation may refuse the vocabulary; when it accepts, the text is tokenized with every
 * flag combination and must give in-range ids, the same count from a count-only call, and a
 * detokenize whose length matches its count-only call. ASan/UBSan catch the rest.
 */
#include "fuzz_tok.h"

#define MAX_EXTRA 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = (const char *)data;
    const size_t head = vocab_end(data, size);
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
    tokenize_round(t, p + off, size - off, 0, 1, 0);
    nb_tokenizer_free(t);
    return 0;
}
