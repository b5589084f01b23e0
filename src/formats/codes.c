/*
 * codes.c: the small number codes (fp16, bf16, E4M3, UE4M3, E8M0, E2M1), encode and decode.
 *
 * Rounding: every encoder rounds to nearest, ties to even, on the value (not on bits of a decimal
 * string), then saturates where the format has no infinity (E4M3, UE4M3, E2M1, E8M0). fp16 and
 * bf16 follow IEEE: overflow rounds to infinity. A NaN input gives the format's quiet NaN code; a
 * decoded fp16 NaN keeps sign and payload with the quiet bit set (as any IEEE conversion does).
 * The ggml-compatible helpers at the end reproduce ggml's own (different) conventions, which the
 * GGUF block codecs need to stay bit-exact with llama.cpp.
 */
#include "formats/codes.h"

#include <math.h>

#include "nibble.h"

/* ------------------------------------------------------------------ fp16 */

float nb_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in f32 */
        float v = (float)man * 0x1p-24f;
        return nb_bits_f32(sign | nb_f32_bits(v));
    }
    if (exp == 31) return nb_bits_f32(sign | 0x7F800000u | (man ? 0x400000u | (man << 13) : 0));
    return nb_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t nb_fp32_to_fp16(float f) {
    uint32_t x = nb_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7FFFFFFF;
    if (ax > 0x7F800000) return sign | 0x7E00;     /* NaN */
    if (ax >= 0x477FF000) return sign | 0x7C00;    /* >= 65520 rounds to infinity */
    if (ax >= 0x38800000) {                        /* normal in fp16: rebias, round 13 bits away */
        uint32_t r = ax - 0x38000000;
        r += 0xFFF + ((r >> 13) & 1);
        return sign | (uint16_t)(r >> 13);
    }
    if (ax <= 0x33000000) return sign;             /* <= 2^-25 (the tie goes to even zero) */
    /* subnormal in fp16: units of 2^-24 */
    uint32_t m = (ax & 0x7FFFFF) | 0x800000;
    int shift = 126 - (int)(ax >> 23);             /* 14..24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return sign | (uint16_t)q;
}

/* ------------------------------------------------------------------ bf16 */

float nb_bf16_to_fp32(uint16_t h) { return nb_bits_f32((uint32_t)h << 16); }

uint16_t nb_fp32_to_bf16(float f) {
    uint32_t x = nb_f32_bits(f);
    if ((x & 0x7FFFFFFF) > 0x7F800000) return (uint16_t)((x >> 16) | 0x40); /* keep NaN quiet */
    return (uint16_t)((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

/* ------------------------------------------- minifloats (E4M3, UE4M3, E2M1) */

/* Magnitude a >= 0 (finite) to the nearest code of an unsigned minifloat with `mbits` mantissa
 * bits and exponent bias `bias`, ties to even, saturated at max_code. Scaling by powers of two
 * is exact in f32, so rintf (nearest-even in the default mode) sees the exact quotient. */
static uint8_t minifloat_encode(float a, int mbits, int bias, uint8_t max_code) {
    float min_normal = ldexpf(1.0f, 1 - bias);
    unsigned code;
    if (isinf(a)) return max_code;
    if (a < min_normal) {
        code = (unsigned)rintf(ldexpf(a, bias - 1 + mbits)); /* may reach the smallest normal */
    } else {
        int e;
        float fr = frexpf(a, &e); /* a = fr * 2^e, fr in [0.5, 1) */
        e -= 1;                   /* a = (2fr) * 2^e, 2fr in [1, 2) */
        float q = rintf(ldexpf(2.0f * fr - 1.0f, mbits));
        if (q >= (float)(1 << mbits)) {
            q = 0;
            e++;
        }
        long biased = (long)e + bias;
        if (biased > (max_code >> mbits)) return max_code;
        code = (unsigned)(biased << mbits) | (unsigned)q;
    }
    return code > max_code ? max_code : (uint8_t)code;
}

static float minifloat_decode(unsigned code, int mbits, int bias) {
    unsigned e = code >> mbits, m = code & ((1u << mbits) - 1);
    if (e == 0) return ldexpf((float)m, 1 - bias - mbits);
    return ldexpf(1.0f + ldexpf((float)m, -mbits), (int)e - bias);
}

float nb_e4m3_to_fp32(uint8_t c) {
    if ((c & 0x7F) == 0x7F) return (c & 0x80) ? -NAN : NAN;
    float v = minifloat_decode(c & 0x7F, 3, 7);
    return (c & 0x80) ? -v : v;
}

uint8_t nb_fp32_to_e4m3(float f) {
    uint8_t sign = signbit(f) ? 0x80 : 0;
    if (isnan(f)) return sign | 0x7F;
    return sign | minifloat_encode(fabsf(f), 3, 7, 0x7E); /* saturating: 448 is 0x7E */
}

float nb_ue4m3_to_fp32(uint8_t c) {
    if (c >= 0x7F) return NAN; /* 0x7F is NaN; codes with bit 7 set are not UE4M3 codes */
    return minifloat_decode(c, 3, 7);
}

uint8_t nb_fp32_to_ue4m3(float f) {
    if (isnan(f)) return 0x7F;
    if (!(f > 0.0f)) return 0; /* no sign bit: zero and negatives clamp to +0 */
    return minifloat_encode(f, 3, 7, 0x7E);
}

float nb_e2m1_to_fp32(uint8_t c) {
    float v = minifloat_decode(c & 7, 1, 1);
    return (c & 8) ? -v : v;
}

uint8_t nb_fp32_to_e2m1(float f) {
    if (isnan(f)) return signbit(f) ? 15 : 7; /* no NaN code: saturate, like infinity */
    return nb_e2m1_round(f, NB_E2M1_SIGNED_ZERO, NULL);
}

/* ------------------------------------------------------------------ E8M0 */

float nb_e8m0_to_fp32(uint8_t c) {
    if (c == 0xFF) return NAN;
    return ldexpf(1.0f, (int)c - 127);
}

uint8_t nb_fp32_to_e8m0(float f) {
    if (isnan(f)) return 0xFF;
    if (!(f > 0.0f)) return 0; /* no zero and no sign: the smallest code */
    if (isinf(f)) return 0xFE;
    int e;
    float fr = frexpf(f, &e); /* f = 2fr * 2^(e-1), 2fr in [1,2) */
    int k = e - 1;
    float m = 2.0f * fr;
    /* between 2^k and 2^(k+1) the midpoint is 1.5 * 2^k; ties go to the even code */
    if (m > 1.5f || (m == 1.5f && ((k + 127) & 1))) k++;
    if (k + 127 < 0) return 0;
    if (k + 127 > 0xFE) return 0xFE;
    return (uint8_t)(k + 127);
}

/* ------------------------------------------------- ggml-compatible helpers */

const int8_t nb_e2m1_doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float nb_e8m0_to_fp32_half(uint8_t e) {
    /* 2^(e-128): e = 0 and 1 are the f32 denormals 2^-128 and 2^-127; 0xFF decodes as 2^127 */
    if (e < 2) return nb_bits_f32(0x00200000u << e);
    return nb_bits_f32((uint32_t)(e - 1) << 23);
}

float nb_ue4m3_to_fp32_half(uint8_t c) {
    if (c == 0 || c == 0x7F) return 0.0f;
    return 0.5f * minifloat_decode(c & 0x7F, 3, 7);
}

uint8_t nb_fp32_to_ue4m3_ggml(float x) {
    if (!(x > 0.0f)) return 0;
    if (x > 448.0f) x = 448.0f;
    uint32_t b = nb_f32_bits(x);
    int e = (int)((b >> 23) & 0xFF) - 127 + 7; /* UE4M3 biased exponent */
    if (e <= 0) {                              /* subnormal: units of 2^-9, rounded half up */
        int m = (int)(x * 512.0f + 0.5f);
        return (uint8_t)(m > 7 ? 7 : m);
    }
    int m = (int)((b >> 20) & 7) + (int)((b >> 19) & 1); /* half up on the first dropped bit */
    if (m > 7) {
        m = 0;
        e++;
    }
    if (e >= 15) return 0x7E; /* everything from 256 up saturates to 448 */
    return (uint8_t)((e << 3) | m);
}
