/*
 * args.h: the one flag parser every subcommand uses, the messages and exit codes they share, and
 * small helpers (files, escapes, clocks).
 *
 * A command declares its options as a table of arg_opt rows (every spelling of a flag in one row:
 * "-n|--n-predict"), hands it to arg_parse() with its usage text, and then only checks how the
 * options combine. arg_parse() prints `--help` once to stdout (exit 0) and, on a bad flag or value,
 * says what was wrong and then prints the usage to stderr (exit 2).
 *
 * Exit codes, the same for every command (README, "Exit codes"):
 *   0 success; 1 bad data or a runtime failure (a damaged or unreadable file, out of memory);
 *   2 bad usage (an unknown flag, a missing or malformed value, a value outside what the command or
 *     the given input allows, an output path nibble will not replace);
 *   130 / 143 interrupted by SIGINT / SIGTERM (a partial output file is removed).
 * Messages start with one prefix, "nibble CMD: ", and go to stderr.
 */
#ifndef NB_CLI_ARGS_H
#define NB_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h" /* nb_plural, for "%lld token%s" */
#include "nibble.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

typedef enum arg_kind {
    ARG_FLAG,    /* no value; int *out = 1 */
    ARG_STR,     /* const char **out */
    ARG_INT,     /* int *out, in [lo, hi] */
    ARG_U64,     /* uint64_t *out */
    ARG_FLOAT,   /* float *out, in [lo, hi] */
    ARG_CHOICE,  /* int *out = index of the value in choices ("md|json") */
    ARG_LIST,    /* arg_list *out: comma-separated integers in [lo, hi] */
    ARG_CHOICES, /* arg_list *out: the indices of comma-separated words of choices ("f16,q8_0") */
    ARG_STRS,    /* arg_strs *out: every occurrence of a repeatable option */
    ARG_IGNORED, /* takes a value and ignores it with a note; choices says why */
} arg_kind;

#define ARG_LIST_MAX 16
typedef struct arg_list {
    int v[ARG_LIST_MAX];
    int n;
} arg_list;

#define ARG_STRS_MAX 64
typedef struct arg_strs {
    const char *v[ARG_STRS_MAX];
    int n;
} arg_strs;

typedef struct arg_opt {
    const char *names;   /* every spelling, '|'-separated: "-m|--model" */
    arg_kind kind;
    void *out;
    double lo, hi;       /* ARG_INT, ARG_FLOAT, ARG_LIST */
    const char *choices; /* ARG_CHOICE: "md|json"; ARG_IGNORED: the reason shown */
    int given;           /* set by arg_parse: times the option appeared */
} arg_opt;

#define OPT_FLAG(names, p) {names, ARG_FLAG, p, 0, 0, NULL, 0}
#define OPT_STR(names, p) {names, ARG_STR, p, 0, 0, NULL, 0}
#define OPT_INT(names, p, lo, hi) {names, ARG_INT, p, lo, hi, NULL, 0}
#define OPT_U64(names, p) {names, ARG_U64, p, 0, 0, NULL, 0}
#define OPT_FLOAT(names, p, lo, hi) {names, ARG_FLOAT, p, lo, hi, NULL, 0}
#define OPT_CHOICE(names, p, choices) {names, ARG_CHOICE, p, 0, 0, choices, 0}
#define OPT_LIST(names, p, lo, hi) {names, ARG_LIST, p, lo, hi, NULL, 0}
#define OPT_CHOICES(names, p, choices) {names, ARG_CHOICES, p, 0, 0, choices, 0}
#define OPT_STRS(names, p) {names, ARG_STRS, p, 0, 0, NULL, 0}
#define OPT_IGNORED(names, why) {names, ARG_IGNORED, NULL, 0, 0, why, 0}
/* -t as every command spells it: at most what the thread pool accepts. */
#define OPT_THREADS(p) OPT_INT("-t|--threads", p, 1, NB_MAX_THREADS)
/* -ngl as llama.cpp's users type it; a CPU engine has no layers to offload. */
#define OPT_NGL OPT_IGNORED("-ngl|--gpu-layers|--n-gpu-layers", "nibble runs on the CPU")

/* The KV cache's options as llama.cpp spells them; arg_cache_apply turns the choices into
 * nb_ctx_params' values. */
typedef struct arg_cache {
    int k, v, fa, swa_full, fast_prefill;
} arg_cache;
#define ARG_CACHE_TYPES "f16|f32|bf16|q8_0|q4_0"
#define OPT_CACHE(c)                                                                                                   \
    OPT_CHOICE("-ctk|--cache-type-k", &(c)->k, ARG_CACHE_TYPES), OPT_CHOICE("-ctv|--cache-type-v", &(c)->v, ARG_CACHE_TYPES), \
        OPT_CHOICE("-fa|--flash-attn", &(c)->fa, "auto|on|off"), OPT_FLAG("--swa-full", &(c)->swa_full),             \
        OPT_FLAG("--fast-prefill", &(c)->fast_prefill)
#define ARG_CACHE_USAGE                                                                                                \
    "  -ctk, --cache-type-k T    K cache cells: f16 (default), f32, bf16, q8_0, q4_0\n"                              \
    "  -ctv, --cache-type-v T    V cache cells, the same types\n"                                                      \
    "  -fa, --flash-attn M       auto (default), on (fused attention), off (llama.cpp's unfused order; f16/f32)\n"    \
    "  --swa-full                sliding-window layers keep every position (default: the window, in a ring)\n"   \
    "  --fast-prefill            batches sum each weight block exactly, then round once (faster; not llama.cpp's bits)\n"
/* The choices into a context's parameters. */
void arg_cache_apply(const arg_cache *c, nb_ctx_params *p);
/* The nb_type of a choice of ARG_CACHE_TYPES (its index). */
int arg_cache_type(int choice);

typedef struct arg_spec {
    const char *cmd;   /* "run", "bench roofline": messages start "nibble CMD: " */
    const char *usage; /* the whole usage text, ending in a newline */
    arg_opt *opts;
    int n_opts;
    const char **pos;  /* positional arguments in order ("-" counts as one) */
    int max_pos, n_pos;
} arg_spec;

#define ARG_SPEC(cmd, usage, opts, pos, max_pos) {cmd, usage, opts, (int)(sizeof opts / sizeof opts[0]), pos, max_pos, 0}

/* Parses argv[1..argc-1] (argv[0] is the command). Returns -1 when the command should go on, or
 * the exit code to return: 0 after --help, 2 after a message on a bad flag or value. */
int arg_parse(arg_spec *s, int argc, char **argv);
/* How many times the option with this spelling was given. */
int arg_given(const arg_spec *s, const char *name);
/* "nibble CMD: message" and the usage on stderr; returns 2. */
int arg_usage_error(const arg_spec *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "nibble CMD: message" on stderr; returns 1. */
int arg_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "nibble CMD: note: message" on stderr. */
void arg_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "nibble CMD: <nb_last_error()>" on stderr ("out of memory: ..." for NB_ERR_NOMEM); returns the
 * exit code of a library failure: 2 for NB_ERR_INVALID_ARG (a value the caller chose), else 1. */
int arg_status(nb_status s);

/* Whole file into a NUL-terminated buffer (free it); "-" is standard input. NULL with a message. */
char *arg_read_file(const char *path, size_t *len);
/* llama.cpp's prompt escapes (\n \r \t \' \" \\ \xHH), in place; returns the new length.
 * Unknown escapes stay as written. */
size_t arg_unescape(char *s, size_t len);
/* A JSON string of n bytes: quotes, backslashes and control bytes escaped, invalid UTF-8 as
 * U+FFFD, so the output always parses. */
void arg_json_str(FILE *f, const char *p, size_t n);
/* Text from a file for a terminal: control bytes (and DEL) as \xHH, so a name holding escape
 * sequences cannot drive the terminal; UTF-8 passes through. */
void arg_text(FILE *f, const char *p, size_t n);
/* The same on a static buffer, for printf arguments (truncated at 255 bytes of output; two slots). */
const char *arg_safe(int slot, const char *s);
/* Peak resident memory of this process, bytes. */
uint64_t arg_peak_rss(void);
/* Monotonic seconds. */
double arg_now(void);

#endif
