/*
 * tokenizer.h: the tokenizers behind the nb_tokenize* API, shared by tokenizer.c (vocabulary,
 * pieces, look-ups), tokenizer_encode.c (text -> ids) and tokenizer_bpe.c (byte-level BPE).
 *
 * Contract: llama.cpp's llama_tokenize / llama_token_to_piece / llama_detokenize, id for id.
 *  1. Special split (both models). Every token of type control, unknown or user-defined is a
 *     "special" text. Specials are tried longest text first (equal lengths: lower id first); each
 *     one cuts every still-raw fragment at all its leftmost non-overlapping occurrences.
 *     User-defined tokens always take part; control and unknown ones only when parse_special is set.
 *  BOS goes in front when the caller asks for special tokens and the vocabulary's add_bos is set;
 *  EOS behind likewise with add_eos.
 *
 * SentencePiece ("SPM", tokenizer.ggml.model = "llama"), for each raw fragment:
 *  2. Prefixed with a space when add_space_prefix is set and the fragment is the first piece or
 *     follows a special, ' ' replaced by U+2581, cut into UTF-8 characters by the lead byte alone
 *     (a lone continuation byte is one character; a lead byte claims its full length even over bad
 *     continuation bytes, clipped at the end).
 *  3. Merge: while some adjacent pair of symbols spells a token, merge the pair whose token has
 *     the highest score; among equal scores the leftmost pair goes first.
 *  4. A final symbol that is a token is emitted as that token; any other symbol is emitted byte by
 *     byte as the <0xXX> tokens (the unknown id when the vocabulary lacks one).
 *
 * Byte-level BPE ("gpt2"), for each raw fragment:
 *  2. Decoded to code points as llama.cpp does: a lead byte without all its continuation bytes, a
 *     stray continuation byte and 0xF8..0xFF are each one U+FFFD; overlong forms and surrogates
 *     pass as decoded. (A 4-byte form above U+10FFFF is U+FFFD here; llama.cpp aborts on it.)
 *  3. Pre-tokenized by the patterns of tokenizer.ggml.pre (tokenizer_bpe.c), each applied to every
 *     piece the previous one left: matches are pieces, and so is the text between matches.
 *  4. Each piece, encoded again as UTF-8, starts as one symbol per byte (the byte's GPT-2
 *     character); with ignore_merges (llama3) a piece that is a token is emitted whole.
 *  5. Merge: the adjacent pair listed in tokenizer.ggml.merges with the lowest rank (index) merges
 *     first, leftmost on ties; sides are compared as text, so merges need not name tokens.
 *  6. A final symbol that is a token is emitted; otherwise each byte's one-character token, and a
 *     byte without one is dropped.
 *  Pieces: a normal token's characters map back to bytes (a character outside the mapping reads
 *  "[UNK_BYTE_0x<hex>" + the text + "]"). Detokenize applies llama.cpp's clean_spaces when the
 *  pre-tokenizer sets it (" ?" " !" " ." " ," lose the space, " ' " loses both, " 's" " 'm" " 're"
 *  " 've" lose it).
 *
 * Token attributes follow llama.cpp's loader: with general.name containing "phi-3"/"phi3" (any
 * case) every special token but <unk>, <s> and <|endoftext|> is rstrip, and "<mask>" (pre
 * jina-v2-*) or "[MASK]" (name modern-bert) is lstrip: the split drops the ASCII whitespace
 * (space, \t \n \v \f \r) after / before such a token. a token whose text names an end of generation
 * ("<end_of_turn>", "</s>", "<|eot_id|>", "<|im_end|>", "<|endoftext|>", ...) is marked EOG and
 * treated as a control token, so with parse_special off it is not split out, and its piece is
 * hidden unless `special`.
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
    NB_TA_LSTRIP = 1u << 3,  /* split out, it takes the whitespace before it (llama.cpp's lstrip) */
    NB_TA_RSTRIP = 1u << 4,  /* ... and the whitespace after it (rstrip) */
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

typedef struct nb_bpe nb_bpe;
typedef struct nb_bpe_scratch nb_bpe_scratch;

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
    int model;             /* NB_VOCAB_SPM or NB_VOCAB_BPE */
    int clean_spaces, ignore_merges; /* BPE, from the pre-tokenizer */
    nb_bpe *bpe;           /* BPE tables, NULL for SPM */
};

/* Output ids: counts every id, stores the first cap. */
typedef struct nb_ids_out {
    int32_t *ids;
    size_t cap, n;
} nb_ids_out;

static inline void nb_ids_emit(nb_ids_out *o, int32_t id) {
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

/* Token id whose text is exactly (s, len), or -1. */
int32_t nb_tok_lookup(const nb_tokenizer *t, const char *s, size_t len);
uint64_t nb_tok_hash(const char *s, size_t len); /* the text tables' hash */
/* Grows *p (per-call scratch) to hold at least `need` elements of `elem` bytes. */
nb_status nb_tok_reserve(void **p, size_t *cap, size_t need, size_t elem);

/* tokenizer_bpe.c */
/* Next code point of s[0 .. n) at *i (advanced), decoded as llama.cpp does (rule 2 above). */
uint32_t nb_utf8_next(const uint8_t *s, size_t n, size_t *i);
size_t nb_utf8_put(uint32_t cp, char *out); /* 1..4 bytes of cp <= U+10FFFF */
int nb_bpe_cp_byte(uint32_t cp);            /* the byte a GPT-2 character stands for, or -1 */
int nb_bpe_pre_find(const char *name);      /* pre-tokenizer index, -1 unknown; NULL/"" = default */
int nb_bpe_pre_add_bos(int pre);            /* llama.cpp's add_bos default for that pre-tokenizer */
/* Builds t->bpe (patterns, merges) once t's tokens and text table exist. */
nb_status nb_bpe_create(nb_tokenizer *t, const nb_vocab_desc *d);
void nb_bpe_free(nb_bpe *b);
/* Encodes one raw fragment onto o; *w is per-call scratch (NULL at first, nb_bpe_scratch_free after). */
nb_status nb_bpe_encode(const nb_tokenizer *t, const char *text, size_t len, nb_bpe_scratch **w, nb_ids_out *o);
void nb_bpe_scratch_free(nb_bpe_scratch *w);

#endif
