/*
 * explain_block.c: `nibble explain FORMAT [--fixture article]` and `nibble explain MODEL.gguf
 * TENSOR`: one payload byte (or one lane) of one block, followed to its lanes with every step
 * shown: payload index and the lane rule, the code bits (and any high bits kept elsewhere), the
 * scale that owns the lane and how it is unpacked, and the reconstructed weight. On a real tensor
 * the bytes are the file's, and each is located in the file: data-section offset + tensor offset
 * + row x row bytes + block x block bytes + offset in the block. The trace and its words are the
 * library's (src/explain: nb_block_explain, nb_lane_explain, nb_byte_rule, nb_lane_story); this
 * file reads the flags, finds the block and lays them out as text or JSON.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checked.h"
#include "cli/args.h"
#include "cli/explain.h"

typedef struct source {
    const char *file, *tensor; /* NULL for a fixture */
    int64_t row, block, rows, blocks;
    uint64_t data_offset, tensor_offset, row_bytes, block_at; /* block_at: file offset of the block */
    float tscale;
} source;

static void print_text(const nb_block_trace *bt, const uint8_t *b, const source *src, int byte, const nb_lane_trace *lt,
                       int nl) {
    const nb_type_info *in = nb_type_get(bt->type);
    if (src->file)
        printf("%s: tensor %s (%s), row %lld of %lld, block %lld of %lld\n"
               "  block at file offset %llu = data section %llu + tensor offset %llu + row %lld x %llu B + block %lld "
               "x %d B\n",
               src->file, src->tensor, in->name, (long long)src->row, (long long)src->rows, (long long)src->block,
               (long long)src->blocks, (unsigned long long)src->block_at, (unsigned long long)src->data_offset,
               (unsigned long long)src->tensor_offset, (long long)src->row, (unsigned long long)src->row_bytes,
               (long long)src->block, in->block_bytes);
    else printf("%s article fixture\n", in->name);
    printf("%s block: %d elements in %d bytes (%s bits/weight)\n  layout: %s\n", in->name, in->block_elems,
           in->block_bytes, ex_num(0, 8.0 * in->block_bytes / in->block_elems), bt->layout);
    if (bt->has_d) printf("  d    = fp16 0x%04X = %s\n", bt->d_raw, ex_num(0, bt->d));
    if (bt->has_dmin) printf("  dmin = fp16 0x%04X = %s\n", bt->dmin_raw, ex_num(0, bt->dmin));
    if (bt->type == NB_TYPE_Q4_K || bt->type == NB_TYPE_Q5_K) {
        printf("  scale bytes B[0..11] =");
        for (int i = 0; i < 12; i++) printf(" %d", b[4 + i]);
        printf("\n  sub-block  s   m    gain d*s    offset dmin*m\n");
        for (int j = 0; j < 8; j++)
            printf("  %5d   %3d %3d   %-11s %s\n", j, bt->sub_raw[j], bt->sub_min_raw[j], ex_num(0, bt->sub_scale[j]),
                   ex_num(1, bt->sub_offset[j]));
    } else if (bt->type == NB_TYPE_Q6_K) {
        printf("  scales (int8, one per 16 lanes):");
        for (int j = 0; j < 16; j++) printf(" %d", bt->sub_raw[j]);
        printf("\n");
    } else if (bt->type == NB_TYPE_NVFP4) {
        for (int j = 0; j < 4; j++) {
            nb_code_trace s;
            nb_code_explain(NB_CODE_UE4M3, (uint32_t)bt->sub_raw[j], &s);
            printf("  d[%d] (lanes %2d-%2d) = UE4M3 0x%02X: %s\n", j, 16 * j, 16 * j + 15, bt->sub_raw[j], s.arith);
        }
        printf("  tensor scale = %s%s\n", ex_num(0, src->tscale), src->file ? "" : " (fixture)");
    }
    if (byte >= 0) {
        char bits[12], rule[320];
        nb_code_bits(b[bt->payload_offset + byte], 8, bits);
        nb_byte_rule(bt, byte, rule, sizeof rule);
        printf("\npayload byte %d = block byte %d", byte, bt->payload_offset + byte);
        if (src->file) printf(" = file offset %llu", (unsigned long long)(src->block_at + (uint64_t)(bt->payload_offset + byte)));
        printf(": 0x%02X = %.4s %.4s\n  %s\n", b[bt->payload_offset + byte], bits, bits + 4, rule);
    }
    for (int i = 0; i < nl; i++) {
        char code[320], owner[320], arith[320];
        nb_lane_story(bt, &lt[i], src->tscale, code, owner, arith, sizeof code);
        printf("\nlane %d (row element %lld):\n  code:  %s\n  owner: %s\n", lt[i].lane,
               (long long)(src->block * bt->block_elems + lt[i].lane), code, owner);
        if (bt->type == NB_TYPE_Q4_K || bt->type == NB_TYPE_Q5_K) {
            char un[320];
            nb_k_scale_story(b + 4, lt[i].sub, un, sizeof un);
            printf("         %s\n", un);
        }
        printf("  value: %s\n", arith);
    }
}

static void print_json(const nb_block_trace *bt, const uint8_t *b, const source *src, int byte, const nb_lane_trace *lt,
                       int nl) {
    const nb_type_info *in = nb_type_get(bt->type);
    printf("{\"format\": \"%s\", \"block_elems\": %d, \"block_bytes\": %d, \"layout\": ", in->name, in->block_elems,
           in->block_bytes);
    ex_json_str(stdout, bt->layout);
    if (src->file) {
        printf(", \"source\": {\"file\": ");
        ex_json_str(stdout, src->file);
        printf(", \"tensor\": ");
        ex_json_str(stdout, src->tensor);
        printf(", \"row\": %lld, \"rows\": %lld, \"block\": %lld, \"blocks_per_row\": %lld, \"data_offset\": %llu, "
               "\"tensor_offset\": %llu, \"row_bytes\": %llu, \"block_file_offset\": %llu}",
               (long long)src->row, (long long)src->rows, (long long)src->block, (long long)src->blocks,
               (unsigned long long)src->data_offset, (unsigned long long)src->tensor_offset,
               (unsigned long long)src->row_bytes, (unsigned long long)src->block_at);
    } else printf(", \"source\": {\"fixture\": \"article\"}");
    printf(", \"d\": ");
    if (bt->has_d) ex_json_num(stdout, bt->d);
    else printf("null");
    printf(", \"dmin\": ");
    if (bt->has_dmin) ex_json_num(stdout, bt->dmin);
    else printf("null");
    printf(", \"tensor_scale\": ");
    ex_json_num(stdout, src->tscale);
    printf(",\n \"subblocks\": [");
    for (int j = 0; j < bt->n_sub; j++) {
        printf("%s\n  {\"index\": %d, \"lanes\": [%d, %d], \"scale_raw\": %d, \"min_raw\": %d, \"scale_byte\": %d, \"scale\": ",
               j ? "," : "", j, j * bt->sub_elems, (j + 1) * bt->sub_elems - 1, bt->sub_raw[j], bt->sub_min_raw[j],
               bt->sub_byte[j]);
        ex_json_num(stdout, bt->sub_scale[j]);
        printf(", \"offset\": ");
        ex_json_num(stdout, bt->sub_offset[j]);
        if (bt->type == NB_TYPE_Q4_K || bt->type == NB_TYPE_Q5_K) {
            char un[320];
            nb_k_scale_story(b + 4, j, un, sizeof un);
            printf(", \"unpack\": ");
            ex_json_str(stdout, un);
        }
        printf("}");
    }
    printf("],\n \"byte\": ");
    if (byte >= 0) {
        char rule[320];
        nb_byte_rule(bt, byte, rule, sizeof rule);
        printf("{\"payload_index\": %d, \"block_offset\": %d, \"value\": %d", byte, bt->payload_offset + byte,
               b[bt->payload_offset + byte]);
        if (bt->type == NB_TYPE_Q4_K || bt->type == NB_TYPE_Q5_K) printf(", \"chunk\": %d, \"position\": %d", byte / 32, byte % 32);
        if (src->file) printf(", \"file_offset\": %llu", (unsigned long long)(src->block_at + (uint64_t)(bt->payload_offset + byte)));
        printf(", \"rule\": ");
        ex_json_str(stdout, rule);
        printf("}");
    } else printf("null");
    printf(",\n \"lanes\": [");
    for (int i = 0; i < nl; i++) {
        const nb_lane_trace *t = &lt[i];
        char code[320], owner[320], arith[320];
        nb_lane_story(bt, t, src->tscale, code, owner, arith, sizeof code);
        printf("%s\n  {\"lane\": %d, \"row_element\": %lld, \"payload_index\": %d, \"block_offset\": %d, \"nibble\": \"%s\", "
               "\"low_bits\": %u, \"high_bits_byte\": %d, \"high_bits\": %u, \"code\": %u, \"code_bits\": %d, \"element\": ",
               i ? "," : "", t->lane, (long long)(src->block * bt->block_elems + t->lane), t->payload, t->byte,
               t->nibble == 0 ? "low" : t->nibble == 1 ? "high" : "byte", t->low, t->hi_byte, t->hi, t->code, t->code_bits);
        ex_json_num(stdout, t->element);
        printf(", \"subblock\": %d, \"scale\": ", t->sub);
        ex_json_num(stdout, t->scale);
        printf(", \"offset\": ");
        ex_json_num(stdout, t->offset);
        printf(", \"value\": ");
        ex_json_num(stdout, t->value);
        if (src->file) printf(", \"file_offset\": %llu", (unsigned long long)(src->block_at + (uint64_t)t->byte));
        printf(", \"code_text\": ");
        ex_json_str(stdout, code);
        printf(", \"owner\": ");
        ex_json_str(stdout, owner);
        printf(", \"arithmetic\": ");
        ex_json_str(stdout, arith);
        printf("}");
    }
    printf("]}\n");
}

static const char USAGE_FMT[] =
    "usage: nibble explain FORMAT [--fixture article] [--byte N | --lane L] [--value V] [--json] [--svg FILE]\n"
    "       nibble explain MODEL.gguf TENSOR [--row R] [--block B] [--byte N | --lane L | --col C] [--json] [--svg FILE]\n"
    "  FORMAT   %s (case-insensitive)\n"
    "  --byte N payload byte N of the block (default 0); --lane L element L of the block;\n"
    "  --col C  element C of the row (sets block and lane); --value V replaces the payload byte's value\n"
    "  --svg    draw the block's bytes with each nibble's arrow to its lane, colored by its scale\n"
    "           ('-': standard output, instead of the text)\n"
    "A --row, --block, --byte, --lane or --col past the block or tensor is bad usage (exit 2).\n";

/* Locates the block of a tensor; fills src and copies the block. Returns 0, 1 after a message on a
 * file that cannot be read, or 2 after one on a --row/--block/--col past the tensor. */
static int load_tensor(source *src, int col, uint8_t *blk, int *type, float *tscale) {
    nb_gguf *g;
    nb_status st = nb_gguf_open(src->file, &g);
    if (st) return arg_status(st);
    int rc = CLI_USAGE;
    const nb_gguf_tensor *t = nb_gguf_find_tensor(g, src->tensor);
    const nb_type_info *in = t ? nb_type_get(t->type) : NULL;
    if (!t) arg_error("%s has no tensor '%s' (`nibble inspect --tensors` lists them)", src->file, arg_safe(0, src->tensor));
    else if (!in) rc = arg_error("tensor '%s': %s", src->tensor, nb_last_error());
    else {
        size_t row_bytes;
        nb_row_bytes(t->type, t->ne[0], &row_bytes);
        src->rows = nb_gguf_tensor_rows(t);
        src->blocks = t->ne[0] / in->block_elems;
        if (col >= 0) {
            if (col >= t->ne[0]) {
                arg_error("--col %d is out of range: a row of '%s' has %lld elements (0..%lld)", col, src->tensor,
                          (long long)t->ne[0], (long long)t->ne[0] - 1);
                goto out;
            }
            src->block = col / in->block_elems;
        }
        src->row_bytes = row_bytes;
        src->data_offset = nb_gguf_data_offset(g);
        src->tensor_offset = t->offset;
        uint64_t off;
        if (src->row >= src->rows)
            arg_error("--row %lld is out of range: tensor '%s' has %lld row%s (0..%lld)", (long long)src->row,
                      src->tensor, (long long)src->rows, nb_plural(src->rows), (long long)src->rows - 1);
        else if (src->block >= src->blocks)
            arg_error("--block %lld is out of range: a row of '%s' has %lld %s block%s (0..%lld)", (long long)src->block,
                      src->tensor, (long long)src->blocks, in->name, nb_plural(src->blocks), (long long)src->blocks - 1);
        else if (!nb_mul_u64((uint64_t)src->row, row_bytes, &off) ||
                 !nb_add_u64(off, (uint64_t)src->block * (uint64_t)in->block_bytes, &off) || off + (uint64_t)in->block_bytes > t->bytes)
            rc = arg_error("block offset overflows tensor '%s'", src->tensor);
        else {
            memcpy(blk, (const uint8_t *)t->data + off, (size_t)in->block_bytes);
            src->block_at = src->data_offset + src->tensor_offset + off;
            *type = t->type;
            /* NVFP4's per-tensor factor, when the file has one */
            char name[NB_GGUF_MAX_NAME + 8];
            if (nb_gguf_scale_name(src->tensor, name, sizeof name)) {
                const nb_gguf_tensor *s = nb_gguf_find_tensor(g, name);
                if (s && s->type == NB_TYPE_F32 && s->bytes >= 4) memcpy(tscale, s->data, 4);
            }
            rc = 0;
        }
    }
out:
    nb_gguf_close(g);
    return rc;
}

int explain_block(int argc, char **argv) {
    source src = {0};
    src.tscale = 1.0f;
    const char *svg = NULL, *fixture = NULL, *value_text = NULL, *pos[2] = {0};
    int json = 0, byte = -1, lane = -1, value = -1, col = -1, row = 0, block = 0, type = nb_type_from_name(argv[0]);
    arg_opt opts[] = {
        OPT_FLAG("--json", &json),         OPT_STR("--svg", &svg),
        OPT_STR("--fixture", &fixture),    OPT_INT("--col", &col, 0, INT_MAX),
        OPT_INT("--byte", &byte, 0, INT_MAX), OPT_INT("--lane", &lane, 0, INT_MAX),
        OPT_INT("--row", &row, 0, INT_MAX), OPT_INT("--block", &block, 0, INT_MAX),
        OPT_STR("--value", &value_text),
    };
    /* argv[0] is the format or the file: a file takes the tensor as its one positional argument */
    char usage[1024];
    snprintf(usage, sizeof usage, USAGE_FMT, ex_block_formats());
    arg_spec spec = ARG_SPEC("explain", usage, opts, pos, type < 0 ? 1 : 0);
    int rc = arg_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    if (type < 0) src.file = argv[0], src.tensor = pos[0];
    src.row = row;
    src.block = block;
    if (value_text) {
        uint32_t c;
        if (nb_code_parse(value_text, 8, &c, NULL)) return arg_usage_error(&spec, "--value: %s", nb_last_error());
        value = (int)c;
    }
    if (src.file && !src.tensor)
        return arg_usage_error(&spec, "which tensor of %s? e.g. blk.0.attn_output.weight", src.file);
    if (!src.file && (arg_given(&spec, "--row") || arg_given(&spec, "--block") || col >= 0))
        return arg_usage_error(&spec, "--row, --block and --col pick a block of a tensor: give MODEL.gguf TENSOR");
    if (src.file && fixture) return arg_usage_error(&spec, "--fixture picks a block of a format: drop it with a file");
    if (fixture && strcmp(fixture, "article"))
        return arg_usage_error(&spec, "unknown fixture '%s' (there is one: article)", fixture);
    if ((byte >= 0) + (lane >= 0) + (col >= 0) > 1) return arg_usage_error(&spec, "give one of --byte, --lane and --col");
    if (value >= 0 && lane >= 0)
        return arg_usage_error(&spec, "--value replaces a payload byte: use it with --byte");
    uint8_t blk[512];
    nb_status st;
    if (src.file) {
        if ((rc = load_tensor(&src, col, blk, &type, &src.tscale))) return rc;
    } else if ((st = nb_fixture_block(type, blk, sizeof blk, &src.tscale))) {
        return arg_status(st);
    }
    nb_block_trace bt;
    if ((st = nb_block_explain(type, blk, &bt))) return arg_status(st);
    if (col >= 0) lane = col % bt.block_elems;
    if (byte < 0 && lane < 0) byte = 0;
    if (value >= 0) blk[bt.payload_offset + byte] = (uint8_t)value;
    int lanes[2], nl = 1;
    if (byte >= 0 && nb_byte_lanes(&bt, byte, lanes, &nl)) return arg_usage_error(&spec, "%s", nb_last_error());
    if (byte < 0) lanes[0] = lane;
    nb_lane_trace lt[2];
    for (int i = 0; i < nl; i++)
        if (nb_lane_explain(&bt, blk, lanes[i], &lt[i])) return arg_usage_error(&spec, "%s", nb_last_error());
    if (svg && !strcmp(svg, "-")) {
        /* the picture on standard output is the whole output */
    } else if (json) print_json(&bt, blk, &src, byte, lt, nl);
    else print_text(&bt, blk, &src, byte, lt, nl);
    if (svg) {
        char title[200];
        if (src.file) snprintf(title, sizeof title, "%s row %lld block %lld (%s)", src.tensor, (long long)src.row,
                               (long long)src.block, nb_type_name(type));
        else snprintf(title, sizeof title, "%s article fixture", nb_type_name(type));
        st = nb_picture_block(svg, &bt, blk, byte >= 0 ? byte : lt[0].payload, title);
        if (st == NB_ERR_UNSUPPORTED) return arg_error("--svg: %s", nb_last_error());
        return st ? arg_status(st) : 0;
    }
    return 0;
}
