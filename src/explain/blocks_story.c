/*
 * blocks_story.c: a block trace in words, with its numbers filled in (contract: explain.h), as
 * nb_code_explain's rule and arithmetic are for a code: how a payload byte reaches its lanes, who
 * owns a lane's scale and how the lane's value is computed, and how a K-quant sub-block's 6-bit
 * scale and min are unpacked. The lane orders and scale owners are docs/FORMATS.md's; the numbers
 * are the trace's own, so the words agree with nb_dequantize() wherever the trace does.
 */
#include <stdio.h>
#include <string.h>

#include "explain/explain.h"

/* A number for people (nb_fmt_float with a Unicode minus) in slot k of the caller's nums[4][48], so
 * that one snprintf can hold several. */
#define NUM(k, v) nb_fmt_float((v), 1, nums[k], sizeof nums[k])

void nb_byte_rule(const nb_block_trace *bt, int p, char *s, size_t cap) {
    switch (bt->type) {
    case NB_TYPE_Q4_0: case NB_TYPE_Q5_0: case NB_TYPE_MXFP4:
        snprintf(s, cap, "j = %d: low nibble -> lane j = %d, high nibble -> lane j + 16 = %d (not 2j, 2j+1)", p, p, p + 16);
        break;
    case NB_TYPE_Q4_K: case NB_TYPE_Q5_K: {
        int c = p / 32, l = p % 32;
        snprintf(s, cap, "payload index 32c + l with chunk c = %d, l = %d: low nibble -> lane 64c + l = %d "
                 "(sub-block 2c = %d), high nibble -> lane 64c + 32 + l = %d (sub-block 2c + 1 = %d)",
                 c, l, 64 * c + l, 2 * c, 64 * c + 32 + l, 2 * c + 1);
        break;
    }
    case NB_TYPE_Q6_K: {
        int h = p / 64, r = p % 64, l = r % 32;
        snprintf(s, cap, "half h = %d, ql[64h + %s l] with l = %d: low nibble -> lane 128h + %sl = %d, high nibble -> "
                 "lane 128h + %sl = %d; high 2 bits from qh[32h + l] = byte %d",
                 h, r < 32 ? "" : "32 +", l, r < 32 ? "" : "32 + ", 128 * h + r, r < 32 ? "64 + " : "96 + ",
                 128 * h + r + 64, 128 + 32 * h + l);
        break;
    }
    case NB_TYPE_NVFP4: {
        int sb = p / 8, j = p % 8;
        snprintf(s, cap, "split halves: byte 8s + j with s = %d, j = %d: low nibble -> lane 16s + j = %d, high "
                 "nibble -> lane 16s + j + 8 = %d", sb, j, 16 * sb + j, 16 * sb + j + 8);
        break;
    }
    case NB_TYPE_Q8_0: snprintf(s, cap, "one int8 per lane: byte j = lane j = %d", p); break;
    default: snprintf(s, cap, "byte %d of the element's %d bytes (little endian)", p, bt->block_bytes);
    }
}

void nb_lane_story(const nb_block_trace *bt, const nb_lane_trace *t, float tscale, char *code, char *owner, char *arith,
                   size_t cap) {
    char bits[40], hb[8], nums[4][48];
    const char *nib = t->nibble == 0 ? "low nibble" : t->nibble == 1 ? "high nibble" : "byte";
    nb_code_bits(t->low, t->nibble < 0 ? 8 : 4, bits);
    snprintf(code, cap, "%s %s = %u", nib, bits, t->low);
    if (t->hi_byte >= 0) {
        char full[40];
        nb_code_bits(t->code, t->code_bits, full);
        nb_code_bits(t->hi, t->hi_bits, hb);
        size_t n = strlen(code);
        snprintf(code + n, cap - n, ", high bit%s %s from byte %d (bit %d%s) -> code %s = %u", t->hi_bits > 1 ? "s" : "",
                 hb, t->hi_byte, t->hi_shift, t->hi_bits > 1 ? "+" : "", full, t->code);
    }
    const int j = t->sub;
    switch (bt->type) {
    case NB_TYPE_Q4_0: case NB_TYPE_Q5_0:
        snprintf(owner, cap, "d = fp16 0x%04X = %s (bytes 0-1), the block's one scale", bt->d_raw, NUM(0, bt->d));
        snprintf(arith, cap, "(q \xe2\x88\x92 %d) \xc3\x97 d = (%u \xe2\x88\x92 %d) \xc3\x97 %s = %s", t->code_bias, t->code,
                 t->code_bias, NUM(0, bt->d), NUM(1, t->value));
        break;
    case NB_TYPE_Q8_0:
        snprintf(code, cap, "int8 0x%02X = %s", t->code, NUM(0, t->element));
        snprintf(owner, cap, "d = fp16 0x%04X = %s (bytes 0-1), the block's one scale", bt->d_raw, NUM(0, bt->d));
        snprintf(arith, cap, "q \xc3\x97 d = %s \xc3\x97 %s = %s", NUM(0, t->element), NUM(1, bt->d), NUM(2, t->value));
        break;
    case NB_TYPE_Q4_K: case NB_TYPE_Q5_K:
        snprintf(owner, cap, "sub-block %d (lanes %d-%d): gain d \xc3\x97 s[%d] = %s \xc3\x97 %d = %s, offset dmin \xc3\x97 m[%d] = "
                 "%s \xc3\x97 %d = %s", j, 32 * j, 32 * j + 31, j, NUM(0, bt->d), bt->sub_raw[j], NUM(1, t->scale), j,
                 NUM(2, bt->dmin), bt->sub_min_raw[j], NUM(3, t->offset));
        snprintf(arith, cap, "gain \xc3\x97 q \xe2\x88\x92 offset = %s \xc3\x97 %u \xe2\x88\x92 %s = %s", NUM(0, t->scale),
                 t->code, NUM(1, t->offset), NUM(2, t->value));
        break;
    case NB_TYPE_Q6_K:
        snprintf(owner, cap, "group %d (16 lanes): d \xc3\x97 scale[%d] = %s \xc3\x97 %d = %s (scale byte %d)", j, j,
                 NUM(0, bt->d), bt->sub_raw[j], NUM(1, t->scale), bt->sub_byte[j]);
        snprintf(arith, cap, "(d \xc3\x97 scale) \xc3\x97 (q \xe2\x88\x92 32) = %s \xc3\x97 (%u \xe2\x88\x92 32) = %s",
                 NUM(0, t->scale), t->code, NUM(1, t->value));
        break;
    case NB_TYPE_MXFP4: case NB_TYPE_NVFP4: {
        nb_code_trace e, s;
        nb_code_explain(NB_CODE_E2M1, t->code, &e);
        nb_code_explain(bt->type == NB_TYPE_MXFP4 ? NB_CODE_E8M0 : NB_CODE_UE4M3, (uint32_t)bt->sub_raw[j], &s);
        snprintf(code + strlen(code), cap - strlen(code), "; E2M1 %s: %s", e.rule, e.arith);
        if (bt->type == NB_TYPE_MXFP4)
            snprintf(owner, cap, "E8M0 byte 0 = 0x%02X: %s, shared by all 32 lanes", bt->sub_raw[0], s.arith);
        else
            snprintf(owner, cap, "sub-block %d (lanes %d-%d): UE4M3 byte %d = 0x%02X: %s", j, 16 * j, 16 * j + 15, j,
                     bt->sub_raw[j], s.arith);
        snprintf(arith, cap, "E2M1 \xc3\x97 scale = %s \xc3\x97 %s = %s", NUM(0, t->element), NUM(1, t->scale),
                 NUM(2, t->value));
        if (bt->type == NB_TYPE_NVFP4 && tscale != 1.0f)
            snprintf(arith + strlen(arith), cap - strlen(arith), "; \xc3\x97 tensor scale %s = %s", NUM(0, tscale),
                     NUM(1, t->value * tscale));
        break;
    }
    default: {
        nb_code_trace c;
        nb_code_explain(bt->type == NB_TYPE_F32 ? NB_CODE_FP32 : bt->type == NB_TYPE_F16 ? NB_CODE_FP16 : NB_CODE_BF16,
                        t->code, &c);
        snprintf(code, cap, "%s 0x%0*X (%s)", nb_type_name(bt->type), bt->block_bytes * 2, t->code, c.rule);
        snprintf(owner, cap, "no scale: the element is its own value");
        snprintf(arith, cap, "%s", c.arith);
    }
    }
}

void nb_k_scale_story(const uint8_t *B, int j, char *s, size_t cap) {
    if (j < 4) {
        snprintf(s, cap, "s[%d] = B[%d] & 63 = %d & 63 = %d;  m[%d] = B[%d] & 63 = %d & 63 = %d", j, j, B[j], B[j] & 63, j,
                 j + 4, B[j + 4], B[j + 4] & 63);
        return;
    }
    int sl = B[j + 4] & 15, sh = B[j - 4] >> 6, ml = B[j + 4] >> 4, mh = B[j] >> 6;
    snprintf(s, cap, "s[%d] = (B[%d] & 15) | ((B[%d] >> 6) << 4) = (%d & 15) | ((%d >> 6) << 4) = %d | %d = %d;  "
             "m[%d] = (B[%d] >> 4) | ((B[%d] >> 6) << 4) = %d | %d = %d",
             j, j + 4, j - 4, B[j + 4], B[j - 4], sl, sh << 4, sl | sh << 4, j, j + 4, j, ml, mh << 4, ml | mh << 4);
}
