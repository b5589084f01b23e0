/*
 * explain_out.c: the output helpers every `nibble explain` form shares (declared in explain.h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/explain.h"

void ex_json_str(FILE *f, const char *s) { arg_json_str(f, s, strlen(s)); }

void ex_json_num(FILE *f, double v) {
    char buf[48];
    if (!isfinite(v)) fputs("null", f);
    else fputs(nb_fmt_float(v, 0, buf, sizeof buf), f);
}

const char *ex_num(int slot, double v) {
    static char bufs[8][48];
    return nb_fmt_float(v, 1, bufs[slot & 7], sizeof bufs[0]);
}
