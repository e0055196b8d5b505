/* cmd_bench.c: `bert8 bench`: an FP32 model quantized in memory, FP32 and INT8 timed
 * alternated in blocks of a few passes in one process, on a fixed B x S batch or, with --lengths FILE, on batches of real
 * sequence lengths run padding-free and padded side by side. --roofline measures the machine's
 * ceilings (bert8_measure_peaks) and prints, per op, operations, bytes, time, rate, % of peak
 * and arithmetic intensity; --plot FILE.svg|png draws the roofline with each op as a point. */
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calib_text.h"
#include "quant_opts.h"
#include "cli.h"
#include "plot.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The timed work: batches of token ids, each padded ([B][T] + mask) and packed (cu_seqlens). */
typedef struct work {
    int64_t nb;           /* batches */
    int64_t seqs;         /* sequences in all */
    int64_t *B, *T;       /* per batch: sequences, longest */
    int64_t **cu;         /* per batch: [B + 1] */
    int32_t **ids, **mask, **pids;
    bool varlen;          /* --lengths: packed and padded differ */
} work;

static void work_free(work *w) {
    for (int64_t i = 0; i < w->nb; i++) free(w->cu[i]), free(w->ids[i]), free(w->mask[i]), free(w->pids[i]);
    free(w->B), free(w->T), free(w->cu), free(w->ids), free(w->mask), free(w->pids);
    memset(w, 0, sizeof *w);
}

/* Batches of `per` consecutive lengths; token ids from bert8's deterministic formula (away from
 * the special ids at the low end), the same ids the peers' scripts use. */
static bool work_make(work *w, const int64_t *len, int64_t n, int64_t per, int64_t vocab) {
    memset(w, 0, sizeof *w);
    w->nb = (n + per - 1) / per;
    w->B = calloc((size_t)w->nb, sizeof *w->B), w->T = calloc((size_t)w->nb, sizeof *w->T);
    w->cu = calloc((size_t)w->nb, sizeof *w->cu), w->ids = calloc((size_t)w->nb, sizeof *w->ids);
    w->mask = calloc((size_t)w->nb, sizeof *w->mask), w->pids = calloc((size_t)w->nb, sizeof *w->pids);
    if (!w->B || !w->T || !w->cu || !w->ids || !w->mask || !w->pids) return false;
    for (int64_t k = 0; k < w->nb; k++) {
        const int64_t B = n - k * per < per ? n - k * per : per;
        const int64_t *l = len + k * per;
        int64_t T = 0;
        for (int64_t b = 0; b < B; b++) T = l[b] > T ? l[b] : T;
        w->B[k] = B, w->T[k] = T;
        w->cu[k] = calloc((size_t)B + 1, sizeof(int64_t));
        w->ids[k] = calloc((size_t)(B * T), sizeof(int32_t));
        w->mask[k] = calloc((size_t)(B * T), sizeof(int32_t));
        w->pids[k] = calloc((size_t)(B * T), sizeof(int32_t));
        if (!w->cu[k] || !w->ids[k] || !w->mask[k] || !w->pids[k]) return false;
        for (int64_t b = 0; b < B; b++) {
            w->cu[k][b + 1] = w->cu[k][b] + l[b];
            for (int64_t t = 0; t < T; t++) {
                const int64_t i = b * T + t;
                w->ids[k][i] = t < l[b] ? (int32_t)(5 + ((uint64_t)i * 2654435761u) % (uint64_t)(vocab - 5)) : 0;
                w->mask[k][i] = t < l[b];
                if (t < l[b]) w->pids[k][w->cu[k][b] + t] = w->ids[k][i];
            }
            if (l[b] != T) w->varlen = true;
        }
        w->seqs += B;
    }
    return true;
}

/* Passes of one precision in a row, and the pause between FP32 and INT8 blocks (see the loop). */
#define BENCH_BLOCK 4
#define BENCH_PAUSE_MS 30

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* One pass over every batch; returns its seconds, or -1 on failure. */
static double run_pass(bert8_session *s, const work *w, bool packed) {
    double t0 = omp_get_wtime();
    bert8_outputs o;
    for (int64_t k = 0; k < w->nb; k++) {
        bert8_status st;
        if (packed) {
            bert8_packed_batch b = {w->B[k], w->cu[k], w->pids[k], NULL};
            st = bert8_forward_packed(s, &b, &o);
        } else {
            bert8_batch b = {w->B[k], w->T[k], w->ids[k], w->varlen ? w->mask[k] : NULL, NULL};
            st = bert8_forward(s, &b, &o);
        }
        if (st) return -1;
    }
    return omp_get_wtime() - t0;
}

/* Operations and minimum bytes of each profiled op over one pass. */
typedef struct opcost {
    double ops[BERT8_OP_COUNT], bytes[BERT8_OP_COUNT];
    double useful; /* the Linear and attention products only: what a roofline counts */
} opcost;

/* ffn_out_per_token: the INT8 model quantizes FFN-out's input per token (a pass of its own over
 * FFN-in's fp32 output, profiled as "quantize"); the other INT8 quantizations are fused into the
 * LayerNorms and the products' epilogues. */
static void cost(const bert8_model_info *in, const work *w, bool packed, bool int8, bool ffn_out_per_token,
                 opcost *c) {
    memset(c, 0, sizeof *c);
    const double H = (double)in->hidden_size, I = (double)in->intermediate_size, L = (double)in->num_layers;
    const double wb = int8 ? 1 : 4; /* bytes per weight and per Linear input */
    const double G = in->ffn_gated ? 2 : 1; /* a gated FFN-in gives gate and up: 2 x I outputs */
    const double Ls = (double)in->sliding_layers, win = (double)in->attention_window; /* |i - j| <= win */
    double M = 0, att = 0, att_win = 0, B = 0; /* attention: 4 H per (query, key) pair */
    for (int64_t k = 0; k < w->nb; k++) {
        B += (double)w->B[k];
        for (int64_t b = 0; b < w->B[k]; b++) {
            const double len = packed ? (double)(w->cu[k][b + 1] - w->cu[k][b]) : (double)w->T[k];
            M += len;
            att += 4.0 * len * len * H;
            for (double i = 0; Ls > 0 && i < len; i++)
                att_win += 4.0 * H * (fmin(i, win) + fmin(len - 1 - i, win) + 1);
        }
    }
    c->ops[BERT8_OP_QKV] = L * 2 * M * 3 * H * H;
    c->ops[BERT8_OP_ATTN_OUT] = L * 2 * M * H * H;
    c->ops[BERT8_OP_FFN_IN] = L * 2 * M * G * I * H;
    c->ops[BERT8_OP_FFN_OUT] = L * 2 * M * H * I;
    c->ops[BERT8_OP_ATTENTION] = (L - Ls) * att + Ls * att_win;
    c->ops[BERT8_OP_NORM] = L * 2 * 8 * M * H;
    c->ops[BERT8_OP_EMBED] = 11 * M * H;
    c->ops[BERT8_OP_QUANTIZE] = int8 && ffn_out_per_token ? L * 4 * M * I : 0; /* min, max, scale, round */
    c->ops[BERT8_OP_HEAD] = 2 * B * H * H;
    c->bytes[BERT8_OP_QKV] = L * (3 * H * H * wb + M * H * wb + M * 3 * H * 4);
    c->bytes[BERT8_OP_ATTN_OUT] = L * (H * H * wb + M * H * wb + 2 * M * H * 4);
    c->bytes[BERT8_OP_FFN_IN] = L * (G * I * H * wb + M * H * wb + G * M * I * wb);
    c->bytes[BERT8_OP_FFN_OUT] = L * (H * I * wb + M * I * wb + 2 * M * H * 4);
    c->bytes[BERT8_OP_ATTENTION] = L * (M * 3 * H * 4 + M * H * 4);
    c->bytes[BERT8_OP_NORM] = L * 2 * (2 * M * H * 4 + (int8 ? M * H : 0));
    c->bytes[BERT8_OP_EMBED] = 3 * M * H * 4;
    c->bytes[BERT8_OP_QUANTIZE] = int8 && ffn_out_per_token ? L * M * I * 5 : 0;
    c->bytes[BERT8_OP_HEAD] = H * H * 4 + B * H * 8;
    c->useful = c->ops[BERT8_OP_QKV] + c->ops[BERT8_OP_ATTENTION] + c->ops[BERT8_OP_ATTN_OUT] +
                c->ops[BERT8_OP_FFN_IN] + c->ops[BERT8_OP_FFN_OUT];
    /* INT8: each LayerNorm also writes the int8 input of the next Linear; it runs inside or after
     * the residual product and the profile charges it to "layernorm" (forward.c) */
    if (int8) c->bytes[BERT8_OP_NORM] += L * 2 * M * H;
}

static int64_t *read_lengths(const char *path, int64_t max_len, int64_t *n) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    int64_t cap = 1024, *v = malloc((size_t)cap * sizeof *v);
    long long x;
    *n = 0;
    while (v && fscanf(f, "%lld", &x) == 1) {
        if (x < 1 || x > max_len) {
            free(v);
            v = NULL;
            *n = -x;
            break;
        }
        if (*n == cap) {
            int64_t *nv = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (!nv) {
                free(v);
                v = NULL;
                break;
            }
            v = nv;
        }
        v[(*n)++] = x;
    }
    if (v && !feof(f)) { /* something that is not a number */
        free(v);
        v = NULL;
        *n = 0;
    }
    fclose(f);
    return v;
}

typedef struct timing {
    double *t;
    double med, best;
    double prof[BERT8_OP_COUNT];
} timing;

static void finish_timing(timing *x, long iters) {
    qsort(x->t, (size_t)iters, sizeof *x->t, cmp_double);
    x->med = x->t[iters / 2];
    x->best = x->t[0];
}

/* Each op's rate against the ceiling of the units it runs on (the INT8 products against the INT8
 * peak; everything else, attention in FP32 included, against the FP32 one), its share of the
 * pass's time, and the points of the pass's ceiling (INT8 or FP32) lost to it: how much higher
 * the whole pass's share of that ceiling would be if the op ran at the ceiling (a product) or took
 * no time (the rest: LayerNorm, quantization, embeddings, head, which the roofline does not count). */
static void print_roofline(const char *what, const opcost *c, const timing *x, long iters, double peak_int8,
                           double peak_fp32, bool int8, bool int8_attention) {
    printf("  roofline, %s (per pass: operations, minimum bytes, median time)\n", what);
    printf("    %-10s %9s %9s %9s %10s %8s %8s %8s %9s\n", "op", "GOP", "MB", "ms", "GOP/s", "% peak", "% time",
           "pts lost", "ops/byte");
    double sum = 0;
    for (int i = 0; i < BERT8_OP_COUNT; i++) sum += x->prof[i];
    const double ceiling = int8 ? peak_int8 : peak_fp32, reached = ceiling > 0 ? c->useful / x->med / 1e9 / ceiling : 0;
    for (int i = 0; i < BERT8_OP_COUNT; i++) {
        /* the profile sums every timed pass: its share of the median pass */
        const double t = sum > 0 ? x->prof[i] / sum * x->med : 0;
        const bool lin = i >= BERT8_OP_QKV && i <= BERT8_OP_FFN_OUT && i != BERT8_OP_ATTENTION;
        const bool att8 = i == BERT8_OP_ATTENTION && int8_attention; /* its products on int8 units */
        const double peak = (lin || att8) && int8 ? peak_int8 : peak_fp32;
        const double r = t > 0 ? c->ops[i] / t / 1e9 : 0;
        const bool useful = lin || i == BERT8_OP_ATTENTION;
        const double ideal = useful && ceiling > 0 ? c->ops[i] / ceiling / 1e9 : 0;
        const double without = x->med - t + ideal > 0 ? reached * x->med / (x->med - t + ideal) : 0;
        printf("    %-10s %9.3f %9.1f %9.2f %10.1f %7.1f%% %7.1f%% %8.1f %9.1f\n", bert8_op_name((bert8_op)i),
               c->ops[i] / 1e9, c->bytes[i] / 1e6, t * 1e3, r, peak > 0 ? 100 * r / peak : 0,
               sum > 0 ? 100 * x->prof[i] / sum : 0, 100 * (without - reached), c->bytes[i] > 0 ? c->ops[i] / c->bytes[i] : 0);
    }
    (void)iters;
}

/* The INT8 pass's roofline table as JSON: per op its ms, GOP/s, % of its ceiling, % of the time. */
static void json_roofline(const opcost *c, const timing *x, double peak_int8, double peak_fp32, bool int8_attention) {
    double sum = 0;
    for (int i = 0; i < BERT8_OP_COUNT; i++) sum += x->prof[i];
    printf(",\"int8_roofline\":{");
    for (int i = 0; i < BERT8_OP_COUNT; i++) {
        const double t = sum > 0 ? x->prof[i] / sum * x->med : 0;
        const bool lin = i >= BERT8_OP_QKV && i <= BERT8_OP_FFN_OUT && i != BERT8_OP_ATTENTION;
        const double peak = lin || (i == BERT8_OP_ATTENTION && int8_attention) ? peak_int8 : peak_fp32;
        const double r = t > 0 ? c->ops[i] / t / 1e9 : 0;
        printf("%s\"%s\":{\"gop\":%.4f,\"mb\":%.2f,\"ms\":%.3f,\"gops\":%.2f,\"pct_peak\":%.3f,\"pct_time\":%.3f}",
               i ? "," : "", bert8_op_name((bert8_op)i), c->ops[i] / 1e9, c->bytes[i] / 1e6, t * 1e3, r,
               peak > 0 ? 100 * r / peak : 0, sum > 0 ? 100 * x->prof[i] / sum : 0);
    }
    printf("}");
}

static bool draw(const char *path, const char *title, const opcost *cf, const timing *tf, const opcost *cq,
                 const timing *tq, const bert8_peaks *pk) {
    plot_point pts[2 * BERT8_OP_COUNT];
    size_t np = 0;
    double ymin = 1e30, ymax = 0, xmin = 1e30, xmax = 0;
    const opcost *cs[2] = {cf, cq};
    const timing *ts[2] = {tf, tq};
    for (int k = 0; k < 2; k++) {
        double sum = 0;
        for (int i = 0; i < BERT8_OP_COUNT; i++) sum += ts[k]->prof[i];
        for (int i = 0; i < BERT8_OP_COUNT; i++) {
            const double t = sum > 0 ? ts[k]->prof[i] / sum * ts[k]->med : 0;
            if (t <= 0 || cs[k]->ops[i] <= 0 || cs[k]->bytes[i] <= 0) continue;
            plot_point p = {cs[k]->ops[i] / cs[k]->bytes[i], cs[k]->ops[i] / t / 1e9, k ? 0xc0392b : 0x2471a3,
                            bert8_op_name((bert8_op)i)};
            pts[np++] = p;
            ymin = fmin(ymin, p.y), ymax = fmax(ymax, p.y), xmin = fmin(xmin, p.x), xmax = fmax(xmax, p.x);
        }
    }
    const double bw = pk->mem_gbps;
    ymax = fmax(ymax, fmax(pk->int8_gops, pk->fp32_gflops));
    xmin = pow(10, floor(log10(fmin(xmin, 0.1))));
    xmax = pow(10, ceil(log10(fmax(xmax, 1000))));
    ymin = pow(10, floor(log10(fmin(ymin, bw * xmin))));
    ymax = pow(10, ceil(log10(ymax * 1.5)));
    plot_line lines[3];
    size_t nl = 0;
    if (pk->int8_gops > 0) {
        lines[nl++] = (plot_line){pk->int8_gops / bw, pk->int8_gops, xmax, pk->int8_gops, 0xc0392b, "INT8 peak"};
    }
    if (pk->fp32_gflops > 0)
        lines[nl++] = (plot_line){pk->fp32_gflops / bw, pk->fp32_gflops, xmax, pk->fp32_gflops, 0x2471a3, "FP32 peak"};
    const double top = fmax(pk->int8_gops, pk->fp32_gflops);
    lines[nl++] = (plot_line){xmin, bw * xmin, top / bw, top, 0x555555, "memory"};
    plot p = {title, "arithmetic intensity (operations per byte)", "GOP/s", xmin, xmax, ymin, ymax, lines, nl, pts, np};
    char err[256];
    if (!plot_write(&p, path, err, sizeof err)) {
        cli_error("bench", "%s", err);
        return false;
    }
    return true;
}

int cmd_bench(int argc, char **argv) {
    const char *C = "bench";
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (cli_flag(&a, "--help") || cli_flag(&a, "-h")) {
        printf("usage: bert8 bench MODEL_DIR [--batch B] [--seq S] [--threads T] [--scheme static|dynamic]\n"
               "         [--alpha A|auto|none] [--attention fp32|int8] [--embeddings fp32|int8] [--ffn-out dynamic|static] [--ffn-in dynamic|static]\n"
               "         [--weight-bits 7|8] [--outliers N]\n"
               "         [--calib FILE [--column C]] [--samples N]\n"
               "         [--iters N]\n"
               "         [--lengths FILE] [--roofline [--plot FILE.svg|png]] [--json]\n"
               "  --lengths FILE  one token count per line; batches of B consecutive lengths, timed\n"
               "                  padding-free and padded (the same batches padded to their longest)\n"
               "  --roofline      measures the FP32, INT8 and memory ceilings and prints each op's rate\n"
               "                  (without MODEL_DIR: the ceilings only)\n");
        return 0;
    }
    const char *bs = cli_opt(&a, "--batch"), *ss = cli_opt(&a, "--seq"), *th = cli_opt(&a, "--threads"),
               *lora_task = cli_opt(&a, "--lora-task");
    const char *scheme_s = cli_opt(&a, "--scheme"), *calib = cli_opt(&a, "--calib"), *it = cli_opt(&a, "--iters");
    const char *alpha_s = cli_opt(&a, "--alpha"), *columns = cli_opt(&a, "--column");
    const char *ffn_out = cli_opt(&a, "--ffn-out"), *ffn_in = cli_opt(&a, "--ffn-in");
    const char *samples_s = cli_opt(&a, "--samples"), *lengths = cli_opt(&a, "--lengths"), *plot_path = cli_opt(&a, "--plot");
    const char *att = cli_opt(&a, "--attention"), *emb = cli_opt(&a, "--embeddings");
    const char *wbits = cli_opt(&a, "--weight-bits"), *outl = cli_opt(&a, "--outliers");
    bool json = cli_flag(&a, "--json"), roofline = cli_flag(&a, "--roofline") || plot_path;
    const char *dir = cli_positional(&a), *left = cli_leftover(&a);
    if (left) return cli_error(C, "unknown argument \"%s\"", left);
    long B = 8, S = 128, threads = bert8_physical_cores(), iters = 0;
    if (bs && !cli_int(C, "--batch", bs, 1, 4096, &B)) return 1;
    if (ss && !cli_int(C, "--seq", ss, 1, 65536, &S)) return 1;
    if (th && !cli_int(C, "--threads", th, 1, 1024, &threads)) return 1;
    if (it && !cli_int(C, "--iters", it, 1, 100000, &iters)) return 1;
    long samples = 256;
    if (samples_s && !cli_int(C, "--samples", samples_s, 1, 10000000, &samples)) return 1;
    bert8_quant_params p = bert8_default_quant_params();
    if (!parse_scheme(C, scheme_s, &p.scheme) || !parse_alpha(C, alpha_s, &p.alpha, &p.smooth) ||
        !parse_attention(C, att, &p.int8_attention) || !parse_embeddings(C, emb, &p.int8_embeddings) ||
        !parse_weight_bits(C, wbits, &p.weight_bits) || !parse_ffn_out(C, ffn_out, &p.ffn_out_per_token) ||
        !parse_ffn_in(C, ffn_in, &p.ffn_in_per_token) || !parse_outliers(C, outl, &p.outliers))
        return 1;
    if (!dir && roofline && !plot_path) {
        /* no model: the machine's ceilings only */
        bert8_peaks pk0;
        if (bert8_measure_peaks((int)threads, &pk0)) return cli_error(C, "out of memory");
        if (json)
            printf("{\"peaks\":{\"threads\":%d,\"fp32_gflops\":%.2f,\"int8_gops\":%.2f,\"mem_gbps\":%.2f,"
                   "\"int8_vnni_gops\":%.2f,\"int8_amx_gops\":%.2f,\"int8_avx2_gops\":%.2f},"
                   "\"fp32_gflops_per_core\":%.2f,\"int8_gops_per_core\":%.2f}\n",
                   pk0.threads, pk0.fp32_gflops, pk0.int8_gops, pk0.mem_gbps, pk0.int8_vnni_gops, pk0.int8_amx_gops,
                   pk0.int8_avx2_gops, pk0.fp32_gflops / pk0.threads, pk0.int8_gops / pk0.threads);
        else
            printf("peaks on %d threads: FP32 %.1f GFLOP/s (%.1f per core), INT8 %.1f GOP/s (%.1f per core; "
                   "vpdpbusd %.1f, AMX %.1f, vpmaddwd %.1f), memory %.1f GB/s\n", pk0.threads, pk0.fp32_gflops,
                   pk0.fp32_gflops / pk0.threads, pk0.int8_gops, pk0.int8_gops / pk0.threads, pk0.int8_vnni_gops,
                   pk0.int8_amx_gops, pk0.int8_avx2_gops, pk0.mem_gbps);
        return 0;
    }
    bert8_model *m = cli_load_model(C, dir, (int)threads, lora_task), *q = NULL;
    if (!m) return 1;
    const bert8_model_info *info = bert8_model_get_info(m);
    resolve_attention(m, &p.int8_attention);
    int rc = 1;
    bert8_tokenizer *tok = NULL;
    bert8_encoding *encs = NULL;
    bert8_batch *batches = NULL, rnd = {0};
    int64_t nb = 0, *lens = NULL, nlen = 0;
    texts t = {0};
    work w = {0};
    bert8_session *sf = NULL, *sq = NULL;
    timing tf = {0}, tq = {0}, tfp = {0}, tqp = {0};
    char err[1024];
    const char *calib_desc;
    if (info->quantized) {
        cli_error(C, "%s is already INT8: bench takes an FP32 folder and quantizes it in memory", dir);
        goto out;
    }
    if (lengths) {
        if (!(lens = read_lengths(lengths, info->max_seq_len, &nlen)) || nlen < 1) {
            if (nlen < 0)
                cli_error(C, "%s: length %lld is outside [1, %lld]", lengths, (long long)-nlen, (long long)info->max_seq_len);
            else
                cli_error(C, "%s: expected one token count per line", lengths);
            goto out;
        }
        S = 0;
        for (int64_t i = 0; i < nlen; i++) S = lens[i] > S ? lens[i] : S;
    } else {
        if (S > info->max_seq_len) {
            cli_error(C, "--seq %ld exceeds the model's %lld positions", S, (long long)info->max_seq_len);
            goto out;
        }
        if (!(lens = malloc((size_t)B * sizeof *lens))) goto oom;
        for (long i = 0; i < B; i++) lens[i] = S;
        nlen = B;
    }
    if (!work_make(&w, lens, nlen, B, info->vocab_size)) goto oom;
    /* calibration */
    bool have_tok = bert8_tokenizer_load(dir, &tok, err, sizeof err) == BERT8_OK;
    if (calib) {
        if (!have_tok) {
            cli_error(C, "--calib needs the model's tokenizer: %s", err);
            goto out;
        }
        if (read_texts(C, calib, columns, samples, &t)) goto out;
        calib_desc = calib;
    } else if (have_tok) {
        for (size_t i = 0; SAMPLE_TEXT[i]; i++) texts_add(&t, SAMPLE_TEXT[i], NULL);
        calib_desc = "built-in sample text";
    } else {
        calib_desc = "the timing batch's token ids (the folder has no tokenizer)";
    }
    if (have_tok) {
        if (make_batches(C, tok, &t, S < info->max_seq_len ? S : info->max_seq_len, 16, &encs, &batches, &nb))
            goto out;
    } else {
        rnd = (bert8_batch){w.B[0], w.T[0], w.ids[0], w.varlen ? w.mask[0] : NULL, NULL};
        batches = &rnd;
        nb = 1;
    }
    p.max_samples = samples;
    if (!json)
        fprintf(stderr, "bench: quantizing %s (%s, %s attention), calibration on %s\n", dir,
                p.scheme == BERT8_SCHEME_STATIC ? "static" : "dynamic", p.int8_attention ? "INT8" : "FP32", calib_desc);
    bert8_status st = bert8_quantize(m, batches, (size_t)nb, &p, &q, err, sizeof err);
    if (batches == &rnd) batches = NULL;
    if (st) {
        cli_error(C, "%s (%s)", err, bert8_status_string(st));
        goto out;
    }
    /* what the quantized model runs: an architecture may keep its attention FP32 whatever was asked
     * (DeBERTa's disentangled attention), and the report and the roofline name what ran */
    bool att8 = false;
    for (int64_t u = 0; u < bert8_model_unit_count(q); u++) {
        bert8_unit_info ui;
        if (!bert8_model_unit(q, u, &ui) && !strcmp(ui.kind, "attention") && ui.mode != BERT8_UNIT_FP32) att8 = true;
    }
    p.int8_attention = att8;
    bool ffn_out_pt = false; /* FFN-out's input quantized per token (a pass of its own) */
    for (int64_t u = 0; u < bert8_model_unit_count(q); u++) {
        bert8_unit_info ui;
        if (!bert8_model_unit(q, u, &ui) && !strcmp(ui.kind, "ffn_out") && ui.mode == BERT8_UNIT_INT8_DYNAMIC)
            ffn_out_pt = true;
    }
    if (bert8_session_create(m, &sf) || bert8_session_create(q, &sq)) goto oom;
    /* warm-up (allocations), then timing */
    if (run_pass(sf, &w, true) < 0 || run_pass(sq, &w, true) < 0 || run_pass(sf, &w, false) < 0 ||
        run_pass(sq, &w, false) < 0) {
        cli_error(C, "forward failed: %s / %s", bert8_session_last_error(sf), bert8_session_last_error(sq));
        goto out;
    }
    double one = run_pass(sf, &w, false);
    if (iters == 0) iters = (long)(20.0 / (one * (w.varlen ? 3.0 : 1.5))); /* about 20 s of timing in all */
    if (iters < 3) iters = 3;
    if (iters > 50) iters = 50;
    timing *all[4] = {&tf, &tq, &tfp, &tqp};
    for (int k = 0; k < 4; k++)
        if (!(all[k]->t = malloc((size_t)iters * sizeof(double)))) goto oom;
    /* padded first: the fixed-shape figures; with --lengths, also the padding-free passes */
    const int modes = w.varlen ? 2 : 1;
    for (int mode = 0; mode < modes; mode++) {
        const bool packed = mode == 1;
        timing *xf = packed ? &tfp : &tf, *xq = packed ? &tqp : &tq;
        bert8_session_set_profiling(sf, 1);
        bert8_session_set_profiling(sq, 1);
        /* FP32 and INT8 alternate in blocks of a few passes, with a pause before each block: the
         * FP32 passes run oneDNN on OpenMP, whose idle threads keep spinning for milliseconds after
         * a pass, and an INT8 pass (bert8's own pool) started at once would share the cores with
         * them (pass by pass, all-MiniLM-L6-v2 INT8 was timed at half its speed at 1 x 128). */
        for (long r = 0; r < iters; r += BENCH_BLOCK) {
            const long n = iters - r < BENCH_BLOCK ? iters - r : BENCH_BLOCK;
            pause_ms(BENCH_PAUSE_MS);
            for (long k = 0; k < n; k++) xf->t[r + k] = run_pass(sf, &w, packed);
            pause_ms(BENCH_PAUSE_MS);
            for (long k = 0; k < n; k++) xq->t[r + k] = run_pass(sq, &w, packed);
        }
        bert8_session_get_profile(sf, xf->prof);
        bert8_session_get_profile(sq, xq->prof);
        finish_timing(xf, iters);
        finish_timing(xq, iters);
    }
    const char *scheme = p.weight_bits == 7 ? (p.scheme == BERT8_SCHEME_STATIC ? "static (7-bit weights)"
                                                                              : "dynamic (7-bit weights)")
                                            : p.scheme == BERT8_SCHEME_STATIC ? "static" : "dynamic";
    const char *scheme_key = p.scheme == BERT8_SCHEME_STATIC ? "static" : "dynamic";
    const double seqs = (double)w.seqs;
    opcost cf, cq;
    cost(info, &w, false, false, false, &cf);
    cost(info, &w, false, true, ffn_out_pt, &cq);
    const double gop_seq = cf.useful / seqs / 1e9;
    if (lengths) {
        printf("bert8 bench: %s, %lld layers, hidden %lld; %lld sequences from %s (longest %ld) in batches of %ld, "
               "%ld thread(s), %s INT8, %ld iterations (FP32 and INT8 in alternate blocks of %d)\n",
               dir, (long long)info->num_layers, (long long)info->hidden_size, (long long)w.seqs, lengths, S, B, threads,
               scheme, iters, BENCH_BLOCK);
    } else {
        printf("bert8 bench: %s, %lld layers, hidden %lld; batch %ld x seq %ld, %ld thread(s), %s INT8, %ld iterations "
               "(FP32 and INT8 in alternate blocks of %d)\n",
               dir, (long long)info->num_layers, (long long)info->hidden_size, B, S, threads, scheme, iters, BENCH_BLOCK);
    }
    const char *pad = w.varlen ? " padded" : "";
    printf("  fp32%s: %8.2f seq/s  (median %.1f ms, best %.1f ms, %.1f GFLOP/s)\n", pad, seqs / tf.med, tf.med * 1e3,
           tf.best * 1e3, gop_seq * seqs / tf.med);
    printf("  int8%s: %8.2f seq/s  (median %.1f ms, best %.1f ms, %.1f GOP/s)\n", pad, seqs / tq.med, tq.med * 1e3,
           tq.best * 1e3, gop_seq * seqs / tq.med);
    printf("  speedup int8 / fp32%s: %.2fx (median), %.2fx (best)\n", pad, tf.med / tq.med, tf.best / tq.best);
    if (w.varlen) {
        printf("  fp32 padding-free: %8.2f seq/s  (median %.1f ms)\n", seqs / tfp.med, tfp.med * 1e3);
        printf("  int8 padding-free: %8.2f seq/s  (median %.1f ms)\n", seqs / tqp.med, tqp.med * 1e3);
        printf("  padding-free / padded: fp32 %.2fx, int8 %.2fx; padding-free int8 / padded fp32 %.2fx\n",
               tf.med / tfp.med, tq.med / tqp.med, tf.med / tqp.med);
    }
    double sumf = 0, sumq = 0, sumfp = 0, sumqp = 0;
    for (int i = 0; i < BERT8_OP_COUNT; i++) sumf += tf.prof[i], sumq += tq.prof[i];
    if (w.varlen)
        for (int i = 0; i < BERT8_OP_COUNT; i++) sumfp += tfp.prof[i], sumqp += tqp.prof[i];
    printf("  time share per op%s    fp32     int8%s\n", pad, w.varlen ? "  padding-free: fp32     int8" : "");
    for (int i = 0; i < BERT8_OP_COUNT; i++) {
        printf("    %-16s %7.1f%% %7.1f%%", bert8_op_name((bert8_op)i), 100 * tf.prof[i] / (sumf > 0 ? sumf : 1),
               100 * tq.prof[i] / (sumq > 0 ? sumq : 1));
        if (w.varlen)
            printf("                %7.1f%% %7.1f%%", 100 * tfp.prof[i] / (sumfp > 0 ? sumfp : 1),
                   100 * tqp.prof[i] / (sumqp > 0 ? sumqp : 1));
        printf("\n");
    }
    bert8_peaks pk = {0};
    if (roofline) {
        if (bert8_measure_peaks((int)threads, &pk)) goto oom;
        printf("  ceilings on %d thread(s): FP32 %.1f GFLOP/s, INT8 %.1f GOP/s (%s), memory %.1f GB/s\n",
               pk.threads, pk.fp32_gflops, pk.int8_gops,
               pk.int8_amx_gops > 0 ? "AMX" : pk.int8_vnni_gops > 0 ? "vpdpbusd" : "vpmaddwd", pk.mem_gbps);
        printf("  roofline: %.3f GOP per sequence%s; FP32 ceiling %.2f seq/s (%.1f%% reached), INT8 ceiling %.2f "
               "seq/s (%.1f%% reached)\n",
               gop_seq, pad, pk.fp32_gflops / gop_seq, 100 * (seqs / tf.med) / (pk.fp32_gflops / gop_seq),
               pk.int8_gops / gop_seq, pk.int8_gops > 0 ? 100 * (seqs / tq.med) / (pk.int8_gops / gop_seq) : 0);
        print_roofline(w.varlen ? "fp32 padded" : "fp32", &cf, &tf, iters, pk.int8_gops, pk.fp32_gflops, false, false);
        print_roofline(w.varlen ? "int8 padded" : "int8", &cq, &tq, iters, pk.int8_gops, pk.fp32_gflops, true,
                       p.int8_attention);
        if (w.varlen) { /* the same operations counted over the real tokens only */
            opcost cfp, cqp;
            cost(info, &w, true, false, false, &cfp);
            cost(info, &w, true, true, ffn_out_pt, &cqp);
            const double gop_pf = cfp.useful / seqs / 1e9;
            printf("  roofline padding-free: %.3f GOP per sequence; FP32 ceiling %.2f seq/s (%.1f%% reached), INT8 "
                   "ceiling %.2f seq/s (%.1f%% reached)\n",
                   gop_pf, pk.fp32_gflops / gop_pf, 100 * (seqs / tfp.med) / (pk.fp32_gflops / gop_pf),
                   pk.int8_gops / gop_pf, pk.int8_gops > 0 ? 100 * (seqs / tqp.med) / (pk.int8_gops / gop_pf) : 0);
            print_roofline("fp32 padding-free", &cfp, &tfp, iters, pk.int8_gops, pk.fp32_gflops, false, false);
            print_roofline("int8 padding-free", &cqp, &tqp, iters, pk.int8_gops, pk.fp32_gflops, true,
                           p.int8_attention);
        }
        if (plot_path) {
            char title[300];
            snprintf(title, sizeof title, "bert8 roofline: %lld layers, hidden %lld, %s, %ld threads",
                     (long long)info->num_layers, (long long)info->hidden_size, lengths ? "length mix" : "fixed batch",
                     threads);
            if (!draw(plot_path, title, &cf, &tf, &cq, &tq, &pk)) goto out;
            if (!json) fprintf(stderr, "bench: wrote %s\n", plot_path);
        }
    }
    if (json) {
        printf("{\"model\":");
        cli_print_json_string(stdout, dir);
        printf(",\"batch\":%ld,\"seq\":%ld,\"threads\":%ld,\"scheme\":\"%s\",\"weight_bits\":%d,\"iterations\":%ld,"
               "\"sequences\":%lld,\"gop_per_sequence\":%.4f,\"attention\":\"%s\"",
               B, S, threads, scheme_key, p.weight_bits ? p.weight_bits : 8, iters, (long long)w.seqs, gop_seq, p.int8_attention ? "int8" : "fp32");
        if (lengths) {
            printf(",\"lengths\":");
            cli_print_json_string(stdout, lengths);
            printf(",\"fp32_seq_per_s\":%.4f,\"int8_seq_per_s\":%.4f,\"fp32_padded_seq_per_s\":%.4f,"
                   "\"int8_padded_seq_per_s\":%.4f,\"speedup\":%.4f,\"speedup_padded\":%.4f",
                   seqs / tfp.med, seqs / tqp.med, seqs / tf.med, seqs / tq.med, tfp.med / tqp.med, tf.med / tq.med);
        } else {
            printf(",\"fp32_seq_per_s\":%.4f,\"int8_seq_per_s\":%.4f,\"speedup\":%.4f,\"speedup_best\":%.4f,"
                   "\"fp32_gflops\":%.2f,\"int8_gops\":%.2f",
                   seqs / tf.med, seqs / tq.med, tf.med / tq.med, tf.best / tq.best, gop_seq * seqs / tf.med,
                   gop_seq * seqs / tq.med);
        }
        printf(",\"fp32_op_share\":{");
        for (int i = 0; i < BERT8_OP_COUNT; i++)
            printf("%s\"%s\":%.4f", i ? "," : "", bert8_op_name((bert8_op)i), tf.prof[i] / (sumf > 0 ? sumf : 1));
        printf("},\"int8_op_share\":{");
        for (int i = 0; i < BERT8_OP_COUNT; i++)
            printf("%s\"%s\":%.4f", i ? "," : "", bert8_op_name((bert8_op)i), tq.prof[i] / (sumq > 0 ? sumq : 1));
        printf("}");
        if (roofline)
            printf(",\"peaks\":{\"threads\":%d,\"fp32_gflops\":%.2f,\"int8_gops\":%.2f,\"mem_gbps\":%.2f,"
                   "\"int8_vnni_gops\":%.2f,\"int8_amx_gops\":%.2f,\"int8_avx2_gops\":%.2f},"
                   "\"fp32_gflops_per_core\":%.2f,\"int8_gops_per_core\":%.2f",
                   pk.threads, pk.fp32_gflops, pk.int8_gops, pk.mem_gbps, pk.int8_vnni_gops, pk.int8_amx_gops,
                   pk.int8_avx2_gops, pk.fp32_gflops / pk.threads, pk.int8_gops / pk.threads);
        if (roofline && !w.varlen) json_roofline(&cq, &tq, pk.int8_gops, pk.fp32_gflops, p.int8_attention);
        printf("}\n");
    }
    rc = 0;
    goto out;
oom:
    cli_error(C, "out of memory");
out:
    for (int k = 0; k < 4; k++) free((k == 0 ? &tf : k == 1 ? &tq : k == 2 ? &tfp : &tqp)->t);
    bert8_session_free(sf);
    bert8_session_free(sq);
    free_batches(encs, batches, nb);
    bert8_tokenizer_free(tok);
    bert8_model_free(q);
    bert8_model_free(m);
    texts_free(&t);
    work_free(&w);
    free(lens);
    return rc;
}
