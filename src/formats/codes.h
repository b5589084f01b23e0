/*
 * codes.h: internal helpers of the small number codes, beyond the public ones in nibble.h.
 */
#ifndef NB_FORMATS_CODES_H
#define NB_FORMATS_CODES_H

#include <stdint.h>
#include <string.h>

/* E2M1 values doubled, as ggml keeps them (so that a code times a halved scale is exact). */
extern const int8_t nb_e2m1_doubled[16];

/* ggml's E8M0 decode to half the value (2^(e-128); e = 0,1 as f32 denormals; 0xFF is not NaN). */
float nb_e8m0_to_fp32_half(uint8_t e);
/* ggml's UE4M3 decode to half the value; 0x00 and 0x7F give 0. */
float nb_ue4m3_to_fp32_half(uint8_t c);
/* ggml's UE4M3 encoder: round half up on the first dropped mantissa bit, everything >= 256
 * saturates to 0x7E, subnormals round(x*512) capped at 7, x <= 0 gives 0. */
uint8_t nb_fp32_to_ue4m3_ggml(float x);

static inline uint32_t nb_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float nb_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#endif
