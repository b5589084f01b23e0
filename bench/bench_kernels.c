/*
 * bench_kernels.c: `make bench` entry for the kernel benchmark; the same program as
 * `nibble bench kernels` (cli/bench.c), built standalone so the bench target needs no CLI.
 */
#include "cli/bench.c"

int main(int argc, char **argv) {
    char *args[16] = {"bench", "kernels"};
    int n = 2;
    for (int i = 1; i < argc && n < 16; i++) args[n++] = argv[i];
    return cmd_bench(n, args);
}
