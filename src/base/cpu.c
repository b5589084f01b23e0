/*
 * cpu.c: CPU feature detection (CPUID + XGETBV) and the choice of kernel set, made once.
 *
 * A feature counts only when both the CPU reports it and the OS saves the register state it needs
 * (XCR0 bits 1-2 for YMM; 5-7 as well for ZMM and opmask registers), so a kernel set is never
 * chosen that would fault.
 */
#include "base/cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void detect(nb_cpu_features *f) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    int osxsave = (c >> 27) & 1;
    int avx = (c >> 28) & 1;
    int fma = (c >> 12) & 1;
    int f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return;
    uint64_t xcr0 = read_xcr0();
    int ymm_ok = (xcr0 & 0x6) == 0x6;
    int zmm_ok = (xcr0 & 0xE6) == 0xE6;
    if (!ymm_ok || __get_cpuid_max(0, NULL) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = (b >> 5) & 1;
    f->fma = fma;
    f->f16c = f16c;
    if (zmm_ok) {
        f->avx512f = (b >> 16) & 1;
        f->avx512bw = (b >> 30) & 1;
        f->avx512vl = (b >> 31) & 1;
        f->avx512vnni = (c >> 11) & 1;
    }
}
#else
static void detect(nb_cpu_features *f) { (void)f; }
#endif

static nb_cpu_features features;
static nb_isa active = NB_ISA_REF;
static char note[160];
static pthread_once_t once = PTHREAD_ONCE_INIT;

nb_isa nb_isa_best_of(const nb_cpu_features *f) {
    if (f->avx512f && f->avx512bw && f->avx512vl && f->avx2 && f->fma && f->f16c) return NB_ISA_AVX512;
    if (f->avx2 && f->fma && f->f16c) return NB_ISA_AVX2;
    return NB_ISA_REF;
}

nb_isa nb_isa_choose(const nb_cpu_features *f, const char *env, char *why, size_t why_size) {
    nb_isa best = nb_isa_best_of(f);
    if (!env || !*env) {
        snprintf(why, why_size, "%s: best this CPU runs", nb_isa_name(best));
        return best;
    }
    nb_isa want;
    if (!strcmp(env, "ref")) want = NB_ISA_REF;
    else if (!strcmp(env, "avx2")) want = NB_ISA_AVX2;
    else if (!strcmp(env, "avx512")) want = NB_ISA_AVX512;
    else {
        snprintf(why, why_size, "%s: NIBBLE_ISA='%.40s' is not ref|avx2|avx512, ignored", nb_isa_name(best), env);
        return best;
    }
    /* the sets nest, so the best one the CPU has is the closest to what was asked */
    if (want > best) {
        snprintf(why, why_size, "%s: NIBBLE_ISA=%s forced, but this CPU lacks it; using the best it has",
                 nb_isa_name(best), env);
        return best;
    }
    snprintf(why, why_size, "%s: forced by NIBBLE_ISA", env);
    return want;
}

static void choose(void) {
    detect(&features);
    active = nb_isa_choose(&features, getenv("NIBBLE_ISA"), note, sizeof note);
}

const nb_cpu_features *nb_cpu(void) {
    pthread_once(&once, choose);
    return &features;
}

nb_isa nb_isa_active(void) {
    pthread_once(&once, choose);
    return active;
}

nb_isa nb_isa_best(void) {
    pthread_once(&once, choose);
    return nb_isa_best_of(&features);
}

const char *nb_isa_note(void) {
    pthread_once(&once, choose);
    return note;
}

const char *nb_isa_name(nb_isa isa) {
    switch (isa) {
    case NB_ISA_REF: return "ref";
    case NB_ISA_AVX2: return "avx2";
    case NB_ISA_AVX512: return "avx512";
    }
    return "?";
}
