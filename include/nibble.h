/*
 * nibble.h: the public C API of nibble, an engine for 4-bit quantized language-model weights.
 *
 * Contract:
 *  - Every fallible call returns an nb_status. NB_OK is 0; anything else is an error whose text
 *    nb_strerror() gives, and nb_last_error() gives the message of the last failure on this thread,
 *    naming what was wrong, where (offset, tensor, key, index) and the limit it broke.
 *  - The library never exits, aborts or prints on bad input.
 *  - Objects are opaque handles created and destroyed in pairs (nb_gguf_open / nb_gguf_close, ...).
 *  - Sizes are int64_t element counts or size_t byte counts; rows are contiguous.
 */
#ifndef NIBBLE_H
#define NIBBLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

typedef enum nb_status {
    NB_OK = 0,
    NB_ERR_INVALID_ARG,  /* a caller passed something the API does not accept */
    NB_ERR_IO,           /* open/read/write/mmap/rename failed */
    NB_ERR_FORMAT,       /* malformed or hostile file content */
    NB_ERR_UNSUPPORTED,  /* well-formed, but a type/version/architecture nibble does not run */
    NB_ERR_OVERFLOW,     /* a size or count overflowed its checked arithmetic */
    NB_ERR_NOMEM,        /* an allocation failed */
    NB_ERR_RANGE,        /* an index or length outside its valid range */
    NB_ERR_NONFINITE,    /* NaN or Inf given where only finite values are allowed */
} nb_status;

/* Short fixed text for a status ("invalid argument", ...). Never NULL. */
const char *nb_strerror(nb_status s);

/* The message of the most recent failure on the calling thread ("" if none). */
const char *nb_last_error(void);

/* ------------------------------------------------------------ CPU and ISA */

/* Kernel sets. The best one the CPU supports is chosen once at first use; the environment
 * variable NIBBLE_ISA=ref|avx2|avx512 forces one (a forced set the CPU lacks falls back to ref
 * and nb_isa_note() says so). */
typedef enum nb_isa {
    NB_ISA_REF = 0,    /* portable scalar C: the definition of correct */
    NB_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
    NB_ISA_AVX512 = 2, /* AVX-512 F/BW/VL (+VNNI when present) */
} nb_isa;

typedef struct nb_cpu_features {
    int avx2, fma, f16c;                       /* and the OS saves YMM state */
    int avx512f, avx512bw, avx512vl, avx512vnni; /* and the OS saves ZMM/opmask state */
} nb_cpu_features;

const nb_cpu_features *nb_cpu(void);
nb_isa nb_isa_active(void);
nb_isa nb_isa_best(void);            /* the best set this CPU can run */
const char *nb_isa_name(nb_isa isa); /* "ref", "avx2", "avx512" */
const char *nb_isa_note(void);       /* why the active set was chosen, e.g. an override */

/* ------------------------------------------------------- small number codes */
/* Encoders round to nearest, ties to even, unless a function says otherwise. Rules per code in
 * docs/FORMATS.md. */

float nb_fp16_to_fp32(uint16_t h);
uint16_t nb_fp32_to_fp16(float f);   /* IEEE: overflow to Inf, NaN stays a quiet NaN */
float nb_bf16_to_fp32(uint16_t h);
uint16_t nb_fp32_to_bf16(float f);   /* RNE; NaN stays a quiet NaN */

float nb_e4m3_to_fp32(uint8_t c);    /* OCP E4M3FN: bias 7, max 448, S.1111.111 = NaN, no Inf */
uint8_t nb_fp32_to_e4m3(float f);    /* RNE; saturates at +-448; NaN -> 0x7F */
float nb_ue4m3_to_fp32(uint8_t c);   /* E4M3 without sign bit (NVFP4 block scale); 0x7F = NaN */
uint8_t nb_fp32_to_ue4m3(float f);   /* RNE; saturates at 448; negatives and zero -> 0; NaN -> 0x7F */
float nb_e8m0_to_fp32(uint8_t c);    /* 2^(c-127); 0xFF = NaN */
uint8_t nb_fp32_to_e8m0(float f);    /* nearest power of two; a tie (1.5*2^k) goes to the even code;
                                        no zero or sign: <= 0 gives 0x00; Inf 0xFE; NaN 0xFF */
float nb_e2m1_to_fp32(uint8_t c);    /* FP4 element: 0,0.5,1,1.5,2,3,4,6 and negatives; 8 = -0 */
uint8_t nb_fp32_to_e2m1(float f);    /* RNE on the E2M1 grid; saturates at +-6 (Inf too); no NaN code:
                                        NaN saturates like Inf, keeping its sign */

/* ------------------------------------------------------------- block types */

/* GGUF tensor type ids (ggml enum ggml_type values). */
typedef enum nb_type {
    NB_TYPE_F32 = 0,
    NB_TYPE_F16 = 1,
    NB_TYPE_Q4_0 = 2,
    NB_TYPE_Q5_0 = 6,
    NB_TYPE_Q8_0 = 8,
    NB_TYPE_Q4_K = 12,
    NB_TYPE_Q5_K = 13,
    NB_TYPE_Q6_K = 14,
    NB_TYPE_Q8_K = 15,
    NB_TYPE_BF16 = 30,
    NB_TYPE_MXFP4 = 39,
    NB_TYPE_NVFP4 = 40,
} nb_type;

typedef struct nb_type_info {
    const char *name;    /* "q4_K" style names as ggml prints them */
    int id;              /* GGUF id */
    int block_elems;     /* elements per block along a row */
    int block_bytes;     /* bytes per block */
    int weight_type;     /* 1 if nibble runs weights of this type (Q8_K is activations only) */
} nb_type_info;

/* Row of the type table for a GGUF id, or NULL (with nb_last_error set) for ids nibble does not
 * know or does not support. */
const nb_type_info *nb_type_get(int id);
/* Name of any ggml type id, including retired and unsupported ones ("q4_1", "iq2_xxs", ...);
 * "unknown" when the id was never assigned. */
const char *nb_type_name(int id);
/* Bytes of a row of n elements of a type; fails when n is not a multiple of the block length. */
nb_status nb_row_bytes(int id, int64_t n, size_t *bytes);

/* Reference quantizer: llama.cpp's reference rules, byte for byte. x must be finite (NaN/Inf are
 * refused with NB_ERR_NONFINITE naming the index); n a multiple of the block length. */
nb_status nb_quantize(int id, const float *x, void *dst, int64_t n);
/* Dequantizer: bit-exact with llama.cpp's. */
nb_status nb_dequantize(int id, const void *src, float *y, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
