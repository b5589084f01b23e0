/*
 * blocks_explain.c: one block's header and one element's path through it (contract: explain.h;
 * byte diagrams: docs/FORMATS.md). Each lane's value is computed with the dequantizer's own
 * operations in the same order, so it equals nb_dequantize() bit for bit (tests/test_explain.c
 * checks every lane of random blocks of every traced type).
 */
#include <string.h>

#include "base/error.h"
#include "explain/explain.h"
#include "formats/blocks.h"
#include "formats/codes.h"
#include "formats/types.h"

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

nb_status nb_block_explain(int type, const void *block, nb_block_trace *out) {
    const nb_type_traits *row = nb_type_traits_get(type);
    if (!row) return nb_fail(NB_ERR_UNSUPPORTED, "explain: type id %d (%s) is not a type nibble knows", type, nb_type_name(type));
    const nb_type_info *info = &row->info;
    if (!block) return nb_fail(NB_ERR_INVALID_ARG, "explain %s: block is NULL", info->name);
    const uint8_t *b = block;
    nb_block_trace *t = out;
    memset(t, 0, sizeof *t);
    t->type = type;
    t->layout = row->layout;
    t->block_elems = info->block_elems;
    t->block_bytes = info->block_bytes;
    t->n_sub = 1;
    t->sub_elems = info->block_elems;
    t->lanes_per_byte = 2;
    t->sub_scale[0] = 1.0f;
    switch (type) {
    case NB_TYPE_F32: case NB_TYPE_F16: case NB_TYPE_BF16:
        t->payload_bytes = info->block_bytes; /* every byte of the element feeds lane 0 */
        t->lanes_per_byte = 1;
        return NB_OK;
    case NB_TYPE_Q4_0: case NB_TYPE_Q5_0: case NB_TYPE_Q8_0:
        t->has_d = 1;
        t->d_raw = rd16(b);
        t->d = nb_fp16_to_fp32(t->d_raw);
        t->payload_offset = type == NB_TYPE_Q5_0 ? 6 : 2;
        t->payload_bytes = type == NB_TYPE_Q8_0 ? 32 : 16;
        t->lanes_per_byte = type == NB_TYPE_Q8_0 ? 1 : 2;
        t->sub_raw[0] = t->d_raw;
        t->sub_scale[0] = t->d;
        return NB_OK;
    case NB_TYPE_Q4_K: case NB_TYPE_Q5_K:
        t->has_d = t->has_dmin = 1;
        t->d_raw = rd16(b), t->dmin_raw = rd16(b + 2);
        t->d = nb_fp16_to_fp32(t->d_raw), t->dmin = nb_fp16_to_fp32(t->dmin_raw);
        t->payload_offset = type == NB_TYPE_Q4_K ? 16 : 48;
        t->payload_bytes = 128;
        t->n_sub = 8, t->sub_elems = 32;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            nb_k_scale_min(j, b + 4, &sc, &m);
            t->sub_raw[j] = sc, t->sub_min_raw[j] = m;
            t->sub_byte[j] = 4 + (j < 4 ? j : j + 4); /* the byte holding the scale's low bits */
            t->sub_scale[j] = t->d * sc;
            t->sub_offset[j] = t->dmin * m;
        }
        return NB_OK;
    case NB_TYPE_Q6_K: {
        const nb_block_q6_k *q = block;
        t->has_d = 1;
        t->d_raw = rd16(b + 208);
        t->d = nb_fp16_to_fp32(t->d_raw);
        t->payload_bytes = 128;
        t->n_sub = 16, t->sub_elems = 16;
        for (int j = 0; j < 16; j++) {
            t->sub_raw[j] = q->scales[j];
            t->sub_byte[j] = 192 + j;
            t->sub_scale[j] = t->d * q->scales[j];
        }
        return NB_OK;
    }
    case NB_TYPE_MXFP4:
        t->payload_offset = 1, t->payload_bytes = 16;
        t->sub_raw[0] = b[0];
        t->sub_scale[0] = nb_e8m0_to_fp32(b[0]);
        return NB_OK;
    case NB_TYPE_NVFP4:
        t->payload_offset = 4, t->payload_bytes = 32;
        t->n_sub = 4, t->sub_elems = 16;
        for (int s = 0; s < 4; s++) {
            t->sub_raw[s] = b[s];
            t->sub_byte[s] = s;
            t->sub_scale[s] = nb_ue4m3_to_fp32(b[s]);
        }
        return NB_OK;
    default:
        if (info->weight_type) /* runs, but has no lane map here yet */
            return nb_fail(NB_ERR_UNSUPPORTED, "%s blocks have no lane map yet: nibble cannot trace them", info->name);
        return nb_fail(NB_ERR_UNSUPPORTED, "%s blocks are activations only, not weights", info->name);
    }
}

nb_status nb_byte_lanes(const nb_block_trace *bt, int p, int lanes[2], int *n) {
    if (p < 0 || p >= bt->payload_bytes)
        return nb_fail(NB_ERR_RANGE, "byte %d is outside the %d payload bytes of a %s block (0..%d)", p,
                       bt->payload_bytes, nb_type_name(bt->type), bt->payload_bytes - 1);
    *n = 2;
    switch (bt->type) {
    case NB_TYPE_Q4_0: case NB_TYPE_Q5_0: case NB_TYPE_MXFP4:
        lanes[0] = p, lanes[1] = p + 16;
        break;
    case NB_TYPE_Q4_K: case NB_TYPE_Q5_K:
        lanes[0] = 64 * (p / 32) + p % 32, lanes[1] = lanes[0] + 32;
        break;
    case NB_TYPE_Q6_K: {
        int h = p / 64, r = p % 64;
        lanes[0] = 128 * h + r; /* r >= 32 lands on l + 32 for l = r - 32 */
        lanes[1] = lanes[0] + 64;
        break;
    }
    case NB_TYPE_NVFP4:
        lanes[0] = 16 * (p / 8) + p % 8, lanes[1] = lanes[0] + 8;
        break;
    default: /* q8_0 and the float types: one lane per byte (the float's bytes all feed lane 0) */
        *n = 1;
        lanes[0] = bt->type == NB_TYPE_Q8_0 ? p : 0;
    }
    return NB_OK;
}

/* Where lane `lane` keeps its low bits: payload index and nibble (0 low, 1 high). */
static void lane_source(const nb_block_trace *bt, int lane, int *p, int *nib, int *sub) {
    switch (bt->type) {
    case NB_TYPE_Q4_0: case NB_TYPE_Q5_0: case NB_TYPE_MXFP4:
        *p = lane % 16, *nib = lane / 16, *sub = 0;
        return;
    case NB_TYPE_Q4_K: case NB_TYPE_Q5_K: {
        int c = lane / 64, r = lane % 64;
        *p = 32 * c + r % 32, *nib = r / 32, *sub = 2 * c + r / 32;
        return;
    }
    case NB_TYPE_Q6_K: {
        int h = lane / 128, quarter = (lane % 128) / 32, l = lane % 32;
        *p = 64 * h + l + (quarter & 1) * 32, *nib = quarter / 2, *sub = 8 * h + l / 16 + 2 * quarter;
        return;
    }
    case NB_TYPE_NVFP4:
        *p = 8 * (lane / 16) + lane % 8, *nib = (lane % 16) / 8, *sub = lane / 16;
        return;
    default:
        *p = bt->type == NB_TYPE_Q8_0 ? lane : 0, *nib = -1, *sub = 0;
    }
}

nb_status nb_lane_explain(const nb_block_trace *bt, const void *block, int lane, nb_lane_trace *out) {
    if (lane < 0 || lane >= bt->block_elems)
        return nb_fail(NB_ERR_RANGE, "lane %d is outside the %d elements of a %s block (0..%d)", lane,
                       bt->block_elems, nb_type_name(bt->type), bt->block_elems - 1);
    const uint8_t *b = block;
    nb_lane_trace *t = out;
    memset(t, 0, sizeof *t);
    t->lane = lane;
    t->hi_byte = -1;
    lane_source(bt, lane, &t->payload, &t->nibble, &t->sub);
    t->byte = bt->payload_offset + t->payload;
    const uint8_t byte = b[t->byte];
    t->low = t->nibble < 0 ? byte : t->nibble ? (uint32_t)(byte >> 4) : (uint32_t)(byte & 15);
    t->code_bits = t->nibble < 0 ? 8 : 4;
    switch (bt->type) {
    case NB_TYPE_Q5_0: t->hi_byte = 2 + lane / 8, t->hi_shift = lane % 8, t->hi_bits = 1, t->code_bias = 16; break;
    case NB_TYPE_Q5_K: t->hi_byte = 16 + lane % 32, t->hi_shift = t->sub, t->hi_bits = 1; break;
    case NB_TYPE_Q6_K:
        t->hi_byte = 128 + 32 * (lane / 128) + lane % 32, t->hi_shift = 2 * ((lane % 128) / 32), t->hi_bits = 2;
        t->code_bias = 32;
        break;
    case NB_TYPE_Q4_0: t->code_bias = 8; break;
    default: break;
    }
    if (t->hi_byte >= 0) {
        t->hi = (uint32_t)(b[t->hi_byte] >> t->hi_shift) & ((1u << t->hi_bits) - 1);
        t->code_bits += t->hi_bits;
    }
    t->code = t->low | t->hi << 4;
    t->scale = bt->sub_scale[t->sub];
    t->offset = bt->sub_offset[t->sub];
    switch (bt->type) {
    case NB_TYPE_F32: case NB_TYPE_F16: case NB_TYPE_BF16: {
        t->code_bits = 8 * bt->block_bytes;
        t->code = bt->type == NB_TYPE_F32 ? (uint32_t)(rd16(b) | (uint32_t)rd16(b + 2) << 16) : rd16(b);
        t->low = t->code;
        t->value = bt->type == NB_TYPE_F32 ? nb_bits_f32(t->code)
                   : bt->type == NB_TYPE_F16 ? nb_fp16_to_fp32((uint16_t)t->code)
                                             : nb_bf16_to_fp32((uint16_t)t->code);
        t->element = t->value;
        break;
    }
    case NB_TYPE_Q8_0:
        t->element = (float)(int8_t)t->code;
        t->value = (int8_t)t->code * t->scale;
        break;
    case NB_TYPE_Q4_0: case NB_TYPE_Q5_0: case NB_TYPE_Q6_K:
        t->element = (float)((int)t->code - t->code_bias);
        t->value = t->element * t->scale;
        break;
    case NB_TYPE_Q4_K: case NB_TYPE_Q5_K:
        t->element = (float)t->code;
        t->value = t->scale * (float)t->code - t->offset;
        break;
    case NB_TYPE_MXFP4: case NB_TYPE_NVFP4: {
        /* the dequantizer's exact route: doubled E2M1 times the halved scale */
        const uint8_t sc = bt->type == NB_TYPE_MXFP4 ? b[0] : b[t->sub];
        const float half = bt->type == NB_TYPE_MXFP4 ? nb_e8m0_to_fp32_half(sc) : nb_ue4m3_to_fp32_half(sc);
        t->element = nb_e2m1_to_fp32((uint8_t)t->code);
        t->value = nb_e2m1_doubled[t->code] * half;
        break;
    }
    }
    return NB_OK;
}

/* ------------------------------------------------------------- fixtures */

/* Deterministic filler for the bytes an article does not fix, so a fixture is asymmetric (every
 * sub-block and lane different) and a misplaced lane cannot pass by accident. */
static void fill(uint8_t *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

/*
 * The fixtures. Byte 0 of the payload is 0xA5 (1010 0101) in every one, the byte the first article
 * hands to three decoders.
 *  q4_K (article 1 §5-6): d = 0.125, dmin = 0.0625, (sc,m) = (2,4) and (3,8) for sub-blocks 0 and 1
 *       → lane 0 = 0.25·5 − 0.25 = 1, lane 32 = 0.375·10 − 0.5 = 3.25; B[0] = 130, B[8] = 33 give
 *       sc[4] = 33; the other pairs differ from each other: (5,6) (7,1) (33,18) (18,5) (9,33) (52,3).
 *  q5_K: the same header, the fifth bits from qh (qh[0] = 0x01: lane 0's code is 21).
 *  mxfp4 (article 1 §3): E8M0 0x7E = 0.5; lane 0 = E2M1 3 × 0.5 = 1.5, lane 16 = −1 × 0.5 = −0.5.
 *  nvfp4 (article 1 §4): UE4M3 0x2A = 2^(5−7)·1.25 = 0.3125 for sub-block 0, so lane 0 =
 *       3 × 0.3125 = 0.9375 and lane 8 = −0.3125; sub-blocks 1..3 scale 0.5, 1, 0.25; tensor scale 1.
 *  q4_0: d = 0.25 → lanes 0 and 16 = (5−8)·0.25 = −0.75 and (10−8)·0.25 = 0.5.
 *  q5_0: d = 0.25, qh bit 0 set → lane 0 = (21−16)·0.25 = 1.25, lane 16 = (10−16)·0.25 = −1.5.
 *  q8_0: d = 0.125 → lane 0 = int8 0xA5 = −91 → −11.375.
 *  q6_K: d = 0.125, qh[0] = 0x1B → lane 0 code 5|3<<4 = 53 → (53−32)·2·0.125 = 5.25 and lane 64
 *       code 10|1<<4 = 26 → (26−32)·(−6)·0.125 = 4.5; signed scales vary per group.
 */
nb_status nb_fixture_block(int type, void *out, size_t cap, float *tensor_scale) {
    const nb_type_info *info = nb_type_get(type);
    if (!info) return nb_fail(NB_ERR_UNSUPPORTED, "explain: no fixture for type id %d (%s)", type, nb_type_name(type));
    if (cap < (size_t)info->block_bytes)
        return nb_fail(NB_ERR_RANGE, "explain %s fixture: needs %d bytes, got %zu", info->name, info->block_bytes, cap);
    uint8_t *b = out;
    fill(b, (size_t)info->block_bytes, (uint32_t)type * 2654435761u);
    if (tensor_scale) *tensor_scale = 1.0f;
    static const uint8_t k_scales[12] = {130, 67, 5, 199, 68, 8, 134, 1, 33, 0x52, 0x19, 0x34};
    uint16_t d;
    switch (type) {
    case NB_TYPE_Q4_K: case NB_TYPE_Q5_K:
        d = nb_fp32_to_fp16(0.125f), memcpy(b, &d, 2);
        d = nb_fp32_to_fp16(0.0625f), memcpy(b + 2, &d, 2);
        memcpy(b + 4, k_scales, 12);
        if (type == NB_TYPE_Q5_K) b[16] = 0x01;
        b[type == NB_TYPE_Q4_K ? 16 : 48] = 0xA5;
        return NB_OK;
    case NB_TYPE_MXFP4:
        b[0] = 0x7E, b[1] = 0xA5;
        return NB_OK;
    case NB_TYPE_NVFP4:
        b[0] = 0x2A, b[1] = 0x30, b[2] = 0x38, b[3] = 0x28, b[4] = 0xA5;
        return NB_OK;
    case NB_TYPE_Q4_0: case NB_TYPE_Q5_0: case NB_TYPE_Q8_0:
        d = nb_fp32_to_fp16(type == NB_TYPE_Q8_0 ? 0.125f : 0.25f), memcpy(b, &d, 2);
        if (type == NB_TYPE_Q5_0) b[2] = (uint8_t)(b[2] | 1), b[4] = (uint8_t)(b[4] & ~1u);
        b[type == NB_TYPE_Q5_0 ? 6 : 2] = 0xA5;
        return NB_OK;
    case NB_TYPE_Q6_K: {
        static const int8_t sc[16] = {2, 3, 4, 5, -6, 7, 1, -2, 3, 8, -1, 2, 6, -4, 5, 9};
        b[0] = 0xA5, b[128] = 0x1B;
        memcpy(b + 192, sc, 16);
        d = nb_fp32_to_fp16(0.125f), memcpy(b + 208, &d, 2);
        return NB_OK;
    }
    default:
        return nb_fail(NB_ERR_UNSUPPORTED, "explain: no article fixture for %s (fixtures: q4_0 q5_0 q8_0 q4_K q5_K "
                       "q6_K mxfp4 nvfp4)", info->name);
    }
}
