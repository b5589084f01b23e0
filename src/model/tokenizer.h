/*
 * tokenizer.h: the SentencePiece-style (llama.cpp "SPM", tokenizer.ggml.model = "llama") tokenizer
 * behind the nb_tokenize* API, shared by tokenizer.c (vocabulary, pieces, look-ups) and
 * tokenizer_encode.c (text -> ids).
 *
 * Contract (llama.cpp's llama_tokenize on an SPM vocabulary, id for id):
 *  1. Special split. Every token of type control, unknown or user-defined is a "special" text.
 *     Specials are tried longest text first (equal lengths: lower id first); each one cuts every
 *     still-raw fragment at all its leftmost non-overlapping occurrences. User-defined tokens
 *     always take part; control and unknown ones only when parse_special is set.
 *  2. Each raw fragment (prefixed with a space when add_space_prefix is set and the fragment is the
 *     first piece or follows a special) has ' ' replaced by U+2581 and is cut into UTF-8
 *     characters by the lead byte alone (a lone continuation byte is one character; a lead byte
 *     claims its full length even over bad continuation bytes, clipped at the end).
 *  3. Merge: while some adjacent pair of symbols spells a token, merge the pair whose token has
 *     the highest score; among equal scores the leftmost pair goes first.
 *  4. A final symbol that is a token is emitted as that token; any other symbol is emitted byte by
 *     byte as the <0xXX> tokens (the unknown id when the vocabulary lacks one).
 *  5. BOS in front when the caller asks for special tokens and the vocabulary's add_bos is set;
 *     EOS behind likewise with add_eos.
 *
 * Token attributes follow llama.cpp's loader: a token whose text names an end of generation
 * ("<end_of_turn>", "</s>", "<|eot_id|>", ...) is marked EOG and treated as a control token, so
 * with parse_special off it is not split out, and its piece is hidden unless `special`.
 */
#ifndef NB_MODEL_TOKENIZER_H
#define NB_MODEL_TOKENIZER_H

#include <stdint.h>

#include "nibble.h"

/* Token attribute bits (nb_tok.attr) */
enum {
    NB_TA_HIDDEN = 1u << 0,  /* control or unknown: split only with parse_special; piece "" unless special */
    NB_TA_USER = 1u << 1,    /* user-defined: always split out; piece is the raw text */
    NB_TA_EOG = 1u << 2,     /* ends generation */
};

typedef struct nb_tok {
    const char *text;  /* into the caller's storage (the mapped GGUF); not NUL-terminated */
    uint32_t len;      /* bytes of text */
    float score;       /* merge priority: higher merges first */
    uint8_t type;      /* nb_token_type */
    uint8_t attr;      /* NB_TA_* */
} nb_tok;

/* Byte trie of the special texts, so one pass over the input finds which specials occur. */
typedef struct nb_trie_node {
    int32_t child;    /* first child node, -1 none */
    int32_t sibling;  /* next node with the same parent, -1 none */
    int32_t rank;     /* index into nb_tokenizer.special of the token ending here, -1 none */
    uint8_t byte;
} nb_trie_node;

struct nb_tokenizer {
    int32_t n;             /* tokens */
    nb_tok *tok;           /* [n] */
    int32_t *slot;         /* [mask + 1] text hash table: token id + 1, 0 = empty */
    uint64_t mask;
    int32_t byte_tok[256]; /* token for each byte fallback, -1 none */
    int32_t bos, eos, unk, eot; /* -1 when absent */
    int add_bos, add_eos, add_space_prefix;
    int32_t *special;      /* [n_special] token ids in split priority order */
    int32_t n_special;
    int32_t root[256];     /* trie node for each first byte, -1 none */
    nb_trie_node *trie;    /* [n_trie] */
    int32_t n_trie;
};

/* Token id whose text is exactly (s, len), or -1. */
int32_t nb_tok_lookup(const nb_tokenizer *t, const char *s, size_t len);

#endif
