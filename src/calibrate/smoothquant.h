/* smoothquant.h: the SmoothQuant pieces bert8_quantize (smoothquant.c) is made of, which the
 * accuracy-budgeted search (budget.c) reuses: parameter checks, one Linear group quantized from its
 * site's statistics, its output error, the INT8 attention scales, the keep_fp32 patterns. */
#ifndef BERT8_SMOOTHQUANT_H
#define BERT8_SMOOTHQUANT_H

#include "calibrate/calibrate.h"

/* Settles the defaults of p that depend on the model: int8_attention -1 becomes 1 where the head
 * size is a multiple of 4 (what the INT8 attention kernels need), else 0. */
void b8_quant_resolve(const bert8_model *fp32, bert8_quant_params *p);
/* Checks what bert8_quantize checks of its parameters (a model not yet quantized, scheme,
 * alpha, unit_modes), after b8_quant_resolve. */
bert8_status b8_quant_check(const bert8_model *fp32, const bert8_quant_params *p, b8_err *e);

/* Quantizes one Linear group (FP32 W [n][k], bias [n]) in the given INT8 mode from the
 * statistics of its input site, with p's alpha (searched on the sampled rows when p->alpha < 0
 * with smoothing on). zero_point: a static input gets the calibrated asymmetric range
 * (b8_qlinear_set_range) instead of the symmetric one. A dynamic input is scored (the alpha
 * search) with the per-row zero point the forward pass gives it. */
bert8_status b8_quantize_group(const float *w, const float *b, int64_t n, int64_t k, const b8_site_stats *ss,
                               const bert8_quant_params *p, b8_qmode mode, bool zero_point, b8_qlinear **out,
                               b8_err *e);

/* The relative output error ||Y_q - Y||^2 / ||Y||^2 of INT8 Linear q against FP32 W on the
 * site's sampled rows (bias left out of both). Needs samples (b8_calib_init with samples). A
 * dynamic q is emulated with a zero point per row, as the forward pass quantizes it. */
bert8_status b8_group_output_error(const float *w, int64_t n, int64_t k, const b8_site_stats *ss, const b8_qlinear *q,
                                   double *rel, b8_err *e);

/* Whether p asks for an INT8 attention in any of `layers` layers (int8_attention, or an attention
 * unit of unit_modes). */
bool b8_quant_attention(const bert8_quant_params *p, int64_t layers);

/* A layer's INT8 attention scales from its calibration maxima (max |x| / 127; needs b8_calib_init
 * with attention): Q and K per tensor (sc[0], sc[1]), V per channel into sv_ch [H] (sc[2]: V's
 * per-tensor scale). */
void b8_qattn_scales(const b8_calib *c, int64_t l, float sc[3], float *sv_ch);

/* Whether the keep_fp32 glob patterns name a checkpoint weight of group g of layer l. */
bool b8_group_kept(const bert8_model *m, int64_t l, b8_group g, const char *patterns);

#endif
