/*
 * blocks.h: the on-disk block structs of every GGUF type nibble knows, each pinned to its size,
 * and the reference codec of each. Byte diagrams and lane orders: docs/FORMATS.md.
 *
 * Codec contract (internal): x/y hold k elements, k a multiple of the block length; inputs are
 * finite (the public nb_quantize() checks that first). Reference quantizers reproduce llama.cpp's
 * `quantize_row_*_ref` byte for byte; dequantizers reproduce `dequantize_row_*` bit for bit.
 */
#ifndef NB_FORMATS_BLOCKS_H
#define NB_FORMATS_BLOCKS_H

#include <assert.h>
#include <stdint.h>

#define NB_QK4_0 32
#define NB_QK4_1 32
#define NB_QK5_0 32
#define NB_QK5_1 32
#define NB_QK8_0 32
#define NB_QK8_1 32
#define NB_QK_K 256
#define NB_K_SCALE_BYTES 12
#define NB_QK_MXFP4 32
#define NB_QK_NVFP4 64
#define NB_QK_NVFP4_SUB 16

typedef struct {
    uint16_t d;              /* fp16 scale */
    uint8_t qs[NB_QK4_0 / 2]; /* byte j: element j (low nibble), j+16 (high) */
} nb_block_q4_0;
static_assert(sizeof(nb_block_q4_0) == 18, "q4_0 block");

typedef struct {
    uint16_t d;               /* fp16 scale */
    uint16_t m;               /* fp16 minimum: element = q*d + m */
    uint8_t qs[NB_QK4_1 / 2]; /* as q4_0 */
} nb_block_q4_1;
static_assert(sizeof(nb_block_q4_1) == 20, "q4_1 block");

typedef struct {
    uint16_t d;               /* fp16 scale */
    uint8_t qh[4];            /* u32 little endian: bit j = fifth bit of element j */
    uint8_t qs[NB_QK5_0 / 2]; /* as q4_0 */
} nb_block_q5_0;
static_assert(sizeof(nb_block_q5_0) == 22, "q5_0 block");

typedef struct {
    uint16_t d;               /* fp16 scale */
    uint16_t m;               /* fp16 minimum: element = q*d + m */
    uint8_t qh[4];            /* as q5_0 */
    uint8_t qs[NB_QK5_1 / 2]; /* as q4_0 */
} nb_block_q5_1;
static_assert(sizeof(nb_block_q5_1) == 24, "q5_1 block");

typedef struct {
    uint16_t d;           /* fp16 scale */
    int8_t qs[NB_QK8_0];  /* element j */
} nb_block_q8_0;
static_assert(sizeof(nb_block_q8_0) == 34, "q8_0 block");

typedef struct {
    uint16_t d;           /* fp16 scale */
    uint16_t s;           /* fp16 of d * (sum of qs), d before its rounding to fp16 */
    int8_t qs[NB_QK8_1];  /* element j */
} nb_block_q8_1;
static_assert(sizeof(nb_block_q8_1) == 36, "q8_1 block");

typedef struct {
    uint16_t d;                     /* fp16 super-block scale of the 6-bit scales */
    uint16_t dmin;                  /* fp16 super-block scale of the 6-bit mins */
    uint8_t scales[NB_K_SCALE_BYTES]; /* 8 x (6-bit scale, 6-bit min), packed */
    uint8_t qs[NB_QK_K / 2];        /* qs[32c+l]: element 64c+l (low), 64c+32+l (high) */
} nb_block_q4_k;
static_assert(sizeof(nb_block_q4_k) == 144, "q4_K block");

typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[NB_K_SCALE_BYTES];
    uint8_t qh[NB_QK_K / 8];  /* bit 2c of qh[l]: fifth bit of element 64c+l; bit 2c+1: 64c+32+l */
    uint8_t qs[NB_QK_K / 2];  /* as q4_K */
} nb_block_q5_k;
static_assert(sizeof(nb_block_q5_k) == 176, "q5_K block");

typedef struct {
    uint8_t ql[NB_QK_K / 2];     /* low 4 bits */
    uint8_t qh[NB_QK_K / 4];     /* high 2 bits */
    int8_t scales[NB_QK_K / 16]; /* one per 16 elements */
    uint16_t d;                  /* fp16 super-block scale (last) */
} nb_block_q6_k;
static_assert(sizeof(nb_block_q6_k) == 210, "q6_K block");

typedef struct {
    float d;                      /* scale */
    int8_t qs[NB_QK_K];           /* element j */
    int16_t bsums[NB_QK_K / 16];  /* sum of qs[16k..16k+15] */
} nb_block_q8_k;
static_assert(sizeof(nb_block_q8_k) == 292, "q8_K block");

typedef struct {
    uint8_t e;                    /* E8M0 shared scale */
    uint8_t qs[NB_QK_MXFP4 / 2];  /* E2M1 codes; byte j: element j (low), j+16 (high) */
} nb_block_mxfp4;
static_assert(sizeof(nb_block_mxfp4) == 17, "mxfp4 block");

typedef struct {
    uint8_t d[NB_QK_NVFP4 / NB_QK_NVFP4_SUB]; /* UE4M3 scale per 16 elements */
    uint8_t qs[NB_QK_NVFP4 / 2];              /* byte 8s+j: element 16s+j (low), 16s+j+8 (high) */
} nb_block_nvfp4;
static_assert(sizeof(nb_block_nvfp4) == 36, "nvfp4 block");

/* Reference quantizers (llama.cpp's rules). */
void nb_f32_quantize_ref(const float *x, void *y, int64_t k);
void nb_f16_quantize_ref(const float *x, void *y, int64_t k);
void nb_bf16_quantize_ref(const float *x, void *y, int64_t k);
void nb_q4_0_quantize_ref(const float *x, void *y, int64_t k);
void nb_q4_1_quantize_ref(const float *x, void *y, int64_t k);
void nb_q5_0_quantize_ref(const float *x, void *y, int64_t k);
void nb_q5_1_quantize_ref(const float *x, void *y, int64_t k);
void nb_q8_0_quantize_ref(const float *x, void *y, int64_t k);
void nb_q8_1_quantize_ref(const float *x, void *y, int64_t k);
void nb_q4_k_quantize_ref(const float *x, void *y, int64_t k);
void nb_q5_k_quantize_ref(const float *x, void *y, int64_t k);
void nb_q6_k_quantize_ref(const float *x, void *y, int64_t k);
void nb_q8_k_quantize_ref(const float *x, void *y, int64_t k);
void nb_mxfp4_quantize_ref(const float *x, void *y, int64_t k);
void nb_nvfp4_quantize_ref(const float *x, void *y, int64_t k);

/* Dequantizers (bit-exact with llama.cpp). */
void nb_f32_dequantize(const void *x, float *y, int64_t k);
void nb_f16_dequantize(const void *x, float *y, int64_t k);
void nb_bf16_dequantize(const void *x, float *y, int64_t k);
void nb_q4_0_dequantize(const void *x, float *y, int64_t k);
void nb_q4_1_dequantize(const void *x, float *y, int64_t k);
void nb_q5_0_dequantize(const void *x, float *y, int64_t k);
void nb_q5_1_dequantize(const void *x, float *y, int64_t k);
void nb_q8_0_dequantize(const void *x, float *y, int64_t k);
void nb_q8_1_dequantize(const void *x, float *y, int64_t k);
void nb_q4_k_dequantize(const void *x, float *y, int64_t k);
void nb_q5_k_dequantize(const void *x, float *y, int64_t k);
void nb_q6_k_dequantize(const void *x, float *y, int64_t k);
void nb_q8_k_dequantize(const void *x, float *y, int64_t k);
void nb_mxfp4_dequantize(const void *x, float *y, int64_t k);
void nb_nvfp4_dequantize(const void *x, float *y, int64_t k);

/* Q4_K/Q5_K 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes. */
static inline void nb_k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

#endif
