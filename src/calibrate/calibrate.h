/* calibrate.h: activation statistics for quantization: the FP32 model is run over calibration
 * batches with an observer at every calibration site (io/names.h) that records the per-channel
 * max |x|, minimum and maximum and, when asked, a uniform sample of rows (reservoir sampling) for the alpha search.
 * Above the forward pass: it drives sessions of a loaded model. */
#ifndef BERT8_CALIBRATE_H
#define BERT8_CALIBRATE_H

#include "model/session.h"

#define B8_CALIB_SAMPLE_ROWS 256 /* rows kept per site for the alpha search */
#define B8_DEFAULT_OUTLIERS 4    /* fp32 outlier input channels of each per-token Linear in the dynamic scheme
                                    (bert8_quant_params.outliers) */

typedef struct b8_site_stats {
    int64_t k;       /* channels (0: site not observed) */
    float *amax;     /* [k] */
    float *cmin, *cmax; /* [k] per-channel minimum and maximum (Linear inputs; NULL elsewhere) */
    float *sample;   /* [B8_CALIB_SAMPLE_ROWS][k] reservoir of rows, or NULL */
    int64_t seen, kept;
} b8_site_stats;

typedef struct b8_calib {
    int64_t layers;
    b8_site_stats *sites; /* [layers][B8_SITE_COUNT] */
    uint64_t rng;
    int64_t sequences;    /* calibration sequences seen */
} b8_calib;

/* Prepares statistics for the Linear-input sites of every layer of m (samples: keep rows too)
 * and, with attention, for the attention operands Q, K and V (max |x| only). */
bert8_status b8_calib_init(b8_calib *c, const bert8_model *m, bool samples, bool attention, b8_err *e);
void b8_calib_free(b8_calib *c); /* NULL is a no-op */
static inline b8_site_stats *b8_calib_site(const b8_calib *c, int64_t layer, b8_site site) {
    return &c->sites[layer * B8_SITE_COUNT + site];
}

/* Runs m over the batches (at most max_samples sequences in all, <= 0: all), observing. */
bert8_status b8_calib_run(b8_calib *c, const bert8_model *m, const bert8_batch *batches, size_t n,
                          int64_t max_samples, bool progress, b8_err *e);

/* A progress bar on stderr (redrawn in place on a terminal, else only the final line). */
void b8_calib_progress(const char *what, int64_t done, int64_t total);

/* ---- SmoothQuant pieces shared by bert8_quantize and the budget search (smoothquant.c) ---- */

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

/* The per-tensor scales of Q, K and V of layer l (max |x| / 127 over the calibration set; needs
 * b8_calib_init with attention). */
/* A layer's INT8 attention scales from its calibration maxima: Q and K per tensor (sc[0], sc[1]),
 * V per channel into sv_ch [H] (sc[2]: V's per-tensor scale). */
void b8_qattn_scales(const b8_calib *c, int64_t l, float sc[3], float *sv_ch);


/* Whether the keep_fp32 glob patterns name a checkpoint weight of group g of layer l. */
bool b8_group_kept(const bert8_model *m, int64_t l, b8_group g, const char *patterns);

#endif
