/*
 * args.h: small helpers every subcommand uses to read its flags. Each prints a message naming
 * the flag and the accepted range to stderr and returns 0 on bad input, 1 on success.
 */
#ifndef NB_CLI_ARGS_H
#define NB_CLI_ARGS_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

/* The value after flag argv[*i] (advances *i), or NULL with a message when it is missing. */
const char *arg_value(int argc, char **argv, int *i);
int arg_int(const char *flag, const char *s, long lo, long hi, int *out);
int arg_u64(const char *flag, const char *s, uint64_t *out);
int arg_float(const char *flag, const char *s, double lo, double hi, float *out);
/* Whole file into a NUL-terminated buffer (free it); NULL with a message on failure. */
char *arg_read_file(const char *path, size_t *len);
/* llama.cpp's prompt escapes (\n \r \t \' \" \\ \xHH), in place; returns the new length.
 * Unknown escapes stay as written. */
size_t arg_unescape(char *s, size_t len);
/* A JSON string of n bytes: quotes, backslashes and control bytes escaped, invalid UTF-8 as
 * U+FFFD, so the output always parses. */
void arg_json_str(FILE *f, const char *p, size_t n);
/* Peak resident memory of this process, bytes. */
uint64_t arg_peak_rss(void);
/* Monotonic seconds. */
double arg_now(void);

#endif
