/* calibrate.c: activation statistics over calibration batches (see calibrate.h). */
#include "calibrate/calibrate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bert8_status b8_calib_init(b8_calib *c, const bert8_model *m, bool samples, bool attention, b8_err *e) {
    memset(c, 0, sizeof *c);
    c->rng = 0x2545F4914F6CDD1DULL;
    c->layers = m->cfg.num_layers;
    c->sites = calloc((size_t)(c->layers * B8_SITE_COUNT) + 1, sizeof *c->sites);
    if (!c->sites) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    for (int64_t l = 0; l < c->layers; l++)
        for (int g = 0; g < B8_GROUP_COUNT; g++) {
            int64_t n, k;
            b8_group_dims(m->cfg.desc, (b8_group)g, m->cfg.hidden_size, m->cfg.intermediate_size, &n, &k);
            b8_site_stats *ss = b8_calib_site(c, l, b8_group_table[g].site);
            ss->k = k;
            ss->amax = calloc((size_t)k, sizeof(float));
            ss->cmin = calloc((size_t)k, sizeof(float));
            ss->cmax = calloc((size_t)k, sizeof(float));
            if (samples) ss->sample = malloc((size_t)(B8_CALIB_SAMPLE_ROWS * k) * sizeof(float));
            if (!ss->amax || !ss->cmin || !ss->cmax || (samples && !ss->sample)) {
                b8_calib_free(c);
                return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for calibration statistics");
            }
        }
    const b8_site att[3] = {B8_SITE_Q, B8_SITE_K, B8_SITE_V};
    for (int64_t l = 0; attention && l < c->layers; l++)
        for (int i = 0; i < 3; i++) {
            b8_site_stats *ss = b8_calib_site(c, l, att[i]);
            ss->k = m->cfg.hidden_size;
            if (!(ss->amax = calloc((size_t)ss->k, sizeof(float)))) {
                b8_calib_free(c);
                return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for calibration statistics");
            }
        }
    return BERT8_OK;
}

void b8_calib_free(b8_calib *c) {
    if (!c) return;
    if (c->sites)
        for (int64_t i = 0; i < c->layers * B8_SITE_COUNT; i++) {
            free(c->sites[i].amax);
            free(c->sites[i].cmin);
            free(c->sites[i].cmax);
            free(c->sites[i].sample);
        }
    free(c->sites);
    memset(c, 0, sizeof *c);
}

static void observe(void *ctx, int64_t layer, b8_site site, const float *x, int64_t rows, int64_t cols, int64_t ld,
                    const int32_t *mask) {
    b8_calib *c = ctx;
    b8_site_stats *s = b8_calib_site(c, layer, site);
    if (!s->amax || s->k != cols) return; /* a site nobody asked for */
    for (int64_t r = 0; r < rows; r++) {
        if (mask && !mask[r]) continue;
        const float *xr = x + r * ld;
        for (int64_t j = 0; j < cols; j++) {
            float a = fabsf(xr[j]);
            if (a > s->amax[j]) s->amax[j] = a;
        }
        for (int64_t j = 0; s->cmin && j < cols; j++) {
            if (xr[j] < s->cmin[j]) s->cmin[j] = xr[j];
            if (xr[j] > s->cmax[j]) s->cmax[j] = xr[j];
        }
        if (!s->sample) continue;
        /* reservoir sampling keeps a uniform sample of every row seen */
        int64_t slot = -1;
        if (s->kept < B8_CALIB_SAMPLE_ROWS) {
            slot = s->kept++;
        } else {
            c->rng ^= c->rng << 13, c->rng ^= c->rng >> 7, c->rng ^= c->rng << 17;
            uint64_t j = c->rng % (uint64_t)(s->seen + 1);
            if (j < B8_CALIB_SAMPLE_ROWS) slot = (int64_t)j;
        }
        if (slot >= 0) memcpy(s->sample + slot * cols, xr, (size_t)cols * sizeof(float));
        s->seen++;
    }
}

void b8_calib_progress(const char *what, int64_t done, int64_t total) {
    if (!isatty(2)) {
        if (done == total) fprintf(stderr, "%s: %lld/%lld done\n", what, (long long)done, (long long)total);
        return;
    }
    int width = 30, fill = total ? (int)(width * done / total) : width;
    fprintf(stderr, "\r%s [", what);
    for (int i = 0; i < width; i++) fputc(i < fill ? '#' : '.', stderr);
    fprintf(stderr, "] %lld/%lld", (long long)done, (long long)total);
    if (done == total) fputc('\n', stderr);
    fflush(stderr);
}

bert8_status b8_calib_run(b8_calib *c, const bert8_model *m, const bert8_batch *batches, size_t n,
                          int64_t max_samples, bool progress, b8_err *e) {
    bert8_session *s = NULL;
    bert8_status st = bert8_session_create(m, &s);
    if (st) return b8_fail(e, st, "out of memory creating a calibration session");
    b8_session_set_observer(s, observe, c);
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) total += batches[i].batch;
    if (max_samples > 0 && total > max_samples) total = max_samples;
    for (size_t i = 0; i < n && c->sequences < total; i++) {
        bert8_batch b = batches[i];
        if (b.batch > total - c->sequences) b.batch = total - c->sequences;
        if ((st = bert8_forward(s, &b, NULL))) {
            b8_fail(e, st, "calibration batch %zu: %s", i, bert8_session_last_error(s));
            break;
        }
        c->sequences += b.batch;
        if (progress) b8_calib_progress("calibrating", c->sequences, total);
    }
    bert8_session_free(s);
    return st;
}
