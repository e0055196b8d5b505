/* calibrate.h: activation statistics for quantization: the FP32 model is run over calibration
 * batches with an observer at every calibration site (io/layer.h) that records the per-channel
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

#endif
