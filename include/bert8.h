/* bert8.h: the public API of bert8, an INT8 inference engine for BERT-family encoders.
 *
 * Thread safety: a bert8_model is immutable after bert8_model_load() returns and may be
 * shared by any number of threads. A bert8_session holds per-request scratch memory and
 * its own last-error message; use one session per thread at a time. All compute runs on
 * the process-wide OpenMP pool (bert8_set_threads()).
 *
 * Structs the library fills (bert8_outputs, bert8_encoding, ...) are owned by the caller; zero
 * them before their first use ({0}); the library may then reuse what it finds in them.
 *
 * Enums passed in (truncation, scheme, ...) are checked: a value outside the enum is
 * BERT8_ERR_INVALID_ARG, never a silent default.
 *
 * Errors: every call that can fail returns a bert8_status (bert8_status_string() names it).
 * The message saying what went wrong is the session's last error for calls on a session
 * (bert8_session_last_error()); calls that make or write a model or tokenizer, which have no
 * handle of their own to keep it in, write it into the err buffer they take. The library never
 * prints (except with BERT8_VERBOSE=1 or an explicit progress flag), exits or aborts.
 */
#ifndef BERT8_H
#define BERT8_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The one source of the version: CMake reads these three lines (project(VERSION)). */
#define BERT8_VERSION_MAJOR 0
#define BERT8_VERSION_MINOR 1
#define BERT8_VERSION_PATCH 0

/* The library's version as "MAJOR.MINOR.PATCH"; a static string. */
const char *bert8_version(void);

typedef enum bert8_status {
    BERT8_OK = 0,
    BERT8_ERR_INVALID_ARG,  /* a caller-supplied argument is wrong (NULL, out of range) */
    BERT8_ERR_IO,           /* a file or folder cannot be opened or read */
    BERT8_ERR_FORMAT,       /* a file is malformed (safetensors, JSON, vocabulary, ...) */
    BERT8_ERR_UNSUPPORTED,  /* valid input that bert8 does not handle (model_type, dtype) */
    BERT8_ERR_SHAPE,        /* tensor shapes disagree with config.json or each other */
    BERT8_ERR_MISSING,      /* a required tensor or field is absent */
    BERT8_ERR_NOMEM,        /* allocation failed */
    BERT8_ERR_TOO_LARGE,    /* a request exceeds a limit (sequence length, batch size) */
    BERT8_ERR_ENCODING,     /* text is not valid UTF-8 */
    BERT8_ERR_INTERNAL,     /* a bug: please report */
    BERT8_STATUS_COUNT
} bert8_status;

/* A static, human-readable name for a status ("invalid argument", ...). */
const char *bert8_status_string(bert8_status status);

/* A text with an explicit byte length (UTF-8; NUL bytes are ordinary characters). */
typedef struct bert8_text {
    const char *data;
    size_t len;
} bert8_text;

/* Checks that s[0..len) is UTF-8 as Python's strict decoder accepts it (no overlong forms,
 * surrogates or code points past U+10FFFF). Returns 1, or 0 with *bad_offset (if not NULL) set
 * to the byte offset of the first error. The library's one validator. */
int bert8_utf8_valid(const char *s, size_t len, size_t *bad_offset);

/* ---- Model ------------------------------------------------------------------------ */

typedef struct bert8_model bert8_model;

typedef enum bert8_arch {
    BERT8_ARCH_BERT,
    BERT8_ARCH_DISTILBERT,
    BERT8_ARCH_XLMR,
    BERT8_ARCH_ROBERTA,
    BERT8_ARCH_CAMEMBERT,
    BERT8_ARCH_MPNET,
    BERT8_ARCH_GTE,
    BERT8_ARCH_NOMIC_BERT,
    BERT8_ARCH_JINA_V3,
    BERT8_ARCH_MODERNBERT,
    BERT8_ARCH_DEBERTA_V2 /* DeBERTa-v2 and -v3 (model_type "deberta-v2") */
} bert8_arch;

/* "bert", "distilbert", "xlm-roberta", "roberta", "camembert", "mpnet", "gte", "nomic_bert",
 * "jina_embeddings_v3", "modernbert", "deberta-v2"; "unknown" otherwise. */
const char *bert8_arch_name(bert8_arch arch);

typedef enum bert8_head {
    BERT8_HEAD_BASE,      /* last_hidden_state (+ pooler_output when the pooler exists) */
    BERT8_HEAD_SEQ_CLS,   /* logits [B, labels] */
    BERT8_HEAD_TOKEN_CLS, /* logits [B, T, labels] */
    BERT8_HEAD_QA         /* start_logits, end_logits [B, T] */
} bert8_head;

typedef enum bert8_scheme {
    BERT8_SCHEME_STATIC,  /* int8 activations per tensor, scales calibrated ahead of time */
    BERT8_SCHEME_DYNAMIC  /* int8 activations per token, scale and zero point computed on the fly */
} bert8_scheme;

typedef struct bert8_model_info {
    bert8_arch arch;
    bert8_head head;
    const char *model_type;   /* as in config.json */
    const char *architecture; /* config.json "architectures"[0], or "" */
    int64_t vocab_size, hidden_size, num_layers, num_heads, intermediate_size;
    int64_t max_position_embeddings, type_vocab_size, num_labels, pad_token_id;
    int64_t max_seq_len;      /* longest sequence the model takes (XLM-R: max_position_embeddings
                                 - pad_token_id - 1, as its positions start after the pad index) */
    double layer_norm_eps;
    const char *hidden_act;   /* "gelu", "gelu_new", "relu" */
    int has_pooler;
    int quantized;            /* 1 when the folder holds an INT8 checkpoint */
    bert8_scheme scheme;      /* quantized: the folder's activation scheme */
    int64_t tensor_count;     /* tensors in the safetensors file(s) */
    int64_t weight_bytes;     /* bytes of tensor data in the file(s) */
    int64_t param_count;      /* parameters used by the forward pass */
    int weight_bits;          /* quantized: 8, or 7 (weights within +-64, bert8_quant_params);
                                 0 for an FP32 model */
    int has_mlm_head;         /* the checkpoint has a masked-LM head (bert8_mlm_logits) */
    const char *lora_task;    /* the LoRA task folded into the weights (bert8_load_params), or "" */
    int ffn_gated;            /* 1: a gated FFN (GeGLU, SwiGLU: ModernBERT, NomicBERT, GTE), whose
                                 FFN-in gives gate and up, 2 x intermediate_size outputs */
    int64_t sliding_layers;   /* layers whose attention is a sliding window (ModernBERT's local
                                 layers), 0 when every layer attends to all keys */
    int64_t attention_window; /* in those layers query i sees the keys j with |i - j| <= this */
} bert8_model_info;

typedef struct bert8_load_params {
    int threads;  /* 0: leave the pool as it is */
    int verbose;  /* print loading and kernel choices to stderr */
    /* Task-specific LoRA adapters (Jina embeddings v3: config.json "lora_adaptations", tensors
     * "<Linear or Embedding>.parametrizations.weight.0.lora_A/lora_B", one slice per task): the
     * name of the task whose adapters are folded into the base weights at load time
     * (W + lora_alpha / lora_rank * B A), or NULL (the default): the base weights, as
     * transformers and sentence-transformers run the model when no task is given. A name the
     * config does not list is BERT8_ERR_INVALID_ARG naming the valid ones. An INT8 folder holds
     * the task it was quantized with already folded: NULL or that name. */
    const char *lora_task;
} bert8_load_params;

bert8_load_params bert8_default_load_params(void);

/* Loads a Hugging Face checkpoint folder (config.json + model.safetensors or a sharded
 * index). On failure returns a status, sets *out to NULL and writes a message into err
 * (if err is not NULL, at most err_len bytes including the NUL). */
bert8_status bert8_model_load(const char *dir, const bert8_load_params *params,
                              bert8_model **out, char *err, size_t err_len);
void bert8_model_free(bert8_model *model); /* NULL is a no-op */
const bert8_model_info *bert8_model_get_info(const bert8_model *model);
/* label name for class i (id2label), or NULL when out of range */
const char *bert8_model_label(const bert8_model *model, int64_t i);

/* ---- Threads ---------------------------------------------------------------------- */

/* Sets the number of threads every later call uses, from whichever thread it is made (each
 * calling thread gets an OpenMP team of this size); n <= 0 selects the number of physical
 * cores. Until it is called, OpenMP's own default applies (OMP_NUM_THREADS). An INT8 call
 * whose batch holds at least as many sequences as threads runs one group of whole sequences per
 * thread (same outputs bit for bit; BERT8_SEQ_PARALLEL=0 at load turns this off), other calls
 * run each op on all threads. */
void bert8_set_threads(int n);
int bert8_get_threads(void);
int bert8_physical_cores(void);

/* ---- Forward pass on token ids ------------------------------------------------------ */

typedef struct bert8_session bert8_session;

bert8_status bert8_session_create(const bert8_model *model, bert8_session **out);
void bert8_session_free(bert8_session *s); /* NULL is a no-op */
const char *bert8_session_last_error(const bert8_session *s);

/* A padded batch: `batch` rows of `seq` token ids each (row-major [batch][seq]).
 * attention_mask and token_type_ids may be NULL (mask all ones, types all zero). */
typedef struct bert8_batch {
    int64_t batch, seq;
    const int32_t *input_ids;
    const int32_t *attention_mask;
    const int32_t *token_type_ids;
} bert8_batch;

/* A packed (variable-length, padding-free) batch: num_sequences sequences back to back;
 * sequence i is tokens [cu_seqlens[i], cu_seqlens[i+1]) (num_sequences + 1 entries, starting
 * at 0, every length >= 1). input_ids and token_type_ids (may be NULL) hold
 * cu_seqlens[num_sequences] entries. Only real tokens are computed. */
typedef struct bert8_packed_batch {
    int64_t num_sequences;
    const int64_t *cu_seqlens;
    const int32_t *input_ids;
    const int32_t *token_type_ids;
} bert8_packed_batch;

/* Output tensors, owned by the session and valid until its next call. A NULL data pointer
 * means the model does not produce that output. */
typedef struct bert8_tensor {
    const float *data;
    int ndim;
    int64_t shape[4];
} bert8_tensor;

/* Token-level outputs of a packed batch are packed too: [tokens, H] instead of [B, T, H]
 * (and [tokens, labels], [tokens]), with cu_seqlens giving each sequence's rows. */
typedef struct bert8_outputs {
    bert8_tensor last_hidden_state; /* [B, T, H]        packed: [tokens, H] */
    bert8_tensor pooler_output;     /* [B, H] */
    bert8_tensor logits;            /* [B, labels] or [B, T, labels]; packed: [tokens, labels] */
    bert8_tensor start_logits;      /* [B, T]           packed: [tokens] */
    bert8_tensor end_logits;        /* [B, T]           packed: [tokens] */
    const int64_t *cu_seqlens;      /* packed: [num_sequences + 1] row starts; NULL when padded */
    int64_t num_sequences;          /* packed: B */
} bert8_outputs;

bert8_status bert8_forward(bert8_session *s, const bert8_batch *batch, bert8_outputs *out);
/* The forward pass of a packed batch: token-level outputs come back packed ([tokens, ...]) with
 * out->cu_seqlens; sequence-level ones (pooler_output, sequence logits) are [num_sequences, ...].
 * The mask-1 rows of a padded run and the rows of a packed run of the same sequences agree
 * (bit for bit for static INT8 Linears and attention; FP32 GEMMs to rounding). */
bert8_status bert8_forward_packed(bert8_session *s, const bert8_packed_batch *batch, bert8_outputs *out);

/* The masked-LM head on n rows of hidden states (hidden [n][hidden_size], e.g. rows of a
 * forward call's last_hidden_state): vocabulary logits into out [n][vocab_size], as
 * transformers' *ForMaskedLM computes them. BERT8_ERR_UNSUPPORTED when the model has no head
 * (bert8_model_info.has_mlm_head). Uses the session's scratch, not its outputs: the outputs of
 * the last forward call stay valid. */
bert8_status bert8_mlm_logits(bert8_session *s, const float *hidden, int64_t n, float *out);

/* Time per operation of the forward pass, summed over calls while profiling is on. */
typedef enum bert8_op {
    BERT8_OP_EMBED,      /* embeddings + their LayerNorm */
    BERT8_OP_QKV,        /* the Q, K, V projection */
    BERT8_OP_ATTENTION,  /* scores, softmax, context */
    BERT8_OP_ATTN_OUT,   /* attention output projection (+ residual; INT8: + the LayerNorm after it) */
    BERT8_OP_FFN_IN,     /* FFN first Linear (+ activation) */
    BERT8_OP_FFN_OUT,    /* FFN second Linear (+ residual; INT8: + the LayerNorm after it) */
    BERT8_OP_NORM,       /* encoder LayerNorms after an FP32 Linear (and their fused int8 output) */
    BERT8_OP_QUANTIZE,   /* stand-alone activation quantization */
    BERT8_OP_HEAD,       /* pooler and task head */
    BERT8_OP_COUNT
} bert8_op;
const char *bert8_op_name(bert8_op op);
void bert8_session_set_profiling(bert8_session *s, int on); /* turning it on clears the sums */
void bert8_session_get_profile(const bert8_session *s, double seconds[BERT8_OP_COUNT]);

/* ---- Machine ceilings (for rooflines) --------------------------------------------------- */

typedef struct bert8_peaks {
    int threads;
    double fp32_gflops; /* FP32 fused multiply-add rate, all threads (0: no AVX2/AVX-512) */
    double int8_gops;   /* INT8 ceiling, all threads: the AMX rate where AMX is allowed, else
                           the vpdpbusd rate, else (AVX2) the vpmaddwd rate (0: none) */
    double mem_gbps;    /* memory read bandwidth, all threads */
    double int8_vnni_gops; /* vpdpbusd (AVX512-VNNI) rate, all threads (0: not allowed) */
    double int8_amx_gops;  /* AMX tdpbssd rate, all threads (0: not allowed) */
    double int8_avx2_gops; /* vpmaddwd rate (int16 pairs), all threads, measured where AVX2 is
                              allowed and AVX512-VNNI is not (0: otherwise) */
} bert8_peaks;

/* Measures the ceilings with short loops (about a second) on `threads` threads (<= 0: the
 * pool's size), within what BERT8_MAX_ISA allows. */
bert8_status bert8_measure_peaks(int threads, bert8_peaks *out);

/* ---- INT8 quantization (SmoothQuant W8A8) -------------------------------------------- */

/* A quantization unit is one part of a layer that runs in FP32 or INT8 on its own: the four
 * Linear groups of each layer, "qkv" (Q, K and V as one product), "attention_output", "ffn_in",
 * "ffn_out", then its "attention" (the products Q K^T and P V; int8_static or fp32, and INT8 only
 * while the layer's qkv unit is). Units are numbered layer by layer (unit = layer * 5 +
 * position), so bert8_model_unit_count() is num_layers x 5. */
typedef enum bert8_unit_mode {
    BERT8_UNIT_FP32,         /* kept in FP32 */
    BERT8_UNIT_INT8_STATIC,  /* int8 weights; int8 activations with a calibrated scale per tensor */
    BERT8_UNIT_INT8_DYNAMIC  /* int8 weights; int8 activations with a scale and a zero point per token at run time */
} bert8_unit_mode;

/* "fp32", "int8_static", "int8_dynamic" (the names quantization_config.json uses); "?" when out of
 * range. A static string. */
const char *bert8_unit_mode_name(bert8_unit_mode mode);

typedef struct bert8_quant_params {
    bert8_scheme scheme;
    float alpha;            /* SmoothQuant migration strength in [0, 1]; < 0 (the default)
                               searches an alpha per Linear group of each layer on a grid
                               (0.3 .. 0.9), keeping the smallest output error on sampled
                               calibration rows */
    int smooth;             /* 0 disables smoothing (naive W8A8, for comparison) */
    int64_t max_samples;    /* calibration sequences used at most */
    const char *keep_fp32;  /* comma-separated glob patterns of tensor names kept FP32 */
    int progress;           /* print a progress bar to stderr */
    int int8_attention;     /* 1: the attention products (Q K^T, P V) run in INT8 too, with
                               calibrated per-tensor scales of Q, K and V (layers whose Q/K/V
                               product stays FP32 keep FP32 attention); an error where the head
                               size is not a multiple of 4. 0: FP32 attention. -1 (the default):
                               INT8 where the head size allows it, else FP32 */
    int int8_embeddings;    /* 1: the word embedding rows are stored int8 with a scale per row
                               and dequantized when gathered (XLM-R's 250k rows: 4x less) */
    const bert8_unit_mode *unit_modes; /* NULL: every Linear in the scheme's mode, the attention as
                               int8_attention says; else one mode per unit
                               (bert8_model_unit_count() entries, attention units included, and
                               int8_attention is not used), e.g. a budget search's result;
                               keep_fp32 still wins. At least one unit must be INT8. */
    int weight_bits;        /* 8 (the default; 0 means 8): int8 weights in [-127, 127]. 7: in
                               [-64, 64], half the resolution, for CPUs without VNNI: there the
                               INT8 products run on vpmaddubsw, exact only for such weights
                               (about 1.3x the GEMM rate of 8-bit weights on AVX2). Results
                               are the same on every CPU for a given model. */
    int ffn_out_per_token;  /* the static scheme's FFN-out input (the GELU output: one-sided,
                               with token outliers): 1 quantizes it per token at run time, as
                               the dynamic scheme does (the default; -1 means 1); 0 per tensor
                               with a calibrated scale and zero point (a few % faster, further
                               from FP32 on real models: docs/int8.md). The dynamic scheme
                               quantizes it per token in any case; unit_modes, when given, wins. */
    int ffn_in_per_token;   /* the static scheme's FFN-in input (a LayerNorm output): 1 quantizes
                               it per token at run time (the default since 2026-12-04; -1 means
                               1), 0 per tensor with a calibrated scale (1-2% faster, further
                               from FP32 on real embedding models: docs/accuracy.md). As
                               ffn_out_per_token otherwise. */
    int outliers;           /* input channels of each per-token (dynamic) Linear kept in fp32:
                               the few of largest calibrated max |x|, which in int8 would set
                               every token's scale and, smoothed, every weight row's; their small
                               fp32 product joins the GEMM's epilogue (docs/int8.md). -1 (the
                               default): 4 with the dynamic scheme, 0 with the static one (whose
                               FFN-in and FFN-out run per token too: a few % of speed for some
                               fidelity there); 0 none; at most 64 (and an eighth of the inputs) */
} bert8_quant_params;

bert8_quant_params bert8_default_quant_params(void);

/* Calibrates `fp32` on the given batches of token ids and returns a new INT8 model. The FP32
 * model is left unchanged (it is not used by the result). */
bert8_status bert8_quantize(const bert8_model *fp32, const bert8_batch *calib, size_t n_calib,
                            const bert8_quant_params *params, bert8_model **out, char *err,
                            size_t err_len);

/* ---- Quantization units of a model ----------------------------------------------------- */

typedef struct bert8_unit_info {
    int64_t layer;
    const char *kind;      /* "qkv", "attention_output", "ffn_in", "ffn_out", "attention" (static) */
    bert8_unit_mode mode;  /* how it runs in this model (FP32 throughout for an FP32 model) */
    float alpha;           /* SmoothQuant alpha of an INT8 unit; < 0 when unsmoothed or FP32 */
} bert8_unit_info;

/* The number of units of a model (num_layers x units per layer); 0 for NULL. */
int64_t bert8_model_unit_count(const bert8_model *model);
/* Unit i (0 <= i < bert8_model_unit_count()): its layer, kind and mode. */
bert8_status bert8_model_unit(const bert8_model *model, int64_t i, bert8_unit_info *out);

/* ---- INT8 to an accuracy budget ------------------------------------------------------------
 * bert8_quantize_budget quantizes every unit, scores the result with the caller's evaluation
 * callback and, while the score is more than max_drop below the FP32 model's, moves the most
 * sensitive remaining unit to a safer form: int8_dynamic first (per-token activation scales),
 * and once every Linear is dynamic, FP32 (an attention unit goes straight to FP32), re-scoring
 * after each move. It stops at the first
 * configuration within the budget. Then (trim, on by default) each moved unit, last moved first,
 * is tried one rung back up and stays there when the score is still within the budget, so no
 * single move is kept that the budget does not need. Sensitivity is ranked two ways:
 *   output error: each unit's INT8-vs-FP32 output error on the calibration rows (no evaluation;
 *                 for an attention unit, its context on a few calibration sequences);
 *   metric:       the score with only that unit in INT8 (one evaluation per unit; an attention
 *                 unit's drop is measured from its layer's qkv unit alone in INT8).
 * With BERT8_RANK_BOTH both orders are followed and the result with the fewest FP32 units (then
 * the fewest dynamic ones, then the higher score) is kept; the report says which.
 *
 * Scores are whatever the callback returns, higher is better, in the units of max_drop (the
 * CLI uses points: accuracy x 100). Tune on data the final figure is not reported on: the
 * callback should score a tuning slice, and the caller report the rest. */

/* Scores a candidate model (higher is better). The model is valid only during the call. Returns
 * BERT8_OK, or a status with a message in err (at most err_len bytes), which ends the search. */
typedef bert8_status (*bert8_eval_fn)(void *ctx, const bert8_model *candidate, double *score, char *err,
                                      size_t err_len);

typedef enum bert8_ranking {
    BERT8_RANK_BOTH,          /* follow both orders below, keep the better result */
    BERT8_RANK_OUTPUT_ERROR,  /* most output error first (calibration rows, no evaluation) */
    BERT8_RANK_METRIC         /* largest drop with only that unit in INT8 first (ties: output error) */
} bert8_ranking;

/* "both", "output-error", "metric"; "?" when out of range. */
const char *bert8_ranking_name(bert8_ranking ranking);

typedef enum bert8_budget_stage {
    BERT8_BUDGET_BASELINE,     /* unit -1: the FP32 score (mode FP32), then the all-INT8 score */
    BERT8_BUDGET_SENSITIVITY,  /* unit alone in INT8 scored (metric ranking); done/total */
    BERT8_BUDGET_STEP,         /* unit moved to mode, the candidate scored; done = steps so far */
    BERT8_BUDGET_TRIM,         /* unit tried back up at mode; accepted says whether it stays */
    BERT8_BUDGET_TRIAL_DONE    /* the search along `ranking` ended at score (unit -1) */
} bert8_budget_stage;

typedef struct bert8_budget_event {
    bert8_budget_stage stage;
    bert8_ranking ranking;     /* the order being followed (STEP, TRIAL_DONE) */
    int64_t unit;              /* a unit index, or -1 */
    bert8_unit_mode mode;
    double score, drop;        /* drop = FP32 score - score */
    int64_t done, total;
    int64_t evaluations;       /* callback calls so far */
    int cached;                /* the configuration was scored before; no new evaluation */
    int accepted;              /* TRIM: the unit stays at mode */
} bert8_budget_event;

typedef void (*bert8_budget_progress_fn)(void *ctx, const bert8_budget_event *event);

typedef struct bert8_budget_params {
    double max_drop;           /* score the result may lose against FP32: finite and >= 0 */
    bert8_ranking ranking;     /* default BOTH */
    int allow_dynamic;         /* 1 (default): static units go to int8_dynamic before FP32 */
    int trim;                  /* 1 (default): try moved units back up once within the budget */
    bert8_eval_fn eval;        /* required */
    void *eval_ctx;
    bert8_budget_progress_fn progress; /* may be NULL */
    void *progress_ctx;
} bert8_budget_params;

bert8_budget_params bert8_default_budget_params(void);

typedef struct bert8_budget_unit {
    int64_t layer;
    const char *kind;
    double output_error;   /* ||Y_int8 - Y||^2 / ||Y||^2 of its INT8 form on the sampled
                              calibration rows (its input taken from the FP32 model) */
    double metric_drop;    /* FP32 score - score with only this unit in INT8; NaN when not measured */
    bert8_unit_mode mode;  /* in the result */
    int fixed;             /* not searched: kept FP32 by keep_fp32, or an attention unit without
                              int8_attention (or over a kept qkv unit) */
} bert8_budget_unit;

typedef struct bert8_budget_trial {
    bert8_ranking ranking;    /* OUTPUT_ERROR or METRIC */
    int64_t *order;           /* [n_order] searched units, most sensitive first */
    int64_t n_order;
    bert8_unit_mode *modes;   /* [n_units] where this order stopped */
    double score;             /* its score */
    int64_t steps;            /* moves down the ladder until within the budget */
    double first_score;       /* the score after those moves, before trimming */
    int64_t first_off;        /* units off the scheme's mode then */
    int64_t trim_steps;       /* moves tried back up */
    int64_t n_static, n_dynamic, n_fp32; /* searched units in each mode (fixed ones not counted) */
    int within;               /* 1 when it ended within the budget */
} bert8_budget_trial;

typedef struct bert8_budget_report {
    double max_drop;
    double fp32_score, int8_score; /* FP32; every searched unit in the scheme's INT8 mode */
    double score;                  /* the result */
    int64_t n_units;
    bert8_budget_unit *units;      /* [n_units] */
    int n_trials;
    bert8_budget_trial trials[2];
    int chosen;                    /* the trial the result is, -1 when all-INT8 met the budget */
    int64_t evaluations;           /* callback calls */
} bert8_budget_report;

/* Frees what the library allocated in a report and zeroes it; NULL is a no-op. */
void bert8_budget_report_free(bert8_budget_report *report);

/* Calibrates as bert8_quantize does (quant: scheme, alpha, smoothing, keep_fp32, progress,
 * int8_attention, which makes the attention units part of the search; unit_modes must be NULL)
 * and searches as described above. report (may be NULL; zero it before
 * the first use) is filled when the search ran, also when it fails later. When even the best
 * configuration keeps every unit FP32, the call fails with BERT8_ERR_UNSUPPORTED (use the FP32
 * model). The FP32 model is left unchanged. */
bert8_status bert8_quantize_budget(const bert8_model *fp32, const bert8_batch *calib, size_t n_calib,
                                   const bert8_quant_params *quant, const bert8_budget_params *budget,
                                   bert8_model **out, bert8_budget_report *report, char *err,
                                   size_t err_len);

/* Writes a loadable folder (config.json, model.safetensors, quantization_config.json) for an
 * INT8 model; tokenizer files of the source folder are copied. */
bert8_status bert8_model_save(const bert8_model *model, const char *out_dir, char *err, size_t err_len);

/* The model folder a model was loaded from (or, for a quantized model, derived from). */
const char *bert8_model_dir(const bert8_model *model);

/* ---- Tokenizers (text -> ids), exact Hugging Face parity ------------------------------ */

/* WordPiece (BERT, DistilBERT) or SentencePiece Unigram (XLM-R), loaded from a model folder.
 * Immutable after load: share it across threads. */
typedef struct bert8_tokenizer bert8_tokenizer;

bert8_status bert8_tokenizer_load(const char *dir, bert8_tokenizer **out, char *err, size_t err_len);
void bert8_tokenizer_free(bert8_tokenizer *t); /* NULL is a no-op */

typedef enum bert8_special_token {
    BERT8_TOKEN_UNK, BERT8_TOKEN_CLS, BERT8_TOKEN_SEP, BERT8_TOKEN_PAD, BERT8_TOKEN_MASK
} bert8_special_token;
/* id of a special token, -1 when the vocabulary has none */
int32_t bert8_tokenizer_special_id(const bert8_tokenizer *t, bert8_special_token which);
/* token string of an id (owned by t), NULL when out of range */
const char *bert8_tokenizer_id_to_token(const bert8_tokenizer *t, int32_t id);
int64_t bert8_tokenizer_vocab_size(const bert8_tokenizer *t);
int64_t bert8_tokenizer_model_max_length(const bert8_tokenizer *t);

typedef enum bert8_truncation {
    BERT8_TRUNCATE_NONE,
    BERT8_TRUNCATE_LONGEST_FIRST,
    BERT8_TRUNCATE_ONLY_FIRST,
    BERT8_TRUNCATE_ONLY_SECOND
} bert8_truncation;

typedef struct bert8_encode_params {
    int add_special_tokens;     /* [CLS] a [SEP] b [SEP] / <s> a </s></s> b </s> */
    bert8_truncation truncation;
    int64_t max_length;         /* 0: the tokenizer's model_max_length */
    int return_overflow;        /* long inputs become several rows (windows) ... */
    int64_t stride;             /* ... overlapping by this many tokens */
    int pad_to_max_length;      /* 0: pad to the longest row */
    int truncate_left;          /* 1: truncation cuts the start of a sequence (transformers'
                                   truncation_side="left"); not with return_overflow */
} bert8_encode_params;

bert8_encode_params bert8_default_encode_params(void);

/* Encoded rows [rows][seq], padded; owned by the encoding (free with bert8_encoding_free).
 * offsets are byte [start, end) into the token's own text (sequence_ids says which). */
typedef struct bert8_encoding {
    int64_t rows, seq;
    const int32_t *input_ids, *attention_mask, *token_type_ids;
    const int32_t *special_mask;  /* 1 for template tokens and padding */
    const int32_t *sequence_ids;  /* 0 text, 1 pair, -1 special/padding */
    const int32_t *word_ids;      /* word index within its sequence, -1 special/padding */
    const int64_t *offsets;       /* [rows*seq][2] */
    const int64_t *lengths;       /* [rows] real tokens per row */
    const int64_t *row_input;     /* [rows] which input a row came from */
    const int64_t *row_window;    /* [rows] overflow window index */
    void *priv;
} bert8_encoding;

/* Encodes n texts (pairs may be NULL, or hold NULL entries for single texts). Invalid UTF-8
 * fails with BERT8_ERR_ENCODING naming the byte offset. */
bert8_status bert8_encode(const bert8_tokenizer *t, int64_t n, const char *const *texts,
                          const char *const *pairs, const bert8_encode_params *params,
                          bert8_encoding *out, char *err, size_t err_len);
/* The same with explicit byte lengths (NUL-safe). pairs may be NULL, or hold entries with data
 * NULL for single texts. */
bert8_status bert8_encode_texts(const bert8_tokenizer *t, int64_t n, const bert8_text *texts,
                                const bert8_text *pairs, const bert8_encode_params *params,
                                bert8_encoding *out, char *err, size_t err_len);
void bert8_encoding_free(bert8_encoding *enc); /* NULL is a no-op */

/* Decodes ids into text as transformers' tokenizer.decode does (WordPiece: "##" joins and the
 * `tokenizers` WordPiece decoder's cleanup of a space before , . ! ?; SentencePiece: U+2581
 * becomes a space; byte-level BPE: the bytes), then, when the folder's tokenizer_config.json sets
 * clean_up_tokenization_spaces true (absent: false, transformers' default), transformers'
 * clean_up_tokenization (not for BPE, which transformers skips); special tokens dropped when
 * skip_special_tokens. *out is a NUL-terminated string the caller frees with free(). */
bert8_status bert8_decode(const bert8_tokenizer *t, const int32_t *ids, int64_t n, int skip_special_tokens,
                          char **out, char *err, size_t err_len);
/* 1 when id is a special token (of the template, padding, unknown, mask or an added special). */
int bert8_tokenizer_is_special(const bert8_tokenizer *t, int32_t id);

/* A batch view of rows [row0, row0+n) of an encoding, for bert8_forward. */
bert8_batch bert8_encoding_batch(const bert8_encoding *enc, int64_t row0, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
