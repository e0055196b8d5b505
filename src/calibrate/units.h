/* units.h: the quantization units of a model (the parts that run FP32 or INT8 on their own)
 * and their modes. bert8_quantize (smoothquant.c) reads a unit_modes list in these terms and the
 * accuracy-budgeted search (budget.c) moves units between modes; both sit above this file.
 *
 * Units are numbered layer by layer: unit = layer * B8_UNITS_PER_LAYER + position in
 * b8_unit_table. Every piece of code that turns a unit into something the model runs (the
 * forms the search prepares, installing a form into a candidate model, a model's current mode,
 * bert8_quantize's unit_modes) switches on the unit's kind: a kind of unit is a b8_unit_kind, a
 * row of the table and a case in those switches (the INT8 attention was added that way). */
#ifndef BERT8_UNITS_H
#define BERT8_UNITS_H

#include "model/model.h"

typedef enum b8_unit_kind {
    B8_UNIT_LINEAR,   /* one Linear group of io/layer.h (b8_group) */
    B8_UNIT_ATTENTION /* the attention products Q K^T and P V in INT8 (b8_qattn): int8_static or
                         fp32 only, and INT8 only while the layer's qkv unit is INT8 */
} b8_unit_kind;

typedef struct b8_unit_desc {
    b8_unit_kind kind;
    b8_group group;  /* B8_UNIT_LINEAR: which group */
    const char *key; /* its name in quantization_config.json and in reports */
} b8_unit_desc;

/* A layer's units: its four Linear groups in b8_group order, then its attention. */
#define B8_UNITS_PER_LAYER 5
#define B8_UNIT_QKV_POS 0
#define B8_UNIT_ATTENTION_POS 4
extern const b8_unit_desc b8_unit_table[B8_UNITS_PER_LAYER];

static inline b8_qmode b8_qmode_of_unit_mode(bert8_unit_mode m) {
    return m == BERT8_UNIT_INT8_STATIC ? B8_QMODE_STATIC : m == BERT8_UNIT_INT8_DYNAMIC ? B8_QMODE_DYNAMIC : B8_QMODE_FP32;
}

static inline bert8_unit_mode b8_unit_mode_of_qmode(b8_qmode m) {
    return m == B8_QMODE_STATIC ? BERT8_UNIT_INT8_STATIC : m == B8_QMODE_DYNAMIC ? BERT8_UNIT_INT8_DYNAMIC : BERT8_UNIT_FP32;
}

static inline bool b8_unit_mode_valid(bert8_unit_mode m) {
    return m == BERT8_UNIT_FP32 || m == BERT8_UNIT_INT8_STATIC || m == BERT8_UNIT_INT8_DYNAMIC;
}

#endif
