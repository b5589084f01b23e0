/*
 * kquants_avx2.c: the AVX2 Q4_K, Q5_K and Q6_K kernels (body in kquants.h): 16 registers hold
 * tiles of up to 4 rows x 2 tokens; the scale multiply is vpmaddwd then an add. The batch orders
 * of Q6_K and Q4_K (kernels.h) go through 8-row panels instead from 16 tokens (kpanel.h).
 */
#include <immintrin.h>
#include <string.h>

#include "formats/blocks.h"
#include "kernels/x86/avx2/avx2.h"

#define KQ_TMAX 2
#define KQ_ISA avx2
static inline __m256i kq_dot16(__m256i acc, __m256i pairs, __m256i scales) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, scales));
}
/* The K-quant panels' group sums (kpanel.h): vpmaddubsw's pair sums added as words, then one
 * kq_dot16 against the scale in both words of each dword; words hold 8 Q4_K groups (8*2*15*127)
 * but only 2 of Q6_K's (2*2*63*127 < 2^15). */
static inline __m256i kp_codes4(__m256i acc, __m256i q, const int8_t *a4) { return nb_avx2_codes4(acc, q, a4); }
static inline __m256i kp_scaled(__m256i isum, __m256i acc, __m256i s) { return kq_dot16(isum, acc, s); }
static inline __m256i kp_scale_word(__m256i s32) { return _mm256_blend_epi16(s32, _mm256_slli_epi32(s32, 16), 0xAA); }
#define KP_Q6_RUN 2

#include "kernels/x86/avx2/kquants.h"

/* Small batches (kernels.h, mm_small): the tiles above, every token of a tile of rows at once.
 * Q4_K's tokens in whole groups of 4 take the batch order, the others the GEMV order; Q6_K's all
 * take the batch order from 8 tokens (the table's batch_min and batch_group: the split nb_matmul
 * makes for mm_batch). */
void nb_mm_q4_k_small_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                           float *y, size_t ldy) {
    const int64_t nbat = nt >= 4 ? nt - nt % 4 : 0;
    nb_avx2_tile_loop_small2(tiles_q4_k_batch, TMAX, tiles_q4_k, TMAX, nbat, n / NB_QK_K, w, ws, a, as, nr, nt, y, ldy);
}

void nb_mm_q6_k_small_avx2(int64_t n, const void *w, size_t ws, const void *a, size_t as, int64_t nr, int64_t nt,
                           float *y, size_t ldy) {
    nb_avx2_tile_loop_small(nt >= 8 ? tiles_q6_k_batch : tiles_q6_k, TMAX, n / NB_QK_K, w, ws, a, as, nr, nt, y, ldy);
}
