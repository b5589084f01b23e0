/* bench.h: `nibble bench -m MODEL ...` (bench_model.c), which cmd_bench (bench.c) dispatches to. */
#ifndef NB_CLI_BENCH_H
#define NB_CLI_BENCH_H

extern const char BENCH_USAGE_MODEL[];
/* argv[0] is "bench", the flags follow. */
int bench_model(int argc, char **argv);

#endif
