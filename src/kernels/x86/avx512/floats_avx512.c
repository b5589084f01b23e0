/*
 * floats_avx512.c: F32, F16 and BF16 weights x f32 activations in the AVX-512 set (body in
 * x86/avx2/floats.h), compiled with AVX-512VL so that 32 registers hold tiles of 4 rows x 4
 * tokens, and from 17 tokens panels of 16 rows in 512-bit registers. Same fma sequence per output
 * as the AVX2 entries, so the same bits.
 */
#define FL_TMAX 4
#define FL_ISA avx512
#include "kernels/x86/avx2/floats.h"
