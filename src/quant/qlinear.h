/* qlinear.h: an INT8 Linear layer (SmoothQuant W8A8) and the maths that makes one: smoothing
 * factors, per-channel int8 weights, the static activation scale, the multipliers the forward
 * pass folds into its quantizers and LayerNorms, and packing into the GEMM kernel's layout.
 *
 *   y = (x / smooth) W'^T + b,  W' = W * smooth stored int8 per output channel (w_scale)
 *   static:  x / smooth ~ a_scale * (q - a_zero), one calibrated scale (and zero point) per tensor
 *   dynamic: one scale per token, computed at run time
 *
 * Below the model layer: it knows weights and statistics, not checkpoints or layers. */
#ifndef BERT8_QLINEAR_H
#define BERT8_QLINEAR_H

#include "base/common.h"
#include "io/qformat.h"
#include "kernels/gemm_s8/qgemm.h"

#define B8_MAX_OUTLIERS 64 /* fp32 outlier input channels of one Linear, at most */

typedef struct b8_qlinear {
    int64_t n, k;
    b8_qmode mode;    /* B8_QMODE_STATIC or B8_QMODE_DYNAMIC */
    int8_t *wq;       /* [n][k]; NULL once packed into a layout that can be read back */
    float *w_scale;   /* [n] */
    float *bias;      /* [n] */
    float *smooth;    /* [k]: the input is divided by it */
    float a_scale;    /* static: scale of the smoothed input; 0 dynamic */
    float a_zero;     /* static: zero point of the int8 input (an integer in [-127, 127]); 0 symmetric */
    float alpha;      /* migration strength used (< 0: smoothing off) */
    /* Outlier input channels kept in fp32 (dynamic only; 0: none): the few channels with the
     * largest calibrated max |x|, which would otherwise set every token's scale and, smoothed,
     * every output channel's weight scale. Their int8 weight columns are 0, their smoothing 1;
     * y gains x[:, out_idx] out_w^T in fp32 (the GEMM epilogue, b8_qepilogue.outliers). */
    int64_t n_out;
    int32_t *out_idx; /* [n_out], strictly ascending */
    float *out_w;     /* [n][n_out]: their FP32 weights */
    /* derived by b8_qlinear_prepare */
    float *in_mul;    /* [k]: 1 / (smooth * a_scale) static, 1 / smooth dynamic */
    float *ln_qg, *ln_qb; /* static: the LayerNorm feeding this Linear with in_mul folded into
                             gamma and beta (NULL when no LayerNorm was given) */
    float *out_wt;    /* [n_out][n]: out_w transposed for the epilogue (in_mul is 0 on them) */
    b8_qweight *packed;
} b8_qlinear;

/* INT8 attention of one layer: the QKV product requantizes Q, K and V to int8 with calibrated
 * scales (x ~ scale * q): Q and K per tensor, V per tensor or per channel (a value channel with
 * outliers then costs the others no resolution: the context is a sum over keys of one channel,
 * so its scale comes out of the sum). The attention products run on int8
 * (kernels/attention/attention.h). */
typedef struct b8_qattn {
    float sq, sk, sv;  /* scales of Q, K, V (sv: 1 when sv_ch is set) */
    float *sv_ch;      /* [H] or NULL: V's scale per channel */
    float *out_mul;    /* [3H]: the QKV GEMM's requantization multipliers 1/sq | 1/sk | 1/sv */
} b8_qattn;

/* A layer's INT8 attention from its calibrated scales (each finite and positive); sv_ch [H]
 * (copied) replaces sv when not NULL. */
bert8_status b8_qattn_make(float sq, float sk, float sv, const float *sv_ch, int64_t H, b8_qattn **out, b8_err *e);
void b8_qattn_free(b8_qattn *a); /* NULL is a no-op */

/* An empty [n][k] Linear (every array allocated, zeroed). NULL when out of memory. */
b8_qlinear *b8_qlinear_alloc(int64_t n, int64_t k);
void b8_qlinear_free(b8_qlinear *q); /* NULL is a no-op */

/* Builds an INT8 Linear from FP32 W [n][k] and bias [n] (NULL: zeros), given the calibrated
 * per-channel max |x| (amax [k], NULL: not calibrated, smoothing impossible) and alpha
 * (< 0: smoothing off). Static mode needs amax for its activation scale. weight_bits 8 puts
 * the weights in [-127, 127], 7 in [-64, 64] (the range the AVX2 vpmaddubsw kernel takes).
 * outliers > 0 (dynamic mode with amax only; at most k / 8) keeps that many input channels,
 * those of largest amax, in fp32. */
bert8_status b8_qlinear_from_fp32(const float *w, const float *b, int64_t n, int64_t k, const float *amax,
                                  float alpha, b8_qmode mode, int weight_bits, int64_t outliers, b8_qlinear **out,
                                  b8_err *e);

/* Sets q's outlier channels from idx [count] (strictly ascending, < k) and their FP32 weights
 * w [n][count] (copied), checking that q is dynamic and that its int8 weights and smoothing on
 * those channels are 0 and 1 (a folder that says otherwise is refused). */
bert8_status b8_qlinear_set_outliers(b8_qlinear *q, const int32_t *idx, int64_t count, const float *w, b8_err *e);

/* The static input's asymmetric range: with cmin/cmax [k] the calibrated per-channel minimum and
 * maximum of x, maps [min_j cmin_j / s_j, max_j cmax_j / s_j] (widened to hold 0) onto
 * [-127, 127] with a zero point, in place of the symmetric [-max|.|, max|.|]: a one-sided
 * input (a GELU output, >= -0.17) gains almost twice the resolution. Sets a_scale and a_zero of
 * a static q (before b8_qlinear_prepare). */
void b8_qlinear_set_range(b8_qlinear *q, const float *cmin, const float *cmax);

/* A copy of q as it was made (weights, scales, smoothing, input scale and zero point, outlier
 * channels), not yet prepared. NULL when out of memory. */
b8_qlinear *b8_qlinear_copy(const b8_qlinear *q);

/* Stacks the rows of parts (same k, smooth_factor, a_scale and mode: they share their input)
 * into one Linear, e.g. Q, K and V into one [3H][H] product. what names it in messages. */
bert8_status b8_qlinear_stack(b8_qlinear *const *parts, int count, const char *what, b8_qlinear **out,
                              b8_err *e);

/* Derives in_mul, folds it into the LayerNorm (g, b: [k], or NULL) that feeds a static Linear,
 * and packs the weights for the GEMM kernel (dropping wq when the packed form can give it back:
 * a model keeps one copy of its weights). Idempotent. */
bert8_status b8_qlinear_prepare(b8_qlinear *q, const float *ln_g, const float *ln_b, b8_err *e);

/* The int8 weights [n][k] into dst (from wq, or unpacked from the kernel's layout). */
bert8_status b8_qlinear_weights(const b8_qlinear *q, int8_t *dst, b8_err *e);

#endif
