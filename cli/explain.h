/*
 * explain.h: the parts of `nibble explain` (one file each) and the output helpers they share.
 * The arithmetic lives in the library (src/explain/explain.h); these files only parse flags and
 * render traces as text, JSON (--json) and SVG (--svg FILE). Exit codes as every subcommand: 0 ok,
 * 1 the work failed (tensor out of range, unreadable file), 2 bad usage (unknown format or flag,
 * a code longer than its format).
 */
#ifndef NB_CLI_EXPLAIN_H
#define NB_CLI_EXPLAIN_H

#include <stdio.h>

#include "explain/explain.h"

int explain_codes(int argc, char **argv);   /* explain e2m1|int4|...|bits CODE */
int explain_block(int argc, char **argv);   /* explain q4_k --fixture article / MODEL.gguf TENSOR */
int explain_dot(int argc, char **argv);     /* explain dot --format F --scale S -w .. -x .. */
int explain_compare(int argc, char **argv); /* explain compare MODEL.gguf TENSOR */

/* JSON pieces: a string (escaped; bytes below 0x20 as \u00XX) and a number (null when not finite). */
void ex_json_str(FILE *f, const char *s);
void ex_json_num(FILE *f, double v);
/* A number for people: shortest round-trip text with a Unicode minus (nb_fmt_float). One static
 * buffer per slot (0..7) so a printf can hold several. */
const char *ex_num(int slot, double v);

/* Pictures (explain_svg.c). Each writes through nb_svg (temp file + rename, or standard output for
 * "-"); returns 0, or the exit code after a message (2 for an output path nibble will not replace). */
int ex_svg_ruler(const char *path, double scale, const double *w, int n, const char *title);
int ex_svg_block(const char *path, const nb_block_trace *bt, const void *block, int payload, const char *title);
typedef struct ex_hist {
    const char *name;
    double rmse;
    int bins[64];   /* counts of log10(|error| / rms(w)) in [-6, 0), 10 bins per decade */
    long zero, over; /* exact zeros, and errors >= rms(w) */
} ex_hist;
int ex_svg_hist(const char *path, const ex_hist *h, int n, const char *title);

#endif
