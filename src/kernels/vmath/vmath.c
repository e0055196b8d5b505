/* vmath.c: scalar twins of the epilogue math in vmath.h (the oracle for the SIMD versions). */
#include "kernels/vmath/vmath.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float vmax(float x, float y) { return x > y ? x : y; }
static inline float vmin(float x, float y) { return x < y ? x : y; }

/* 2^n for integral n in [-126, 127], built from the exponent bits like the SIMD code. */
static inline float pow2i(float n) {
    int32_t bits = ((int32_t)n + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* exp(x) as p * s with s = 2^n; callers fold the final product into their next operation. */
static inline void exp_parts(float x, float *p_out, float *s_out) {
    x = vmin(vmax(x, B8_VM_EXP_LO), B8_VM_EXP_HI);
    float n = rintf(x * B8_VM_LOG2E);
    float r = fmaf(n, -B8_VM_LN2_HI, x);
    r = fmaf(n, -B8_VM_LN2_LO, r);
    float p = B8_VM_EXP_C6;
    p = fmaf(p, r, B8_VM_EXP_C5);
    p = fmaf(p, r, B8_VM_EXP_C4);
    p = fmaf(p, r, B8_VM_EXP_C3);
    p = fmaf(p, r, B8_VM_EXP_C2);
    p = fmaf(p, r, B8_VM_EXP_C1);
    p = fmaf(p, r, B8_VM_EXP_C0);
    *p_out = p;
    *s_out = pow2i(n);
}

float b8_vm_exp(float x) {
    float p, s;
    exp_parts(x, &p, &s);
    return p * s;
}

/* scripts/fit_gelu_table.py: B8_VM_GELU_PIECES 16, B8_VM_GELU_SCALE 2.875, degree 4 */
const float b8_vm_gelu_table[B8_VM_GELU_DEGREE + 1][B8_VM_GELU_PIECES]
    __attribute__((aligned(64))) = {
        {0.000000000e+00f, -1.266033947e-01f, -1.692682058e-01f, -1.548139304e-01f,
         -1.141796261e-01f, -7.131471485e-02f, -3.849614039e-02f, -1.814006269e-02f,
         -7.502444554e-03f, -2.732044086e-03f, -8.776941104e-04f, -2.490667393e-04f,
         -6.248401769e-05f, -1.386602889e-05f, -2.722953013e-06f, -4.733242349e-07f},
        {-1.739162207e-01f, -8.118255436e-02f, -8.860098198e-03f, 3.239817917e-02f,
         4.479964823e-02f, 3.893105686e-02f, 2.639903314e-02f, 1.484622434e-02f,
         7.104528137e-03f, 2.931368770e-03f, 1.050842344e-03f, 3.288696171e-04f,
         9.014167881e-05f, 2.168817082e-05f, 4.588058346e-06f, 8.544353705e-07f},
        {4.829388112e-02f, 4.277177155e-02f, 2.880688943e-02f, 1.279204432e-02f,
         5.748636322e-04f, -5.484963302e-03f, -6.469547749e-03f, -4.905745853e-03f,
         -2.888221294e-03f, -1.398904482e-03f, -5.720021436e-04f, -2.002212423e-04f,
         -6.050529555e-05f, -1.587287989e-05f, -3.628885679e-06f, -7.250455951e-07f},
        {-7.665601879e-05f, -3.795666620e-03f, -5.610054825e-03f, -5.035949871e-03f,
         -3.017557785e-03f, -9.481864399e-04f, 3.187320544e-04f, 7.176516810e-04f,
         6.126223598e-04f, 3.702149552e-04f, 1.772097312e-04f, 7.010600530e-05f,
         2.341329127e-05f, 6.682807907e-06f, 1.643139171e-06f, 3.499151546e-07f},
        {-9.047390777e-04f, -4.587956646e-04f, 1.172689226e-04f, 4.799945746e-04f,
         5.080919946e-04f, 3.208310227e-04f, 1.079611902e-04f, -2.048076567e-05f,
         -5.853443872e-05f, -4.834500578e-05f, -2.743443838e-05f, -1.217788667e-05f,
         -4.434220045e-06f, -1.355868335e-06f, -3.529195567e-07f, -7.888195341e-08f},
};

float b8_vm_gelu(float x) {
    const float u = fabsf(x) * B8_VM_GELU_SCALE;
    float h = 0.0f;
    if (u < (float)B8_VM_GELU_PIECES) { /* false for NaN, as the SIMD compare */
        const int i = (int)u; /* u < 16: no clamp needed here */
        const float t = u - (float)i;
        h = b8_vm_gelu_table[4][i];
        h = fmaf(h, t, b8_vm_gelu_table[3][i]);
        h = fmaf(h, t, b8_vm_gelu_table[2][i]);
        h = fmaf(h, t, b8_vm_gelu_table[1][i]);
        h = fmaf(h, t, b8_vm_gelu_table[0][i]);
    }
    return vmax(0.0f, x) + h; /* NaN stays NaN: vmax gives its second operand */
}

float b8_vm_gelu_tanh(float x) {
    float k = fmaf(x * x, B8_VM_GT_K3, B8_VM_GT_K1);
    float p, s;
    exp_parts(x * k, &p, &s);
    return x / fmaf(p, s, 1.0f);
}

float b8_vm_relu(float x) { return vmax(x, 0.0f); }

float b8_vm_silu(float x) {
    float p, s;
    exp_parts(-x, &p, &s);
    return x / fmaf(p, s, 1.0f);
}
