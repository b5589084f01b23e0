/*
 * act_avx2.c: the activation quantizers with AVX2 (+F16C), byte-identical to act_ref.c (Q8_0,
 * Q8_1) and to nb_q8_k_quantize_ref (Q8_K); kernels.h states the rules. Both round with vcvtps2dq
 * (nearest-even in the default rounding mode, as the references' rintf and 1.5*2^23 trick) and
 * narrow with signed saturating packs; the packs work per 128-bit half, so one cross-lane
 * permute restores element order. NB_ACT_Q8_0X adds the block's derived values (kernels.h).
 */
#include <math.h>
#include <string.h>

#include "formats/blocks.h"
#include "kernels/x86/avx2/avx2.h"

static inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

/* 32 dwords narrowed to 32 bytes in element order (signed saturation). */
static inline __m256i pack32(const __m256i q[4]) {
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* 32 floats times a multiplier, rounded, narrowed to 32 bytes in element order. */
static inline __m256i round_pack32(const __m256 v[4], __m256 mul) {
    __m256i q[4];
    #pragma GCC unroll 4
    for (int k = 0; k < 4; k++) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], mul));
    return pack32(q);
}

/* A 32-element block loaded into v, and its largest magnitude. */
static inline float load_amax32(const float *x, __m256 v[4]) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    #pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
    }
    return hmax(m);
}

/* One 32-element block by the Q8_0 activation rule: codes in element order, fp16 scale in *d. */
static inline __m256i q8_0_block(const float *x, uint16_t *d) {
    __m256 v[4];
    const float amax = load_amax32(x, v);
    *d = (uint16_t)_cvtss_sh(amax / 127.f, _MM_FROUND_TO_NEAREST_INT);
    return round_pack32(v, _mm256_set1_ps(amax != 0 ? 127.f / amax : 0));
}

/* Q8_1: the Q8_0 rule, and s from the dwords before they are narrowed (their wrapping sum). */
static void act_q8_1_avx2(const float *x, void *dst, int64_t n) {
    nb_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / NB_QK8_1; i++) {
        __m256 v[4];
        const float amax = load_amax32(x + i * NB_QK8_1, v), d = amax / 127.f;
        const __m256 mul = _mm256_set1_ps(amax != 0 ? 127.f / amax : 0);
        __m256i q[4];
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], mul));
        const int32_t isum = nb_avx2_hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
        _mm256_storeu_si256((__m256i *)b[i].qs, pack32(q));
        b[i].d = (uint16_t)_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        b[i].s = (uint16_t)_cvtss_sh(d * (float)isum, _MM_FROUND_TO_NEAREST_INT);
    }
}

static void act_q8_0_avx2(const float *x, void *dst, int64_t n) {
    nb_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / NB_QK8_0; i++) {
        __m256i q = q8_0_block(x + i * NB_QK8_0, &b[i].d);
        _mm256_storeu_si256((__m256i *)b[i].qs, q);
    }
}

static void act_q8_0x_avx2(const float *x, void *dst, int64_t n) {
    nb_block_q8_0x *b = dst;
    const __m256i one8 = _mm256_set1_epi8(1), m128 = _mm256_set1_epi16(-128);
    for (int64_t i = 0; i < n / NB_QK8_0; i++) {
        uint16_t d;
        __m256i q = q8_0_block(x + i * NB_QK8_0, &d);
        _mm256_storeu_si256((__m256i *)b[i].qs, q);
        /* pair sums (|.| <= 254), then -128 * (sum of each two pairs): exact in int32 */
        _mm256_storeu_si256((__m256i *)b[i].nc, _mm256_madd_epi16(_mm256_maddubs_epi16(one8, q), m128));
        b[i].d = _cvtsh_ss(d);
    }
}

/* The 16 bsums of a block from its 8 vectors of codes: lane sums of 4 (vpmaddubsw/vpmaddwd with
 * ones), then two rounds of pairwise adds leave bsums 0,2,4,6 | 1,3,5,7 per register half. */
static inline void bsums16(const __m256i q[8], int16_t *out) {
    const __m256i one8 = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1);
    __m256i s[8];
    #pragma GCC unroll 8
    for (int k = 0; k < 8; k++) s[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(one8, q[k]), one16);
    __m256i g0 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    __m256i g1 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    __m256i p = _mm256_packs_epi32(g0, g1); /* even bsums in the low half, odd in the high half */
    __m128i lo = _mm256_castsi256_si128(p), hi = _mm256_extracti128_si256(p, 1);
    _mm_storeu_si128((__m128i *)out, _mm_unpacklo_epi16(lo, hi));
    _mm_storeu_si128((__m128i *)(out + 8), _mm_unpackhi_epi16(lo, hi));
}

static void act_q8_k_avx2(const float *x, void *dst, int64_t n) {
    nb_block_q8_k *b = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / NB_QK_K; i++, x += NB_QK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < NB_QK_K / 8; k++) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k)));
        const float amax = hmax(m);
        /* the reference's signed max is the first element of largest magnitude */
        const __m256 am = _mm256_set1_ps(amax);
        int first = 0;
        for (int k = 0; k < NB_QK_K / 8; k++) {
            int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k)), am, _CMP_EQ_OQ));
            if (mask) {
                first = 8 * k + __builtin_ctz((unsigned)mask);
                break;
            }
        }
        const float iscale = -127.f / x[first];
        /* all zero, or a multiplier that overflows (|max| < ~4e-37): the reference's own path */
        if (amax == 0 || isinf(iscale)) {
            nb_q8_k_quantize_ref(x, &b[i], NB_QK_K);
            continue;
        }
        const __m256 mul = _mm256_set1_ps(iscale);
        __m256i q[8];
        #pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            __m256 v[4];
            #pragma GCC unroll 4
            for (int j = 0; j < 4; j++) v[j] = _mm256_loadu_ps(x + 32 * k + 8 * j);
            q[k] = round_pack32(v, mul);
            _mm256_storeu_si256((__m256i *)(b[i].qs + 32 * k), q[k]);
        }
        bsums16(q, b[i].bsums);
        b[i].d = 1 / iscale;
    }
}

/* F16C converts with round-to-nearest-even and keeps NaN quiet, as nb_fp32_to_fp16 does (the
 * encoder is tested against F16C in tests/test_codes.c), so results equal the reference's. */
static void round_f16_avx2(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++) x[i] = _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}

static void to_f16_avx2(const float *x, uint16_t *h, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

/* exp_ggml of the reference (act_ref.c) on 8 lanes; the split path only when a lane needs it. */
static __m256 exp8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f), z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    const __m256 plain = _mm256_fmadd_ps(j, k, k), an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(an, _mm256_set1_ps(126), _CMP_GT_OQ);
    if (!_mm256_movemask_ps(big)) return plain;
    const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                       _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000))),
                 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256 split = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
    const __m256 huge = _mm256_cmp_ps(an, _mm256_set1_ps(192), _CMP_GT_OQ);
    return _mm256_blendv_ps(_mm256_blendv_ps(plain, split, big), _mm256_mul_ps(s1, s1), huge);
}

static double softmax_exp_avx2(const float *x, float *y, int64_t n, float max) {
    const __m256 m = _mm256_set1_ps(max), ninf = _mm256_set1_ps(-INFINITY);
    double sum = 0;
    for (int64_t i = 0; i < n; i += 8) {
        float buf[8];
        const int c = n - i < 8 ? (int)(n - i) : 8;
        __m256 xv;
        if (c == 8) {
            xv = _mm256_loadu_ps(x + i);
        } else {
            for (int l = 0; l < 8; l++) buf[l] = l < c ? x[i + l] : -INFINITY;
            xv = _mm256_loadu_ps(buf);
        }
        /* -inf (masked) gives 0 */
        const __m256 v = _mm256_andnot_ps(_mm256_cmp_ps(xv, ninf, _CMP_EQ_OQ), exp8(_mm256_sub_ps(xv, m)));
        if (c == 8) {
            _mm256_storeu_ps(y + i, v);
        } else {
            _mm256_storeu_ps(buf, v);
            memcpy(y + i, buf, sizeof(float) * (size_t)c);
        }
        sum += (double)nb_avx2_lane_sum(v);
    }
    return sum;
}

/* Four chains of 8 lanes; max_ps(x, m) keeps m where x is NaN, as the reference skips it. */
static float vec_max_avx2(const float *x, int64_t n) {
    __m256 m[4];
    for (int c = 0; c < 4; c++) m[c] = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int c = 0; c < 4; c++) m[c] = _mm256_max_ps(_mm256_loadu_ps(x + i + 8 * c), m[c]);
    for (; i + 8 <= n; i += 8) m[0] = _mm256_max_ps(_mm256_loadu_ps(x + i), m[0]);
    const __m256 v = _mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3]));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float r = _mm_cvtss_f32(h);
    for (; i < n; i++) r = x[i] > r ? x[i] : r;
    return r;
}

static void vec_scale_avx2(float *x, int64_t n, float a) {
    const __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), av));
    for (; i < n; i++) x[i] *= a;
}

static void swiglu_avx2(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i), e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* The sums of squares of rows v[0..4G-1] (G = 1 or 2) over their whole 4s of elements, into
 * s[0..4G-1]: each row's in its own lane of one double chain per 4 rows, in element order (4
 * elements of 4 rows transposed, lane r of c[k] row r's element i + k, squared in float, widened
 * and added). Returns where the 4s end. */
static inline __attribute__((always_inline)) int squares4(const float *const v[8], int G, int n, double s[8]) {
    __m256d acc[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
    int i = 0;
    for (; i + 4 <= n; i += 4)
        #pragma GCC unroll 2
        for (int g = 0; g < G; g++) {
            __m128 c[4];
            #pragma GCC unroll 4
            for (int r = 0; r < 4; r++) c[r] = _mm_loadu_ps(v[4 * g + r] + i);
            _MM_TRANSPOSE4_PS(c[0], c[1], c[2], c[3]);
            #pragma GCC unroll 4
            for (int k = 0; k < 4; k++) acc[g] = _mm256_add_pd(acc[g], _mm256_cvtps_pd(_mm_mul_ps(c[k], c[k])));
        }
    for (int g = 0; g < G; g++) _mm256_storeu_pd(s + 4 * g, acc[g]);
    return i;
}

/* Groups of 8 rows (a group of fewer repeats its last row): the sums as squares4 gives them, each
 * row's last n % 4 squares added after, then each row scaled 8 elements at a time. */
static void rmsnorm_avx2(float *y, const float *x, const float *w, int rows, int n, float eps) {
    for (int r0 = 0; r0 < rows; r0 += 8) {
        const int nr = rows - r0 < 8 ? rows - r0 : 8;
        const float *v[8];
        for (int j = 0; j < 8; j++) v[j] = x + (size_t)(r0 + (j < nr ? j : nr - 1)) * (size_t)n;
        double s[8];
        const int i4 = nr > 4 ? squares4(v, 2, n, s) : squares4(v, 1, n, s);
        for (int j = 0; j < nr; j++) {
            for (int i = i4; i < n; i++) s[j] += (double)(v[j][i] * v[j][i]);
            const float scale = 1.0f / sqrtf((float)(s[j] / n) + eps);
            const __m256 sv = _mm256_set1_ps(scale);
            float *yr = y + (size_t)(r0 + j) * (size_t)n;
            int i = 0;
            for (; i + 8 <= n; i += 8)
                _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(v[j] + i), sv), _mm256_loadu_ps(w + i)));
            for (; i < n; i++) yr[i] = (v[j][i] * scale) * w[i];
        }
    }
}

/* nb_geglu_ref's lookups 8 at a time: the fp16 bits by vcvtps2ph (to_f16_avx2's, the reference's
 * bits), the table's lines asked for a chunk at a time as there, then one gather per 8 and the
 * +-10 bypasses as blends. */
static void geglu_avx2(float *g, const float *u, int64_t n) {
    const float *t = nb_gelu_table();
    uint16_t h[256];
    for (int64_t s = 0; s < n; s += 256) {
        const int64_t c = n - s < 256 ? n - s : 256;
        to_f16_avx2(g + s, h, c);
        nb_gelu_prefetch(t, h, c);
        int64_t k = 0;
        for (; k + 8 <= c; k += 8) {
            const __m256 x = _mm256_loadu_ps(g + s + k);
            const __m256 v = _mm256_i32gather_ps(t, _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + k))), 4);
            const __m256 r = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-10.0f), _CMP_LE_OQ),
                                              _mm256_blendv_ps(v, x, _mm256_cmp_ps(x, _mm256_set1_ps(10.0f), _CMP_GE_OQ)));
            _mm256_storeu_ps(g + s + k, _mm256_mul_ps(r, _mm256_loadu_ps(u + s + k)));
        }
        for (; k < c; k++) g[s + k] = nb_gelu_at(t, g[s + k], h[k]) * u[s + k];
    }
}

const nb_act_set nb_act_avx2 = {act_q8_0_avx2,    act_q8_k_avx2,  act_q8_0x_avx2,  act_q8_1_avx2,
                                round_f16_avx2,   to_f16_avx2,    softmax_exp_avx2, vec_max_avx2,
                                vec_scale_avx2,   swiglu_avx2,    geglu_avx2,      rmsnorm_avx2,
                                nb_attn_pv_avx2,  nb_attn_qk_avx2, nb_rope_body,   "avx2"};
/* The AVX-512 set's: the same with its own value sums and scores (x86/avx512/attn_avx512.c) and
 * softmax exponentials (x86/avx512/act_avx512.c). */
const nb_act_set nb_act_avx512 = {act_q8_0_avx2,     act_q8_k_avx2,     act_q8_0x_avx2,        act_q8_1_avx2,
                                  round_f16_avx2,    to_f16_avx2,       nb_softmax_exp_avx512, vec_max_avx2,
                                  vec_scale_avx2,    swiglu_avx2,       geglu_avx2,            rmsnorm_avx2,
                                  nb_attn_pv_avx512, nb_attn_qk_avx512, nb_rope_body,          "avx512"};
