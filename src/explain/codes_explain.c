/*
 * codes_explain.c: a number code taken apart into its fields, with the rule and the arithmetic
 * that turn the fields into a value (contract: explain.h). The value shown is always the library
 * decoder's; the arithmetic is recomputed here from the fields, so tests can check the two agree.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "explain/explain.h"
#include "formats/codes.h"

static const nb_code_info infos[NB_CODE_COUNT] = {
    [NB_CODE_E2M1] = {"e2m1", 4, 1, 2, 1, 1, "FP4 element of MXFP4 and NVFP4"},
    [NB_CODE_INT4] = {"int4", 4, 1, 0, 0, 0, "signed two's complement nibble"},
    [NB_CODE_UINT4] = {"uint4", 4, 0, 0, 0, 0, "unsigned nibble: the Q4_0/Q4_K element code before scale and offset"},
    [NB_CODE_E8M0] = {"e8m0", 8, 0, 8, 0, 127, "MXFP4 shared scale (one per 32 elements)"},
    [NB_CODE_E4M3] = {"e4m3", 8, 1, 4, 3, 7, "OCP FP8 E4M3FN"},
    [NB_CODE_UE4M3] = {"ue4m3", 8, 0, 4, 3, 7, "NVFP4 block scale (one per 16 elements): E4M3 without a sign"},
    [NB_CODE_FP16] = {"fp16", 16, 1, 5, 10, 15, "IEEE half: d and dmin of the K-quants, d of Q4_0/Q5_0/Q8_0"},
    [NB_CODE_BF16] = {"bf16", 16, 1, 8, 7, 127, "bfloat16: the top half of an fp32"},
    [NB_CODE_FP32] = {"fp32", 32, 1, 8, 23, 127, "IEEE single"},
};

const nb_code_info *nb_code_info_get(nb_code_kind k) {
    return (unsigned)k < NB_CODE_COUNT ? &infos[k] : NULL;
}

int nb_code_find(const char *name) {
    static const struct { const char *alias; nb_code_kind k; } aliases[] = {
        {"fp4", NB_CODE_E2M1}, {"f16", NB_CODE_FP16}, {"half", NB_CODE_FP16},
        {"f32", NB_CODE_FP32}, {"float", NB_CODE_FP32}, {"fp8", NB_CODE_E4M3},
    };
    if (!name) return -1;
    for (int k = 0; k < NB_CODE_COUNT; k++)
        if (!strcasecmp(name, infos[k].name)) return k;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcasecmp(name, aliases[i].alias)) return (int)aliases[i].k;
    return -1;
}

void nb_code_bits(uint32_t code, int width, char *buf) {
    for (int i = 0; i < width; i++) buf[i] = (char)('0' + ((code >> (width - 1 - i)) & 1));
    buf[width] = '\0';
}

char *nb_fmt_float(double v, int unicode, char *buf, size_t cap) {
    const char *minus = unicode ? "\xe2\x88\x92" : "-"; /* U+2212 */
    if (isnan(v)) {
        snprintf(buf, cap, "NaN");
        return buf;
    }
    const char *sign = signbit(v) ? minus : "";
    double a = fabs(v);
    if (isinf(a)) {
        snprintf(buf, cap, "%s%s", sign, unicode ? "\xe2\x88\x9e" : "inf");
        return buf;
    }
    char num[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(num, sizeof num, "%.*g", p, a);
        /* float-valued numbers stop at the float round trip; others at the double one */
        double back = strtod(num, NULL);
        if (back == a || (a == (double)(float)a && (float)back == (float)a)) break;
    }
    snprintf(buf, cap, "%s%s", sign, num);
    return buf;
}

nb_status nb_code_parse(const char *text, int max_width, uint32_t *code, int *digits_width) {
    if (!text || !*text) return nb_fail(NB_ERR_INVALID_ARG, "empty code");
    const char *p = text;
    int base = 10;
    size_t len = strlen(text);
    if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B')) base = 2, p += 2;
    else if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) base = 16, p += 2;
    else if (len >= 4 && strspn(p, "01") == len) base = 2;
    if (!*p) return nb_fail(NB_ERR_INVALID_ARG, "code '%s' has no digits", text);
    uint64_t v = 0;
    int nd = 0;
    for (; *p; p++, nd++) {
        int c = tolower((unsigned char)*p);
        int dg = isdigit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : 99;
        if (dg >= base)
            return nb_fail(NB_ERR_INVALID_ARG, "code '%s': '%c' is not a base-%d digit (write 0101, 0x5 or 5)",
                           text, *p, base);
        v = v * (uint64_t)base + (uint64_t)dg;
        if (v > 0xFFFFFFFFu) return nb_fail(NB_ERR_RANGE, "code '%s' is longer than 32 bits", text);
    }
    int width;
    if (base == 2) width = nd;
    else if (base == 16) width = 4 * nd;
    else width = v < 16 ? 4 : v < 256 ? 8 : v < 65536 ? 16 : 32;
    /* a binary code's length is its width; a hex or decimal one only has to fit */
    int need = base == 2 ? nd : 0;
    if (base != 2)
        for (uint64_t t = v; t; t >>= 1) need++;
    if (need > max_width)
        return nb_fail(NB_ERR_RANGE, "code '%s' has %d bits; this format's codes have %d", text, need, max_width);
    *code = (uint32_t)v;
    if (digits_width) *digits_width = width;
    return NB_OK;
}

/* The library decoder's value of a code. */
static double decoded(nb_code_kind k, uint32_t c) {
    switch (k) {
    case NB_CODE_E2M1: return nb_e2m1_to_fp32((uint8_t)c);
    case NB_CODE_INT4: return c >= 8 ? (double)c - 16 : (double)c;
    case NB_CODE_UINT4: return c;
    case NB_CODE_E8M0: return nb_e8m0_to_fp32((uint8_t)c);
    case NB_CODE_E4M3: return nb_e4m3_to_fp32((uint8_t)c);
    case NB_CODE_UE4M3: return c >= 0x80 ? NAN : nb_ue4m3_to_fp32((uint8_t)c);
    case NB_CODE_FP16: return nb_fp16_to_fp32((uint16_t)c);
    case NB_CODE_BF16: return nb_bf16_to_fp32((uint16_t)c);
    case NB_CODE_FP32: return nb_bits_f32(c);
    default: return NAN;
    }
}

/* "8×0 + 4×1 + 2×0 + 1×1" with the top place negative for two's complement. */
static void integer_arith(nb_code_trace *t, int is_signed) {
    char *s = t->arith;
    size_t cap = sizeof t->arith, n = 0;
    long sum = 0;
    for (int b = t->width - 1; b >= 0; b--) {
        int bit = (t->code >> b) & 1;
        long place = 1L << b;
        if (is_signed && b == t->width - 1) place = -place;
        sum += place * bit;
        n += (size_t)snprintf(s + n, cap - n, "%s%s%ld×%d", b == t->width - 1 ? "" : " + ", place < 0 ? "\xe2\x88\x92" : "",
                              labs(place), bit);
    }
    char v[40];
    snprintf(s + n, cap - n, " = %s", nb_fmt_float((double)sum, 1, v, sizeof v));
    t->field_value = (double)sum;
}

nb_status nb_code_explain(nb_code_kind k, uint32_t code, nb_code_trace *out) {
    const nb_code_info *in = nb_code_info_get(k);
    if (!in) return nb_fail(NB_ERR_INVALID_ARG, "code kind %d is not one of the %d known", (int)k, NB_CODE_COUNT);
    if (in->width < 32 && code >> in->width)
        return nb_fail(NB_ERR_RANGE, "code 0x%X has bits above the %d of a %s code", code, in->width, in->name);
    nb_code_trace *t = out;
    memset(t, 0, sizeof *t);
    t->kind = k, t->code = code, t->width = in->width;
    t->exp_bits = in->exp_bits, t->man_bits = in->man_bits, t->bias = in->bias;
    t->value = decoded(k, code);
    char v[40], ms[40];
    nb_fmt_float(t->value, 1, v, sizeof v);
    if (k == NB_CODE_INT4 || k == NB_CODE_UINT4) {
        t->sign = k == NB_CODE_INT4 ? (int)(code >> 3) : 0;
        t->rule = k == NB_CODE_INT4 ? "two's complement" : "unsigned";
        integer_arith(t, k == NB_CODE_INT4);
        return NB_OK;
    }
    t->sign = in->sign_bits ? (int)(code >> (in->width - 1)) : 0;
    t->exp_field = (code >> in->man_bits) & ((1u << in->exp_bits) - 1);
    t->man_field = code & ((1u << in->man_bits) - 1);
    const uint32_t e_max = (1u << in->exp_bits) - 1, m_max = (1u << in->man_bits) - 1;
    const char *sg = t->sign ? "(\xe2\x88\x92" "1)" : "(+1)";
    const double sgn = t->sign ? -1.0 : 1.0;
    char *a = t->arith;
    size_t cap = sizeof t->arith;
    if (k == NB_CODE_UE4M3 && code >= 0x80) {
        t->rule = "not a code";
        t->field_value = NAN;
        snprintf(a, cap, "bit 7 is set: UE4M3 has no sign bit, so this byte is not a UE4M3 code");
    } else if (k == NB_CODE_E8M0) {
        t->exponent = (int)code - 127;
        if (code == 0xFF) {
            t->rule = "NaN";
            t->field_value = NAN;
            snprintf(a, cap, "E = 255 is reserved for NaN (E8M0 has no zero, sign or infinity)");
        } else {
            t->rule = "power of two";
            t->field_value = ldexp(1.0, t->exponent);
            snprintf(a, cap, "2^(%u \xe2\x88\x92 127) = 2^%d = %s", code, t->exponent, v);
        }
    } else if (t->exp_field == e_max && (k == NB_CODE_E4M3 || k == NB_CODE_UE4M3) && t->man_field == m_max) {
        t->rule = "NaN";
        t->field_value = NAN;
        snprintf(a, cap, "exponent and mantissa all ones: NaN (%s has no infinity)", in->name);
    } else if (t->exp_field == e_max && k != NB_CODE_E2M1 && k != NB_CODE_E4M3 && k != NB_CODE_UE4M3) {
        t->rule = t->man_field ? "NaN" : "infinity";
        t->field_value = t->man_field ? NAN : sgn * INFINITY;
        if (t->man_field) snprintf(a, cap, "exponent all ones, mantissa not zero: NaN");
        else snprintf(a, cap, "exponent all ones, mantissa zero: %s × \xe2\x88\x9e", sg);
    } else if (t->exp_field == 0 && t->man_field == 0) {
        t->rule = "zero";
        t->field_value = sgn * 0.0;
        snprintf(a, cap, "exponent and mantissa zero: %s × 0 = %s", sg, v);
    } else if (t->exp_field == 0) {
        t->rule = "subnormal";
        t->exponent = 1 - in->bias;
        t->field_value = sgn * ldexp((double)t->man_field, t->exponent - in->man_bits);
        snprintf(ms, sizeof ms, "%u/%u", t->man_field, 1u << in->man_bits);
        snprintf(a, cap, "%s × 2^(1 \xe2\x88\x92 %d) × (0 + %s) = %s", sg, in->bias, ms, v);
    } else {
        t->rule = "normal";
        t->exponent = (int)t->exp_field - in->bias;
        t->field_value = sgn * ldexp(1.0 + ldexp((double)t->man_field, -in->man_bits), t->exponent);
        snprintf(ms, sizeof ms, "%u/%u", t->man_field, 1u << in->man_bits);
        snprintf(a, cap, "%s × 2^(%u \xe2\x88\x92 %d) × (1 + %s) = %s", sg, t->exp_field, in->bias, ms, v);
    }
    return NB_OK;
}
