/*
 * pictures.c: the SVG pictures of `nibble explain --svg FILE` (declared in explain.h), drawn with
 * svg.h's writer: the codebook rulers, a block's bytes and lanes, and compare's error histograms.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "explain/explain.h"
#include "explain/svg.h"

static const char *const palette[16] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
                                        "#8c564b", "#e377c2", "#393b79", "#637939", "#8c6d31", "#843c39",
                                        "#7b4173", "#3182bd", "#31a354", "#756bb1"};


/* ---------------------------------------------------------------- ruler */

nb_status nb_picture_ruler(const char *path, double scale, const double *w, int n, const char *title) {
    char n0[48];
    const double W = 1000, cx = 500, half = 430;
    double reach = 8 * scale;
    for (int i = 0; i < n; i++) reach = fmax(reach, fabs(w[i]));
    reach *= 1.08;
#define X(v) (cx + (v) / reach * half)
    nb_svg *s;
    nb_status st = nb_svg_begin(path, W, 400, &s);
    if (st) return st;
    nb_svg_text(s, cx, 24, 15, "middle", "#000", "%s", title);
    const struct { const char *name; double lo, hi, y; } rows[2] = {
        {"E2M1", -6 * scale, 6 * scale, 130}, {"INT4", -8 * scale, 7 * scale, 270}};
    for (int r = 0; r < 2; r++) {
        double y = rows[r].y;
        nb_svg_rect(s, X(-reach), y - 18, X(rows[r].lo) - X(-reach), 36, "#fde0dc", NULL);
        nb_svg_rect(s, X(rows[r].hi), y - 18, X(reach) - X(rows[r].hi), 36, "#fde0dc", NULL);
        nb_svg_rect(s, X(rows[r].lo), y - 18, X(rows[r].hi) - X(rows[r].lo), 36, "#dceefd", NULL);
        nb_svg_line(s, X(-reach), y, X(reach), y, "#444", 1);
        nb_svg_text(s, 8, y - 24, 12, "start", "#000", "%s marks", rows[r].name);
        nb_svg_text(s, X(-reach) + 4, y + 32, 10, "start", "#b03020", "clips");
        nb_svg_text(s, X(reach) - 4, y + 32, 10, "end", "#b03020", "clips");
        for (int c = 0; c < 16; c++) {
            double v;
            if (r == 0) {
                if (c == 8) continue; /* -0 sits on +0 */
                v = nb_e2m1_to_fp32((uint8_t)c) * scale;
            } else v = (c - 8) * scale;
            double x = X(v);
            nb_svg_line(s, x, y - 12, x, y + 12, "#000", 1.5);
            /* labels alternate above and below so neighbours near zero stay legible */
            int up = (r == 0 ? (c < 8 ? c : 15 - c) : c) % 2 == 0;
            nb_svg_text(s, x, up ? y - 22 : y + 30, 10, "middle", "#000", "%s", nb_fmt_float(v, 1, n0, sizeof n0));
        }
    }
    /* weights and where each lands */
    for (int i = 0; i < n; i++) {
        double e = nb_e2m1_to_fp32((uint8_t)nb_e2m1_nearest(w[i] / scale, 0, NULL)) * scale;
        double q = round(w[i] / scale);
        q = q < -8 ? -8 : q > 7 ? 7 : q;
        nb_svg_circle(s, X(w[i]), 70, 5, "#000", NULL);
        nb_svg_text(s, X(w[i]), 58, 11, "middle", "#000", "w%d=%s", i, nb_fmt_float(w[i], 1, n0, sizeof n0));
        nb_svg_arrow(s, X(w[i]), 75, X(e), 116, "#1f5fa8", 1.6);
        nb_svg_circle(s, X(w[i]), 212, 5, "#000", NULL);
        nb_svg_arrow(s, X(w[i]), 217, X(q * scale), 256, "#1f5fa8", 1.6);
    }
    /* the number line */
    const double yA = 350;
    nb_svg_line(s, X(-reach), yA, X(reach), yA, "#000", 1);
    double step = pow(10, floor(log10(reach / 2)));
    if (reach / step > 8) step *= 2;
    for (double v = -floor(reach / step) * step; v <= reach + 1e-12; v += step) {
        nb_svg_line(s, X(v), yA - 5, X(v), yA + 5, "#000", 1);
        nb_svg_text(s, X(v), yA + 20, 11, "middle", "#000", "%s", nb_fmt_float(fabs(v) < 1e-12 ? 0 : v, 1, n0, sizeof n0));
    }
    nb_svg_text(s, cx, 392, 11, "middle", "#444", "scale %s: blue = reach of the codebook, red = clips to the end mark",
                nb_fmt_float(scale, 1, n0, sizeof n0));
#undef X
    return nb_svg_end(s);
}

/* ---------------------------------------------------------------- block */

nb_status nb_picture_block(const char *path, const nb_block_trace *bt, const void *block, int payload,
                           const char *title) {
    if (bt->lanes_per_byte != 2 && bt->type != NB_TYPE_Q8_0)
        return nb_fail(NB_ERR_UNSUPPORTED, "a %s element has no lanes to draw", nb_type_name(bt->type));
    char n0[48], n1[48];
    const uint8_t *b = block;
    const int start = payload / 32 * 32, count = bt->payload_bytes - start < 32 ? bt->payload_bytes - start : 32;
    int lane_of[32][2], nl_of[32], lanes[64], nlanes = 0;
    for (int p = 0; p < count; p++) {
        nb_byte_lanes(bt, start + p, lane_of[p], &nl_of[p]);
        for (int k = 0; k < nl_of[p]; k++) lanes[nlanes++] = lane_of[p][k];
    }
    for (int i = 1; i < nlanes; i++) /* insertion sort: lanes in element order */
        for (int k = i; k > 0 && lanes[k - 1] > lanes[k]; k--) {
            int tmp = lanes[k];
            lanes[k] = lanes[k - 1], lanes[k - 1] = tmp;
        }
    const double cell = 18, byte_w = bt->lanes_per_byte * cell, margin = 90;
    const double W = 2 * margin + fmax(count * byte_w, nlanes * cell);
    const double bx0 = (W - count * byte_w) / 2, lx0 = (W - nlanes * cell) / 2, by = 78, ly = 300;
    int subs_seen[NB_EXPLAIN_MAX_SUB] = {0}, nsub = 0;
    for (int i = 0; i < nlanes; i++) {
        nb_lane_trace t;
        nb_lane_explain(bt, block, lanes[i], &t);
        if (!subs_seen[t.sub]++) nsub++;
    }
    const double H = 390 + 20 * nsub;
    nb_svg *s;
    nb_status st = nb_svg_begin(path, W, H, &s);
    if (st) return st;
    nb_svg_text(s, W / 2, 24, 15, "middle", "#000", "%s: payload bytes %d-%d and the lanes they fill", title, start,
                start + count - 1);
    nb_svg_text(s, W / 2, 44, 11, "middle", "#444", "each arrow: a nibble (high | low) to its lane; color = the sub-block whose scale owns it");
    nb_svg_text(s, 8, by + 20, 12, "start", "#000", "payload");
    nb_svg_text(s, 8, ly + 20, 12, "start", "#000", "lanes");
    /* lane cells */
    double lane_x[256];
    for (int i = 0; i < nlanes; i++) {
        nb_lane_trace t;
        nb_lane_explain(bt, block, lanes[i], &t);
        double x = lx0 + i * cell;
        lane_x[lanes[i]] = x + cell / 2;
        nb_svg_rect(s, x, ly, cell, 28, palette[t.sub % 16], "#ffffff");
        nb_svg_text(s, x + cell / 2, ly + 19, 10, "middle", "#ffffff", "%X", t.code & 15);
        if (i % 2 == 0 || nlanes <= 32)
            nb_svg_text(s, x + cell / 2, ly + 44 + (i % 4 == 2 ? 10 : 0), 8, "middle", "#000", "%d", lanes[i]);
    }
    /* byte cells and arrows */
    for (int p = 0; p < count; p++) {
        const int pb = bt->payload_offset + start + p;
        double x = bx0 + p * byte_w;
        nb_svg_text(s, x + byte_w / 2, by - 8, 8, "middle", "#000", "%d", start + p);
        for (int k = nl_of[p] - 1, cellno = 0; k >= 0; k--, cellno++) { /* high nibble drawn first, as in hex */
            nb_lane_trace t;
            nb_lane_explain(bt, block, lane_of[p][k], &t);
            double nx = x + cellno * cell;
            nb_svg_rect(s, nx, by, cell, 28, palette[t.sub % 16], "#ffffff");
            if (bt->lanes_per_byte == 2) nb_svg_text(s, nx + cell / 2, by + 19, 11, "middle", "#ffffff", "%X", t.low);
            else nb_svg_text(s, nx + cell, by + 19, 11, "middle", "#ffffff", "%02X", b[pb]);
            double w = start + p == payload ? 2.4 : 0.9;
            nb_svg_arrow(s, bt->lanes_per_byte == 2 ? nx + cell / 2 : nx + cell, by + 30, lane_x[lane_of[p][k]], ly - 2,
                         palette[t.sub % 16], w);
        }
        if (start + p == payload) {
            nb_svg_rect(s, x - 2, by - 2, byte_w + 4, 32, NULL, "#000000");
            nb_svg_rect(s, x - 3, by - 3, byte_w + 6, 34, NULL, "#000000");
        }
    }
    /* legend: the owners of the lanes shown, and the chosen byte */
    double y = 370;
    int lanes_sel[2], nsel;
    nb_byte_lanes(bt, payload, lanes_sel, &nsel);
    char sel[200];
    int n = snprintf(sel, sizeof sel, "byte %d = 0x%02X:", payload, b[bt->payload_offset + payload]);
    for (int k = 0; k < nsel; k++) {
        nb_lane_trace t;
        nb_lane_explain(bt, block, lanes_sel[k], &t);
        n += snprintf(sel + n, sizeof sel - (size_t)n, "%s lane %d = %s", k ? "," : "", t.lane, nb_fmt_float(t.value, 1, n0, sizeof n0));
    }
    nb_svg_text(s, margin, y, 12, "start", "#000", "%s", sel);
    for (int j = 0; j < bt->n_sub; j++) {
        if (!subs_seen[j]) continue;
        y += 20;
        nb_svg_rect(s, margin, y - 11, 14, 14, palette[j % 16], NULL);
        if (bt->type == NB_TYPE_Q4_K || bt->type == NB_TYPE_Q5_K)
            nb_svg_text(s, margin + 20, y, 12, "start", "#000", "sub-block %d (lanes %d-%d): s = %d, m = %d, gain %s, offset %s", j,
                        32 * j, 32 * j + 31, bt->sub_raw[j], bt->sub_min_raw[j], nb_fmt_float(bt->sub_scale[j], 1, n0, sizeof n0),
                        nb_fmt_float(bt->sub_offset[j], 1, n1, sizeof n1));
        else
            nb_svg_text(s, margin + 20, y, 12, "start", "#000", "%s %d (lanes %d-%d): scale byte %d = 0x%02X, scale %s",
                        bt->n_sub > 1 ? "sub-block" : "block", j, j * bt->sub_elems, (j + 1) * bt->sub_elems - 1,
                        bt->sub_byte[j], (unsigned)bt->sub_raw[j] & 0xFFFF, nb_fmt_float(bt->sub_scale[j], 1, n0, sizeof n0));
    }
    return nb_svg_end(s);
}

/* ---------------------------------------------------------------- hist */

nb_status nb_picture_errors(const char *path, const nb_compare_result *res, const char *title) {
    const nb_compare_format *h[NB_COMPARE_FORMATS];
    int n = 0;
    for (int f = 0; f < res->n_formats; f++)
        if (res->formats[f].applicable) h[n++] = &res->formats[f];
    const double left = 230, bw = 10, plot = 62 * bw, rowh = 64, top = 60;
    const double W = left + plot + 40, H = top + n * rowh + 70;
    nb_svg *s;
    nb_status st = nb_svg_begin(path, W, H, &s);
    if (st) return st;
    nb_svg_text(s, W / 2, 24, 15, "middle", "#000", "%s", title);
    nb_svg_text(s, W / 2, 44, 11, "middle", "#444", "bars: share of weights per tenth of a decade; first bar = exact, last = at least rms(w)");
    for (int r = 0; r < n; r++) {
        const double y0 = top + r * rowh, base = y0 + rowh - 12;
        long peak = h[r]->hist.zero > h[r]->hist.over ? h[r]->hist.zero : h[r]->hist.over;
        for (int k = 0; k < 60; k++) peak = h[r]->hist.bins[k] > peak ? h[r]->hist.bins[k] : peak;
        nb_svg_text(s, 8, y0 + 26, 13, "start", "#000", "%s", h[r]->name);
        nb_svg_text(s, 8, y0 + 44, 11, "start", "#444", "RMSE %.4g", h[r]->weight_rmse);
        nb_svg_line(s, left, base, left + plot, base, "#888", 1);
        for (int k = 0; k < 62; k++) {
            long c = k == 0 ? h[r]->hist.zero : k == 61 ? h[r]->hist.over : h[r]->hist.bins[k - 1];
            if (!c || !peak) continue;
            double bh = (rowh - 18) * (double)c / (double)peak;
            nb_svg_rect(s, left + k * bw + 1, base - bh, bw - 2, bh, k == 0 || k == 61 ? "#999999" : palette[r % 16], NULL);
        }
    }
    const double ya = top + n * rowh + 4;
    for (int d = 0; d <= 6; d++) {
        double x = left + bw + d * 10 * bw;
        nb_svg_line(s, x, ya - 4, x, ya + 4, "#000", 1);
        nb_svg_text(s, x, ya + 18, 11, "middle", "#000", "1e%d", d - 6);
    }
    nb_svg_text(s, left + plot / 2, ya + 40, 12, "middle", "#000", "|requantized \xe2\x88\x92 original| / rms(w)");
    return nb_svg_end(s);
}
