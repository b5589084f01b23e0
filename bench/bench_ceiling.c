/*
 * bench_ceiling.c: what one core's vector units do at most, for the kernels' steps on AVX2, so that
 * a kernel's rate can be stated as a share of its instructions' ceiling (as decode is stated as a
 * share of the memory's, `nibble bench roofline`). Each figure is a loop of independent
 * instructions in registers or L1, timed against a dependent chain of scalar adds that measures
 * the clock in the same run (one add per cycle), so figures are in cycles:
 *  - clock: the add chain's rate (GHz);
 *  - pair: vpmaddubsw then vpaddw into one of 8 accumulators, 32 multiply-adds of 8-bit codes:
 *    the integer kernels' core (units.h, kpanel.h, tlanes.h);
 *  - triple: the same after a vpbroadcastd of 4 bytes from memory, the GEMM panels' step (one
 *    token's 4 activation bytes against 8 rows' codes, panel.h);
 *  - sign: Q8_0's step by the sign trick (units.h, tlanes.h TL_S): a group's 4 weight bytes
 *    broadcast from memory, vpabsb of them, the 32 activation bytes loaded and vpsignb'd by them,
 *    vpmaddubsw, vpmaddwd with ones, vpaddd into one of 4 accumulators: 32 multiply-adds;
 *  - fma: vfmadd231ps into one of 10 accumulators, 8 f32 multiply-adds: the float routes and the
 *    fused attention's products (attn_avx2.c).
 * Prints each group's cycles as the ratio of its best round to the add chain's best (a neighbour's
 * load only ever adds time), beside the medians' ratio, and the ceiling per core that its best
 * round read (GFLOP/s, two per multiply-add).
 *
 *   bench_ceiling [-r ROUNDS]
 *
 * x86-64 with AVX2 and FMA only (elsewhere it says so and measures nothing). Numbers only: nothing
 * here passes or fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"

#define MAX_ROUNDS 64
#define ITERS 20000000L /* loop iterations per sample: about 0.1 s each */

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

/* 8 dependent scalar adds per iteration: one cycle each. */
static double chain(void) {
    long x = 0;
    const double t0 = now_s();
    for (long i = 0; i < ITERS; i++)
        __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                         "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
                         : "+r"(x));
    return (now_s() - t0) / (ITERS * 8.0);
}

#define PAIR(acc) "vpmaddubsw %%ymm14, %%ymm15, %%ymm12\n\tvpaddw %%ymm12, %%ymm" #acc ", %%ymm" #acc "\n\t"
static double pairs(void) {
    const double t0 = now_s();
    for (long i = 0; i < ITERS; i++)
        __asm__ volatile(PAIR(0) PAIR(1) PAIR(2) PAIR(3) PAIR(4) PAIR(5) PAIR(6) PAIR(7)::
                             : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm12");
    return (now_s() - t0) / (ITERS * 8.0);
}

#define TRIPLE(off, b, acc)                                                                                   \
    "vpbroadcastd " #off "(%0), %%ymm" #b "\n\tvpmaddubsw %%ymm" #b ", %%ymm15, %%ymm" #b "\n\t"             \
    "vpaddw %%ymm" #b ", %%ymm" #acc ", %%ymm" #acc "\n\t"
static double triples(const unsigned char *a) {
    const double t0 = now_s();
    for (long i = 0; i < ITERS; i++)
        __asm__ volatile(TRIPLE(0, 0, 8) TRIPLE(4, 1, 9) TRIPLE(8, 2, 10) TRIPLE(12, 3, 11)
                         TRIPLE(16, 4, 8) TRIPLE(20, 5, 9) TRIPLE(24, 6, 10) TRIPLE(28, 7, 11)::"r"(a)
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
                           "xmm11", "memory");
    return (now_s() - t0) / (ITERS * 8.0);
}

#define SIGN(off, acc)                                                                                        \
    "vpbroadcastd " #off "(%0), %%ymm0\n\tvpabsb %%ymm0, %%ymm1\n\tvmovdqa " #off "*8+64(%0), %%ymm2\n\t"       \
    "vpsignb %%ymm0, %%ymm2, %%ymm2\n\tvpmaddubsw %%ymm2, %%ymm1, %%ymm2\n\tvpmaddwd %1, %%ymm2, %%ymm2\n\t"      \
    "vpaddd %%ymm2, %%ymm" #acc ", %%ymm" #acc "\n\t"
static __attribute__((target("avx2"))) double signs(const unsigned char *a) {
    const __m256i ones = _mm256_set1_epi16(1);
    const double t0 = now_s();
    for (long i = 0; i < ITERS; i++)
        __asm__ volatile(SIGN(0, 8) SIGN(4, 9) SIGN(8, 10) SIGN(12, 11) SIGN(16, 8) SIGN(20, 9) SIGN(24, 10)
                         SIGN(28, 11)::"r"(a), "x"(ones)
                         : "xmm0", "xmm1", "xmm2", "xmm8", "xmm9", "xmm10", "xmm11", "memory");
    return (now_s() - t0) / (ITERS * 8.0);
}

#define FMA(acc) "vfmadd231ps %%ymm14, %%ymm15, %%ymm" #acc "\n\t"
static double fmas(void) {
    const double t0 = now_s();
    for (long i = 0; i < ITERS; i++)
        __asm__ volatile(FMA(0) FMA(1) FMA(2) FMA(3) FMA(4) FMA(5) FMA(6) FMA(7) FMA(8) FMA(9)::
                             : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9");
    return (now_s() - t0) / (ITERS * 10.0);
}

static void usage(void) {
    fprintf(stderr, "usage: bench_ceiling [-r ROUNDS]\n");
    exit(2);
}

int main(int argc, char **argv) {
    int rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-r") && i + 1 < argc) rounds = atoi(argv[++i]);
        else usage();
    }
    if (rounds < 1 || rounds > MAX_ROUNDS) usage();
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        printf("bench_ceiling: this CPU has no AVX2 and FMA; nothing measured\n");
        return 0;
    }
    /* 32 bytes a step broadcasts from, then the steps' 32-byte activation rows (sign: at 8 x off + 64) */
    static unsigned char act[384] __attribute__((aligned(64)));
    for (int i = 0; i < (int)sizeof act; i++) act[i] = (unsigned char)(i * 7 + 3);
    /* seconds per instruction group: [0] the add chain, then pair, triple, sign, fma */
    double s[5][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        s[0][r] = chain();
        s[1][r] = pairs();
        s[2][r] = triples(act);
        s[3][r] = signs(act);
        s[4][r] = fmas();
    }
    for (int k = 0; k < 5; k++) qsort(s[k], (size_t)rounds, sizeof(double), cmp_double);
    const int mid = rounds / 2;
    printf("one core, %d rounds; clock %.2f GHz (median %.2f) by a dependent add chain\n\n", rounds, 1e-9 / s[0][0],
           1e-9 / s[0][mid]);
    printf("| step | instructions | multiply-adds | cycles per step, best (median) | ceiling GFLOP/s |\n"
           "|---|---|---|---|---|\n");
    static const char *const name[4] = {"pair", "triple", "sign", "fma"};
    static const char *const insns[4] = {
        "vpmaddubsw, vpaddw", "vpbroadcastd (memory), vpmaddubsw, vpaddw",
        "vpbroadcastd (memory), vpabsb, vmovdqa (memory), vpsignb, vpmaddubsw, vpmaddwd, vpaddd", "vfmadd231ps"};
    static const int macs[4] = {32, 32, 32, 8};
    for (int k = 0; k < 4; k++)
        printf("| %s | %s | %d | %.3f (%.3f) | %.1f |\n", name[k], insns[k], macs[k], s[k + 1][0] / s[0][0],
               s[k + 1][mid] / s[0][mid], 2.0 * macs[k] / s[k + 1][0] * 1e-9);
    return 0;
}

#else

int main(void) {
    printf("bench_ceiling: x86-64 only; nothing measured\n");
    return 0;
}

#endif
