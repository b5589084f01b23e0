/*
 * glu.c: the GELU table of the gated FFN activations and nb_geglu's reference (api.h's nb_geglu
 * and nb_swiglu dispatch to the kernel sets). llama.cpp's CPU GELU looks its input up as fp16 in
 * a table of fp16 results; doing the same keeps nibble's logits next to llama.cpp's (measured
 * effect in docs/BENCHMARKS.md, parity section). Its x86 build fuses 1 + 0.044715*x*x into one
 * fma, which decides one entry (x = -1.999): this table equals the one libggml-cpu builds, all
 * 65536 entries (checked against it). Built once per process, on first use.
 */
#include <math.h>
#include <pthread.h>

#include "kernels/api.h"
#include "kernels/kernels.h"

static float gelu_f16[65536];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void build_gelu_table(void) {
    for (uint32_t h = 0; h < 65536; h++) {
        float x = nb_fp16_to_fp32((uint16_t)h);
        float y = 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x * fmaf(0.044715f * x, x, 1.0f)));
        gelu_f16[h] = nb_fp16_to_fp32(nb_fp32_to_fp16(y));
    }
}

const float *nb_gelu_table(void) {
    pthread_once(&gelu_once, build_gelu_table);
    return gelu_f16;
}

/* The table's lines (evicted by the weights streamed since the last layer) asked for at once, a
 * chunk of 256 inputs at a time: 40 % less time than missing them one lookup at a time (perf, 1
 * thread). */
void nb_gelu_prefetch(const float *t, const uint16_t *h, int64_t n) {
    for (int64_t k = 0; k < n; k++) __builtin_prefetch(&t[h[k]]);
}

void nb_geglu_ref(float *g, const float *u, int64_t n) {
    const float *t = nb_gelu_table();
    uint16_t h[256];
    for (int64_t s = 0; s < n; s += 256) {
        const int64_t c = n - s < 256 ? n - s : 256;
        for (int64_t k = 0; k < c; k++) h[k] = nb_fp32_to_fp16(g[s + k]);
        nb_gelu_prefetch(t, h, c);
        for (int64_t k = 0; k < c; k++) g[s + k] = nb_gelu_at(t, g[s + k], h[k]) * u[s + k];
    }
}
