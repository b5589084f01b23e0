/*
 * bench.c: `nibble bench -m MODEL ...` (llama-bench's tests: bench_model.c), `nibble bench kernels
 * [-o md|json] [-t LIST] [-r REPS]`: kernel throughput (nb_bench_stream, nb_bench_kernel), and
 * `nibble bench roofline -m MODEL [-t LIST] [-n N] [-r REPS]`: decode against its memory ceiling
 * (nb_bench_roofline). Figures print as median ± range (max - min).
 */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/bench.h"
#include "cli/commands.h"
#include "nibble.h"

static double spread(nb_bench_stat s) { return s.max - s.min; }

static const char USAGE_KERNELS[] = "usage: nibble bench kernels [-o md|json] [-t 1,2] [-r REPS]\n"
                                    "  -o md|json   a Markdown table (default) or JSON\n"
                                    "  -t LIST      thread counts, comma-separated (default 1,2)\n"
                                    "  -r REPS      repetitions per figure, 1..32 (default 5)\n";
static const char USAGE_ROOFLINE[] = "usage: nibble bench roofline -m MODEL [-t 1,2] [-n N] [-r REPS]\n"
                                     "  -m, --model FILE  the GGUF model\n"
                                     "  -t LIST           thread counts, comma-separated (default 1,2)\n"
                                     "  -n N              decode steps per round, 1..4096 (default 64)\n"
                                     "  -r REPS           rounds per thread count, 1..32 (default 5)\n";

static int bench_kernels(int argc, char **argv) {
    int json = 0, reps = 5;
    arg_list threads = {{1, 2}, 2};
    arg_opt opts[] = {OPT_CHOICE("-o|--output", &json, "md|json"), OPT_LIST("-t|--threads", &threads, 1, NB_MAX_THREADS),
                      OPT_INT("-r|--repetitions", &reps, 1, 32)};
    arg_spec spec = ARG_SPEC("bench kernels", USAGE_KERNELS, opts, NULL, 0);
    int rc = arg_parse(&spec, argc - 1, argv + 1);
    if (rc >= 0) return rc;
    if (json) printf("{\"isa\": \"%s\", \"results\": [", nb_isa_name(nb_isa_active()));
    else {
        printf("kernel set: %s (%s)\n\n", nb_isa_name(nb_isa_active()), nb_isa_note());
        printf("| type | threads | GEMV GB/s | %% of stream | GEMM GFLOP/s (512 rows) | block route | quantize+4 rows ms | kernel |\n");
        printf("|---|---|---|---|---|---|---|---|\n");
    }
    int first = 1;
    for (int ti = 0; ti < threads.n; ti++) {
        nb_pool *pool;
        nb_bench_stat st;
        nb_status s = nb_pool_create(threads.v[ti], &pool);
        if (!s && (s = nb_bench_stream(pool, reps, &st))) nb_pool_destroy(pool);
        if (s) return arg_status(s);
        if (!json)
            printf("| stream read | %d | %.1f ± %.1f | 100 | | | | 1 GiB sum |\n", threads.v[ti], st.median,
                   spread(st));
        const nb_type_info *t;
        for (int k = 0; (t = nb_type_at(k)); k++) {
            if (!t->weight_type) continue;
            nb_bench_kernel_result r;
            if ((s = nb_bench_kernel(pool, t->id, reps, &r))) {
                nb_pool_destroy(pool);
                return arg_status(s);
            }
            const double gemv_pct = 100 * r.gemv_gbs.median / st.median;
            if (json)
                printf("%s\n {\"type\": \"%s\", \"threads\": %d, \"kernel\": \"%s\", \"stream_gbs\": %.2f, "
                       "\"gemv_gbs\": %.2f, \"gemv_spread\": %.2f, \"gemv_pct_stream\": %.1f, \"gemm_gflops\": %.1f, "
                       "\"gemm_spread\": %.1f, \"gemm_block_gflops\": %.1f, \"quant_ms\": %.3f}",
                       first ? "" : ",", t->name, threads.v[ti], r.kernel, st.median, r.gemv_gbs.median,
                       spread(r.gemv_gbs), gemv_pct, r.gemm_gflops.median,
                       spread(r.gemm_gflops), r.gemm_block_gflops.median, r.quant_ms.median);
            else {
                char blk[48] = "";
                if (r.gemm_block_gflops.median > 0)
                    snprintf(blk, sizeof blk, "%.1f ± %.1f", r.gemm_block_gflops.median,
                             spread(r.gemm_block_gflops));
                printf("| %s | %d | %.1f ± %.1f | %.0f | %.1f ± %.1f | %s | %.2f | %s |\n", t->name, threads.v[ti],
                       r.gemv_gbs.median, spread(r.gemv_gbs), gemv_pct, r.gemm_gflops.median,
                       spread(r.gemm_gflops), blk, r.quant_ms.median, r.kernel);
            }
            fflush(stdout);
            first = 0;
        }
        nb_pool_destroy(pool);
    }
    if (json) printf("\n]}\n");
    return 0;
}

/* ----------------------------------------------------------- roofline */

static int bench_roofline(int argc, char **argv) {
    int reps = 5, n_gen = 64;
    arg_list threads = {{1, 2}, 2};
    const char *path = NULL;
    arg_opt opts[] = {OPT_STR("-m|--model", &path), OPT_LIST("-t|--threads", &threads, 1, NB_MAX_THREADS),
                      OPT_INT("-n|--n-gen", &n_gen, 1, 4096), OPT_INT("-r|--repetitions", &reps, 1, 32)};
    arg_spec spec = ARG_SPEC("bench roofline", USAGE_ROOFLINE, opts, NULL, 0);
    int rc = arg_parse(&spec, argc - 1, argv + 1);
    if (rc >= 0) return rc;
    if (!path) return arg_usage_error(&spec, "-m MODEL is required");
    nb_model *m;
    nb_status s = nb_model_load(path, &m);
    if (s) return arg_status(s);
    printf("kernel set: %s; %s, %d decode step%s after one token, %d round%s per thread count\n",
           nb_isa_name(nb_isa_active()), path, n_gen, nb_plural(n_gen), reps, nb_plural(reps));
    const double huge = nb_gguf_huge_share(nb_model_gguf(m));
    if (huge >= 0) printf("weights mapped in 2 MiB pages: %.0f %%\n\n", 100 * huge);
    else printf("weights mapped in 2 MiB pages: unknown\n\n");
    printf("| threads | stream GB/s | decode tok/s | MB read per step | ceiling tok/s | share of ceiling |\n");
    printf("|---|---|---|---|---|---|\n");
    for (int ti = 0; ti < threads.n && !s; ti++) {
        nb_pool *pool;
        nb_bench_roofline_result r;
        if ((s = nb_pool_create(threads.v[ti], &pool))) break;
        if (!(s = nb_bench_roofline(m, pool, n_gen, reps, &r)))
            printf("| %d | %.1f ± %.1f | %.1f ± %.1f | %.1f | %.1f ± %.1f | %.0f %% (%.0f..%.0f) |\n", threads.v[ti],
                   r.stream_gbs.median, spread(r.stream_gbs), r.decode_ts.median,
                   spread(r.decode_ts), r.step_bytes / 1e6, r.ceiling_ts.median,
                   spread(r.ceiling_ts), r.share.median, r.share.min, r.share.max);
        fflush(stdout);
        nb_pool_destroy(pool);
    }
    nb_model_free(m);
    return s ? arg_status(s) : 0;
}

int cmd_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "kernels")) return bench_kernels(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "roofline")) return bench_roofline(argc, argv);
    const int help = argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
    if (argc >= 2 && !help && argv[1][0] == '-') return bench_model(argc, argv);
    if (argc < 2) fprintf(stderr, "nibble bench: which benchmark? -m MODEL (llama-bench's tests), kernels or roofline\n");
    else if (!help) fprintf(stderr, "nibble bench: unknown benchmark '%s' (-m MODEL, kernels or roofline)\n", argv[1]);
    fputs(BENCH_USAGE_MODEL, help ? stdout : stderr);
    fputs(USAGE_KERNELS, help ? stdout : stderr);
    fputs(USAGE_ROOFLINE, help ? stdout : stderr);
    return help ? 0 : 2;
}
