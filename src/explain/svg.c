/*
 * svg.c: the SVG writer (contract: svg.h).
 */
#include "explain/svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic.h"

struct nb_svg {
    nb_atomic_file out; /* the SVG goes to a temporary file renamed when complete, or to stdout for "-" */
    FILE *f;            /* out.f */
};

/* Coordinates: two decimals, and never "nan"/"inf", which would not parse as SVG lengths. */
static double fin(double v) { return isfinite(v) ? v : 0.0; }

nb_status nb_svg_begin(const char *path, double width, double height, nb_svg **out) {
    *out = NULL;
    if (!path || !*path) return nb_fail(NB_ERR_INVALID_ARG, "svg: empty output path");
    nb_svg *s = calloc(1, sizeof *s);
    if (!s) return nb_fail(NB_ERR_NOMEM, "svg: out of memory for '%s'", path);
    nb_status st = nb_atomic_open_ex(&s->out, path, "svg", NB_ATOMIC_ALLOW_STDOUT); /* `--svg -` */
    if (st) {
        free(s);
        return st;
    }
    s->f = s->out.f;
    fprintf(s->f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n",
            fin(width), fin(height), fin(width), fin(height), fin(width), fin(height));
    *out = s;
    return NB_OK;
}

void nb_svg_rect(nb_svg *s, double x, double y, double w, double h, const char *fill, const char *stroke) {
    fprintf(s->f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" stroke=\"%s\"/>\n", fin(x),
            fin(y), fin(w > 0 ? w : 0), fin(h > 0 ? h : 0), fill ? fill : "none", stroke ? stroke : "none");
}

void nb_svg_line(nb_svg *s, double x1, double y1, double x2, double y2, const char *stroke, double width) {
    fprintf(s->f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"%.2f\"/>\n",
            fin(x1), fin(y1), fin(x2), fin(y2), stroke, fin(width));
}

void nb_svg_arrow(nb_svg *s, double x1, double y1, double x2, double y2, const char *stroke, double width) {
    double dx = x2 - x1, dy = y2 - y1, len = sqrt(dx * dx + dy * dy);
    if (!(len > 0)) return;
    double ux = dx / len, uy = dy / len, head = 4 + 2 * width;
    /* the shaft stops where the head begins, so the tip stays sharp */
    nb_svg_line(s, x1, y1, x2 - ux * head, y2 - uy * head, stroke, width);
    fprintf(s->f, "<polygon points=\"%.2f,%.2f %.2f,%.2f %.2f,%.2f\" fill=\"%s\"/>\n", fin(x2), fin(y2),
            fin(x2 - ux * head - uy * head * 0.5), fin(y2 - uy * head + ux * head * 0.5),
            fin(x2 - ux * head + uy * head * 0.5), fin(y2 - uy * head - ux * head * 0.5), stroke);
}

void nb_svg_circle(nb_svg *s, double cx, double cy, double r, const char *fill, const char *stroke) {
    fprintf(s->f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" fill=\"%s\" stroke=\"%s\"/>\n", fin(cx), fin(cy),
            fin(r), fill ? fill : "none", stroke ? stroke : "none");
}

void nb_svg_text(nb_svg *s, double x, double y, double size, const char *anchor, const char *fill, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(s->f, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\" text-anchor=\"%s\" fill=\"%s\">", fin(x), fin(y),
            fin(size), anchor, fill);
    for (const char *p = buf; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", s->f); break;
        case '<': fputs("&lt;", s->f); break;
        case '>': fputs("&gt;", s->f); break;
        case '"': fputs("&quot;", s->f); break;
        default:
            /* control bytes are not allowed in XML 1.0 text */
            if ((unsigned char)*p >= 0x20 || *p == '\t') fputc(*p, s->f);
        }
    }
    fputs("</text>\n", s->f);
}

nb_status nb_svg_end(nb_svg *s) {
    fputs("</svg>\n", s->f);
    nb_status st = ferror(s->f) ? nb_fail(NB_ERR_IO, "svg: cannot write '%s'", s->out.path) : NB_OK;
    if (st) nb_atomic_abort(&s->out);
    else st = nb_atomic_commit(&s->out, "svg");
    free(s);
    return st;
}

void nb_svg_abort(nb_svg *s) {
    if (!s) return;
    nb_atomic_abort(&s->out);
    free(s);
}
