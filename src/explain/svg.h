/*
 * svg.h: a minimal SVG 1.1 writer for the pictures of `nibble explain`. Output is plain,
 * well-formed XML (text is escaped; numbers are finite by construction: a non-finite coordinate is
 * written as 0) with a white background and no external resources. The file is written under a
 * temporary name beside `path` and renamed over it by nb_svg_end(), so an interrupted run leaves
 * the old file; nb_svg_abort() removes the temporary file. Coordinates are pixels, y down.
 */
#ifndef NB_EXPLAIN_SVG_H
#define NB_EXPLAIN_SVG_H

#include "base/error.h"

typedef struct nb_svg nb_svg;

nb_status nb_svg_begin(const char *path, double width, double height, nb_svg **out);
void nb_svg_rect(nb_svg *s, double x, double y, double w, double h, const char *fill, const char *stroke);
void nb_svg_line(nb_svg *s, double x1, double y1, double x2, double y2, const char *stroke, double width);
/* A line ending in a filled arrowhead of the same colour at (x2, y2). */
void nb_svg_arrow(nb_svg *s, double x1, double y1, double x2, double y2, const char *stroke, double width);
void nb_svg_circle(nb_svg *s, double cx, double cy, double r, const char *fill, const char *stroke);
/* anchor: "start", "middle" or "end"; the text (printf-formatted, UTF-8) is XML-escaped. */
void nb_svg_text(nb_svg *s, double x, double y, double size, const char *anchor, const char *fill, const char *fmt, ...)
    NB_PRINTF(7, 8);
/* Writes the closing tag, flushes, renames into place and frees s (also on failure). */
nb_status nb_svg_end(nb_svg *s);
void nb_svg_abort(nb_svg *s);

#endif
