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

float b8_vm_erf(float z) {
    float c = vmin(vmax(z, -B8_VM_ERF_CLAMP), B8_VM_ERF_CLAMP);
    float t = c * c;
    float p = B8_VM_ERF_P6;
    p = fmaf(p, t, B8_VM_ERF_P5);
    p = fmaf(p, t, B8_VM_ERF_P4);
    p = fmaf(p, t, B8_VM_ERF_P3);
    p = fmaf(p, t, B8_VM_ERF_P2);
    p = fmaf(p, t, B8_VM_ERF_P1);
    p = fmaf(p, t, B8_VM_ERF_P0);
    float q = B8_VM_ERF_Q4;
    q = fmaf(q, t, B8_VM_ERF_Q3);
    q = fmaf(q, t, B8_VM_ERF_Q2);
    q = fmaf(q, t, B8_VM_ERF_Q1);
    q = fmaf(q, t, 1.0f);
    return (c * p) / q;
}

float b8_vm_gelu(float x) {
    float h = 0.5f * x;
    return fmaf(h, b8_vm_erf(x * B8_VM_SQRT1_2), h);
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
