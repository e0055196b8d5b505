/* names.h: the tensor names of a Hugging Face BERT-family checkpoint and of a bert8 INT8 folder:
 * a layer part's or fused group's name in an architecture (from the architecture table), a
 * group's part count and dimensions there, and the suffixes of an INT8 Linear's tensors.
 *
 * The layer's parts, Linear groups and calibration sites themselves are io/layer.h (included
 * here): one table instead of hand-written lists, which the loader, the quantizer, the INT8
 * folder writer and the forward pass all walk. */
#ifndef BERT8_NAMES_H
#define BERT8_NAMES_H

#include "base/common.h"
#include "io/layer.h"

struct b8_arch_desc;

/* How many checkpoint Linears group g stacks in architecture a (FFN-in: 2 when gated). */
int b8_group_nparts(const struct b8_arch_desc *a, b8_group g);

/* N and K of a group's product in architecture a for hidden size H and intermediate size I. */
void b8_group_dims(const struct b8_arch_desc *a, b8_group g, int64_t H, int64_t I, int64_t *n, int64_t *k);

/* Writes the transformers name of a layer part without ".weight"/".bias", e.g.
 * "bert.encoder.layer.3.attention.self.query"; prefix ("bert.", "roberta.", "distilbert." or
 * "") is prepended as given. */
void b8_part_name(bert8_arch arch, const char *prefix, int64_t layer, b8_part part, char *out,
                  size_t cap);

/* Writes the name of layer `layer`'s fused tensor of group g (b8_arch_desc.fused), without
 * ".weight"/".bias"; false (and "") when the architecture stores that group unfused. */
bool b8_fused_name(bert8_arch arch, const char *prefix, int64_t layer, b8_group g, char *out, size_t cap);

/* The tensor suffixes of an INT8 Linear in a bert8 INT8 folder (beside "<base>.weight" I8 and
 * "<base>.bias" F32). */
#define B8_QT_WEIGHT_SCALE "weight_scale"   /* F32 [n]: per output channel */
#define B8_QT_SMOOTH "smooth_factor"        /* F32 [k]: SmoothQuant s, the input is divided by it */
#define B8_QT_INPUT_SCALE "input_scale"     /* F32 [1]: static scheme, scale of the smoothed input */
#define B8_QT_INPUT_ZERO "input_zero_point" /* F32 [1], optional: static, the input's zero point (an
                                               integer in [-127, 127]; FFN-out only; version 4) */
/* Optional, dynamic Linears only: the input channels kept in fp32 (bert8_quant_params.outliers):
 * "<base>.outlier_index" I32 [r] (strictly ascending) and "<base>.outlier_weight" F32 [n][r],
 * their unsmoothed weights; the int8 weight columns there are 0 and their smooth_factor 1. */
#define B8_QT_OUTLIER_INDEX "outlier_index"
#define B8_QT_OUTLIER_WEIGHT "outlier_weight"
/* INT8 attention: "<query|key|value base>.output_scale", F32 [1], the per-tensor scale of the
 * int8 Q, K and V the QKV product emits. */
#define B8_QT_OUTPUT_SCALE "output_scale"
/* INT8 word embeddings: "embeddings.word_embeddings.weight" I8 [vocab][H] with
 * "embeddings.word_embeddings.weight_scale" F32 [vocab], one scale per row. */

#endif
