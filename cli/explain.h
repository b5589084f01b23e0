/*
 * explain.h: the parts of `nibble explain` (one file each) and the output helpers they share.
 * The arithmetic and the pictures (--svg FILE) live in the library (src/explain/explain.h); these
 * files only parse flags and render traces as text and JSON (--json). Exit codes as every
 * subcommand: 0 ok, 1 the work failed (tensor out of range, unreadable file), 2 bad usage (unknown
 * format or flag, a code longer than its format).
 */
#ifndef NB_CLI_EXPLAIN_H
#define NB_CLI_EXPLAIN_H

#include <stdio.h>

#include "explain/explain.h"

int explain_codes(int argc, char **argv);   /* explain e2m1|int4|...|bits CODE */
int explain_block(int argc, char **argv);   /* explain q4_k --fixture article / MODEL.gguf TENSOR */
int explain_dot(int argc, char **argv);     /* explain dot --format F --scale S -w .. -x .. */
int explain_compare(int argc, char **argv); /* explain compare MODEL.gguf TENSOR */

/* Output helpers (explain_out.c). JSON pieces: a string (escaped; bytes below 0x20 as \u00XX) and a number (null when not finite). */
void ex_json_str(FILE *f, const char *s);
void ex_json_num(FILE *f, double v);
/* The block types `nibble explain FORMAT` traces, in id order, space-separated: the type table's
 * rows with more than one element a block that nb_block_explain takes. */
const char *ex_block_formats(void);
/* A number for people: shortest round-trip text with a Unicode minus (nb_fmt_float). One static
 * buffer per slot (0..7) so a printf can hold several. */
const char *ex_num(int slot, double v);

#endif
