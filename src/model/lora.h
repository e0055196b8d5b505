/* lora.h: task-specific LoRA adapters folded into the base weights at load time.
 *
 * Jina embeddings v3 (its XLMRobertaLoRA custom code, the format of the published checkpoints)
 * registers a LoRA parametrization on every Embedding and Linear of the encoder. Such a module
 * stores its base weight as "<module>.parametrizations.weight.original" (instead of
 * "<module>.weight") and the adapters of all tasks as "<module>.parametrizations.weight.0.lora_A"
 * and "...lora_B", stacked on a first axis with one slice per task (config.json's
 * lora_adaptations, in order). For task t and scale = lora_alpha / lora_rank:
 *   Linear    W [n][k]: A [T][r][k], B [T][n][r];  W' = W + scale * (B[t] A[t])
 *   Embedding E [n][k]: A [T][n][r], B [T][r][k];  E' = E + scale * (A[t] B[t])
 * Folded once, the forward pass and the INT8 quantizer see plain weights. */
#ifndef BERT8_LORA_H
#define BERT8_LORA_H

#include "base/common.h"
#include "io/safetensors.h"

#define B8_LORA_ORIGINAL ".parametrizations.weight.original"
#define B8_LORA_A ".parametrizations.weight.0.lora_A"
#define B8_LORA_B ".parametrizations.weight.0.lora_B"

/* The adapters of one load: which slice, how many slices a tensor must have, rank and scale. */
typedef struct b8_lora {
    int64_t task;  /* slice index, or -1: nothing is folded */
    int64_t tasks; /* slices every adapter holds (the config's task count) */
    int64_t rank;
    float scale;   /* lora_alpha / lora_rank */
} b8_lora;

/* Adds the task's adapter of module `base` (a full tensor name without ".weight") to w [n][k]
 * in place; `table` says it is an Embedding (else a Linear). *applied is false when the module
 * has no adapter. An adapter with one half missing, or of a wrong shape or dtype, is an error
 * naming the tensor. */
bert8_status b8_lora_fold(const b8_st *st, const b8_lora *lo, const char *base, bool table, float *w, int64_t n,
                          int64_t k, bool *applied, b8_err *e);

/* Whether a tensor name belongs to a LoRA parametrization (its original weight or an adapter). */
bool b8_lora_is_param(const char *name);

#endif
