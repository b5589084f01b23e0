/*
 * tokenize.c: `nibble tokenize`, llama.cpp's llama-tokenize in nibble's CLI. Prints one
 * `%6d -> 'piece'` line per token (control tokens rendered), or with --ids a Python-style list
 * "[2, 9259, 1902]". -p text and -f/--stdin input get llama.cpp's escape processing (\n \t \r \\
 * \' \" \xHH) unless --no-escape. Control bytes of a piece are printed as \xHH (the vocabulary comes
 * from the file: its bytes must not drive the terminal).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "nibble.h"

static const char USAGE[] =
    "usage: nibble tokenize -m MODEL (-p TEXT | -f FILE | --stdin) [--ids] [--no-bos]\n"
    "                       [--parse-special] [--show-count] [--no-escape]\n"
    "  -m, --model FILE  the GGUF file whose vocabulary is used\n"
    "  -p, --prompt TEXT the text; -f, --file FILE reads it from a file, --stdin from standard input\n"
    "  --ids             print a list of ids instead of 'id -> piece' lines\n"
    "  --no-bos          do not add BOS even when the model asks for it\n"
    "  --parse-special   split control tokens written in the text (\"<start_of_turn>\")\n"
    "  --show-count      print the number of tokens at the end\n"
    "  --no-escape       take \\n, \\t, \\xHH ... literally\n"
    "Control bytes in pieces are printed as \\xHH.\n";

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    int ids_only = 0, no_bos = 0, parse_special = 0, show_count = 0, no_escape = 0, use_stdin = 0;
    arg_opt opts[] = {
        OPT_STR("-m|--model", &model),        OPT_STR("-p|--prompt", &prompt),
        OPT_STR("-f|--file", &file),          OPT_FLAG("--stdin", &use_stdin),
        OPT_FLAG("--ids", &ids_only),         OPT_FLAG("--no-bos", &no_bos),
        OPT_FLAG("--parse-special", &parse_special), OPT_FLAG("--show-count", &show_count),
        OPT_FLAG("--no-escape", &no_escape),
    };
    arg_spec spec = ARG_SPEC("tokenize", USAGE, opts, NULL, 0);
    int rc = arg_parse(&spec, argc, argv);
    if (rc >= 0) return rc;
    if (!model) return arg_usage_error(&spec, "-m MODEL is required");
    if (!!prompt + !!file + use_stdin != 1)
        return arg_usage_error(&spec, prompt || file || use_stdin ? "-p, -f and --stdin are exclusive: give one"
                                                                  : "no text: give -p TEXT, -f FILE or --stdin");
    char *text;
    size_t len;
    if (use_stdin || file) {
        text = arg_read_file(use_stdin ? "-" : file, &len);
        if (!text) return 1;
    } else {
        len = strlen(prompt);
        if (!(text = strdup(prompt))) return arg_error("out of memory");
    }
    if (!no_escape) len = arg_unescape(text, len);

    nb_gguf *g = NULL;
    nb_tokenizer *t = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    rc = 1;
    nb_status s = nb_gguf_open_ex(model, NB_GGUF_LIST_UNSUPPORTED, &g);
    if (!s) s = nb_tokenizer_from_gguf(g, &t);
    /* a first call with no room counts the tokens */
    if (!s && (s = nb_tokenize(t, text, len, !no_bos, parse_special, NULL, 0, &n)) == NB_ERR_RANGE) {
        ids = malloc((n ? n : 1) * sizeof *ids);
        s = ids ? nb_tokenize(t, text, len, !no_bos, parse_special, ids, n, &n) : NB_ERR_NOMEM;
    }
    if (s) {
        rc = arg_status(s);
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
        arg_text(stdout, piece, plen);
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
