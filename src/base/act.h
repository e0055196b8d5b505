/* act.h: the activation functions of the library, one enum for every layer that names one:
 * config.json's hidden_act (io), the FP32 GEMM's post-op and the INT8 GEMM's epilogue
 * (kernels), the task heads (model). */
#ifndef BERT8_ACT_H
#define BERT8_ACT_H

typedef enum b8_act {
    B8_ACT_NONE,
    B8_ACT_GELU,      /* 0.5 x (1 + erf(x / sqrt 2)): "gelu" */
    B8_ACT_GELU_TANH, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): "gelu_new" */
    B8_ACT_RELU,      /* "relu" */
    B8_ACT_TANH,      /* the BERT pooler, the XLM-R classification head */
    B8_ACT_SILU,      /* x / (1 + exp(-x)): "silu", "swish" (gated FFNs only: the GLU pass) */
    B8_ACT_COUNT
} b8_act;

#endif
