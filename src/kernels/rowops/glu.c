/* glu.c: the gated FFN's activation pass (see glu.h). */
#include "kernels/rowops/glu.h"

#include "kernels/dispatch.h"
#include "kernels/vmath/vmath.h"
#include "kernels/vmath/vmath_avx2.h"
#include "kernels/vmath/vmath_avx512.h"

static float act1(b8_act act, float v) {
    switch (act) {
    case B8_ACT_GELU: return b8_vm_gelu(v);
    case B8_ACT_GELU_TANH: return b8_vm_gelu_tanh(v);
    case B8_ACT_RELU: return b8_vm_relu(v);
    case B8_ACT_SILU: return b8_vm_silu(v);
    default: return v;
    }
}

void b8_glu_rows__scalar(const float *x, int64_t ldx, int64_t n, int64_t I, b8_act act, float *h, int64_t ldh) {
    for (int64_t r = 0; r < n; r++) {
        const float *g = x + r * ldx, *u = g + I;
        float *o = h + r * ldh;
        for (int64_t i = 0; i < I; i++) o[i] = act1(act, g[i]) * u[i];
    }
}

B8_V256_INLINE __m256 act8(b8_act act, __m256 v) {
    switch (act) {
    case B8_ACT_GELU: return b8_v8_gelu(v);
    case B8_ACT_GELU_TANH: return b8_v8_gelu_tanh(v);
    case B8_ACT_RELU: return b8_v8_relu(v);
    case B8_ACT_SILU: return b8_v8_silu(v);
    default: return v;
    }
}

B8_T256 void b8_glu_rows__avx2(const float *x, int64_t ldx, int64_t n, int64_t I, b8_act act, float *h,
                               int64_t ldh) {
    for (int64_t r = 0; r < n; r++) {
        const float *g = x + r * ldx, *u = g + I;
        float *o = h + r * ldh;
        for (int64_t i = 0; i < I; i += 8) {
            const __m256i k = b8_v8_lanes(I - i);
            const __m256 a = act8(act, _mm256_maskload_ps(g + i, k));
            _mm256_maskstore_ps(o + i, k, _mm256_mul_ps(a, _mm256_maskload_ps(u + i, k)));
        }
    }
}

B8_V512_INLINE __m512 act16(b8_act act, __m512 v) {
    switch (act) {
    case B8_ACT_GELU: return b8_v16_gelu(v);
    case B8_ACT_GELU_TANH: return b8_v16_gelu_tanh(v);
    case B8_ACT_RELU: return b8_v16_relu(v);
    case B8_ACT_SILU: return b8_v16_silu(v);
    default: return v;
    }
}

/* vmath_avx512.h's functions are compiled for the VNNI target, so this kernel sits at that level. */
B8_T512 void b8_glu_rows__avx512(const float *x, int64_t ldx, int64_t n, int64_t I, b8_act act, float *h,
                                 int64_t ldh) {
    for (int64_t r = 0; r < n; r++) {
        const float *g = x + r * ldx, *u = g + I;
        float *o = h + r * ldh;
        for (int64_t i = 0; i < I; i += 16) {
            const __mmask16 k = I - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (I - i)) - 1u);
            const __m512 a = act16(act, _mm512_maskz_loadu_ps(k, g + i));
            _mm512_mask_storeu_ps(o + i, k, _mm512_mul_ps(a, _mm512_maskz_loadu_ps(k, u + i)));
        }
    }
}

static const b8_impl glu_impls[] = {
    {"glu_rows__avx512", B8_ISA_AVX512_VNNI, (b8_fnptr)b8_glu_rows__avx512},
    {"glu_rows__avx2", B8_ISA_AVX2, (b8_fnptr)b8_glu_rows__avx2},
    {"glu_rows__scalar", B8_ISA_SCALAR, (b8_fnptr)b8_glu_rows__scalar},
};
b8_op_table b8_op_glu = {"glu", glu_impls, (int)(sizeof glu_impls / sizeof *glu_impls), -1};

b8_glu_fn b8_glu_rows_best(void) { return (b8_glu_fn)b8_dispatch(&b8_op_glu)->fn; }
