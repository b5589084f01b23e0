/*
 * tokenize.c: `nibble tokenize`, llama.cpp's llama-tokenize in nibble's CLI. Prints one
 * `%6d -> 'piece'` line per token (control tokens rendered), or with --ids a Python-style list
 * "[2, 9259, 1902]". -p text and -f/--stdin input get llama.cpp's escape processing (\n \t \r \\
 * \' \" \xHH) unless --no-escape.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "nibble.h"

static void usage(FILE *f) {
    fprintf(f, "usage: nibble tokenize -m MODEL (-p TEXT | -f FILE | --stdin) [--ids] [--no-bos]\n"
               "                       [--parse-special] [--show-count] [--no-escape]\n"
               "  --ids            print a list of ids instead of 'id -> piece' lines\n"
               "  --no-bos         do not add BOS even when the model asks for it\n"
               "  --parse-special  split control tokens written in the text (\"<start_of_turn>\")\n"
               "  --show-count     print the number of tokens at the end\n"
               "  --no-escape      take \\n, \\t, \\xHH ... literally\n");
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    int ids_only = 0, no_bos = 0, parse_special = 0, show_count = 0, escape = 1, use_stdin = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **val = !strcmp(a, "-m") || !strcmp(a, "--model")    ? &model
                           : !strcmp(a, "-p") || !strcmp(a, "--prompt") ? &prompt
                           : !strcmp(a, "-f") || !strcmp(a, "--file")   ? &file
                                                                        : NULL;
        if (val) {
            if (!(*val = arg_value(argc, argv, &i))) return 2;
        } else if (!strcmp(a, "--stdin")) use_stdin = 1;
        else if (!strcmp(a, "--ids")) ids_only = 1;
        else if (!strcmp(a, "--no-bos")) no_bos = 1;
        else if (!strcmp(a, "--parse-special")) parse_special = 1;
        else if (!strcmp(a, "--show-count")) show_count = 1;
        else if (!strcmp(a, "--no-escape")) escape = 0;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "nibble tokenize: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model || (!prompt && !file && !use_stdin)) {
        usage(stderr);
        return 2;
    }
    char *text;
    size_t len;
    if (use_stdin || file) {
        text = arg_read_file(use_stdin ? "/dev/stdin" : file, &len);
        if (!text) return 1;
    } else {
        len = strlen(prompt);
        text = malloc(len + 1);
        if (!text) {
            fprintf(stderr, "nibble tokenize: out of memory\n");
            return 1;
        }
        memcpy(text, prompt, len);
    }
    if (escape) len = arg_unescape(text, len);

    nb_gguf *g = NULL;
    nb_tokenizer *t = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = 1;
    nb_status s = nb_gguf_open_ex(model, NB_GGUF_LIST_UNSUPPORTED, &g);
    if (!s) s = nb_tokenizer_from_gguf(g, &t);
    /* a first call with no room counts the tokens */
    if (!s && (s = nb_tokenize(t, text, len, !no_bos, parse_special, NULL, 0, &n)) == NB_ERR_RANGE) {
        ids = malloc((n ? n : 1) * sizeof *ids);
        s = ids ? nb_tokenize(t, text, len, !no_bos, parse_special, ids, n, &n) : NB_ERR_NOMEM;
    }
    if (s) {
        fprintf(stderr, "nibble tokenize: %s: %s\n", nb_strerror(s), nb_last_error());
        goto done;
    }
    if (ids_only) putchar('[');
    for (size_t i = 0; i < n; i++) {
        if (ids_only) {
            printf(i ? ", %d" : "%d", (int)ids[i]);
            continue;
        }
        static char piece[NB_TOKEN_MAX_BYTES]; /* a piece is never longer than its token's text */
        size_t plen = 0;
        nb_token_to_piece(t, ids[i], piece, sizeof piece, &plen, 1);
        printf("%6d -> '", (int)ids[i]);
        fwrite(piece, 1, plen, stdout);
        puts("'");
    }
    if (ids_only) puts("]");
    if (show_count) printf("Total number of tokens: %zu\n", n);
    rc = 0;
done:
    free(ids);
    free(text);
    nb_tokenizer_free(t);
    nb_gguf_close(g);
    return rc;
}
