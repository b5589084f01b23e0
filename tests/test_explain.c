/*
 * test_explain.c: `nibble explain` and the library traces behind it (src/explain/).
 *
 * The library half holds every trace to an independent authority: a code's field arithmetic to
 * the decoders of src/formats/codes.c (every code of every small format), every lane of random
 * blocks to nb_dequantize() bit for bit, and the seed articles' worked numbers to the values
 * printed in the articles. The CLI half runs build/.../nibble (found beside this program's
 * directory) and checks --json numbers, exit codes on bad input, and that --svg files are
 * well-formed XML holding the expected marks. Tests that need the Gemma 3 270M file SKIP with the
 * reason when it is absent (scripts/fetch-model.sh fetches it).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "explain/explain.h"
#include "formats/codes.h"
#include "test.h"

static char nibble_bin[1024];
static const char *model = "models/gemma-3-270m-q4_k_m.gguf";

static uint64_t rng_state = 0x2545F4914F6CDD1Du;
static uint32_t rng32(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static int same(double a, double b) { return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b)); }

/* ------------------------------------------------------------ library */

TEST(code_fields_agree_with_decoders) {
    for (int k = 0; k < NB_CODE_COUNT; k++) {
        const nb_code_info *in = nb_code_info_get(k);
        uint64_t n = in->width == 32 ? 200000 : 1ull << in->width;
        for (uint64_t i = 0; i < n; i++) {
            uint32_t c = in->width == 32 ? (i < 8 ? (uint32_t[]){0, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                                                                  1, 0x00800000u, 0x3F800000u}[i]
                                                  : rng32() ^ rng32() << 16)
                                         : (uint32_t)i;
            nb_code_trace t;
            CHECK(nb_code_explain(k, c, &t) == NB_OK, "%s 0x%X refused", in->name, c);
            CHECK(same(t.value, t.field_value), "%s 0x%X: fields give %g, decoder %g (%s)", in->name, c, t.field_value,
                  t.value, t.arith);
            CHECK(t.arith[0] && t.rule, "%s 0x%X: no arithmetic", in->name, c);
        }
        if (in->width < 32) {
            nb_code_trace t;
            CHECK(nb_code_explain(k, 1u << in->width, &t) == NB_ERR_RANGE, "%s accepted a code too wide", in->name);
        }
    }
}

TEST(article_codes) {
    nb_code_trace t;
    nb_code_explain(NB_CODE_E2M1, 5, &t);
    CHECK(t.value == 3 && t.sign == 0 && t.exp_field == 2 && t.man_field == 1 && !strcmp(t.rule, "normal"),
          "e2m1 0101: %g %s", t.value, t.rule);
    CHECK(strstr(t.arith, "2^(2 \xe2\x88\x92 1) × (1 + 1/2) = 3") != NULL, "e2m1 0101 arithmetic: %s", t.arith);
    nb_code_explain(NB_CODE_E2M1, 7, &t);
    CHECK(t.value == 6, "e2m1 code 7 = %g", t.value);
    nb_code_explain(NB_CODE_E2M1, 8, &t);
    CHECK(t.value == 0 && signbit(t.value) && !strcmp(t.rule, "zero"), "e2m1 code 8 is -0");
    nb_code_explain(NB_CODE_E2M1, 1, &t);
    CHECK(t.value == 0.5 && !strcmp(t.rule, "subnormal"), "e2m1 0001 = 0.5 subnormal");
    nb_code_explain(NB_CODE_UINT4, 5, &t);
    CHECK(t.value == 5, "uint4 0101 = 5");
    nb_code_explain(NB_CODE_INT4, 0xD, &t);
    CHECK(t.value == -3, "int4 1101 = %g", t.value);
    nb_code_explain(NB_CODE_INT4, 0x8, &t);
    CHECK(t.value == -8, "int4 1000 = %g", t.value);
    nb_code_explain(NB_CODE_E8M0, 0x7E, &t);
    CHECK(t.value == 0.5 && t.exponent == -1, "e8m0 0x7E = %g", t.value);
    nb_code_explain(NB_CODE_E8M0, 0xFF, &t);
    CHECK(isnan(t.value) && !strcmp(t.rule, "NaN"), "e8m0 0xFF is NaN");
    nb_code_explain(NB_CODE_E4M3, 0x2A, &t);
    CHECK(t.value == 0.3125 && t.exp_field == 5 && t.man_field == 2, "e4m3 0x2A = %g", t.value);
    nb_code_explain(NB_CODE_UE4M3, 0x85, &t);
    CHECK(!strcmp(t.rule, "not a code"), "ue4m3 with bit 7 set: %s", t.rule);
}

TEST(code_parsing) {
    uint32_t c;
    int w;
    CHECK(nb_code_parse("0101", 4, &c, &w) == NB_OK && c == 5 && w == 4, "0101");
    CHECK(nb_code_parse("0x5", 4, &c, &w) == NB_OK && c == 5 && w == 4, "0x5");
    CHECK(nb_code_parse("5", 4, &c, &w) == NB_OK && c == 5 && w == 4, "5");
    CHECK(nb_code_parse("0b1", 4, &c, &w) == NB_OK && c == 1 && w == 1, "0b1");
    CHECK(nb_code_parse("0x7E", 8, &c, &w) == NB_OK && c == 0x7E && w == 8, "0x7E");
    CHECK(nb_code_parse("010101", 4, &c, &w) == NB_ERR_RANGE, "a 6-bit code for a 4-bit format");
    CHECK(nb_code_parse("0x15", 4, &c, &w) == NB_ERR_RANGE, "0x15 for a 4-bit format");
    CHECK(nb_code_parse("16", 4, &c, &w) == NB_ERR_RANGE, "16 for a 4-bit format");
    CHECK(nb_code_parse("12z", 8, &c, &w) == NB_ERR_INVALID_ARG, "12z");
    CHECK(nb_code_parse("0x", 8, &c, &w) == NB_ERR_INVALID_ARG, "0x");
}

static const int traced[] = {NB_TYPE_F32,  NB_TYPE_F16,  NB_TYPE_BF16, NB_TYPE_Q4_0,  NB_TYPE_Q5_0, NB_TYPE_Q8_0,
                             NB_TYPE_Q4_K, NB_TYPE_Q5_K, NB_TYPE_Q6_K, NB_TYPE_MXFP4, NB_TYPE_NVFP4};

TEST(lanes_equal_dequantize) {
    uint8_t blk[512];
    float ref[256];
    for (size_t ti = 0; ti < sizeof traced / sizeof traced[0]; ti++) {
        const nb_type_info *in = nb_type_get(traced[ti]);
        for (int rep = 0; rep < 200; rep++) {
            for (int i = 0; i < in->block_bytes; i++) blk[i] = (uint8_t)rng32();
            if (rep % 2 && in->block_elems > 1) { /* half the blocks with tame fp16 factors */
                uint16_t d = nb_fp32_to_fp16(0.01f * (float)(rng32() % 100 + 1));
                memcpy(blk + (traced[ti] == NB_TYPE_Q6_K ? 208 : 0), &d, 2);
            }
            nb_block_trace bt;
            CHECK(nb_block_explain(traced[ti], blk, &bt) == NB_OK, "%s: %s", in->name, nb_last_error());
            nb_dequantize(traced[ti], blk, ref, in->block_elems);
            for (int l = 0; l < in->block_elems; l++) {
                nb_lane_trace t;
                CHECK(nb_lane_explain(&bt, blk, l, &t) == NB_OK, "%s lane %d", in->name, l);
                CHECK(same(t.value, ref[l]), "%s lane %d: trace %g, dequantize %g", in->name, l, t.value, ref[l]);
            }
            /* the byte -> lanes map is the inverse of lane -> byte */
            for (int p = 0; p < bt.payload_bytes && in->block_elems > 1; p++) {
                int lanes[2], n;
                CHECK(nb_byte_lanes(&bt, p, lanes, &n) == NB_OK, "%s byte %d", in->name, p);
                for (int k = 0; k < n; k++) {
                    nb_lane_trace t;
                    nb_lane_explain(&bt, blk, lanes[k], &t);
                    CHECK(t.payload == p && (n == 1 || t.nibble == k), "%s byte %d: lane %d comes from byte %d nibble %d",
                          in->name, p, lanes[k], t.payload, t.nibble);
                }
            }
        }
        nb_block_trace bt;
        nb_block_explain(traced[ti], blk, &bt);
        nb_lane_trace t;
        int lanes[2], n;
        CHECK(nb_lane_explain(&bt, blk, in->block_elems, &t) == NB_ERR_RANGE, "%s: lane past the block", in->name);
        CHECK(nb_byte_lanes(&bt, bt.payload_bytes, lanes, &n) == NB_ERR_RANGE, "%s: byte past the payload", in->name);
    }
    nb_block_trace bt;
    CHECK(nb_block_explain(NB_TYPE_Q8_K, blk, &bt) == NB_ERR_UNSUPPORTED, "q8_K is not a weight type");
    CHECK(nb_block_explain(3, blk, &bt) == NB_ERR_UNSUPPORTED, "q4_1 is unknown");
}

/* Value of lane l of the article fixture of a type, after setting payload byte 0 to v (v < 0: keep). */
static float fixture_lane(int type, int l, int v) {
    uint8_t b[512];
    nb_block_trace bt;
    nb_lane_trace t;
    nb_fixture_block(type, b, sizeof b, NULL);
    nb_block_explain(type, b, &bt);
    if (v >= 0) b[bt.payload_offset] = (uint8_t)v;
    nb_lane_explain(&bt, b, l, &t);
    return t.value;
}

TEST(article_fixtures) {
    /* article 1 §5: 0xA5 into lanes 0 and 32; a zero byte; 255 */
    CHECK(fixture_lane(NB_TYPE_Q4_K, 0, -1) == 1.0f, "q4_K lane 0 = %g", fixture_lane(NB_TYPE_Q4_K, 0, -1));
    CHECK(fixture_lane(NB_TYPE_Q4_K, 32, -1) == 3.25f, "q4_K lane 32 = %g", fixture_lane(NB_TYPE_Q4_K, 32, -1));
    CHECK(fixture_lane(NB_TYPE_Q4_K, 0, 0) == -0.25f && fixture_lane(NB_TYPE_Q4_K, 32, 0) == -0.5f, "q4_K zero byte");
    CHECK(fixture_lane(NB_TYPE_Q4_K, 0, 255) == 3.5f && fixture_lane(NB_TYPE_Q4_K, 32, 255) == 5.125f, "q4_K byte 255");
    uint8_t b[512];
    nb_block_trace bt;
    nb_fixture_block(NB_TYPE_Q4_K, b, sizeof b, NULL);
    nb_block_explain(NB_TYPE_Q4_K, b, &bt);
    CHECK(b[4] == 130 && b[12] == 33 && bt.sub_raw[4] == 33, "article 1 §6: B[0]=130, B[8]=33 give s[4] = %d", bt.sub_raw[4]);
    int distinct = 1; /* asymmetric: no two sub-blocks share (s, m) */
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < i; j++)
            distinct &= bt.sub_raw[i] != bt.sub_raw[j] || bt.sub_min_raw[i] != bt.sub_min_raw[j];
    CHECK(distinct, "fixture sub-blocks differ");
    CHECK(fixture_lane(NB_TYPE_MXFP4, 0, -1) == 1.5f && fixture_lane(NB_TYPE_MXFP4, 16, -1) == -0.5f, "mxfp4 0xA5");
    CHECK(fixture_lane(NB_TYPE_NVFP4, 0, -1) == 0.9375f && fixture_lane(NB_TYPE_NVFP4, 8, -1) == -0.3125f, "nvfp4 0xA5");
    CHECK(fixture_lane(NB_TYPE_Q4_0, 0, -1) == -0.75f && fixture_lane(NB_TYPE_Q4_0, 16, -1) == 0.5f, "q4_0 0xA5");
    CHECK(fixture_lane(NB_TYPE_Q5_0, 0, -1) == 1.25f && fixture_lane(NB_TYPE_Q5_0, 16, -1) == -1.5f, "q5_0 0xA5");
    CHECK(fixture_lane(NB_TYPE_Q8_0, 0, -1) == -11.375f, "q8_0 0xA5");
    CHECK(fixture_lane(NB_TYPE_Q6_K, 0, -1) == 5.25f && fixture_lane(NB_TYPE_Q6_K, 64, -1) == 4.5f, "q6_K 0xA5");
    CHECK(nb_fixture_block(NB_TYPE_F32, b, sizeof b, NULL) == NB_ERR_UNSUPPORTED, "no f32 fixture");
    CHECK(nb_fixture_block(NB_TYPE_Q4_K, b, 100, NULL) == NB_ERR_RANGE, "fixture into a short buffer");
}

static const double aw[4] = {-1, 0.3, 0.9, 1.7}, ax[4] = {2, 1, -1, 0.5};

TEST(article_dot_products) {
    nb_dot_trace t;
    nb_dot_params p = {.format = NB_DOT_MXFP4, .scale = 0.5, .tensor_scale = 1};
    CHECK(nb_dot_explain(&p, aw, ax, 4, &t) == NB_OK, "%s", nb_last_error());
    const double h05[4] = {-1, 0.25, 1, 1.5}, h0125[4] = {-0.75, 0.25, 0.75, 0.75};
    for (int i = 0; i < 4; i++) CHECK(t.w_hat[i] == h05[i], "scale 0.5: w_hat[%d] = %g", i, t.w_hat[i]);
    CHECK(fabs(t.y + 1.75) < 1e-12 && t.y_hat == -2 && fabs(t.err + 0.25) < 1e-12, "scale 0.5: y %g ŷ %g", t.y, t.y_hat);
    CHECK(t.scale_code == 0x7E, "scale 0.5 is E8M0 0x7E");
    p.scale = 0.125;
    nb_dot_explain(&p, aw, ax, 4, &t);
    for (int i = 0; i < 4; i++) CHECK(t.w_hat[i] == h0125[i], "scale 0.125: w_hat[%d] = %g", i, t.w_hat[i]);
    CHECK(t.y_hat == -1.625 && fabs(t.err - 0.125) < 1e-12 && t.clipped[3], "scale 0.125: ŷ %g err %g", t.y_hat, t.err);
    /* article 2 §1: signed INT4 at s = 0.25 */
    const double w2[4] = {-1, 0.25, 0.875, 1.75};
    p = (nb_dot_params){.format = NB_DOT_INT4, .scale = 0.25};
    nb_dot_explain(&p, w2, ax, 4, &t);
    CHECK(t.code[0] == -4 && t.code[1] == 1 && t.code[2] == 4 && t.code[3] == 7, "int4 codes");
    CHECK(t.y == -1.75 && t.y_hat == -1.875 && t.err == -0.125, "int4: y %g ŷ %g", t.y, t.y_hat);
    /* article 2 §4: Q4_K sub-block with step 0.30, offset 0.10 */
    const double w3[3] = {2.0, 0.5, -0.1}, x3[3] = {0.5, -1, 2};
    p = (nb_dot_params){.format = NB_DOT_Q4_K, .scale = 0.3, .offset = 0.1};
    nb_dot_explain(&p, w3, x3, 3, &t);
    CHECK(t.code[0] == 7 && t.code[1] == 2 && t.code[2] == 0 && fabs(t.y_hat - 0.30) < 1e-12, "q4_K codes and 0.30");
    /* NVFP4 (article 1 §4): UE4M3 0x2A = 0.3125, E2M1 3 -> 0.9375 */
    const double w4[1] = {0.9375}, x4[1] = {1};
    p = (nb_dot_params){.format = NB_DOT_NVFP4, .scale = 0.3125, .tensor_scale = 1};
    nb_dot_explain(&p, w4, x4, 1, &t);
    CHECK(t.scale_code == 0x2A && t.w_hat[0] == 0.9375 && t.code[0] == 5, "nvfp4 0.9375");
    p.scale = 0;
    CHECK(nb_dot_explain(&p, w4, x4, 1, &t) == NB_ERR_INVALID_ARG, "zero scale refused");
}

TEST(e2m1_nearest_matches_encoder) {
    for (int i = -1400; i <= 1400; i++) {
        double v = i / 200.0;
        int c = nb_e2m1_nearest(v, 0, NULL);
        CHECK(nb_e2m1_to_fp32((uint8_t)c) == nb_e2m1_to_fp32(nb_fp32_to_e2m1((float)v)), "nearest(%g) = %d", v, c);
    }
    int tie;
    CHECK(nb_e2m1_nearest(0.75, 0, &tie) == 2 && tie, "0.75 ties to even: 1.0");
    CHECK(nb_e2m1_nearest(0.75, 1, &tie) == 1 && tie, "0.75 ties low: 0.5");
    CHECK(nb_e2m1_nearest(-0.75, 1, &tie) == 9, "-0.75 ties low: code 9");
}

/* ---------------------------------------------------------------- CLI */

/* Runs `nibble ARGS`, stdout into buf; returns the exit status (-1 when it did not exit). */
static int run(char *buf, size_t cap, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", nibble_bin, args);
    return test_sh(cmd, buf, cap);
}

/* The number after the n-th occurrence of "key": in json (NAN when absent). */
static double jnum(const char *json, const char *key, int nth) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = json;
    for (int i = 0; i <= nth; i++) {
        p = strstr(p, pat);
        if (!p) return NAN;
        p += strlen(pat);
    }
    return strtod(p, NULL);
}

static int have_python(void) { return system("python3 -c 'import json, xml.dom.minidom' >/dev/null 2>&1") == 0; }

static int json_valid(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null | python3 -c 'import json,sys; json.load(sys.stdin)' 2>/dev/null",
             nibble_bin, args);
    return system(cmd) == 0;
}

static char out[1 << 16];

TEST(cli_codes_and_fixtures) {
    if (access(nibble_bin, X_OK)) SKIP("%s not built", nibble_bin);
    CHECK(run(out, sizeof out, "explain e2m1 0101 --json") == 0 && jnum(out, "value", 0) == 3, "e2m1 0101: %s", out);
    CHECK(run(out, sizeof out, "explain e2m1 0x5 --json") == 0 && jnum(out, "value", 0) == 3, "e2m1 0x5");
    CHECK(run(out, sizeof out, "explain e2m1 5 --json") == 0 && jnum(out, "value", 0) == 3, "e2m1 5");
    CHECK(run(out, sizeof out, "explain e8m0 0x7E --json") == 0 && jnum(out, "value", 0) == 0.5, "e8m0 0x7E");
    CHECK(run(out, sizeof out, "explain e4m3 0x2A --json") == 0 && jnum(out, "value", 0) == 0.3125, "e4m3 0x2A");
    CHECK(run(out, sizeof out, "explain bits 0101 --json") == 0, "bits 0101");
    CHECK(strstr(out, "\"format\": \"e2m1\"") && strstr(out, "\"format\": \"int4\"") && strstr(out, "\"format\": \"bf16\""),
          "bits shows every reading");
    CHECK(jnum(out, "value", 0) == 3 && jnum(out, "value", 1) == 5, "bits 0101: e2m1 3, int4 5");
    CHECK(run(out, sizeof out, "explain q4_k --fixture article --byte 0 --json") == 0, "q4_k fixture");
    CHECK(jnum(out, "chunk", 0) == 0 && jnum(out, "payload_index", 0) == 0, "q4_k byte 0 chunk/payload");
    CHECK(jnum(out, "lane", 0) == 0 && jnum(out, "lane", 1) == 32, "lanes 0 and 32, not 0 and 1");
    CHECK(jnum(out, "value", 1) == 1 && jnum(out, "value", 2) == 3.25, "1.0 and 3.25: %g %g", jnum(out, "value", 1),
          jnum(out, "value", 2));
    CHECK(strstr(out, "(33 & 15) | ((130 >> 6) << 4) = 1 | 32 = 33") != NULL, "s[4] unpacking shown");
    CHECK(run(out, sizeof out, "explain q4_k --byte 0 --value 0 --json") == 0 && jnum(out, "value", 1) == -0.25 &&
              jnum(out, "value", 2) == -0.5, "zero byte -0.25, -0.5");
    CHECK(run(out, sizeof out, "explain nvfp4 --fixture article --json") == 0 && jnum(out, "lane", 0) == 0 &&
              jnum(out, "lane", 1) == 8 && jnum(out, "value", 1) == 0.9375, "nvfp4 split halves: lanes 0 and 8");
    CHECK(run(out, sizeof out, "explain mxfp4 --lane 16 --json") == 0 && jnum(out, "value", 0) == -0.5, "mxfp4 lane 16");
    CHECK(run(out, sizeof out, "explain q6_k --byte 0 --json") == 0 && jnum(out, "lane", 1) == 64, "q6_K byte 0 -> 0, 64");
    CHECK(run(out, sizeof out, "explain q5_0 --json") == 0 && jnum(out, "value", 1) == 1.25, "q5_0 fifth bit");
    CHECK(run(out, sizeof out, "explain q8_0 --json") == 0 && jnum(out, "value", 1) == -11.375, "q8_0");
    if (have_python()) {
        CHECK(json_valid("explain q4_k --byte 5 --json"), "q4_k json parses");
        CHECK(json_valid("explain bits 0x7E --json"), "bits json parses");
        CHECK(json_valid("explain dot --format nvfp4 --scale 0.3 -w '1 -2' -x '1 1' --json"), "dot json parses");
    }
}

TEST(cli_dot) {
    if (access(nibble_bin, X_OK)) SKIP("%s not built", nibble_bin);
    CHECK(run(out, sizeof out, "explain dot --format mxfp4 --scale 0.5 -w '-1 0.3 0.9 1.7' -x '2 1 -1 0.5' --json") == 0,
          "dot 0.5");
    CHECK(jnum(out, "y", 0) == -1.75 && jnum(out, "y_hat", 0) == -2 && jnum(out, "error", 0) == -0.25, "dot 0.5: %s", out);
    CHECK(run(out, sizeof out, "explain dot --format mxfp4 --scale 0.125 -w '[−1, 0.3, 0.9, 1.7]' -x '2,1,-1,0.5' --json") == 0,
          "dot 0.125 (Unicode minus, brackets)");
    CHECK(jnum(out, "y_hat", 0) == -1.625 && jnum(out, "error", 0) == 0.125, "dot 0.125: %s", out);
    CHECK(run(out, sizeof out, "explain dot --format int4 --scale 0.25 -w '-1 0.25 0.875 1.75' -x '2 1 -1 0.5'") == 0 &&
              strstr(out, "0x1C 0x74"), "int4 packs 0x1C 0x74");
    CHECK(run(out, sizeof out, "explain dot --format q4_k --scale 0.3 --min 0.1 -w '2 0.5 -0.1' -x '0.5 -1 2' --json") == 0 &&
              jnum(out, "y_hat", 0) == 0.3, "q4_k 0.30");
}

TEST(cli_bad_input) {
    if (access(nibble_bin, X_OK)) SKIP("%s not built", nibble_bin);
    static const struct { const char *args; int rc; } cases[] = {
        {"explain e2m1 010101", 2},          {"explain e2m1 0x15", 2},       {"explain e2m1 12z", 2},
        {"explain e2m1", 2},                 {"explain q9_z 0101", 2},       {"explain ue4m3 0x85", 2},
        {"explain q4_k --byte 128", 2},      {"explain q4_k --lane 256", 2}, {"explain q4_k --bogus", 2},
        {"explain q4_k --byte -1", 2},       {"explain q4_k --fixture nope", 2},
        {"explain dot --format mxfp4 --scale 0.5 -w '1 2' -x '1'", 2},
        {"explain dot --format fp5 --scale 0.5 -w 1 -x 1", 2}, {"explain dot --format int4 --scale 0 -w 1 -x 1", 2},
        {"explain dot --format int4 --scale 1 -w 'a b' -x 1", 2},
        {"explain /nonexistent/x.gguf t", 1}, {"explain", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = run(out, sizeof out, cases[i].args);
        CHECK(rc == cases[i].rc, "`%s` exited %d, expected %d", cases[i].args, rc, cases[i].rc);
    }
}

/* Well-formed XML (python's parser when present, else a tag-balance check) holding every mark. */
static void check_svg(const char *path, const char *const *marks) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "%s was not written", path);
    if (!f) return;
    static char svg[1 << 20];
    size_t n = fread(svg, 1, sizeof svg - 1, f);
    fclose(f);
    svg[n] = '\0';
    CHECK(!strncmp(svg, "<?xml", 5) && strstr(svg, "<svg ") && strstr(svg, "</svg>"), "%s is not an SVG", path);
    for (int i = 0; marks[i]; i++) CHECK(strstr(svg, marks[i]) != NULL, "%s lacks '%s'", path, marks[i]);
    if (have_python()) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' '%s' 2>/dev/null", path);
        CHECK(system(cmd) == 0, "%s is not well-formed XML", path);
    } else {
        long open = 0, close = 0;
        for (const char *p = svg; (p = strchr(p, '<')); p++) {
            if (p[1] == '/') close++;
            else if (p[1] != '?') open++;
        }
        long selfc = 0;
        for (const char *p = svg; (p = strstr(p, "/>")); p++) selfc++;
        CHECK(open == close + selfc, "%s: %ld open tags, %ld closed", path, open, close + selfc);
    }
}

TEST(cli_svg) {
    if (access(nibble_bin, X_OK)) SKIP("%s not built", nibble_bin);
    char dir[] = "/tmp/nb_explain_XXXXXX", args[1400], path[200];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/ruler.svg", dir);
    snprintf(args, sizeof args, "explain dot --format mxfp4 --scale 0.5 -w '-1 0.3 0.9 1.7' -x '2 1 -1 0.5' --svg %s", path);
    CHECK(run(out, sizeof out, args) == 0, "dot --svg");
    check_svg(path, (const char *const[]){"E2M1 marks", "INT4 marks", "clips", "w3=1.7", NULL});
    snprintf(path, sizeof path, "%s/block.svg", dir);
    snprintf(args, sizeof args, "explain q4_k --fixture article --byte 0 --svg %s", path);
    CHECK(run(out, sizeof out, args) == 0, "q4_k --svg");
    check_svg(path, (const char *const[]){"sub-block 0 (lanes 0-31)", "lane 32 = 3.25", "<polygon", NULL});
    snprintf(path, sizeof path, "%s/e2m1.svg", dir);
    snprintf(args, sizeof args, "explain e2m1 0101 --scale 0.5 --svg %s", path);
    CHECK(run(out, sizeof out, args) == 0, "e2m1 --svg");
    check_svg(path, (const char *const[]){"E2M1 marks", NULL});
    snprintf(args, sizeof args, "explain q4_k --svg %s/no/such/dir.svg", dir);
    CHECK(run(out, sizeof out, args) == 1, "unwritable --svg exits 1");
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    CHECK(system(args) == 0, "cleanup");
}

TEST(cli_model) {
    if (access(nibble_bin, X_OK)) SKIP("%s not built", nibble_bin);
    if (access(model, R_OK)) SKIP("%s absent (scripts/fetch-model.sh fetches it)", model);
    char args[1024];
    snprintf(args, sizeof args, "explain %s blk.0.attn_output.weight --row 3 --block 2 --byte 40 --json", model);
    CHECK(run(out, sizeof out, args) == 0, "model q4_K trace");
    /* the printed file offset holds the printed byte: read it back independently */
    double off = jnum(out, "file_offset", 0), val = jnum(out, "value", 0);
    FILE *f = fopen(model, "rb");
    int c = -1;
    if (f && !fseek(f, (long)off, SEEK_SET)) c = fgetc(f);
    if (f) fclose(f);
    CHECK(c == (int)val, "byte at file offset %.0f is %d, trace says %g", off, c, val);
    CHECK(jnum(out, "block_file_offset", 0) == jnum(out, "data_offset", 0) + jnum(out, "tensor_offset", 0) +
                                                   3 * jnum(out, "row_bytes", 0) + 2 * 144,
          "block offset arithmetic");
    snprintf(args, sizeof args, "explain %s token_embd.weight --row 7 --col 100 --json", model);
    CHECK(run(out, sizeof out, args) == 0 && jnum(out, "lane", 0) == 4 && jnum(out, "block", 0) == 3, "q8_0 --col 100");
    snprintf(args, sizeof args, "explain %s blk.0.attn_output.weight --row 640", model);
    CHECK(run(out, sizeof out, args) == 2, "row out of range: bad usage, 2");
    snprintf(args, sizeof args, "explain %s blk.0.attn_output.weight --block 4", model);
    CHECK(run(out, sizeof out, args) == 2, "block out of range: bad usage, 2");
    snprintf(args, sizeof args, "explain %s no.such.tensor", model);
    CHECK(run(out, sizeof out, args) == 2, "a tensor the file lacks: bad usage, 2");
    snprintf(args, sizeof args, "explain compare %s token_embd.weight --rows 64 --json", model);
    CHECK(run(out, sizeof out, args) == 0, "compare token_embd");
    CHECK(jnum(out, "rmse", 0) == 0, "q8_0 -> q8_0 requantizes exactly: %g", jnum(out, "rmse", 0));
    CHECK(strstr(out, "\"name\": \"q4_K\", \"type\": \"q4_K\", \"bits_per_weight\": 4.5, \"applicable\": false") != NULL,
          "q4_K does not apply to rows of 640");
    snprintf(args, sizeof args, "explain compare %s blk.0.ffn_down.weight --rows 32 --json", model);
    CHECK(run(out, sizeof out, args) == 0, "compare ffn_down");
    double sq_q8 = jnum(out, "sqnr_db", 0), sq_q6 = jnum(out, "sqnr_db", 2), sq_q4k = jnum(out, "sqnr_db", 6),
           sq_mx = jnum(out, "sqnr_db", 10);
    CHECK(sq_q6 > sq_q8 && sq_q8 > sq_q4k && sq_q4k > sq_mx && sq_mx > 10, "SQNR order q6_K %g > q8_0 %g > q4_K %g > mxfp4 %g",
          sq_q6, sq_q8, sq_q4k, sq_mx);
    if (have_python()) {
        snprintf(args, sizeof args, "explain compare %s blk.0.attn_q.weight --rows 16 --json", model);
        CHECK(json_valid(args), "compare json parses");
    }
}

/* The _amax route against the one it replaces: the row plus a block holding the tensor's |max|,
 * quantized by nb_quantize_nvfp4_2level with that block dropped. */
TEST(nvfp4_2level_amax_matches_padded_row) {
    enum { N = 256, ROWS = 24 };
    static float x[ROWS][N], padded[N + 64];
    uint8_t want[(N + 64) / 64 * 36], got[N / 64 * 36];
    srand(7);
    float amax = 0;
    for (int r = 0; r < ROWS; r++) {
        const float size = r % 4 == 3 ? 1e-30f : powf(10.0f, (float)(r % 7) - 3);
        for (int i = 0; i < N; i++) {
            x[r][i] = r == 5 || (i % 13 == 0) ? 0 : size * ((float)rand() / (float)RAND_MAX - 0.5f);
            amax = fmaxf(amax, fabsf(x[r][i]));
        }
    }
    for (int r = 0; r < ROWS; r++) {
        float ts_want, ts_got;
        memset(padded, 0, sizeof padded);
        memcpy(padded, x[r], sizeof x[r]);
        padded[N] = amax;
        CHECK(nb_quantize_nvfp4_2level(padded, want, N + 64, &ts_want) == NB_OK, "row %d: padded route refused", r);
        CHECK(nb_quantize_nvfp4_2level_amax(x[r], got, N, amax, &ts_got) == NB_OK, "row %d: %s", r, nb_last_error());
        CHECK(!memcmp(want, got, sizeof got) && ts_want == ts_got, "row %d: blocks or tensor scale differ", r);
    }
    /* with the row's own maximum it is nb_quantize_nvfp4_2level of the row */
    float ts_want, ts_got, own = 0;
    for (int i = 0; i < N; i++) own = fmaxf(own, fabsf(x[2][i]));
    CHECK(nb_quantize_nvfp4_2level(x[2], want, N, &ts_want) == NB_OK &&
              nb_quantize_nvfp4_2level_amax(x[2], got, N, own, &ts_got) == NB_OK && !memcmp(want, got, sizeof got) &&
              ts_want == ts_got,
          "own maximum: differs from nb_quantize_nvfp4_2level");
    CHECK(nb_quantize_nvfp4_2level_amax(x[2], got, N, own / 2, &ts_got) == NB_ERR_INVALID_ARG,
          "a maximum below |x| accepted");
    CHECK(nb_quantize_nvfp4_2level_amax(x[2], got, N, NAN, &ts_got) == NB_ERR_INVALID_ARG, "a NaN maximum accepted");
}

static int same_result(const nb_compare_result *a, const nb_compare_result *b) {
    if (a->rows != b->rows || a->n_formats != b->n_formats) return 0;
    for (int f = 0; f < a->n_formats; f++) {
        const nb_compare_format *x = &a->formats[f], *y = &b->formats[f];
        if (x->applicable != y->applicable || x->weight_rmse != y->weight_rmse || x->weight_max != y->weight_max ||
            x->output_rmse != y->output_rmse || x->output_max != y->output_max || x->tensor_scale != y->tensor_scale ||
            memcmp(&x->hist, &y->hist, sizeof x->hist))
            return 0;
    }
    return 1;
}

TEST(compare_formats_on_a_synthetic_tensor) {
    enum { N_IN = 256, ROWS = 300 }; /* more rows than one chunk of the engine */
    static float w[ROWS * N_IN];
    srand(3);
    for (int i = 0; i < ROWS * N_IN; i++) w[i] = 0.05f * ((float)rand() / (float)RAND_MAX - 0.5f);
    nb_gguf_tensor t = {.name = "w", .type = NB_TYPE_F32, .supported = 1, .n_dims = 3, .ne = {N_IN, 100, 3, 1},
                        .bytes = sizeof w, .data = w};
    CHECK(nb_gguf_tensor_rows(&t) == ROWS, "rows %lld", (long long)nb_gguf_tensor_rows(&t));
    static nb_compare_result one, four, part;
    nb_compare_params p = {.n_tok = 3, .seed = 5, .route = NB_ROUTE_F32, .threads = 1, .hist = 1};
    CHECK(nb_compare_formats(&t, &p, &one) == NB_OK, "%s", nb_last_error());
    p.threads = 4;
    CHECK(nb_compare_formats(&t, &p, &four) == NB_OK, "%s", nb_last_error());
    CHECK(same_result(&one, &four), "results depend on the thread count");
    CHECK(one.rows == ROWS && one.rows_total == ROWS && one.row_length == N_IN && one.n_formats == NB_COMPARE_FORMATS,
          "shape %lld of %lld", (long long)one.rows, (long long)one.rows_total);
    const nb_compare_format *q8 = &one.formats[0], *q4 = &one.formats[4], *two = &one.formats[NB_COMPARE_FORMATS - 1];
    CHECK(!strcmp(q8->name, "q8_0") && !strcmp(q4->name, "q4_0"), "format order: %s %s", q8->name, q4->name);
    CHECK(q8->weight_rmse > 0 && q8->weight_rmse < q4->weight_rmse && q8->output_rmse < q4->output_rmse,
          "q8_0 error %g not below q4_0's %g", q8->weight_rmse, q4->weight_rmse);
    CHECK(q8->weight_sqnr_db > q4->weight_sqnr_db, "SQNR q8_0 %g, q4_0 %g", q8->weight_sqnr_db, q4->weight_sqnr_db);
    CHECK(two->tensor_scale != 1 && q4->tensor_scale == 1, "tensor scales %g %g", two->tensor_scale, q4->tensor_scale);
    for (int f = 0; f < NB_COMPARE_FORMATS; f++) {
        const nb_compare_format *r = &one.formats[f];
        long total = r->hist.zero + r->hist.over;
        for (int k = 0; k < 64; k++) total += r->hist.bins[k];
        CHECK(r->applicable && total == (long)ROWS * N_IN, "%s: histogram holds %ld", r->name, total);
    }
    /* a row limit; a row length that fits only the 32-element formats */
    p.rows = 10;
    CHECK(nb_compare_formats(&t, &p, &part) == NB_OK && part.rows == 10, "--rows 10: %lld", (long long)part.rows);
    t.ne[0] = 96, t.ne[1] = 10, t.ne[2] = 1;
    CHECK(nb_compare_formats(&t, &p, &part) == NB_OK, "%s", nb_last_error());
    CHECK(part.formats[0].applicable && !part.formats[1].applicable &&
              strstr(part.formats[1].why, "not a multiple of 256") != NULL,
          "q6_K on rows of 96: %s", part.formats[1].why);
}

/* The words of a trace end on the trace's own numbers: every lane's arithmetic on the value
 * nb_lane_explain gives (the number as people read it), for every type with a scale. */
TEST(block_words) {
    static const int scaled[] = {NB_TYPE_Q4_0, NB_TYPE_Q5_0, NB_TYPE_Q8_0, NB_TYPE_Q4_K,
                                 NB_TYPE_Q5_K, NB_TYPE_Q6_K, NB_TYPE_MXFP4, NB_TYPE_NVFP4};
    uint8_t blk[512];
    for (size_t ti = 0; ti < sizeof scaled / sizeof scaled[0]; ti++) {
        const nb_type_info *in = nb_type_get(scaled[ti]);
        float ts;
        nb_block_trace bt;
        CHECK(nb_fixture_block(scaled[ti], blk, sizeof blk, &ts) == NB_OK && nb_block_explain(scaled[ti], blk, &bt) == NB_OK,
              "%s: %s", in->name, nb_last_error());
        for (int l = 0; l < in->block_elems; l++) {
            nb_lane_trace t;
            char code[320], owner[320], arith[320], want[64] = "= ";
            nb_lane_explain(&bt, blk, l, &t);
            nb_lane_story(&bt, &t, 1.0f, code, owner, arith, sizeof code);
            nb_fmt_float(t.value, 1, want + 2, sizeof want - 2);
            const size_t n = strlen(arith), w = strlen(want);
            CHECK(n > w && !strcmp(arith + n - w, want) && *code && *owner, "%s lane %d: '%s' does not end in '%s'",
                  in->name, l, arith, want);
        }
    }
    char rule[320];
    nb_block_trace bt;
    nb_fixture_block(NB_TYPE_Q4_0, blk, sizeof blk, &(float){0});
    nb_block_explain(NB_TYPE_Q4_0, blk, &bt);
    nb_byte_rule(&bt, 3, rule, sizeof rule);
    CHECK(!strcmp(rule, "j = 3: low nibble -> lane j = 3, high nibble -> lane j + 16 = 19 (not 2j, 2j+1)"), "rule: %s", rule);
    const uint8_t B[12] = {[9] = 0x2F}; /* sub-block 5: its low 4 bits from B[9], its high 2 from B[1] */
    nb_k_scale_story(B, 5, rule, sizeof rule);
    CHECK(strstr(rule, "s[5] = (B[9] & 15) | ((B[1] >> 6) << 4) = (47 & 15) | ((0 >> 6) << 4) = 15 | 0 = 15"), "unpack: %s",
          rule);
}

int main(int argc, char **argv) {
    (void)argc;
    test_nibble_bin(argv[0], nibble_bin, sizeof nibble_bin);
    RUN(code_fields_agree_with_decoders);
    RUN(article_codes);
    RUN(code_parsing);
    RUN(lanes_equal_dequantize);
    RUN(block_words);
    RUN(article_fixtures);
    RUN(article_dot_products);
    RUN(e2m1_nearest_matches_encoder);
    RUN(cli_codes_and_fixtures);
    RUN(cli_dot);
    RUN(cli_bad_input);
    RUN(cli_svg);
    RUN(cli_model);
    RUN(nvfp4_2level_amax_matches_padded_row);
    RUN(compare_formats_on_a_synthetic_tensor);
    return test_summary();
}
