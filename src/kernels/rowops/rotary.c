/* rotary.c: rotary position embeddings on Q and K (see rotary.h). */
#include "kernels/rowops/rotary.h"

#include <immintrin.h>
#include <math.h>

#include "kernels/dispatch.h"

void b8_rotary_table(float *cs, int64_t T, int64_t d, float theta) {
    const int64_t h = d / 2;
    for (int64_t i = 0; i < h; i++) {
        /* torch: 1.0 / (base ** (arange(0, d, 2).float() / d)), all float */
        const float inv = 1.0f / powf(theta, (float)(2 * i) / (float)d);
        for (int64_t t = 0; t < T; t++) {
            const float a = (float)t * inv;
            cs[t * d + i] = cosf(a);
            cs[t * d + h + i] = sinf(a);
        }
    }
}

void b8_rotary_rows__scalar(float *x, int64_t ldx, int64_t n, int64_t heads, int64_t d, const float *cs,
                            int64_t pos0) {
    const int64_t h = d / 2;
    for (int64_t r = 0; r < n; r++) {
        const float *c = cs + (pos0 + r) * d, *s = c + h;
        for (int64_t hd = 0; hd < heads; hd++) {
            float *v = x + r * ldx + hd * d;
            for (int64_t j = 0; j < h; j++) {
                const float a = v[j], b = v[j + h];
                v[j] = fmaf(-b, s[j], a * c[j]);
                v[j + h] = fmaf(a, s[j], b * c[j]);
            }
        }
    }
}

#define AVX2 __attribute__((target("avx2,fma")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

AVX2 void b8_rotary_rows__avx2(float *x, int64_t ldx, int64_t n, int64_t heads, int64_t d, const float *cs,
                               int64_t pos0) {
    const int64_t h = d / 2;
    for (int64_t r = 0; r < n; r++) {
        const float *c = cs + (pos0 + r) * d, *s = c + h;
        for (int64_t hd = 0; hd < heads; hd++) {
            float *v = x + r * ldx + hd * d;
            for (int64_t j = 0; j < h; j += 8) {
                const int left = h - j >= 8 ? 8 : (int)(h - j);
                const __m256i k =
                    _mm256_cmpgt_epi32(_mm256_set1_epi32(left), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
                const __m256 a = _mm256_maskload_ps(v + j, k), b = _mm256_maskload_ps(v + j + h, k);
                const __m256 cv = _mm256_maskload_ps(c + j, k), sv = _mm256_maskload_ps(s + j, k);
                _mm256_maskstore_ps(v + j, k, _mm256_fnmadd_ps(b, sv, _mm256_mul_ps(a, cv)));
                _mm256_maskstore_ps(v + j + h, k, _mm256_fmadd_ps(a, sv, _mm256_mul_ps(b, cv)));
            }
        }
    }
}

AVX512 void b8_rotary_rows__avx512(float *x, int64_t ldx, int64_t n, int64_t heads, int64_t d, const float *cs,
                                   int64_t pos0) {
    const int64_t h = d / 2;
    for (int64_t r = 0; r < n; r++) {
        const float *c = cs + (pos0 + r) * d, *s = c + h;
        for (int64_t hd = 0; hd < heads; hd++) {
            float *v = x + r * ldx + hd * d;
            for (int64_t j = 0; j < h; j += 16) {
                const __mmask16 k = h - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (h - j)) - 1u);
                const __m512 a = _mm512_maskz_loadu_ps(k, v + j), b = _mm512_maskz_loadu_ps(k, v + j + h);
                const __m512 cv = _mm512_maskz_loadu_ps(k, c + j), sv = _mm512_maskz_loadu_ps(k, s + j);
                _mm512_mask_storeu_ps(v + j, k, _mm512_fnmadd_ps(b, sv, _mm512_mul_ps(a, cv)));
                _mm512_mask_storeu_ps(v + j + h, k, _mm512_fmadd_ps(a, sv, _mm512_mul_ps(b, cv)));
            }
        }
    }
}

static const b8_impl rotary_impls[] = {
    {"rotary_rows__avx512", B8_ISA_AVX512, (b8_fnptr)b8_rotary_rows__avx512},
    {"rotary_rows__avx2", B8_ISA_AVX2, (b8_fnptr)b8_rotary_rows__avx2},
    {"rotary_rows__scalar", B8_ISA_SCALAR, (b8_fnptr)b8_rotary_rows__scalar},
};
b8_op_table b8_op_rotary = {"rotary", rotary_impls, (int)(sizeof rotary_impls / sizeof *rotary_impls), -1};

b8_rotary_fn b8_rotary_rows_best(void) { return (b8_rotary_fn)b8_dispatch(&b8_op_rotary)->fn; }
