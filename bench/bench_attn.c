/*
 * bench_attn.c: the fused attention's prefill products, one work unit's block as fa_run
 * (src/model/forward.c) calls them: 32 tokens' query heads of one kv head (rows) against 128
 * cached keys (cells). Scores by nb_attn_qk on packed queries and by nb_matmul's F16 route (the
 * scores' route before nb_attn_qk), and the value sums by nb_attn_pv, in GFLOP/s (2 * rows * keys
 * * head size per call), on the heads of the default model and of the architectures' realistic
 * shapes. "hot": one block of cells again and again (in cache); "cold": every call the next block
 * of a 64 Ki-cell cache (32 MiB at head size 256: from memory, as at depth).
 * --decode: a decode step's products instead, one token's G query heads against the same blocks:
 * scores by nb_matmul (F16 cells on the route of llama.cpp's single-row dot, NB_ROUTE_VEC; Q8_0 and
 * Q4_0 cells on the quantized route), values by nb_attn_pv, the two in ns per cached key, and
 * beside them (float cells) the scores by nb_attn_qk, whose packing so few rows do not repay.
 *
 *   bench_attn [-r ROUNDS] [--types f16,bf16,f32] [--tokens N] [--decode]
 *
 * --tokens: a prefill unit's tokens (forward.c's FA_TOKENS; default 32), to weigh the
 * packing of keys and values against the rows that share it.
 *
 * One thread (the units are independent, one per thread); medians over rounds with their range,
 * each sample calls repeated for at least 200 ms. The kernel set is the active one
 * (NIBBLE_ISA=avx2 forces AVX2). Numbers only: nothing here passes or fails. It reaches the kernel
 * layer's interface (src/kernels/api.h), as the model does.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "kernels/api.h"
#include "nibble.h"

#define MAX_ROUNDS 64
enum { TOKENS = 32, MAX_TOKENS = 256, KEYS = 128, CELLS = 65536 };

typedef struct {
    const char *name;
    int D, G;
} head_shape;

enum { QK_PACKED, QK_MATMUL, PV, N_KERNELS };
static const char *kernel_names[N_KERNELS] = {"scores nb_attn_qk", "scores nb_matmul", "values nb_attn_pv"};

/* GFLOP/s of kernel k over calls repeated for at least 200 ms, each on the next block of cells
 * (of `blocks`); R rows of one token (decode) take the scores' decode route as fa_run does. */
static double sample(int k, int ty, const uint8_t *cache, size_t rb, int blocks, int D, int R, int decode,
                     const float *q, const float *qp, float *s, float *acc) {
    const nb_route route = decode && ty == NB_TYPE_F16 ? NB_ROUTE_VEC : NB_ROUTE_CELLS;
    int calls = 0;
    const double t0 = now_s();
    double t;
    do {
        const uint8_t *cells = cache + (size_t)(calls % blocks) * KEYS * rb;
        if (k == QK_PACKED) nb_attn_qk(ty, cells, rb, KEYS, D, qp, R, s, KEYS);
        else if (k == QK_MATMUL) nb_matmul_ex(NULL, ty, cells, 0, KEYS, D, q, R, s, route);
        else nb_attn_pv(ty, cells, rb, KEYS, D, s, KEYS, R, acc);
        calls++;
    } while ((t = now_s() - t0) < 0.2);
    return 2.0 * R * KEYS * D * (double)calls / t / 1e9;
}

#define USAGE "usage: bench_attn [-r ROUNDS] [--types f16,bf16,f32,q8_0,q4_0] [--tokens N] [--decode]\n"

int main(int argc, char **argv) {
    int rounds = 5, decode = 0, unit_tokens = TOKENS;
    const char *type_list = "f16";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--decode")) {
            decode = 1;
            continue;
        }
        if (!v) return fprintf(stderr, USAGE), 2;
        i++;
        if (!strcmp(a, "-r")) rounds = atoi(v);
        else if (!strcmp(a, "--types")) type_list = v;
        else if (!strcmp(a, "--tokens")) unit_tokens = atoi(v);
        else return fprintf(stderr, USAGE), 2;
    }
    if (rounds < 1 || rounds > MAX_ROUNDS) return fprintf(stderr, "bench_attn: -r is 1..%d\n", MAX_ROUNDS), 2;
    if (unit_tokens < 1 || unit_tokens > MAX_TOKENS) return fprintf(stderr, "bench_attn: --tokens is 1..%d\n", MAX_TOKENS), 2;
    static const head_shape shapes[] = {{"Gemma 3 270M", 256, 4}, {"Qwen3-0.6B", 128, 2}, {"Llama-3.2-1B", 64, 4},
                                        {"Phi-3-mini", 96, 1}};
    /* prefill: both score routes and the value sums; decode: its own two products first */
    static const int prefill_kernels[] = {QK_PACKED, QK_MATMUL, PV}, decode_kernels[] = {QK_MATMUL, PV, QK_PACKED};
    const int *kernels = decode ? decode_kernels : prefill_kernels;
    const int tokens = decode ? 1 : unit_tokens;
    printf("fused attention's %s (%d token%s x G rows, %d keys), kernel set %s, 1 thread, %d rounds: GFLOP/s, "
           "median (min..max)\n\n", decode ? "decode steps" : "blocks", tokens, tokens > 1 ? "s" : "", KEYS,
           nb_isa_name(nb_isa_active()), rounds);
    if (decode)
        printf("| head | type | cells | scores nb_matmul | values nb_attn_pv | ns per key | scores nb_attn_qk |\n"
               "|---|---|---|---|---|---|---|\n");
    else printf("| head | type | cells | %s | %s | qk/matmul | %s |\n|---|---|---|---|---|---|---|\n", kernel_names[0],
                kernel_names[1], kernel_names[2]);
    char names[128];
    snprintf(names, sizeof names, "%s", type_list);
    for (char *tok = strtok(names, ","); tok; tok = strtok(NULL, ",")) {
        const int ty = nb_type_from_name(tok);
        const int quant = ty == NB_TYPE_Q8_0 || ty == NB_TYPE_Q4_0, n_kernels = quant ? 2 : 3; /* nb_attn_qk: floats */
        if (ty != NB_TYPE_F16 && ty != NB_TYPE_BF16 && ty != NB_TYPE_F32 && !(decode && quant))
            return fprintf(stderr, "bench_attn: '%s' is not f16, bf16 or f32 (or, with --decode, q8_0 or q4_0)\n", tok), 2;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const int D = shapes[si].D, R = tokens * shapes[si].G;
            size_t rb;
            if (nb_row_bytes(ty, D, &rb)) return fprintf(stderr, "bench_attn: %s\n", nb_last_error()), 1;
            uint8_t *cache = malloc(rb * CELLS);
            float *x = malloc(sizeof(float) * (size_t)D), *q = malloc(sizeof(float) * (size_t)R * D);
            float *qp = malloc(sizeof(float) * NB_ATTN_QK_PACKED(R, D)), *s = malloc(sizeof(float) * (size_t)R * KEYS);
            float *acc = calloc((size_t)R * D, sizeof(float));
            if (!cache || !x || !q || !qp || !s || !acc) return fprintf(stderr, "bench_attn: out of memory\n"), 1;
            for (int j = 0; j < CELLS; j++) {
                for (int d = 0; d < D; d++) x[d] = (float)(((j * 31 + d * 17) % 201) - 100) / 100.0f;
                if (nb_quantize(ty, x, cache + (size_t)j * rb, D)) return fprintf(stderr, "bench_attn: %s\n", nb_last_error()), 1;
            }
            for (int i = 0; i < R * D; i++) q[i] = (float)((i * 7919) % 2001 - 1000) / 1000.0f;
            if (ty == NB_TYPE_F16) nb_round_fp16(q, (int64_t)R * D);
            nb_attn_pack_q(q, R, D, qp);
            for (int i = 0; i < R * KEYS; i++) s[i] = 1.0f / KEYS; /* the value sums' weights */
            for (int cold = 0; cold < 2; cold++) {
                double r[N_KERNELS][MAX_ROUNDS], med[N_KERNELS];
                for (int k = 0; k < rounds; k++)
                    for (int i = 0; i < n_kernels; i++) {
                        /* the scores' kernels overwrite s: the value sums weigh whatever they left */
                        r[kernels[i]][k] = sample(kernels[i], ty, cache, rb, cold ? CELLS / KEYS : 1, D, R, decode, q, qp, s, acc);
                    }
                printf("| %s (D %d, %d rows) | %s | %s |", shapes[si].name, D, R, nb_type_name(ty), cold ? "cold" : "hot");
                for (int i = 0; i < n_kernels; i++) {
                    const int kn = kernels[i];
                    qsort(r[kn], (size_t)rounds, sizeof(double), cmp_double);
                    med[kn] = r[kn][rounds / 2];
                    printf(" %.1f (%.1f..%.1f) |", med[kn], r[kn][0], r[kn][rounds - 1]);
                    if (!decode && kn == QK_MATMUL) printf(" %.2f |", med[QK_PACKED] / med[QK_MATMUL]);
                    /* a key's two products at the medians: 2 R D flops each */
                    if (decode && kn == PV) printf(" %.1f |", 2.0 * R * D * (1.0 / med[QK_MATMUL] + 1.0 / med[PV]));
                }
                printf(decode && quant ? " - |\n" : "\n");
                fflush(stdout);
            }
            free(cache), free(x), free(q), free(qp), free(s), free(acc);
        }
    }
    return 0;
}
