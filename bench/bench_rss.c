/* bench_rss.c: the resident memory of a model folder in use, as a long-running process sees it:
 * after loading, after one batch, and after a sweep over the whole vocabulary (every embedding
 * row read once: the worst case a server reaches over enough text). Public API only.
 *
 *   bench_rss MODEL_DIR [--threads N] [--json]                                              */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bert8.h"

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_rss MODEL_DIR [--threads N] [--json]\n");
        return 2;
    }
    int threads = 0, json = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json")) json = 1;
    }
    long r0 = rss_kb();
    bert8_load_params lp = bert8_default_load_params();
    lp.threads = threads;
    bert8_model *m = NULL;
    char err[1024];
    if (bert8_model_load(argv[1], &lp, &m, err, sizeof err)) {
        fprintf(stderr, "bench_rss: %s\n", err);
        return 1;
    }
    const bert8_model_info *in = bert8_model_get_info(m);
    long r_load = rss_kb();
    bert8_session *s = NULL;
    bert8_session_create(m, &s);
    const int64_t T = in->max_seq_len < 128 ? in->max_seq_len : 128, B = 8;
    int32_t *ids = malloc((size_t)(B * T) * sizeof(int32_t));
    bert8_outputs o;
    int64_t first = in->pad_token_id + 2; /* past the specials at the low end */
    for (int64_t i = 0; i < B * T; i++) ids[i] = (int32_t)(first + i % (in->vocab_size - first));
    bert8_batch b = {B, T, ids, NULL, NULL};
    if (bert8_forward(s, &b, &o)) {
        fprintf(stderr, "bench_rss: %s\n", bert8_session_last_error(s));
        return 1;
    }
    long r_batch = rss_kb();
    /* every id once, B x T at a time */
    for (int64_t id0 = first; id0 < in->vocab_size; id0 += B * T) {
        for (int64_t i = 0; i < B * T; i++) ids[i] = (int32_t)(id0 + i < in->vocab_size ? id0 + i : first);
        if (bert8_forward(s, &b, &o)) {
            fprintf(stderr, "bench_rss: %s\n", bert8_session_last_error(s));
            return 1;
        }
    }
    long r_sweep = rss_kb();
    if (json)
        printf("{\"model\":\"%s\",\"quantized\":%d,\"rss_kb\":{\"start\":%ld,\"loaded\":%ld,\"one_batch\":%ld,"
               "\"vocabulary_sweep\":%ld}}\n",
               argv[1], in->quantized, r0, r_load, r_batch, r_sweep);
    else
        printf("%s (%s): resident kB: start %ld, loaded %ld, after one %lldx%lld batch %ld, after a sweep over all "
               "%lld ids %ld\n",
               argv[1], in->quantized ? "INT8" : "FP32", r0, r_load, (long long)B, (long long)T, r_batch,
               (long long)in->vocab_size, r_sweep);
    free(ids);
    bert8_session_free(s);
    bert8_model_free(m);
    return 0;
}
