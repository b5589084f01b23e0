/*
 * test_codes.c: the small number codes, exhaustively where the code space allows.
 *
 * Expected values are computed here from the specifications' formulas in double precision (an
 * independent route from the minifloat code in codes.c); the fp16 encoder is also checked against
 * the CPU's own F16C conversion when the CPU has it.
 */
#include <math.h>
#include <stdint.h>

#include "formats/codes.h"
#include "nibble.h"
#include "test.h"

static int same_bits(float a, float b) { return nb_f32_bits(a) == nb_f32_bits(b); }

/* Spec value of a sign/exponent/mantissa code with the given widths and bias (no NaN/Inf). */
static double spec_value(unsigned code, int ebits, int mbits, int bias, int has_sign) {
    unsigned m = code & ((1u << mbits) - 1), e = (code >> mbits) & ((1u << ebits) - 1);
    int neg = has_sign && ((code >> (ebits + mbits)) & 1);
    double v = e == 0 ? ldexp((double)m, 1 - bias - mbits) : ldexp(1.0 + ldexp((double)m, -mbits), (int)e - bias);
    return neg ? -v : v;
}

TEST(fp16_all_patterns_round_trip) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = nb_fp16_to_fp32((uint16_t)h);
        unsigned e = (h >> 10) & 31, m = h & 1023;
        if (e == 31 && m) {
            CHECK(isnan(f) && !!signbit(f) == !!(h & 0x8000), "fp16 0x%04x should decode to NaN", h);
            CHECK((nb_fp32_to_fp16(f) & 0x7FFF) == 0x7E00, "NaN 0x%04x re-encodes as quiet NaN", h);
            continue;
        }
        double want = e == 31 ? INFINITY : spec_value(h & 0x7FFF, 5, 10, 15, 0);
        if (h & 0x8000) want = -want;
        CHECK((double)f == want && !!signbit(f) == !!(h & 0x8000), "fp16 0x%04x -> %g, want %g", h, f, want);
        CHECK(nb_fp32_to_fp16(f) == h, "fp16 0x%04x does not round-trip (got 0x%04x)", h, nb_fp32_to_fp16(f));
    }
}

TEST(fp16_rounding_boundaries) {
    CHECK(nb_fp32_to_fp16(65504.0f) == 0x7BFF, "max finite");
    CHECK(nb_fp32_to_fp16(65519.996f) == 0x7BFF, "just below the overflow midpoint stays finite");
    CHECK(nb_fp32_to_fp16(65520.0f) == 0x7C00, "the overflow midpoint rounds to infinity (even)");
    CHECK(nb_fp32_to_fp16(-INFINITY) == 0xFC00, "-inf");
    CHECK(nb_fp32_to_fp16(1.0f + 0x1p-11f) == 0x3C00, "tie 1+2^-11 goes to even 1.0");
    CHECK(nb_fp32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3C02, "tie 1+3*2^-11 goes to even 1+2^-9");
    CHECK(nb_fp32_to_fp16(0x1p-25f) == 0x0000, "half the smallest subnormal ties to zero");
    CHECK(nb_fp32_to_fp16(0x1.000002p-25f) == 0x0001, "just above half rounds up");
    CHECK(nb_fp32_to_fp16(3 * 0x1p-25f) == 0x0002, "subnormal tie 1.5 ulp goes to even 2");
    CHECK(nb_fp32_to_fp16(0x1.ff8p-15f) == 0x03FF, "largest subnormal");
    CHECK(nb_fp32_to_fp16(0x1.ffcp-15f) == 0x0400, "subnormal tie rounds up into the (even) smallest normal");
    CHECK(nb_fp32_to_fp16(-0.0f) == 0x8000, "-0 keeps its sign");
}

/* The CPU's own conversion: F16C's vcvtps2ph on x86, FCVT (through __fp16) on ARM; both round to
 * nearest even. 0 where the CPU has none. */
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("f16c"))) static uint16_t hw_fp16(float f) {
    return (uint16_t)__builtin_ia32_vcvtps2ph((float __attribute__((vector_size(16)))){f, 0, 0, 0}, 0)[0];
}
static int have_hw_fp16(void) { return __builtin_cpu_supports("f16c"); }
#elif defined(__aarch64__)
static uint16_t hw_fp16(float f) {
    const __fp16 h = (__fp16)f;
    uint16_t u;
    memcpy(&u, &h, sizeof u);
    return u;
}
static int have_hw_fp16(void) { return 1; }
#else
static uint16_t hw_fp16(float f) { return (uint16_t)f; }
static int have_hw_fp16(void) { return 0; }
#endif

TEST(fp16_encoder_matches_the_cpu) {
    if (!have_hw_fp16()) SKIP("no fp16 conversion instruction on this CPU");
    /* every 97th f32 bit pattern: all exponents, many mantissas, both signs */
    for (uint64_t u = 0; u < 0x100000000ull; u += 97) {
        float f = nb_bits_f32((uint32_t)u);
        if (isnan(f)) continue;
        uint16_t a = nb_fp32_to_fp16(f), b = hw_fp16(f);
        CHECK(a == b, "f32 0x%08x: nibble 0x%04x, the CPU 0x%04x", (uint32_t)u, a, b);
    }
}

TEST(bf16_all_patterns_round_trip) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = nb_bf16_to_fp32((uint16_t)h);
        CHECK(nb_f32_bits(f) == h << 16, "bf16 0x%04x decodes to the top half", h);
        uint16_t back = nb_fp32_to_bf16(f);
        if (isnan(f)) CHECK((back & 0xFFBF) == (h & 0xFFBF) && (back & 0x40), "NaN 0x%04x stays a quiet NaN", h);
        else CHECK(back == h, "bf16 0x%04x round-trip gave 0x%04x", h, back);
    }
}

TEST(bf16_rounding_boundaries) {
    CHECK(nb_fp32_to_bf16(nb_bits_f32(0x3F808000)) == 0x3F80, "tie to even (down)");
    CHECK(nb_fp32_to_bf16(nb_bits_f32(0x3F818000)) == 0x3F82, "tie to even (up)");
    CHECK(nb_fp32_to_bf16(nb_bits_f32(0x3F808001)) == 0x3F81, "above the tie rounds up");
    CHECK(nb_fp32_to_bf16(nb_bits_f32(0x7F7FFFFF)) == 0x7F80, "max f32 rounds to infinity");
    CHECK(nb_fp32_to_bf16(nb_bits_f32(0x7F800001)) == 0x7FC0, "signalling NaN becomes quiet");
}

TEST(e4m3_all_codes) {
    for (unsigned c = 0; c < 256; c++) {
        float f = nb_e4m3_to_fp32((uint8_t)c);
        if ((c & 0x7F) == 0x7F) {
            CHECK(isnan(f), "E4M3 0x%02x is NaN", c);
            continue;
        }
        double want = spec_value(c, 4, 3, 7, 1);
        CHECK((double)f == want && !!signbit(f) == !!(c & 0x80), "E4M3 0x%02x -> %g, want %g", c, f, want);
        CHECK(nb_fp32_to_e4m3(f) == c, "E4M3 0x%02x does not round-trip", c);
    }
    CHECK(nb_e4m3_to_fp32(0x7E) == 448.0f, "max is 448");
    CHECK(nb_e4m3_to_fp32(0x2A) == 0.3125f, "article: exponent 5 fraction 2 is 0.3125");
    CHECK(nb_e4m3_to_fp32(0x01) == 0x1p-9f, "smallest subnormal 2^-9");
}

TEST(e4m3_encode_rules) {
    CHECK(nb_fp32_to_e4m3(464.0f) == 0x7E, "464 (tie 448/480) goes to even 448");
    CHECK(nb_fp32_to_e4m3(1e9f) == 0x7E && nb_fp32_to_e4m3(-1e9f) == 0xFE, "saturates at +-448");
    CHECK(nb_fp32_to_e4m3(INFINITY) == 0x7E, "infinity saturates");
    CHECK((nb_fp32_to_e4m3(NAN) & 0x7F) == 0x7F, "NaN encodes as NaN");
    CHECK(nb_fp32_to_e4m3(0x1p-10f) == 0x00, "half the smallest subnormal ties to zero");
    CHECK(nb_fp32_to_e4m3(3 * 0x1p-10f) == 0x02, "1.5 subnormal units tie to even 2");
    CHECK(nb_fp32_to_e4m3(1.0625f) == 0x38, "1+1/16 ties to even 1.0");
    CHECK(nb_fp32_to_e4m3(1.1875f) == 0x3A, "1+3/16 ties to even 1.25");
    CHECK(nb_fp32_to_e4m3(0.015625f * 0.99f) == 0x08, "just below min normal rounds up into it");
    CHECK(nb_fp32_to_e4m3(-0.0f) == 0x80, "-0 keeps its sign");
}

TEST(ue4m3_all_codes) {
    for (unsigned c = 0; c < 256; c++) {
        float f = nb_ue4m3_to_fp32((uint8_t)c);
        if (c >= 0x7F) {
            CHECK(isnan(f), "UE4M3 0x%02x is NaN or not a code", c);
            continue;
        }
        CHECK((double)f == spec_value(c, 4, 3, 7, 0), "UE4M3 0x%02x", c);
        CHECK(nb_fp32_to_ue4m3(f) == c, "UE4M3 0x%02x round-trip", c);
    }
    CHECK(nb_fp32_to_ue4m3(-1.0f) == 0 && nb_fp32_to_ue4m3(0.0f) == 0, "no sign: clamps to zero");
    CHECK(nb_fp32_to_ue4m3(1000.0f) == 0x7E, "saturates at 448");
    CHECK(nb_fp32_to_ue4m3(NAN) == 0x7F, "NaN");
}

TEST(e8m0_all_codes) {
    for (unsigned c = 0; c < 256; c++) {
        float f = nb_e8m0_to_fp32((uint8_t)c);
        if (c == 255) {
            CHECK(isnan(f), "E8M0 0xFF is NaN");
            continue;
        }
        CHECK((double)f == ldexp(1.0, (int)c - 127), "E8M0 0x%02x", c);
        CHECK(nb_fp32_to_e8m0(f) == c, "E8M0 0x%02x round-trip", c);
        CHECK(c < 2 || nb_e8m0_to_fp32_half((uint8_t)c) == f / 2, "ggml half decode of 0x%02x", c);
    }
    CHECK(nb_e8m0_to_fp32(0x7E) == 0.5f, "article: E8M0 0x7E is 0.5");
    CHECK(nb_e8m0_to_fp32_half(0) == 0x1p-128f && nb_e8m0_to_fp32_half(1) == 0x1p-127f, "ggml denormals");
    CHECK(nb_fp32_to_e8m0(1.5f) == 128, "1.5 (tie of 1 and 2) goes to the even code 128 (2.0)");
    CHECK(nb_fp32_to_e8m0(3.0f) == 128, "3 (tie of 2 and 4) goes to the even code 128 (2.0)");
    CHECK(nb_fp32_to_e8m0(1.49f) == 127 && nb_fp32_to_e8m0(1.51f) == 128, "either side of the midpoint");
    CHECK(nb_fp32_to_e8m0(0.0f) == 0 && nb_fp32_to_e8m0(-2.0f) == 0, "no zero, no sign: smallest code");
    CHECK(nb_fp32_to_e8m0(INFINITY) == 0xFE && nb_fp32_to_e8m0(NAN) == 0xFF, "saturation and NaN");
}

TEST(e2m1_all_codes) {
    static const float want[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (unsigned c = 0; c < 16; c++) {
        float f = nb_e2m1_to_fp32((uint8_t)c);
        float w = (c & 8) ? -want[c & 7] : want[c & 7];
        CHECK(same_bits(f, w), "E2M1 %u -> %g, want %g", c, f, w);
        CHECK((double)f == spec_value(c, 2, 1, 1, 1), "E2M1 %u against the formula", c);
        CHECK(nb_fp32_to_e2m1(f) == c, "E2M1 %u round-trip", c);
        CHECK(nb_e2m1_doubled[c] == 2 * f, "ggml's doubled table at %u", c);
    }
    CHECK(nb_e2m1_to_fp32(0x5) == 3.0f, "article: 0101 is 3 as E2M1 (5 as an unsigned code)");
    CHECK(nb_e2m1_to_fp32(7) == 6.0f, "article: code 7 is +6");
    CHECK(nb_e2m1_to_fp32(8) == 0.0f && signbit(nb_e2m1_to_fp32(8)), "article: code 8 is -0");
}

TEST(e2m1_encode_rules) {
    static const struct { float x; uint8_t code; } cases[] = {
        {0.25f, 0}, {0.26f, 1}, {0.75f, 2}, {1.25f, 2}, {1.75f, 4}, {2.5f, 4},
        {3.5f, 6}, {5.0f, 6}, {5.01f, 7}, {7.0f, 7}, {100.0f, 7}, {-0.0f, 8}, {-5.5f, 15},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(nb_fp32_to_e2m1(cases[i].x) == cases[i].code, "E2M1 encode %g -> %u, want %u", cases[i].x,
              nb_fp32_to_e2m1(cases[i].x), cases[i].code);
    CHECK(nb_fp32_to_e2m1(INFINITY) == 7 && nb_fp32_to_e2m1(-INFINITY) == 15, "infinity saturates at 6");
}

TEST(ggml_ue4m3_conventions) {
    for (unsigned c = 1; c < 0x7F; c++)
        CHECK(nb_ue4m3_to_fp32_half((uint8_t)c) == nb_ue4m3_to_fp32((uint8_t)c) / 2, "half decode 0x%02x", c);
    CHECK(nb_ue4m3_to_fp32_half(0x7F) == 0.0f, "ggml reads 0x7F as zero");
    /* ggml rounds half up where RNE goes to even, and saturates from 256 */
    CHECK(nb_fp32_to_ue4m3_ggml(1.0625f) == 0x39 && nb_fp32_to_ue4m3(1.0625f) == 0x38, "tie: half up vs even");
    CHECK(nb_fp32_to_ue4m3_ggml(256.0f) == 0x7E && nb_fp32_to_ue4m3(256.0f) == 0x78, "256 saturates in ggml");
    CHECK(nb_fp32_to_ue4m3_ggml(0x1p-10f) == 0x01, "subnormal tie rounds up in ggml");
    CHECK(nb_fp32_to_ue4m3_ggml(-3.0f) == 0 && nb_fp32_to_ue4m3_ggml(1.0f) == 0x38, "sign and 1.0");
}

int main(void) {
    RUN(fp16_all_patterns_round_trip);
    RUN(fp16_rounding_boundaries);
    RUN(fp16_encoder_matches_the_cpu);
    RUN(bf16_all_patterns_round_trip);
    RUN(bf16_rounding_boundaries);
    RUN(e4m3_all_codes);
    RUN(e4m3_encode_rules);
    RUN(ue4m3_all_codes);
    RUN(e8m0_all_codes);
    RUN(e2m1_all_codes);
    RUN(e2m1_encode_rules);
    RUN(ggml_ue4m3_conventions);
    return test_summary();
}
