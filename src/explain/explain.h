/*
 * explain.h: the arithmetic behind `nibble explain`, as values a program can check, and the words
 * that tell it (a code's rule and arithmetic, a block's lane rule and lane story). Nothing here
 * prints; cli/explain*.c lays these traces out as text and JSON, pictures.c draws them as SVG. The
 * three questions the seed articles ask of every 4-bit code are the three parts of a trace: what
 * does the code mean (its fields and decoding rule), who owns its scale (the sub-block and the
 * scale's bytes), and where does the result go (the lane, i.e. the element's position in the
 * block).
 *
 *  - Number codes: nb_code_explain() splits a raw code into sign / exponent / mantissa fields and
 *    names the rule that decodes it (normal, subnormal, zero, NaN, two's complement...). `value`
 *    is the library decoder's (src/formats/codes.c); `field_value` is recomputed here from the
 *    fields, independently, so a test can hold the explanation to the decoder.
 *  - Blocks: nb_block_explain() decodes a block's header (d, dmin, every sub-block's scale and
 *    offset); nb_lane_explain() follows one element from its payload byte (and extra high bits)
 *    to its value, which equals nb_dequantize() of the block at that element bit for bit;
 *    nb_byte_lanes() says which elements one payload byte feeds (lane orders: docs/FORMATS.md).
 *  - Fixtures: blocks built from the seed articles' worked numbers; byte 0 is 0xA5 in each, so the
 *    same byte can be handed to every decoder.
 *  - Toy dot products: nb_dot_explain() quantizes a short row at a chosen scale the way the
 *    articles do by hand and returns each lane's contribution and the signed output error.
 *  - Real tensors: nb_compare_formats() requantizes one with every 4-to-8-bit format and measures
 *    the weight and output error of each.
 *
 * Types traced: f32, f16, bf16 (one element per "block"), q4_0, q5_0, q8_0, q4_K, q5_K, q6_K,
 * mxfp4, nvfp4. Failures return nb_status with nb_last_error() naming the input and its limit.
 */
#ifndef NB_EXPLAIN_EXPLAIN_H
#define NB_EXPLAIN_EXPLAIN_H

#include <stddef.h>
#include <stdint.h>

#include "nibble.h"

/* ---------------------------------------------------------------- codes */

typedef enum nb_code_kind {
    NB_CODE_E2M1,  /* FP4 element of MXFP4/NVFP4 */
    NB_CODE_INT4,  /* signed two's complement nibble */
    NB_CODE_UINT4, /* unsigned nibble, the Q4_0/Q4_K element code before scale and offset */
    NB_CODE_E8M0,  /* MX shared scale */
    NB_CODE_E4M3,  /* OCP E4M3FN */
    NB_CODE_UE4M3, /* NVFP4 block scale: E4M3 without its sign bit */
    NB_CODE_FP16,
    NB_CODE_BF16,
    NB_CODE_FP32,
    NB_CODE_COUNT
} nb_code_kind;

typedef struct nb_code_info {
    const char *name;  /* "e2m1", ... as the CLI spells it */
    int width;         /* bits of a code */
    int sign_bits;     /* 1 when the top bit is a sign bit (int4: the -8 bit counts as sign) */
    int exp_bits, man_bits, bias; /* 0 for the integer codes */
    const char *about; /* one line: where the code is used */
} nb_code_info;

const nb_code_info *nb_code_info_get(nb_code_kind k); /* NULL out of range */
/* Kind by name (case-insensitive, "fp4" = e2m1, "f16" = fp16...), or -1. */
int nb_code_find(const char *name);

typedef struct nb_code_trace {
    nb_code_kind kind;
    uint32_t code;         /* the raw bits */
    int width;
    int sign;              /* the sign bit (0 when the code has none) */
    uint32_t exp_field;    /* stored exponent bits (E) */
    uint32_t man_field;    /* stored mantissa bits (M) */
    int exp_bits, man_bits, bias;
    const char *rule;      /* "normal", "subnormal", "zero", "NaN", "infinity", "power of two",
                              "two's complement", "unsigned", "not a code" */
    int exponent;          /* power of two applied: E - bias (normal), 1 - bias (subnormal) */
    double value;          /* the library decoder's value (NaN for NaN / not a code) */
    double field_value;    /* the same, recomputed from the fields by the rule */
    char arith[200];       /* the arithmetic in the open, e.g. "(+1) × 2^(2 − 1) × (1 + 1/2) = 3" */
} nb_code_trace;

/* Fails (NB_ERR_RANGE) when the code has bits above the format's width. */
nb_status nb_code_explain(nb_code_kind k, uint32_t code, nb_code_trace *out);

/* Reads a code as written on a command line: "0b0101" or a run of 0/1 of 4 or more digits is
 * binary, "0x5" hex, anything else decimal. *digits_width is the width the text spells (binary: its
 * digit count; hex: 4 bits a digit; decimal: the smallest of 4, 8, 16, 32 that holds the value).
 * Fails (NB_ERR_INVALID_ARG) on text that is not a code, NB_ERR_RANGE when it needs more than
 * max_width bits (a code longer than the format). */
nb_status nb_code_parse(const char *text, int max_width, uint32_t *code, int *digits_width);

/* `width` binary digits of code into buf (at least width + 1 bytes). */
void nb_code_bits(uint32_t code, int width, char *buf);

/* Shortest decimal text that reads back as the same float (as %g would, at most 9 digits),
 * with a Unicode minus when `unicode`. Returns buf. */
char *nb_fmt_float(double v, int unicode, char *buf, size_t cap);

/* --------------------------------------------------------------- blocks */

#define NB_EXPLAIN_MAX_SUB 16 /* sub-blocks with their own scale: q6_K has 16 */

typedef struct nb_block_trace {
    int type;
    const char *layout;     /* the bytes of a block in one line (the type table's) */
    int block_elems, block_bytes;
    int payload_bytes;      /* bytes of the low-bit code array (qs, or ql for q6_K) */
    int payload_offset;     /* where that array starts in the block */
    int lanes_per_byte;     /* 2 for packed nibbles, 1 for q8_0 and the float types */
    int has_d, has_dmin;
    uint16_t d_raw, dmin_raw; /* fp16 factors as stored */
    float d, dmin;
    int n_sub, sub_elems;   /* scale owners and the elements each owns */
    int sub_raw[NB_EXPLAIN_MAX_SUB];    /* the scale as stored: 6-bit sc, int8, E8M0 or UE4M3 byte */
    int sub_min_raw[NB_EXPLAIN_MAX_SUB]; /* q4_K/q5_K 6-bit min, else 0 */
    int sub_byte[NB_EXPLAIN_MAX_SUB];   /* offset in the block of the scale's (first) byte */
    float sub_scale[NB_EXPLAIN_MAX_SUB];  /* multiplier of the element code */
    float sub_offset[NB_EXPLAIN_MAX_SUB]; /* subtracted after scaling (dmin * m) */
} nb_block_trace;

typedef struct nb_lane_trace {
    int lane;           /* element index within the block */
    int payload;        /* index into the code array holding its low bits */
    int byte;           /* offset of that byte within the block */
    int nibble;         /* 0 low nibble, 1 high nibble, -1 the whole byte/element */
    uint32_t low;       /* the bits taken from that byte (4, 8, or the whole float code) */
    int hi_byte;        /* offset of the byte giving extra high bits (q5_0, q5_K, q6_K), else -1 */
    int hi_shift, hi_bits;
    uint32_t hi;        /* (block[hi_byte] >> hi_shift) & (2^hi_bits - 1) */
    uint32_t code;      /* the full element code: low | hi << 4 */
    int code_bits;
    int code_bias;      /* subtracted from an integer code: 8 (q4_0), 16 (q5_0), 32 (q6_K), else 0 */
    float element;      /* the code as a number before scaling: E2M1 value, code - bias, int8 */
    int sub;            /* the sub-block whose scale owns the lane */
    float scale, offset; /* value = element * scale - offset (as the dequantizer computes it) */
    float value;        /* nb_dequantize of the block at this lane, bit for bit */
} nb_lane_trace;

/* Fails for types nibble cannot trace (NB_ERR_UNSUPPORTED). `block` holds block_bytes bytes. */
nb_status nb_block_explain(int type, const void *block, nb_block_trace *out);
nb_status nb_lane_explain(const nb_block_trace *bt, const void *block, int lane, nb_lane_trace *out);
/* Elements fed by payload byte p (0 .. payload_bytes-1): writes 1 or 2 lanes, low nibble first. */
nb_status nb_byte_lanes(const nb_block_trace *bt, int p, int lanes[2], int *n);

/* The trace in words, numbers filled in (blocks_story.c), each into s / code, owner, arith of cap
 * bytes (320 hold every type's): how payload byte p reaches its lanes; a lane's code bits (and the
 * high bits kept elsewhere), who owns its scale, and the arithmetic of its value (times an NVFP4
 * tensor scale other than 1); and q4_K/q5_K sub-block j's 6-bit scale and min unpacked from the
 * block's 12 scale bytes B. */
void nb_byte_rule(const nb_block_trace *bt, int p, char *s, size_t cap);
void nb_lane_story(const nb_block_trace *bt, const nb_lane_trace *t, float tensor_scale, char *code, char *owner,
                   char *arith, size_t cap);
void nb_k_scale_story(const uint8_t *B, int j, char *s, size_t cap);

/* The article fixture of a type (see explain.c for each one's numbers) into out (cap bytes).
 * *tensor_scale is the NVFP4 per-tensor factor of the fixture (1 for other types). */
nb_status nb_fixture_block(int type, void *out, size_t cap, float *tensor_scale);

/* ------------------------------------------------------------ toy dots */

#define NB_DOT_MAX 64

typedef enum nb_dot_format { NB_DOT_INT4, NB_DOT_MXFP4, NB_DOT_NVFP4, NB_DOT_Q4_K } nb_dot_format;

typedef struct nb_dot_params {
    nb_dot_format format;
    double scale;        /* the reconstruction step: int4 s, MXFP4 scale (rounded to E8M0), NVFP4
                            block scale (rounded to UE4M3), Q4_K gain d*s_j */
    double tensor_scale; /* NVFP4 per-tensor factor (1 by default) */
    double offset;       /* Q4_K offset dmin*m_j (subtracted) */
    int ties_low;        /* E2M1 ties: 0 nearest even (OCP, llama.cpp), 1 lowest unsigned code
                            (the first article's lab convention) */
} nb_dot_params;

typedef struct nb_dot_trace {
    int n;
    double scale;          /* the scale actually used, after its own code rounded it */
    int scale_code;        /* E8M0 / UE4M3 byte of the scale, -1 when the scale is a plain number */
    double offset;
    int code[NB_DOT_MAX];      /* element codes (int4 as -8..7, E2M1 as 0..15, Q4_K 0..15) */
    double element[NB_DOT_MAX]; /* code's value before scaling */
    double w_hat[NB_DOT_MAX];
    int clipped[NB_DOT_MAX];   /* the weight lay beyond the codebook's reach */
    int tie[NB_DOT_MAX];       /* the weight sat exactly between two codes */
    double term[NB_DOT_MAX];   /* w_hat[i] * x[i] */
    double term_exact[NB_DOT_MAX]; /* w[i] * x[i] */
    double y, y_hat, err;      /* exact, reconstructed, y_hat - y */
} nb_dot_trace;

nb_status nb_dot_explain(const nb_dot_params *p, const double *w, const double *x, int n, nb_dot_trace *out);
/* nb_e2m1_round (formats/codes.h) as explain dot uses it: ties to even or (ties_low) to the smaller
 * magnitude, never -0; *tie set when v sat midway. */
int nb_e2m1_nearest(double v, int ties_low, int *tie);

/* ------------------------------------------------------------- compare */

#define NB_COMPARE_FORMATS 9 /* q8_0 q6_K q5_0 q4_K q4_0 mxfp4 (and round-up) nvfp4 (and two-level) */

typedef struct nb_error_hist {
    int bins[64];    /* counts of log10(|error| / rms(w)) in [-6, 0), 10 bins per decade (60 used) */
    long zero, over; /* exact zeros (and below 1e-6), and errors >= rms(w) */
} nb_error_hist;

typedef struct nb_compare_params {
    int64_t rows;    /* the first rows only; 0: all */
    const float *x;  /* n_tok activation vectors of the row length, or NULL: sampled */
    int n_tok;       /* 1..4096 */
    uint64_t seed;   /* of the sampled standard-normal activations (splitmix64, Box-Muller) */
    nb_route route;  /* of nb_matmul_route, for the file's rows and the requantized ones alike */
    int threads;     /* as nb_pool_create; the results do not depend on it */
    int hist;        /* fill each format's histogram (the rms(w) unit: the first 256 rows) */
} nb_compare_params;

typedef struct nb_compare_format {
    const char *name;  /* "q8_0" ... "mxfp4 round-up", "nvfp4 two-level" */
    int type;
    int applicable;    /* 0: the row length is not a multiple of the block; why says so */
    char why[96];
    double weight_rmse, weight_max, weight_sqnr_db; /* requantized vs the file's values */
    double output_rmse, output_max, output_sqnr_db; /* nb_matmul of both; SQNR +inf when exact */
    float tensor_scale; /* two-level: the factor decoded values are multiplied by; else 1 */
    nb_error_hist hist;
} nb_compare_format;

typedef struct nb_compare_result {
    int64_t row_length, rows, rows_total;
    int n_formats;
    nb_compare_format formats[NB_COMPARE_FORMATS];
} nb_compare_result;

/* Requantizes the tensor's first rows with each format's reference quantizer (mxfp4 round-up and
 * nvfp4 two-level: nibble's options; two-level with the compared rows' |max|) and measures the
 * weight and output error against the file's own values, a chunk of rows at a time. */
nb_status nb_compare_formats(const nb_gguf_tensor *t, const nb_compare_params *p, nb_compare_result *out);

/* ------------------------------------------------------------ pictures */
/* SVG through nb_svg (svg.h: temp file + rename, "-" for standard output). */

/* The E2M1 codebook at a scale as marks on a ruler above the uniform INT4 marks; each ruler's
 * reach shaded blue, what clips red; the n weights w (may be 0) as dots with arrows to the mark
 * each reconstructs to. */
nb_status nb_picture_ruler(const char *path, double scale, const double *w, int n, const char *title);
/* A block's payload bytes (32 around `payload`) with an arrow from each nibble to its lane,
 * coloured by the sub-block owning that lane; the chosen byte framed. NB_ERR_UNSUPPORTED for a
 * type without lanes (the float types). */
nb_status nb_picture_block(const char *path, const nb_block_trace *bt, const void *block, int payload,
                           const char *title);
/* Per applicable format of r, the histogram of log10(|weight error| / rms(w)). */
nb_status nb_picture_errors(const char *path, const nb_compare_result *r, const char *title);

#endif
