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

const char *ex_block_formats(void) {
    static char names[256];
    if (names[0]) return names;
    static const uint8_t zero[512]; /* more than any block */
    const nb_type_info *t;
    size_t n = 0;
    for (int i = 0; (t = nb_type_at(i)) && n < sizeof names; i++) {
        nb_block_trace bt;
        if (t->block_elems > 1 && t->block_bytes <= (int)sizeof zero && nb_block_explain(t->id, zero, &bt) == NB_OK)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", n ? " " : "", t->name);
    }
    return names;
}

const char *ex_num(int slot, double v) {
    static char bufs[8][48];
    return nb_fmt_float(v, 1, bufs[slot & 7], sizeof bufs[0]);
}
