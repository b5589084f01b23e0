/*
 * float.c: the unblocked float types F32, F16 and BF16 (block length 1).
 *
 * Layout: one little-endian value per element: f32 (4 bytes), IEEE binary16 (2 bytes), or bf16,
 * the top half of an f32 (2 bytes).
 *
 * Rules (llama.cpp's): F16 is IEEE round-to-nearest-even with overflow to Inf; BF16 rounds to
 * nearest even on the dropped 16 bits and turns a NaN into a quiet NaN by setting bit 6 of the kept
 * half (ggml_compute_fp32_to_bf16), which nb_fp32_to_bf16() implements. Decoding is exact.
 */
#include <string.h>

#include "formats/blocks.h"
#include "nibble.h"

void nb_f32_quantize_ref(const float *x, void *y, int64_t k) {
    memcpy(y, x, (size_t)k * sizeof(float));
}

void nb_f32_dequantize(const void *x, float *y, int64_t k) {
    memcpy(y, x, (size_t)k * sizeof(float));
}

/* Halves are stored through memcpy: a row of F16 inside a GGUF mapping need not be 2-aligned. */
static void halves_encode(const float *x, void *y, int64_t k, uint16_t (*enc)(float)) {
    uint8_t *out = y;
    for (int64_t i = 0; i < k; i++) {
        uint16_t h = enc(x[i]);
        memcpy(out + 2 * i, &h, 2);
    }
}

static void halves_decode(const void *x, float *y, int64_t k, float (*dec)(uint16_t)) {
    const uint8_t *in = x;
    for (int64_t i = 0; i < k; i++) {
        uint16_t h;
        memcpy(&h, in + 2 * i, 2);
        y[i] = dec(h);
    }
}

void nb_f16_quantize_ref(const float *x, void *y, int64_t k) { halves_encode(x, y, k, nb_fp32_to_fp16); }
void nb_f16_dequantize(const void *x, float *y, int64_t k) { halves_decode(x, y, k, nb_fp16_to_fp32); }
void nb_bf16_quantize_ref(const float *x, void *y, int64_t k) { halves_encode(x, y, k, nb_fp32_to_bf16); }
void nb_bf16_dequantize(const void *x, float *y, int64_t k) { halves_decode(x, y, k, nb_bf16_to_fp32); }
