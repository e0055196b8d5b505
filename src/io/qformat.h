/* qformat.h: quantization_config.json, the file that marks a bert8 INT8 folder and records how
 * each Linear group was quantized. Read by the loader, written by bert8_model_save.
 *
 * An INT8 folder is a Hugging Face folder whose model.safetensors stores every quantized
 * Linear as "<base>.weight" I8 [n][k] plus F32 "<base>.bias", "<base>.weight_scale" [n],
 * "<base>.smooth_factor" [k] and, for static activations, "<base>.input_scale" [1] (names in
 * io/names.h); every other tensor is kept as in the source checkpoint.
 *
 * quantization_config.json (version 3):
 *   {"quant_method": "bert8-smoothquant", "version": 3, "scheme": "static" | "dynamic",
 *    "calibration_samples": N, "keep_fp32": "patterns", "attention": "fp32" | "int8",
 *    "embeddings": "fp32" | "int8", "lora_task": "name" (only when LoRA adapters were folded),
 *    "layers": [{"qkv": {"mode": "int8_static" | "int8_dynamic" | "fp32", "alpha": a | null},
 *                "attention_output": {...}, "ffn_in": {...}, "ffn_out": {...},
 *                "attention": "int8" | "fp32"}, ...],
 *    "weights": "...", "activations": "..."}            (the last two are descriptions only)
 * Version 1 files (one scheme for the folder, "alpha_per_layer": [{"qkv": a | null | "fp32",
 * ...}]) are read too, and version 2 files (the value output_scale of INT8 attention per
 * tensor only; version 3 also allows one per channel). */
#ifndef BERT8_QFORMAT_H
#define BERT8_QFORMAT_H

#include "base/common.h"
#include "io/layer.h"

#define B8_QFORMAT_METHOD "bert8-smoothquant"
#define B8_QFORMAT_VERSION 5 /* 4: a static FFN-out input may have a zero point (input_zero_point); 5: a
                                dynamic Linear may keep fp32 outlier channels (outlier_index, outlier_weight) */

typedef enum b8_qmode {
    B8_QMODE_FP32,    /* the group stays FP32 */
    B8_QMODE_STATIC,  /* int8 weights, int8 activations with a calibrated per-tensor scale */
    B8_QMODE_DYNAMIC  /* int8 weights, int8 activations with a per-token scale at run time */
} b8_qmode;

/* "fp32", "int8_static", "int8_dynamic"; "?" when out of range. */
const char *b8_qmode_name(b8_qmode m);

typedef struct b8_qgroup {
    b8_qmode mode;
    float alpha; /* SmoothQuant migration strength used, or < 0 when smoothing was off/unknown */
} b8_qgroup;

typedef struct b8_qconfig {
    int version;
    bert8_scheme scheme;  /* the folder's scheme: the mode of every INT8 group in version 1 */
    int64_t calib_samples;
    int weight_bits;      /* 8, or 7: every weight within +-64 ("weight_bits", 8 when absent) */
    char keep_fp32[256];
    bool int8_attention;  /* some layer runs its attention products in INT8 */
    bool int8_embeddings; /* the word embedding rows are int8 with a scale per row */
    char lora_task[64];   /* the LoRA task folded into every weight of the folder ("lora_task"), or "" */
    int64_t layers;       /* rows of groups; 0 when the file has no per-layer table */
    b8_qgroup *groups;    /* [layers][B8_GROUP_COUNT], owned */
    uint8_t *attn_int8;   /* [layers]: 1 where the layer's attention runs INT8, owned */
} b8_qconfig;

/* Reads dir/quantization_config.json. *present is false (and cfg zeroed) when the file does not
 * exist; a file that exists but is not a valid config is an error naming the field. */
bert8_status b8_qconfig_read(const char *dir, bool *present, b8_qconfig *cfg, b8_err *e);
/* Parses the text of a quantization_config.json (path only for messages). */
bert8_status b8_qconfig_parse(const char *text, const char *path, b8_qconfig *cfg, b8_err *e);
/* Writes cfg (version B8_QFORMAT_VERSION) to path. */
bert8_status b8_qconfig_write(const char *path, const b8_qconfig *cfg, b8_err *e);
void b8_qconfig_free(b8_qconfig *cfg); /* frees groups and zeroes *cfg; NULL is a no-op */

#endif
