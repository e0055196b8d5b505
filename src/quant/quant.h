/* quant.h: SmoothQuant W8A8 for bert8 models: calibration statistics, smoothing factors,
 * int8 weights, the per-layer alpha search, and the pieces the loader and the INT8 forward
 * pass share. */
#ifndef BERT8_QUANT_H
#define BERT8_QUANT_H

#include "model/model.h"

void b8_qlinear_free(b8_qlinear *q);

/* Builds an INT8 Linear from FP32 W [n][k], bias [n], the calibrated per-channel max |x|
 * (amax [k], NULL = no smoothing possible), alpha (< 0: smoothing off), and scheme. */
bert8_status b8_qlinear_from_fp32(const float *w, const float *b, int64_t n, int64_t k,
                                  const float *amax, float alpha, bert8_scheme scheme,
                                  b8_qlinear **out, b8_err *e);

/* After the layers' qlinears exist (quantized or loaded): derived multipliers, LayerNorm
 * folds for the static scheme, packing into the kernels' layouts. */
bert8_status b8_quant_finalize(bert8_model *m, b8_err *e);

/* Reads dir/quantization_config.json when present: sets m->quantized, scheme, samples. */
bert8_status b8_quant_read_config(bert8_model *m, b8_err *e);

#endif
