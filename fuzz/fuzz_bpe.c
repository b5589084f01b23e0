/*
 * fuzz_bpe.c: libFuzzer harness for the byte-level BPE tokenizer. The input is split in two at its
 * first 0xFF 0x00 pair: the head lists vocabulary entries (NUL-separated; an entry's first byte
 * picks what it is: a normal token, a control or user-defined token, a merge of two raw byte
 * strings cut at their first space, or a merge line taken as it is, malformed ones included), the
 * tail is the text; the input's first byte picks the pre-tokenizer. Entries join the 256 one-byte
 * tokens, so every byte has a token. When creation accepts the vocabulary, the text is tokenized
 * with every flag combination: ids in range, a count-only call agreeing, a detokenize no longer
 * than its count-only call; with only normal extra tokens, well-formed UTF-8 and a pre-tokenizer
 * that keeps spaces as they are, the ids must detokenize to the exact text. ASan/UBSan catch the rest.
 */
#include "fuzz_tok.h"

#define MAX_EXTRA 96

/* GPT-2 characters of raw bytes, as UTF-8 (2 bytes per byte at most) */
static size_t gpt2(const uint8_t *s, size_t n, char *out) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int c = s[i], k = 0;
        uint32_t cp = (uint32_t)c;
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) {
            for (int j = 0; j < c; j++) k += !((j >= 0x21 && j <= 0x7E) || (j >= 0xA1 && j <= 0xAC) || j >= 0xAE);
            cp = 256u + (uint32_t)k;
        }
        if (cp < 0x80) out[m++] = (char)cp;
        else out[m++] = (char)(0xC0 | cp >> 6), out[m++] = (char)(0x80 | (cp & 0x3F));
    }
    return m;
}

/* RFC 3629 UTF-8: no overlongs, surrogates or code points above U+10FFFF */
static int well_formed(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!len || i + len > n) return 0;
        uint32_t cp = len == 1 ? c : (uint32_t)(c & (0x7F >> len));
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += len;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const pres[] = {"default", "llama-bpe", "gpt-2", "qwen2", "qwen35", "starcoder",
                                       "smollm", "falcon", "deepseek-coder", "deepseek-llm"};
    static const int keeps_spaces[] = {0, 0, 0, 1, 1, 0, 1, 0, 1, 1}; /* no clean_spaces */
    enum { N_PRE = sizeof pres / sizeof pres[0] };
    const size_t head = vocab_end(data, size);
    static char byte_text[256][2];
    static char store[MAX_EXTRA][2 * 512 + 2];
    nb_token_text texts[256 + MAX_EXTRA], merges[MAX_EXTRA];
    int32_t types[256 + MAX_EXTRA];
    int n = 0, nm = 0, normal_only = 1;
    for (int c = 0; c < 256; c++, n++) {
        uint8_t b = (uint8_t)c;
        texts[n] = (nb_token_text){byte_text[c], gpt2(&b, 1, byte_text[c])};
        types[n] = NB_TOKEN_NORMAL;
    }
    int pre = size ? data[0] % N_PRE : 0;
    for (size_t i = size ? 1 : 0, k = 0; i < head && k < MAX_EXTRA;) {
        size_t j = i;
        while (j < head && data[j]) j++;
        size_t len = j - i;
        if (len > 1 && len <= 512) {
            uint8_t sel = data[i];
            const uint8_t *x = data + i + 1;
            char *st = store[k++];
            switch (sel % 5) {
            case 0: /* normal token, raw bytes */
                texts[n] = (nb_token_text){st, gpt2(x, len - 1, st)};
                types[n++] = NB_TOKEN_NORMAL;
                break;
            case 1: /* control or user-defined token, text as given */
                memcpy(st, x, len - 1);
                texts[n] = (nb_token_text){st, len - 1};
                types[n++] = sel & 8 ? NB_TOKEN_USER_DEFINED : NB_TOKEN_CONTROL;
                normal_only = 0;
                break;
            case 2: /* merge line as given */
                memcpy(st, x, len - 1);
                merges[nm++] = (nb_token_text){st, len - 1};
                break;
            default: { /* merge of two raw byte strings, cut at the first space after the first byte */
                const uint8_t *sp = len > 2 ? memchr(x + 1, ' ', len - 2) : NULL;
                size_t cut = sp ? (size_t)(sp - x) : (len - 1) / 2;
                size_t m = gpt2(x, cut, st);
                st[m++] = ' ';
                m += gpt2(x + cut + (sp != NULL), len - 1 - cut - (sp != NULL), st + m);
                merges[nm++] = (nb_token_text){st, m};
            }
            }
        }
        i = j + 1;
    }
    nb_vocab_desc d = {.n_tokens = n, .texts = texts, .types = types, .bos_id = 0, .eos_id = 1, .unk_id = -1,
                       .eot_id = -1, .add_bos = 1, .add_eos = size > 1 && (data[1] & 1), .model = NB_VOCAB_BPE,
                       .pre = pres[pre], .merges = merges, .n_merges = nm};
    nb_tokenizer *t = NULL;
    if (nb_tokenizer_create(&d, &t) != NB_OK) return 0;
    size_t off = head + 2 <= size ? head + 2 : size;
    const char *text = (const char *)data + off;
    const int exact = normal_only && keeps_spaces[pre] && well_formed(data + off, size - off);
    tokenize_round(t, text, size - off, 1, 0, exact);
    nb_tokenizer_free(t);
    return 0;
}
