/*
 * test_formats.c: the block codecs (the files of src/formats/) through the public API.
 *
 * Expected values here come from the layouts and formulas as the GGUF spec and the first seed
 * article state them (lane placement, 6-bit scale packing, E2M1/E4M3/E8M0 values), computed by
 * code written independently of the codecs. Byte-for-byte agreement with llama.cpp itself is the
 * parity tier's job (tests/parity/test_codecs.py); this program needs no oracle.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "formats/blocks.h"
#include "formats/types.h"
#include "nibble.h"
#include "test.h"

/* ------------------------------------------------------------------ helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static double rng_uniform(void) { return (double)(rng_next() >> 11) * 0x1p-53; }

static float rng_normal(void) {
    double u = rng_uniform(), v = rng_uniform();
    return (float)(sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v));
}

#define NELEM 16384 /* a multiple of every block length */
static float xbuf[NELEM], ybuf[NELEM], zbuf[NELEM];
static uint8_t qbuf[NELEM * 4 + 64];

static int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

static uint16_t fp16(float f) { return nb_fp32_to_fp16(f); }

/* Pack eight 6-bit (scale, min) pairs into Q4_K/Q5_K's 12 bytes, written from the unpacking rule of
 * the article (section 6) solved for B: j<4 own the low 6 bits of B[j] (scale) and B[j+4] (min);
 * j>=4 put their low 4 bits in B[j+4] (scale low nibble, min high nibble) and their top 2 bits in
 * bits 6-7 of B[j-4] (scale) and B[j] (min). */
static void pack_k_scales(const uint8_t sc[8], const uint8_t m[8], uint8_t B[12]) {
    memset(B, 0, 12);
    for (int j = 0; j < 4; j++) {
        B[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        B[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        B[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

/* ---------------------------------------------------- round trips and bounds */

/* Relative RMS error of a quantize/dequantize round trip on N(0,1) data whose per-32-block
 * magnitudes vary over 2^-4..2^4, and the worst error relative to the largest magnitude of the
 * group of `group` elements that shares the element's scale (1: relative to the element). */
static void round_trip(int id, int group, double *rel_rms, double *rel_max) {
    for (int i = 0; i < NELEM; i += 32) {
        float s = ldexpf(1.0f, (int)(rng_next() % 9) - 4);
        for (int j = 0; j < 32; j++) xbuf[i + j] = rng_normal() * s;
    }
    for (int i = 0; i < NELEM; i++) ybuf[i] = NAN;
    nb_status s1 = nb_quantize(id, xbuf, qbuf, NELEM);
    nb_status s2 = nb_dequantize(id, qbuf, ybuf, NELEM);
    CHECK(s1 == NB_OK && s2 == NB_OK, "type %d: quantize %d dequantize %d (%s)", id, s1, s2, nb_last_error());
    double se = 0, sx = 0, worst = 0;
    for (int i = 0; i < NELEM; i += group) {
        float amax = 0;
        for (int j = 0; j < group; j++) amax = fmaxf(amax, fabsf(xbuf[i + j]));
        for (int j = 0; j < group; j++) {
            double e = (double)ybuf[i + j] - xbuf[i + j];
            CHECK(isfinite(ybuf[i + j]), "type %d: element %d not written or not finite", id, i + j);
            se += e * e;
            sx += (double)xbuf[i + j] * xbuf[i + j];
            if (fabs(e) / amax > worst) worst = fabs(e) / amax;
        }
    }
    *rel_rms = sqrt(se / sx);
    *rel_max = worst;
}

TEST(round_trip_error_bounds) {
    /* Bounds: relative RMS from the step size of each format on Gaussian data, with headroom; the
     * worst error against the group maximum from the format's half step plus what its reference
     * rule can clip: f16 2^-11, bf16 2^-8, Q8_0 1/254 plus fp16 rounding of d, Q4_0 1/8 (the +8
     * side clips at 7 steps), MXFP4 1/4 (a floor exponent clips a maximum of mantissa ~2 to 1.5),
     * NVFP4 ~1/5.65 (half gap 1 of 4..6 against a maximum whose scale rounded up by 1/16), the
     * K types at most their half step plus 6-bit sub-scale rounding. */
    static const struct {
        int id, group;
        double rms, max;
    } want[] = {
        {NB_TYPE_F32, 1, 0, 0},            {NB_TYPE_F16, 32, 0.0003, 0.00049}, {NB_TYPE_BF16, 32, 0.0025, 0.0039},
        {NB_TYPE_Q8_0, 32, 0.01, 0.0045},  {NB_TYPE_Q5_0, 32, 0.05, 0.0635},    {NB_TYPE_Q4_0, 32, 0.10, 0.126},
        {NB_TYPE_Q6_K, 256, 0.03, 0.05},   {NB_TYPE_Q5_K, 256, 0.05, 0.06},     {NB_TYPE_Q4_K, 256, 0.10, 0.12},
        {NB_TYPE_Q8_K, 256, 0.02, 0.0045}, {NB_TYPE_MXFP4, 32, 0.15, 0.25},     {NB_TYPE_NVFP4, 16, 0.12, 0.18},
        {NB_TYPE_Q4_1, 32, 0.09, 0.07},    {NB_TYPE_Q5_1, 32, 0.045, 0.035},   {NB_TYPE_Q8_1, 32, 0.01, 0.0045},
    };
    for (size_t t = 0; t < sizeof want / sizeof want[0]; t++) {
        double rms, mx;
        round_trip(want[t].id, want[t].group, &rms, &mx);
        if (getenv("NB_TEST_VERBOSE")) printf("  %-6s rel rms %.5f  rel max %.5f\n", nb_type_name(want[t].id), rms, mx);
        CHECK(rms <= want[t].rms, "%s: relative RMS error %g > %g", nb_type_name(want[t].id), rms, want[t].rms);
        CHECK(mx <= want[t].max, "%s: worst error / block max %g > %g", nb_type_name(want[t].id), mx, want[t].max);
    }
}

TEST(zero_input_gives_zero) {
    memset(xbuf, 0, sizeof xbuf);
    const nb_type_info *info;
    for (int t = 0; (info = nb_type_at(t)); t++) {
        for (int i = 0; i < NELEM; i++) ybuf[i] = NAN;
        CHECK(nb_quantize(info->id, xbuf, qbuf, NELEM) == NB_OK, "%s", nb_last_error());
        CHECK(nb_dequantize(info->id, qbuf, ybuf, NELEM) == NB_OK, "%s", nb_last_error());
        for (int i = 0; i < NELEM; i++)
            if (ybuf[i] != 0) {
                CHECK(0, "%s: zero input decodes to %g at %d", info->name, ybuf[i], i);
                break;
            }
    }
}

/* ------------------------------------------------------------- refusals */

TEST(lengths_not_a_block_multiple_are_refused) {
    const nb_type_info *info;
    for (int t = 0; (info = nb_type_at(t)); t++) {
        if (info->block_elems == 1) continue;
        int64_t bad[] = {info->block_elems + 1, info->block_elems / 2, -(int64_t)info->block_elems};
        for (int b = 0; b < 3; b++) {
            size_t bytes = 0;
            CHECK(nb_quantize(info->id, xbuf, qbuf, bad[b]) == NB_ERR_INVALID_ARG, "%s quantize n=%lld", info->name,
                  (long long)bad[b]);
            CHECK(contains(nb_last_error(), info->name), "message names the type: %s", nb_last_error());
            CHECK(nb_dequantize(info->id, qbuf, ybuf, bad[b]) == NB_ERR_INVALID_ARG, "%s dequantize", info->name);
            CHECK(nb_row_bytes(info->id, bad[b], &bytes) == NB_ERR_INVALID_ARG, "%s row bytes", info->name);
        }
    }
    CHECK(nb_quantize_mxfp4_roundup(xbuf, qbuf, 33) == NB_ERR_INVALID_ARG, "round-up length");
    float ts;
    CHECK(nb_quantize_nvfp4_2level(xbuf, qbuf, 96, &ts) == NB_ERR_INVALID_ARG, "2-level length");
}

TEST(nonfinite_input_is_refused_with_its_index) {
    const float bad[] = {NAN, INFINITY, -INFINITY};
    const nb_type_info *info;
    for (int t = 0; (info = nb_type_at(t)); t++) {
        for (int b = 0; b < 3; b++) {
            for (int i = 0; i < 512; i++) xbuf[i] = 0.5f;
            xbuf[300] = bad[b];
            CHECK(nb_quantize(info->id, xbuf, qbuf, 512) == NB_ERR_NONFINITE, "%s", info->name);
            CHECK(contains(nb_last_error(), "element 300"), "message names the index: %s", nb_last_error());
            CHECK(contains(nb_last_error(), b ? "Inf" : "NaN"), "message names the value: %s", nb_last_error());
        }
    }
    float ts;
    xbuf[300] = NAN;
    CHECK(nb_quantize_mxfp4_roundup(xbuf, qbuf, 512) == NB_ERR_NONFINITE && contains(nb_last_error(), "element 300"),
          "round-up: %s", nb_last_error());
    CHECK(nb_quantize_nvfp4_2level(xbuf, qbuf, 512, &ts) == NB_ERR_NONFINITE && contains(nb_last_error(), "element 300"),
          "2-level: %s", nb_last_error());
    xbuf[300] = 0.5f;
    CHECK(nb_quantize_nvfp4_2level(xbuf, qbuf, 512, NULL) == NB_ERR_INVALID_ARG, "NULL tensor_scale");
}

TEST(unknown_and_unsupported_ids_are_refused_by_name) {
    size_t bytes;
    CHECK(nb_quantize(16, xbuf, qbuf, 256) == NB_ERR_UNSUPPORTED, "iq2_xxs quantize");
    CHECK(contains(nb_last_error(), "iq2_xxs"), "names iq2_xxs: %s", nb_last_error());
    CHECK(nb_dequantize(16, qbuf, ybuf, 256) == NB_ERR_UNSUPPORTED && contains(nb_last_error(), "iq2_xxs"), "iq2_xxs deq");
    CHECK(nb_dequantize(10, qbuf, ybuf, 256) == NB_ERR_UNSUPPORTED && contains(nb_last_error(), "q2_K"), "q2_K");
    CHECK(nb_dequantize(41, qbuf, ybuf, 256) == NB_ERR_UNSUPPORTED && contains(nb_last_error(), "q1_0"), "q1_0 (ggml's newest id): %s",
          nb_last_error());
    CHECK(nb_quantize(99, xbuf, qbuf, 32) == NB_ERR_UNSUPPORTED && contains(nb_last_error(), "99"), "id 99");
    CHECK(contains(nb_last_error(), "unknown"), "id 99 is unknown: %s", nb_last_error());
    CHECK(nb_row_bytes(-1, 32, &bytes) == NB_ERR_UNSUPPORTED, "id -1");
    CHECK(nb_type_get(16) == NULL && nb_type_get(99) == NULL, "no rows for unsupported ids");
}

/* --------------------------------------------- the table and bits per weight */

TEST(type_table_sizes_and_bits_per_weight) {
    static const struct {
        int id, elems, bytes;
        double bpw;
    } want[] = {
        {NB_TYPE_F32, 1, 4, 32},        {NB_TYPE_F16, 1, 2, 16},         {NB_TYPE_BF16, 1, 2, 16},
        {NB_TYPE_Q4_0, 32, 18, 4.5},    {NB_TYPE_Q5_0, 32, 22, 5.5},     {NB_TYPE_Q8_0, 32, 34, 8.5},
        {NB_TYPE_Q4_K, 256, 144, 4.5},  {NB_TYPE_Q5_K, 256, 176, 5.5},   {NB_TYPE_Q6_K, 256, 210, 6.5625},
        {NB_TYPE_Q8_K, 256, 292, 9.125}, {NB_TYPE_MXFP4, 32, 17, 4.25},  {NB_TYPE_NVFP4, 64, 36, 4.5},
        {NB_TYPE_Q4_1, 32, 20, 5},      {NB_TYPE_Q5_1, 32, 24, 6},       {NB_TYPE_Q8_1, 32, 36, 9},
    };
    for (size_t t = 0; t < sizeof want / sizeof want[0]; t++) {
        const nb_type_info *info = nb_type_get(want[t].id);
        CHECK(info && info->block_elems == want[t].elems && info->block_bytes == want[t].bytes, "type %d", want[t].id);
        if (!info) continue;
        double bpw = info->block_bytes * 8.0 / info->block_elems;
        CHECK(bpw == want[t].bpw, "%s: %g bits/weight, want %g", info->name, bpw, want[t].bpw);
        size_t bytes = 0;
        CHECK(nb_row_bytes(info->id, 4096, &bytes) == NB_OK && bytes == (size_t)(4096 / info->block_elems * info->block_bytes),
              "%s row bytes %zu", info->name, bytes);
    }
    /* The article's capacity arithmetic: 7e9 weights at 4.5 bits are 3.9375 GB. */
    CHECK(7e9 * 4.5 / 8 / 1e9 == 3.9375, "Q4_K capacity");
}

/* The table read row by row: ids ascend, every row is the one nb_type_get() gives, names round trip
 * for the weight types, and the fallback rules point at rows that can take the row. */
TEST(type_table_rows_names_and_fallbacks) {
    const nb_type_info *info;
    int last = -1, n = 0, q8_k = 0;
    for (int i = 0; (info = nb_type_at(i)); i++, n++) {
        CHECK(info->id > last && nb_type_get(info->id) == info, "row %d: id %d", i, info->id);
        CHECK(!strcmp(nb_type_name(info->id), info->name), "%s: nb_type_name %s", info->name, nb_type_name(info->id));
        CHECK(nb_type_from_name(info->name) == (info->weight_type ? info->id : -1), "%s by name", info->name);
        q8_k += info->id == NB_TYPE_Q8_K && !info->weight_type;
        last = info->id;
        const nb_type_traits *t = nb_type_traits_get(info->id);
        if (t->fallback >= 0) {
            const nb_type_info *f = nb_type_get(t->fallback);
            CHECK(f && f->weight_type && f->block_elems < info->block_elems && info->block_elems % f->block_elems == 0,
                  "%s falls back to %s", info->name, nb_type_name(t->fallback));
        }
    }
    CHECK(n >= 12 && q8_k == 1 && nb_type_at(-1) == NULL && nb_type_at(n) == NULL, "%d rows", n);
    CHECK(nb_type_from_name("Q4_k") == NB_TYPE_Q4_K && nb_type_from_name("q4_1") == NB_TYPE_Q4_1 &&
          nb_type_from_name("q8_1") == -1 && nb_type_from_name("iq2_xxs") == -1 && nb_type_from_name(NULL) == -1,
          "names in any case; none for activation types and types without a codec");
    CHECK(!strcmp(nb_type_name(16), "iq2_xxs") && !strcmp(nb_type_name(4), "q4_2 (retired)") && !strcmp(nb_type_name(42), "unknown") &&
          !strcmp(nb_type_name(-1), "unknown"), "ggml's names of ids without a codec");
    /* what llama.cpp's K-quant recipes wanted where a file holds a fallback */
    for (int id = 0; id < 64; id++) {
        const nb_type_traits *t = nb_type_row(id);
        if (t && t->fallback_of >= 0)
            CHECK((nb_type_row(t->fallback_of)->flags & NB_TYPE_KQUANT), "%s stands in for %s", t->info.name,
                  nb_type_name(t->fallback_of));
    }
    CHECK(nb_type_row(NB_TYPE_Q5_0)->fallback_of == NB_TYPE_Q4_K && nb_type_row(7)->fallback_of == NB_TYPE_Q5_K &&
          nb_type_row(NB_TYPE_Q8_0)->fallback_of == NB_TYPE_Q6_K && nb_type_row(20)->fallback_of == 10,
          "q5_0, q5_1, q8_0 and iq4_nl stand in for q4_K, q5_K, q6_K and q2_K");
}

TEST(llama_file_type_names) {
    CHECK(!strcmp(nb_ftype_name(15), "Q4_K_M") && !strcmp(nb_ftype_name(38), "MXFP4_MOE") && !strcmp(nb_ftype_name(7), "Q8_0"),
          "names");
    CHECK(!strcmp(nb_ftype_name(4), "unknown") && !strcmp(nb_ftype_name(40), "unknown") && !strcmp(nb_ftype_name(-1), "unknown"),
          "retired and unassigned ids");
    for (int id = 0; id < 64; id++)
        if (strcmp(nb_ftype_name(id), "unknown"))
            CHECK(nb_ftype_from_name(nb_ftype_name(id)) == id, "%s round trip", nb_ftype_name(id));
    CHECK(nb_ftype_from_name("Q9_K") == -1, "unknown name");
}

/* ----------------------------------------------------- Q4_K worked numbers */

static void q4k_block(nb_block_q4_k *b, float d, float dmin, const uint8_t sc[8], const uint8_t m[8]) {
    memset(b, 0, sizeof *b);
    b->d = fp16(d);
    b->dmin = fp16(dmin);
    pack_k_scales(sc, m, b->scales);
}

TEST(q4_k_article_byte_0xa5) {
    /* Section 5: d = 0.125, dmin = 0.0625, pairs (2,4) and (3,8); 0xA5 -> 1.0 in lane 0 and 3.25 in
     * lane 32; byte 0 -> -0.25 and -0.5; 0xFF -> both codes 15, still different weights. */
    static const uint8_t sc[8] = {2, 3, 1, 1, 1, 1, 1, 1}, m[8] = {4, 8, 0, 0, 0, 0, 0, 0};
    nb_block_q4_k b;
    q4k_block(&b, 0.125f, 0.0625f, sc, m);
    b.qs[0] = 0xA5;
    b.qs[1] = 0x00;
    b.qs[2] = 0xFF;
    CHECK(b.scales[0] == 2 && b.scales[1] == 3 && b.scales[4] == 4 && b.scales[5] == 8, "fixture packing");
    float y[256];
    CHECK(nb_dequantize(NB_TYPE_Q4_K, &b, y, 256) == NB_OK, "%s", nb_last_error());
    CHECK(y[0] == 1.0f, "lane 0: %g, want 1", y[0]);
    CHECK(y[32] == 3.25f, "lane 32: %g, want 3.25", y[32]);
    CHECK(y[1] != 3.25f, "the high nibble must not land in lane 1");
    CHECK(y[1] == -0.25f && y[33] == -0.5f, "byte 0: %g %g, want -0.25 -0.5", y[1], y[33]);
    CHECK(y[2] == 3.5f && y[34] == 5.125f, "byte 0xFF: %g %g, want 3.5 5.125", y[2], y[34]);
}

TEST(q4_k_article_scale_bytes_130_and_33) {
    /* Section 6: B[0] = 130, B[8] = 33 -> s[4] = (33 & 15) | ((130 >> 6) << 4) = 33, not B[4]. */
    uint8_t B[12] = {130, 0, 0, 0, 7, 0, 0, 0, 33, 0, 0, 0};
    uint8_t s, m;
    nb_k_scale_min(4, B, &s, &m);
    CHECK(s == 33, "s[4] = %u, want 33", s);
    CHECK(m == 2, "m[4] = %u, want (33 >> 4) | ((B[4] >> 6) << 4) = 2", m);
    nb_block_q4_k b;
    memset(&b, 0, sizeof b);
    b.d = fp16(1.0f);
    memcpy(b.scales, B, 12);
    b.qs[64] = 0x01; /* chunk 2, low nibble: sub-block 4, lane 128 */
    float y[256];
    CHECK(nb_dequantize(NB_TYPE_Q4_K, &b, y, 256) == NB_OK, "%s", nb_last_error());
    CHECK(y[128] == 33.0f, "lane 128 decodes with s[4]: %g, want 33", y[128]);
}

/* Asymmetric metadata: every scale and min different, j >= 4 using their split top bits. */
static const uint8_t asym_sc[8] = {5, 17, 33, 63, 47, 18, 60, 9};
static const uint8_t asym_m[8] = {61, 2, 44, 13, 31, 57, 16, 40};

TEST(q4_k_all_eight_scale_min_pairs) {
    uint8_t B[12];
    pack_k_scales(asym_sc, asym_m, B);
    for (int j = 0; j < 8; j++) {
        uint8_t s, m;
        nb_k_scale_min(j, B, &s, &m);
        CHECK(s == asym_sc[j] && m == asym_m[j], "pair %d: (%u,%u), want (%u,%u)", j, s, m, asym_sc[j], asym_m[j]);
    }
    /* and as the decoder sees them: code 0 gives -dmin*m[j], code 1 gives d*sc[j] - dmin*m[j] */
    nb_block_q4_k b;
    q4k_block(&b, 1.0f, 0.5f, asym_sc, asym_m);
    for (int c = 0; c < 4; c++) b.qs[32 * c + 1] = 0x11;
    float y[256];
    CHECK(nb_dequantize(NB_TYPE_Q4_K, &b, y, 256) == NB_OK, "%s", nb_last_error());
    for (int j = 0; j < 8; j++) {
        CHECK(y[32 * j] == -0.5f * asym_m[j], "sub-block %d min: %g", j, y[32 * j]);
        CHECK(y[32 * j + 1] == asym_sc[j] - 0.5f * asym_m[j], "sub-block %d scale: %g", j, y[32 * j + 1]);
    }
}

TEST(q4_k_and_q5_k_lane_placement_all_256) {
    /* Random codes, different metadata per sub-block; expected value of each destination t from
     * the article's rule: chunk c = t/64, byte 32c + t%32, high nibble iff t%64 >= 32, sub-block
     * 2c + high. Q5_K adds bit (2c + high) of qh[t%32] as the fifth bit. */
    for (int rep = 0; rep < 20; rep++) {
        nb_block_q4_k b4;
        nb_block_q5_k b5;
        q4k_block(&b4, 0.25f, 0.125f, asym_sc, asym_m);
        memset(&b5, 0, sizeof b5);
        b5.d = b4.d;
        b5.dmin = b4.dmin;
        memcpy(b5.scales, b4.scales, 12);
        for (int i = 0; i < 128; i++) b4.qs[i] = b5.qs[i] = (uint8_t)rng_next();
        for (int i = 0; i < 32; i++) b5.qh[i] = (uint8_t)rng_next();
        float y4[256], y5[256];
        CHECK(nb_dequantize(NB_TYPE_Q4_K, &b4, y4, 256) == NB_OK, "q4_K");
        CHECK(nb_dequantize(NB_TYPE_Q5_K, &b5, y5, 256) == NB_OK, "q5_K");
        for (int t = 0; t < 256; t++) {
            int c = t / 64, high = (t % 64) >= 32, l = t % 32, sub = 2 * c + high;
            int code = high ? b4.qs[32 * c + l] >> 4 : b4.qs[32 * c + l] & 15;
            float want4 = 0.25f * asym_sc[sub] * code - 0.125f * asym_m[sub];
            int code5 = code | ((b5.qh[l] >> sub) & 1) << 4;
            float want5 = 0.25f * asym_sc[sub] * code5 - 0.125f * asym_m[sub];
            CHECK(y4[t] == want4, "q4_K lane %d: %g, want %g", t, y4[t], want4);
            CHECK(y5[t] == want5, "q5_K lane %d: %g, want %g", t, y5[t], want5);
        }
    }
}

TEST(q6_k_lane_placement_all_256) {
    nb_block_q6_k b;
    for (int i = 0; i < 128; i++) b.ql[i] = (uint8_t)rng_next();
    for (int i = 0; i < 64; i++) b.qh[i] = (uint8_t)rng_next();
    for (int i = 0; i < 16; i++) b.scales[i] = (int8_t)(i * 7 - 50);
    b.d = fp16(0.5f);
    float y[256];
    CHECK(nb_dequantize(NB_TYPE_Q6_K, &b, y, 256) == NB_OK, "q6_K");
    for (int t = 0; t < 256; t++) {
        int h = t / 128, r = (t % 128) / 32, l = t % 32;
        int lowbyte = b.ql[64 * h + l + 32 * (r & 1)];
        int low = r < 2 ? lowbyte & 15 : lowbyte >> 4;
        int q = (low | ((b.qh[32 * h + l] >> (2 * r)) & 3) << 4) - 32;
        float want = 0.5f * b.scales[t / 16] * q;
        CHECK(y[t] == want, "q6_K lane %d: %g, want %g", t, y[t], want);
    }
}

TEST(legacy_lane_placement) {
    /* Q4_0/Q5_0: byte j holds elements j (low) and j+16 (high); Q5_0's fifth bits are bits of a
     * little-endian u32. */
    nb_block_q4_0 b4;
    nb_block_q5_0 b5;
    b4.d = b5.d = fp16(2.0f);
    for (int j = 0; j < 16; j++) b4.qs[j] = b5.qs[j] = (uint8_t)rng_next();
    for (int j = 0; j < 4; j++) b5.qh[j] = (uint8_t)rng_next();
    float y4[32], y5[32];
    CHECK(nb_dequantize(NB_TYPE_Q4_0, &b4, y4, 32) == NB_OK && nb_dequantize(NB_TYPE_Q5_0, &b5, y5, 32) == NB_OK, "dq");
    for (int t = 0; t < 32; t++) {
        int code = t < 16 ? b4.qs[t] & 15 : b4.qs[t - 16] >> 4;
        int bit = (b5.qh[t / 8] >> (t % 8)) & 1;
        CHECK(y4[t] == 2.0f * (code - 8), "q4_0 lane %d", t);
        CHECK(y5[t] == 2.0f * ((code | bit << 4) - 16), "q5_0 lane %d", t);
    }
}

TEST(q4_1_q5_1_lane_placement_and_minimum) {
    /* Q4_1/Q5_1: Q4_0's and Q5_0's code placement, unsigned codes, element = q*d + m. */
    nb_block_q4_1 b4;
    nb_block_q5_1 b5;
    b4.d = b5.d = fp16(0.5f);
    b4.m = b5.m = fp16(-3.0f);
    for (int j = 0; j < 16; j++) b4.qs[j] = b5.qs[j] = (uint8_t)rng_next();
    for (int j = 0; j < 4; j++) b5.qh[j] = (uint8_t)rng_next();
    float y4[32], y5[32];
    CHECK(nb_dequantize(NB_TYPE_Q4_1, &b4, y4, 32) == NB_OK && nb_dequantize(NB_TYPE_Q5_1, &b5, y5, 32) == NB_OK, "dq");
    for (int t = 0; t < 32; t++) {
        int code = t < 16 ? b4.qs[t] & 15 : b4.qs[t - 16] >> 4;
        int bit = (b5.qh[t / 8] >> (t % 8)) & 1;
        CHECK(y4[t] == 0.5f * code - 3.0f, "q4_1 lane %d", t);
        CHECK(y5[t] == 0.5f * (code | bit << 4) - 3.0f, "q5_1 lane %d", t);
    }
    /* the rule: d = (max - min)/15 (31), m = min, code = trunc((x - min)/d + 0.5); the minimum
     * and maximum are exact codes 0 and 15 (31), a value half a step up rounds up */
    for (int j = 0; j < 32; j++) xbuf[j] = -3.0f + 0.5f * (float)((j * 7) % 16);
    xbuf[5] = -3.0f + 0.5f * 3.5f; /* x = min + 3.5 d: code 4 */
    CHECK(nb_quantize(NB_TYPE_Q4_1, xbuf, &b4, 32) == NB_OK, "%s", nb_last_error());
    CHECK(b4.d == fp16(0.5f) && b4.m == fp16(-3.0f), "d %g m %g", nb_fp16_to_fp32(b4.d), nb_fp16_to_fp32(b4.m));
    CHECK((b4.qs[5] & 15) == 4, "half a step rounds up: code %d", b4.qs[5] & 15);
    CHECK(nb_dequantize(NB_TYPE_Q4_1, &b4, y4, 32) == NB_OK, "dq");
    for (int j = 0; j < 32; j++) CHECK(j == 5 || y4[j] == xbuf[j], "q4_1 grid value %d: %g, want %g", j, y4[j], xbuf[j]);
    for (int j = 0; j < 32; j++) xbuf[j] = 1.0f + 0.25f * (float)((j * 5) % 32);
    CHECK(nb_quantize(NB_TYPE_Q5_1, xbuf, &b5, 32) == NB_OK && nb_dequantize(NB_TYPE_Q5_1, &b5, y5, 32) == NB_OK, "q5_1");
    CHECK(b5.d == fp16(0.25f) && b5.m == fp16(1.0f), "q5_1 d %g m %g", nb_fp16_to_fp32(b5.d), nb_fp16_to_fp32(b5.m));
    for (int j = 0; j < 32; j++) CHECK(y5[j] == xbuf[j], "q5_1 grid value %d: %g, want %g", j, y5[j], xbuf[j]);
}

TEST(q8_1_sum_field) {
    /* Q8_1 (the file rule): Q8_0's codes and d, and s = fp16(d * sum of the codes). */
    for (int i = 0; i < 64; i++) xbuf[i] = rng_normal();
    nb_block_q8_1 b[2];
    nb_block_q8_0 b0[2];
    CHECK(nb_quantize(NB_TYPE_Q8_1, xbuf, b, 64) == NB_OK && nb_quantize(NB_TYPE_Q8_0, xbuf, b0, 64) == NB_OK, "quantize");
    for (int k = 0; k < 2; k++) {
        int sum = 0;
        float amax = 0;
        for (int j = 0; j < 32; j++) sum += b[k].qs[j];
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(xbuf[32 * k + j])); /* apart, as act_ref.c's */
        CHECK(!memcmp(b[k].qs, b0[k].qs, 32) && b[k].d == b0[k].d, "block %d: q8_0's codes and d", k);
        CHECK(b[k].s == fp16((float)sum * (amax / 127)), "block %d s", k);
    }
}

/* ---------------------------------------------------------- E2M1, MXFP4, NVFP4 */

static const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

TEST(mxfp4_codes_and_article_scale_0x7e) {
    /* e = 127 is scale 1: the 16 nibbles decode to the E2M1 table (0101 = 3, 0111 = 6, 1000 = -0);
     * 0x7E is scale 0.5, so code 0101 gives 1.5. Byte j: element j low, j+16 high. */
    nb_block_mxfp4 b;
    b.e = 127;
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | (15 - j) << 4);
    float y[32];
    CHECK(nb_dequantize(NB_TYPE_MXFP4, &b, y, 32) == NB_OK, "%s", nb_last_error());
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == e2m1[j], "code %d: %g, want %g", j, y[j], e2m1[j]);
        CHECK(y[j + 16] == e2m1[15 - j], "lane %d: %g, want %g", j + 16, y[j + 16], e2m1[15 - j]);
    }
    CHECK(y[5] == 3.0f && y[7] == 6.0f && y[8] == 0.0f, "0101 = 3, 0111 = 6, 1000 = -0");
    b.e = 0x7E;
    CHECK(nb_dequantize(NB_TYPE_MXFP4, &b, y, 32) == NB_OK && y[5] == 1.5f, "0x7E scale: %g, want 1.5", y[5]);
}

TEST(nvfp4_split_half_lane_order_and_article_e4m3) {
    /* d[s] per 16 elements; byte 8s+j: element 16s+j (low), 16s+j+8 (high). UE4M3 0x2A is
     * exponent 5, fraction 2 = 0.3125 (article section 4); code 0101 (3) gives 0.9375. */
    nb_block_nvfp4 b;
    static const uint8_t d[4] = {0x2A, 0x38, 0x40, 0x30}; /* 0.3125, 1, 2, 0.5 */
    static const float dv[4] = {0.3125f, 1.0f, 2.0f, 0.5f};
    memcpy(b.d, d, 4);
    for (int i = 0; i < 32; i++) b.qs[i] = (uint8_t)rng_next();
    float y[64];
    CHECK(nb_dequantize(NB_TYPE_NVFP4, &b, y, 64) == NB_OK, "%s", nb_last_error());
    for (int t = 0; t < 64; t++) {
        int s = t / 16, r = t % 16, byte = b.qs[8 * s + r % 8];
        int code = r < 8 ? byte & 15 : byte >> 4;
        CHECK(y[t] == e2m1[code] * dv[s], "nvfp4 lane %d: %g, want %g", t, y[t], e2m1[code] * dv[s]);
    }
    b.qs[0] = 0x05;
    CHECK(nb_dequantize(NB_TYPE_NVFP4, &b, y, 64) == NB_OK && y[0] == 0.9375f, "0.3125 * 3 = %g", y[0]);
    /* and the quantizer puts element 16s+j+8 in the high nibble: a ramp of distinct codes */
    for (int t = 0; t < 64; t++) xbuf[t] = e2m1[t % 8] * (t % 16 < 8 ? 1.0f : -1.0f);
    CHECK(nb_quantize(NB_TYPE_NVFP4, xbuf, &b, 64) == NB_OK, "%s", nb_last_error());
    for (int s = 0; s < 4; s++)
        for (int j = 0; j < 8; j++)
            CHECK(b.qs[8 * s + j] == (uint8_t)(j | (j == 0 ? 0 : 8 + j) << 4), "nvfp4 byte %d = 0x%02x", 8 * s + j,
                  b.qs[8 * s + j]);
}

TEST(mxfp4_reference_clips_and_roundup_does_not) {
    /* Block maximum 1.875: the reference exponent floor(log2(1.875)) - 2 = -2 gives a scale 0.25
     * whose largest value is 1.5 (clipped by 0.375); round-up takes 2^-1 (max 3) and 1.875/0.5 =
     * 3.75 rounds to 4, i.e. 2.0 (error 0.125). */
    for (int j = 0; j < 32; j++) xbuf[j] = 0.01f * j;
    xbuf[7] = 1.875f;
    nb_block_mxfp4 ref, up;
    float yr[32], yu[32];
    CHECK(nb_quantize(NB_TYPE_MXFP4, xbuf, &ref, 32) == NB_OK, "ref");
    CHECK(nb_quantize_mxfp4_roundup(xbuf, &up, 32) == NB_OK, "%s", nb_last_error());
    nb_dequantize(NB_TYPE_MXFP4, &ref, yr, 32);
    nb_dequantize(NB_TYPE_MXFP4, &up, yu, 32);
    CHECK(ref.e == 125 && yr[7] == 1.5f, "reference: e %u, max decodes to %g", ref.e, yr[7]);
    CHECK(up.e == 126 && yu[7] == 2.0f, "round-up: e %u, max decodes to %g", up.e, yu[7]);
}

TEST(mxfp4_roundup_properties) {
    /* On every block: 2^E is the smallest power of two with 6*2^E >= amax (so nothing clips), the
     * block maximum is off by at most one scale unit (the half gap between 4 and 6), and every
     * element is the E2M1 value nearest to x/2^E (within half its local gap). */
    for (int i = 0; i < NELEM; i += 32) {
        float s = ldexpf(1.0f, (int)(rng_next() % 40) - 20) * (float)(1.0 + rng_uniform());
        for (int j = 0; j < 32; j++) xbuf[i + j] = rng_normal() * s;
    }
    nb_block_mxfp4 *b = (nb_block_mxfp4 *)qbuf;
    CHECK(nb_quantize_mxfp4_roundup(xbuf, qbuf, NELEM) == NB_OK, "%s", nb_last_error());
    CHECK(nb_dequantize(NB_TYPE_MXFP4, qbuf, ybuf, NELEM) == NB_OK, "dequantize");
    int bad_scale = 0, bad_elem = 0;
    for (int i = 0; i < NELEM / 32; i++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(xbuf[32 * i + j]));
        double unit = ldexp(1.0, b[i].e - 127);
        if (!(6 * unit >= amax && 3 * unit < amax)) bad_scale++;
        for (int j = 0; j < 32; j++) {
            double v = fabs(xbuf[32 * i + j]) / unit, gap = v < 2 ? 0.5 : v < 4 ? 1 : 2;
            double err = fabs((double)ybuf[32 * i + j] - xbuf[32 * i + j]) / unit;
            if (err > gap / 2) bad_elem++;
        }
    }
    CHECK(bad_scale == 0, "%d blocks whose shared scale is not the smallest covering power of two", bad_scale);
    CHECK(bad_elem == 0, "%d elements farther than half a step from their value", bad_elem);
    /* ties go to the even code: 5 -> 4, 2.5 -> 2, 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 3.5 -> 4 */
    static const float tie[8] = {6, 5, 2.5f, 0.25f, 0.75f, 1.25f, 1.75f, -3.5f};
    static const float want[8] = {6, 4, 2, 0, 1, 1, 2, -4};
    memset(xbuf, 0, 32 * sizeof(float));
    memcpy(xbuf, tie, sizeof tie);
    CHECK(nb_quantize_mxfp4_roundup(xbuf, qbuf, 32) == NB_OK && b[0].e == 127, "e = %u, want 127", b[0].e);
    nb_dequantize(NB_TYPE_MXFP4, qbuf, ybuf, 32);
    for (int j = 0; j < 8; j++) CHECK(ybuf[j] == want[j], "tie %g -> %g, want %g", tie[j], ybuf[j], want[j]);
}

static double rms_err(const float *x, const float *y, int n, float factor) {
    double se = 0;
    for (int i = 0; i < n; i++) {
        double e = (double)y[i] * factor - x[i];
        se += e * e;
    }
    return sqrt(se / n);
}

TEST(nvfp4_two_level_properties) {
    float ts = 0;
    nb_block_nvfp4 *b = (nb_block_nvfp4 *)qbuf;
    /* all zero: factor 1, all-zero bytes */
    memset(xbuf, 0, 64 * sizeof(float));
    memset(qbuf, 0xEE, 36);
    CHECK(nb_quantize_nvfp4_2level(xbuf, qbuf, 64, &ts) == NB_OK && ts == 1.0f, "zero tensor factor %g", ts);
    for (int i = 0; i < 36; i++) CHECK(qbuf[i] == 0, "zero tensor byte %d = 0x%02x", i, qbuf[i]);

    /* Ordinary tensor: factor = amax/2688, the tensor maximum is block scale 448 times code 6, and
     * every element is within one E2M1 unit (the largest half gap) of its value. */
    float amax = 0;
    int at = 0;
    for (int i = 0; i < NELEM; i++) {
        xbuf[i] = rng_normal() * 0.05f;
        if (fabsf(xbuf[i]) > amax) amax = fabsf(xbuf[i]), at = i;
    }
    CHECK(nb_quantize_nvfp4_2level(xbuf, qbuf, NELEM, &ts) == NB_OK, "%s", nb_last_error());
    CHECK(fabsf(ts - amax / 2688.0f) <= 1e-6f * ts, "factor %g, want %g", ts, amax / 2688.0f);
    const nb_block_nvfp4 *bm = &b[at / 64];
    int sub = (at % 64) / 16, j = at % 16;
    uint8_t code = j < 8 ? bm->qs[8 * sub + j] & 15 : bm->qs[8 * sub + j - 8] >> 4;
    CHECK(bm->d[sub] == 0x7E && (code & 7) == 7, "max element: scale 0x%02x code %u", bm->d[sub], code);
    CHECK(nb_dequantize(NB_TYPE_NVFP4, qbuf, ybuf, NELEM) == NB_OK, "dequantize");
    int far = 0;
    for (int i = 0; i < NELEM; i++) {
        double unit = nb_ue4m3_to_fp32(b[i / 64].d[(i % 64) / 16]) * (double)ts;
        if (fabs((double)ybuf[i] * ts - xbuf[i]) > unit * 1.0001) far++;
    }
    CHECK(far == 0, "%d elements more than one unit from their value", far);

    /* Two-level beats ggml's single-level rule where the block magnitudes leave UE4M3's range:
     * a small tensor (single level: amax16/6 below UE4M3's smallest step, blocks vanish), a large
     * one (single level saturates at 448*6), and a tensor where a quarter of the blocks are 1000x
     * smaller than the rest. */
    static const float mags[3] = {2e-3f, 3e4f, 0};
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < NELEM; i++) {
            float s = mags[k] ? mags[k] : ((i / 64) % 4 == 0 ? 1e-3f : 1.0f);
            xbuf[i] = rng_normal() * s;
        }
        CHECK(nb_quantize_nvfp4_2level(xbuf, qbuf, NELEM, &ts) == NB_OK, "2-level");
        nb_dequantize(NB_TYPE_NVFP4, qbuf, ybuf, NELEM);
        nb_quantize(NB_TYPE_NVFP4, xbuf, qbuf, NELEM);
        nb_dequantize(NB_TYPE_NVFP4, qbuf, zbuf, NELEM);
        double two, one;
        if (mags[k]) {
            two = rms_err(xbuf, ybuf, NELEM, ts);
            one = rms_err(xbuf, zbuf, NELEM, 1.0f);
        } else { /* only the small blocks */
            two = one = 0;
            for (int i = 0; i < NELEM; i += 256) {
                two += rms_err(xbuf + i, ybuf + i, 64, ts);
                one += rms_err(xbuf + i, zbuf + i, 64, 1.0f);
            }
        }
        CHECK(two < 0.5 * one, "case %d: two-level RMS error %g not well below single-level %g", k, two, one);
    }
}

TEST(q8_k_bsums_and_scale) {
    for (int i = 0; i < 512; i++) xbuf[i] = rng_normal();
    xbuf[3] = 7.0f; /* the signed element of largest magnitude maps to -127, so here d < 0 */
    nb_block_q8_k b[2];
    CHECK(nb_quantize(NB_TYPE_Q8_K, xbuf, b, 512) == NB_OK, "%s", nb_last_error());
    CHECK(b[0].qs[3] == -127 && b[0].d < 0, "max element code %d, d %g", b[0].qs[3], b[0].d);
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < 16; s++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += b[k].qs[16 * s + l];
            CHECK(b[k].bsums[s] == sum, "block %d bsums[%d] = %d, want %d", k, s, b[k].bsums[s], sum);
        }
    memset(xbuf, 0, 256 * sizeof(float));
    memset(b, 0x55, sizeof b[0]);
    CHECK(nb_quantize(NB_TYPE_Q8_K, xbuf, b, 256) == NB_OK, "zero block");
    CHECK(b[0].d == 0 && b[0].bsums[0] == 0 && b[0].bsums[15] == 0 && b[0].qs[100] == 0, "zero block fully written");
}

int main(void) {
    RUN(round_trip_error_bounds);
    RUN(zero_input_gives_zero);
    RUN(lengths_not_a_block_multiple_are_refused);
    RUN(nonfinite_input_is_refused_with_its_index);
    RUN(unknown_and_unsupported_ids_are_refused_by_name);
    RUN(type_table_sizes_and_bits_per_weight);
    RUN(type_table_rows_names_and_fallbacks);
    RUN(llama_file_type_names);
    RUN(q4_k_article_byte_0xa5);
    RUN(q4_k_article_scale_bytes_130_and_33);
    RUN(q4_k_all_eight_scale_min_pairs);
    RUN(q4_k_and_q5_k_lane_placement_all_256);
    RUN(q6_k_lane_placement_all_256);
    RUN(legacy_lane_placement);
    RUN(q4_1_q5_1_lane_placement_and_minimum);
    RUN(q8_1_sum_field);
    RUN(mxfp4_codes_and_article_scale_0x7e);
    RUN(nvfp4_split_half_lane_order_and_article_e4m3);
    RUN(mxfp4_reference_clips_and_roundup_does_not);
    RUN(mxfp4_roundup_properties);
    RUN(nvfp4_two_level_properties);
    RUN(q8_k_bsums_and_scale);
    return test_summary();
}
