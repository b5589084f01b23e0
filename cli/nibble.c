/*
 * nibble.c: the command-line entry point; dispatches to one file per subcommand. SIGINT and
 * SIGTERM remove the temporary file of an output being written and exit 130 / 143 (`run`
 * catches the first SIGINT itself to stop generation and print its statistics); a signal the
 * parent process left ignored stays ignored.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "nibble.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} commands[] = {
    {"run", cmd_run, "generate text from a model (llama.cpp flags), or --chat"},
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server with continuous batching (llama-server flags)"},
    {"bench", cmd_bench, "benchmarks: `bench -m MODEL` (llama-bench's tests and output), `bench kernels` (GEMV GB/s vs streaming read, GEMM GFLOP/s), `bench roofline` (decode vs its memory ceiling)"},
    {"inspect", cmd_inspect, "what a GGUF file holds: hyperparameters, type census, memory (--tensors, --json)"},
    {"tokenize", cmd_tokenize, "text -> token ids and pieces, as llama-tokenize (--ids, --parse-special)"},
    {"perplexity", cmd_perplexity, "perplexity of a text as llama-perplexity; --save-logits / --kld for KL divergence"},
    {"quantize", cmd_quantize, "convert a model: q8_0 q4_0 q4_k_m (llama.cpp's rules), mxfp4/nvfp4(_m), auto:BPW"},
    {"imatrix", cmd_imatrix, "importance statistics of the weight matrices over a text (llama.cpp's GGUF format)"},
    {"explain", cmd_explain, "open a code, a byte of a block or a dot product and show the arithmetic"},
    {"version", cmd_version, "print the version and the kernel set this CPU gets"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: nibble COMMAND [ARGS]   (nibble COMMAND --help for its flags)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\nexit codes: 0 success, 1 bad data or a runtime failure, 2 bad usage, 130/143 interrupted\n");
}

/* Only async-signal-safe calls: unlink (inside nb_remove_temp_files), write, _exit. */
static void on_signal(int sig) {
    static const char msg_int[] = "\nnibble: interrupted (SIGINT); no partial output file is left\n";
    static const char msg_term[] = "\nnibble: terminated (SIGTERM); no partial output file is left\n";
    nb_remove_temp_files();
    if (sig == SIGINT) (void)!write(2, msg_int, sizeof msg_int - 1);
    else (void)!write(2, msg_term, sizeof msg_term - 1);
    _exit(128 + sig);
}

/* Installs handler for sig unless the parent left sig ignored (a shell's background job, nohup):
 * that choice is kept, as every Unix program keeps it. */
void cli_catch(int sig, void (*handler)(int)) {
    struct sigaction sa, old;
    if (sigaction(sig, NULL, &old) || old.sa_handler == SIG_IGN) return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler; /* no SA_RESTART: an interrupted read returns (run --chat's prompt) */
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

int main(int argc, char **argv) {
    cli_catch(SIGINT, on_signal);
    cli_catch(SIGTERM, on_signal);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "nibble: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
