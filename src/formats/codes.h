/*
 * codes.h: internal helpers of the small number codes, beyond the public ones in nibble.h.
 */
#ifndef NB_FORMATS_CODES_H
#define NB_FORMATS_CODES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* E2M1 values doubled, as ggml keeps them (so that a code times a halved scale is exact). */
extern const int8_t nb_e2m1_doubled[16];

/* The one E2M1 encoder: the code (magnitude index | sign << 3) nearest to v, saturating at +-6; a
 * NaN gives index 0 (callers that can meet one decide). Its users need two rules of their own:
 *  - a tie between two codes goes to the even code (IEEE, nb_fp32_to_e2m1 and explain dot's
 *    default) or, with NB_E2M1_TIES_LOW, to the smaller magnitude (the NVFP4 search of
 *    src/quant/best.c, whose output files must not change; explain dot's --ties low);
 *  - with NB_E2M1_SIGNED_ZERO a negative v that rounds to zero gives -0 (code 8, as IEEE
 *    rounding does: nb_fp32_to_e2m1), else +0 (the search and explain dot never write code 8).
 * *tie, when not NULL, says whether |v| lay exactly halfway between two codes. Inline: the
 * search calls it for every element of every candidate scale. Any float is exact as a double. */
#define NB_E2M1_TIES_LOW 1
#define NB_E2M1_SIGNED_ZERO 2
static inline uint8_t nb_e2m1_round(double v, int rule, int *tie) {
    static const double mid[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
    const double a = fabs(v);
    int i = (a > mid[0]) + (a > mid[1]) + (a > mid[2]) + (a > mid[3]) + (a > mid[4]) + (a > mid[5]) + (a > mid[6]);
    if (tie || !(rule & NB_E2M1_TIES_LOW)) {
        const int t = i < 7 && a == mid[i]; /* a tie leaves i at the lower neighbour */
        if (tie) *tie = t;
        if (t && (i & 1) && !(rule & NB_E2M1_TIES_LOW)) i++;
    }
    /* & rather than &&: the sign of random data must not become a branch */
    const int neg = rule & NB_E2M1_SIGNED_ZERO ? signbit(v) != 0 : (v < 0) & (i > 0);
    return (uint8_t)(i | neg << 3);
}

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
