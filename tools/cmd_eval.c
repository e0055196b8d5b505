/* cmd_eval.c: `bert8 eval`: runs a model over a task's evaluation set and prints the task's
 * standard metric (text, or one JSON object with --json).
 *
 *   sst2   accuracy                 sentence<TAB>label (0 negative, 1 positive)
 *   xnli   accuracy                 label, sentence1_<lang>, sentence2_<lang> (lang: en if present)
 *   mrpc   accuracy, F1 of class 1  Quality, #1 String, #2 String
 *   stsb   Spearman, Pearson        sentence1, sentence2, score (a regression head)
 *   squad  exact match, F1          SQuAD v1.1 JSON, official normalisation
 *
 * Metrics are fractions in [0, 1] (SQuAD's script prints percentages: multiply by 100).
 * Class ids map to the task's labels through id2label when every model label names one
 * (negative/positive, not_equivalent/equivalent, entailment/neutral/contradiction), else by
 * id order. Pairs are encoded with longest_first truncation at --max-length (default 128).
 * SQuAD runs as `bert8 qa` does (only_second windows), scoring spans by start+end logit
 * (the reference post-processing; --score prob for the product of probabilities). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "metrics.h"
#include "tasks.h"
#include "text_io.h"
#include "text_runner.h"

#define CMD "eval"

typedef enum task_kind { TASK_SST2, TASK_XNLI, TASK_MRPC, TASK_STSB, TASK_SQUAD } task_kind;

typedef struct eval_opts {
    task_kind task;
    const char *task_name, *data, *split_path, *lang;
    int64_t limit, row_lo, row_hi; /* rows [row_lo, row_hi) of the data file; row_hi -1: all */
    long batch, threads, max_len, stride, max_answer;
    bool json, progress, prob;
} eval_opts;

static const char *const SST2_LABELS[] = {"negative", "positive"};
static const char *const MRPC_LABELS[] = {"not_equivalent", "equivalent"};
static const char *const XNLI_LABELS[] = {"entailment", "neutral", "contradiction"};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Lower-case letters and digits only, so "NOT_EQUIVALENT" and "not equivalent" agree. */
static void label_key(const char *s, char *out, size_t n) {
    size_t k = 0;
    for (; s && *s && k + 1 < n; s++)
        if (isalnum((unsigned char)*s)) out[k++] = (char)tolower((unsigned char)*s);
    out[k] = 0;
}

/* map[class id] = task label index: by name when every model label names a distinct task
 * label, else the identity. Returns false when the label counts differ. */
static bool map_labels(const bert8_model *m, int64_t L, const char *const *names, int nt,
                       int *map) {
    if (L != nt) {
        cli_error(CMD, "the model has %lld labels but the task has %d", (long long)L, nt);
        return false;
    }
    bool by_name = true;
    int used = 0;
    for (int j = 0; j < nt; j++) {
        char a[64], b[64];
        label_key(bert8_model_label(m, j), a, sizeof a);
        map[j] = -1;
        for (int k = 0; k < nt; k++) {
            label_key(names[k], b, sizeof b);
            if (!strcmp(a, b) && !(used & (1 << k))) {
                map[j] = k;
                used |= 1 << k;
                break;
            }
        }
        by_name = by_name && map[j] >= 0;
    }
    bool identity = true;
    for (int j = 0; j < nt; j++) {
        if (!by_name) map[j] = j;
        identity = identity && map[j] == j;
    }
    if (!identity)
        fprintf(stderr, "bert8 eval: model labels are mapped to the task's labels by name\n");
    return true;
}

static bool parse_int(const char *s, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    while (*end == ' ')
        end++;
    if (errno || end == s || *end) return false;
    *out = v;
    return true;
}

/* ---- sequence tasks (sst2, xnli, mrpc, stsb) --------------------------------------------- */

typedef struct seq_set {
    const char **a, **b;
    int *gold;     /* class tasks */
    double *score; /* stsb */
    int64_t n;
} seq_set;

static void seq_free(seq_set *s) {
    free(s->a);
    free(s->b);
    free(s->gold);
    free(s->score);
    memset(s, 0, sizeof *s);
}

static int64_t need_col(const tsv_table *t, const char *path, const char *name) {
    int64_t c = tsv_col(t, name);
    if (c < 0) cli_error(CMD, "%s has no column \"%s\" in its header", path, name);
    return c;
}

/* The rows split.json keeps ("eval_index": values of the index column), when it lists any. */
static bool split_index(const cJSON *split, const tsv_table *t, const eval_opts *o, bool *keep) {
    const cJSON *idx = cJSON_GetObjectItemCaseSensitive(split, "eval_index");
    if (!idx) {
        fprintf(stderr, "bert8 eval: %s lists no eval_index; scoring every row\n", o->split_path);
        for (int64_t r = 0; r < t->rows; r++)
            keep[r] = true;
        return true;
    }
    int64_t ci = need_col(t, o->data, "index");
    if (ci < 0 || !cJSON_IsArray(idx)) {
        if (ci >= 0) cli_error(CMD, "%s: eval_index is not an array", o->split_path);
        return false;
    }
    for (int64_t r = 0; r < t->rows; r++)
        keep[r] = false;
    int k = 0;
    for (const cJSON *v = idx->child; v; v = v->next, k++) {
        if (!cJSON_IsNumber(v))
            return cli_error(CMD, "%s: eval_index[%d] is not a number", o->split_path, k), false;
        bool found = false;
        for (int64_t r = 0; r < t->rows; r++) {
            long long x;
            if (parse_int(tsv_cell(t, r, ci), &x) && x == (long long)v->valuedouble)
                keep[r] = found = true;
        }
        if (!found)
            return cli_error(CMD, "%s: eval_index[%d] = %g is not in %s", o->split_path, k,
                             v->valuedouble, o->data),
                   false;
    }
    return true;
}

static bool load_seq(const eval_opts *o, tsv_table *t, const cJSON *split, seq_set *s) {
    char err[1024];
    memset(s, 0, sizeof *s);
    if (!tsv_load(o->data, t, err, sizeof err)) return cli_error(CMD, "%s", err), false;
    int64_t ca = -1, cb = -1, cl = -1;
    char n1[64], n2[64];
    switch (o->task) {
    case TASK_SST2:
        ca = need_col(t, o->data, "sentence"), cl = need_col(t, o->data, "label");
        if (ca < 0 || cl < 0) return false;
        break;
    case TASK_MRPC:
        ca = need_col(t, o->data, "#1 String"), cb = need_col(t, o->data, "#2 String");
        cl = need_col(t, o->data, "Quality");
        if (ca < 0 || cb < 0 || cl < 0) return false;
        break;
    case TASK_STSB:
        ca = need_col(t, o->data, "sentence1"), cb = need_col(t, o->data, "sentence2");
        cl = need_col(t, o->data, "score");
        if (ca < 0 || cb < 0 || cl < 0) return false;
        break;
    case TASK_XNLI: {
        const cJSON *cols = split ? cJSON_GetObjectItemCaseSensitive(split, "columns") : NULL;
        if (o->lang) {
            snprintf(n1, sizeof n1, "sentence1_%s", o->lang);
            snprintf(n2, sizeof n2, "sentence2_%s", o->lang);
        } else if (cJSON_GetArraySize(cols) == 2 && cJSON_IsString(cols->child) &&
                   cJSON_IsString(cols->child->next)) {
            snprintf(n1, sizeof n1, "%s", cols->child->valuestring);
            snprintf(n2, sizeof n2, "%s", cols->child->next->valuestring);
        } else if (tsv_col(t, "sentence1_en") >= 0) {
            snprintf(n1, sizeof n1, "sentence1_en");
            snprintf(n2, sizeof n2, "sentence2_en");
        } else { /* the first language the file has */
            snprintf(n1, sizeof n1, "sentence1");
            for (int64_t c = 0; c < t->cols; c++)
                if (!strncmp(t->cells[c], "sentence1_", 10)) {
                    snprintf(n1, sizeof n1, "%s", t->cells[c]);
                    break;
                }
            snprintf(n2, sizeof n2, "sentence2%s", n1 + 9);
        }
        ca = need_col(t, o->data, n1), cb = need_col(t, o->data, n2),
        cl = need_col(t, o->data, "label");
        if (ca < 0 || cb < 0 || cl < 0) return false;
        break;
    }
    case TASK_SQUAD:
        return false;
    }
    bool *keep = calloc((size_t)t->rows + 1, sizeof *keep);
    s->a = calloc((size_t)t->rows + 1, sizeof *s->a);
    s->b = calloc((size_t)t->rows + 1, sizeof *s->b);
    s->gold = calloc((size_t)t->rows + 1, sizeof *s->gold);
    s->score = calloc((size_t)t->rows + 1, sizeof *s->score);
    bool ok = keep && s->a && s->b && s->gold && s->score;
    if (!ok) cli_error(CMD, "out of memory");
    if (ok && split && o->task == TASK_STSB)
        ok = split_index(split, t, o, keep);
    else if (ok)
        for (int64_t r = 0; r < t->rows; r++)
            keep[r] = true;
    for (int64_t r = 0; ok && r < t->rows && (o->limit <= 0 || s->n < o->limit); r++) {
        if (!keep[r] || r < o->row_lo || (o->row_hi >= 0 && r >= o->row_hi)) continue;
        const char *lab = tsv_cell(t, r, cl);
        int64_t i = s->n;
        s->a[i] = tsv_cell(t, r, ca);
        s->b[i] = cb >= 0 ? tsv_cell(t, r, cb) : NULL;
        long long v;
        if (o->task == TASK_STSB) {
            char *end;
            s->score[i] = strtod(lab, &end);
            if (end == lab || *end || !isfinite(s->score[i]))
                ok = !cli_error(CMD, "%s:%lld: score \"%s\" is not a number", o->data,
                                (long long)t->line[r], lab);
        } else if (o->task == TASK_XNLI) {
            s->gold[i] = -1;
            for (int k = 0; k < 3; k++)
                if (!strcmp(lab, XNLI_LABELS[k])) s->gold[i] = k;
            if (s->gold[i] < 0)
                ok = !cli_error(CMD,
                                "%s:%lld: label \"%s\" is not entailment, neutral or contradiction",
                                o->data, (long long)t->line[r], lab);
        } else if (!parse_int(lab, &v) || (v != 0 && v != 1)) {
            ok = !cli_error(CMD, "%s:%lld: label \"%s\" is not 0 or 1", o->data,
                            (long long)t->line[r], lab);
        } else {
            s->gold[i] = (int)v;
        }
        s->n++;
    }
    free(keep);
    if (ok && s->n == 0) ok = !cli_error(CMD, "no examples selected from %s", o->data);
    return ok;
}

/* Examples run in order of text length so a batch pads little (as the trainer's batcher
 * does); the index breaks ties so the order is deterministic. */
typedef struct len_idx {
    size_t len;
    int64_t i;
} len_idx;

static int by_length(const void *x, const void *y) {
    const len_idx *a = x, *b = y;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return a->i < b->i ? -1 : (a->i > b->i);
}

static int eval_seq(const eval_opts *o, text_runner *r, const cJSON *split) {
    tsv_table t;
    seq_set s;
    int rc = 1;
    float *logits = NULL;
    int *pred = NULL;
    double *score = NULL;
    int64_t *order = NULL;
    bert8_text *ta = NULL, *tb = NULL;
    float *lb = NULL;
    if (!load_seq(o, &t, split, &s)) goto out;
    const int64_t L = r->info->num_labels;
    const char *const *names = o->task == TASK_SST2   ? SST2_LABELS
                               : o->task == TASK_MRPC ? MRPC_LABELS
                                                      : XNLI_LABELS;
    int nt = o->task == TASK_XNLI ? 3 : 2, map[3] = {0, 1, 2};
    if (o->task == TASK_STSB && L != 1) {
        cli_error(CMD, "stsb needs a regression head (num_labels 1); the model has %lld labels",
                  (long long)L);
        goto out;
    }
    if (o->task != TASK_STSB && !map_labels(r->model, L, names, nt, map)) goto out;
    size_t cnt;
    if (__builtin_mul_overflow((size_t)s.n, (size_t)L * sizeof(float), &cnt) ||
        !(logits = malloc(cnt)) || !(pred = calloc((size_t)s.n, sizeof *pred)) ||
        !(score = calloc((size_t)s.n, sizeof *score)) ||
        !(order = malloc((size_t)s.n * sizeof *order)) ||
        !(ta = malloc((size_t)o->batch * sizeof *ta)) ||
        !(tb = malloc((size_t)o->batch * sizeof *tb)) ||
        !(lb = malloc((size_t)o->batch * (size_t)L * sizeof *lb))) {
        cli_error(CMD, "out of memory");
        goto out;
    }
    len_idx *li = malloc((size_t)s.n * sizeof *li);
    if (!li) {
        cli_error(CMD, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < s.n; i++)
        li[i] = (len_idx){strlen(s.a[i]) + (s.b[i] ? strlen(s.b[i]) : 0), i};
    qsort(li, (size_t)s.n, sizeof *li, by_length);
    for (int64_t i = 0; i < s.n; i++)
        order[i] = li[i].i;
    free(li);
    bert8_run_options ro = bert8_default_run_options();
    ro.max_length = o->max_len;
    text_progress pg;
    text_progress_start(&pg, o->task_name, s.n, o->progress);
    double t0 = now_s();
    for (int64_t i0 = 0; i0 < s.n; i0 += o->batch) {
        int64_t nb = s.n - i0 < o->batch ? s.n - i0 : o->batch;
        for (int64_t k = 0; k < nb; k++) {
            const char *x = s.a[order[i0 + k]], *y = s.b[order[i0 + k]];
            ta[k] = (bert8_text){x, strlen(x)};
            tb[k] = (bert8_text){y, y ? strlen(y) : 0};
        }
        bert8_status st = bert8_classify(r->pl, nb, ta, o->task == TASK_SST2 ? NULL : tb, &ro, BERT8_SCORE_NONE, lb,
                                         r->err, sizeof r->err);
        for (int64_t k = 0; !st && k < nb; k++)
            memcpy(logits + order[i0 + k] * L, lb + k * L, (size_t)L * sizeof(float));
        if (st) {
            text_progress_end(&pg);
            cli_error(CMD, "a batch holding example %lld: %s", (long long)order[i0], r->err);
            goto out;
        }
        text_progress_update(&pg, i0 + nb);
    }
    text_progress_end(&pg);
    double secs = now_s() - t0;
    const char *name = o->task_name;
    if (o->task == TASK_STSB) {
        for (int64_t i = 0; i < s.n; i++)
            score[i] = logits[i];
        double sp = metric_spearman(score, s.score, (size_t)s.n),
               pe = metric_pearson(score, s.score, (size_t)s.n);
        if (o->json) {
            printf("{\"task\":\"%s\",\"n\":%lld,\"spearman\":", name, (long long)s.n);
            text_print_double(stdout, sp);
            printf(",\"pearson\":");
            text_print_double(stdout, pe);
        } else {
            printf("%s: n=%lld spearman=%.4f pearson=%.4f", name, (long long)s.n, sp, pe);
        }
    } else {
        float p[3];
        for (int64_t i = 0; i < s.n; i++)
            pred[i] = map[text_softmax(logits + i * L, L, p)];
        double acc = metric_accuracy(pred, s.gold, (size_t)s.n);
        int64_t right = 0;
        for (int64_t i = 0; i < s.n; i++)
            right += pred[i] == s.gold[i];
        metric_prf f = metric_binary_f1(pred, s.gold, (size_t)s.n, 1);
        if (o->json) {
            printf("{\"task\":\"%s\",\"n\":%lld,\"accuracy\":", name, (long long)s.n);
            text_print_double(stdout, acc);
            printf(",\"correct\":%lld", (long long)right);
            if (o->task == TASK_MRPC) {
                printf(",\"f1\":");
                text_print_double(stdout, f.f1);
                printf(",\"precision\":");
                text_print_double(stdout, f.precision);
                printf(",\"recall\":");
                text_print_double(stdout, f.recall);
            }
        } else {
            printf("%s: n=%lld accuracy=%.4f (%lld/%lld)", name, (long long)s.n, acc,
                   (long long)right, (long long)s.n);
            if (o->task == TASK_MRPC)
                printf(" f1=%.4f precision=%.4f recall=%.4f", f.f1, f.precision, f.recall);
        }
    }
    if (o->json) {
        printf(",\"seconds\":");
        text_print_double(stdout, round(secs * 1000) / 1000);
        printf(",\"quantized\":%s}\n", r->info->quantized ? "true" : "false");
    } else {
        printf(" [%.2f s]\n", secs);
    }
    rc = 0;
out:
    free(logits);
    free(pred);
    free(score);
    free(order);
    free(ta);
    free(tb);
    free(lb);
    seq_free(&s);
    tsv_free(&t);
    return rc;
}

/* ---- squad ----------------------------------------------------------------------------------- */

/* Predicts questions [i0, i0 + nb) into answers; a batch that fails is retried one question
 * at a time, and a question that still fails keeps found = 0 (an empty prediction). */
static void squad_batch(text_runner *r, const squad_set *s, int64_t i0, int64_t nb, const bert8_qa_options *qo,
                        bert8_qa_answer *ans, bert8_text *qs, bert8_text *cs, int64_t *failed) {
    for (int64_t i = 0; i < nb; i++) {
        const char *qq = s->q[i0 + i].question;
        while (*qq == ' ' || *qq == '\t' || *qq == '\n')
            qq++; /* run_qa strips leading blanks */
        qs[i] = (bert8_text){qq, strlen(qq)};
        cs[i] = (bert8_text){s->q[i0 + i].context, strlen(s->q[i0 + i].context)};
    }
    if (!bert8_qa(r->pl, nb, qs, cs, qo, ans, r->err, sizeof r->err)) return;
    if (nb == 1) {
        fprintf(stderr, "\nbert8 eval: question %s: %s (scored as an empty answer)\n", s->q[i0].id, r->err);
        (*failed)++;
        memset(ans, 0, sizeof *ans);
        return;
    }
    for (int64_t i = 0; i < nb; i++) squad_batch(r, s, i0 + i, 1, qo, ans + i, qs, cs, failed);
}

static int eval_squad(const eval_opts *o0, text_runner *r, const cJSON *split) {
    eval_opts o = *o0;
    squad_set s;
    char err[1024];
    int rc = 1;
    bert8_qa_answer *spans = NULL;
    bert8_text *qs = NULL, *cs = NULL;
    const char **titles = NULL;
    if (!squad_load(o.data, &s, err, sizeof err)) return cli_error(CMD, "%s", err);
    if (split) {
        const cJSON *arr =
            cJSON_IsArray(split) ? split : cJSON_GetObjectItemCaseSensitive(split, "eval_articles");
        if (!cJSON_IsArray(arr)) {
            cli_error(CMD, "%s has no \"eval_articles\" list of titles", o.split_path);
            goto out;
        }
        int64_t nt = cJSON_GetArraySize(arr), k = 0;
        if (!(titles = calloc((size_t)nt + 1, sizeof *titles))) goto oom;
        for (const cJSON *v = arr->child; v; v = v->next, k++) {
            if (!cJSON_IsString(v)) {
                cli_error(CMD, "%s: eval_articles[%lld] is not a string", o.split_path,
                          (long long)k);
                goto out;
            }
            titles[k] = v->valuestring;
            bool found = false;
            for (int64_t i = 0; i < s.n && !found; i++)
                found = !strcmp(s.q[i].title, titles[k]);
            if (!found)
                fprintf(stderr, "bert8 eval: %s: article \"%s\" is not in %s\n", o.split_path,
                        titles[k], o.data);
        }
        squad_keep_titles(&s, titles, nt);
        /* The trainer records its window settings; flags still win. */
        const cJSON *v;
        if (!o0->max_len &&
            cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(split, "max_length")))
            o.max_len = (long)v->valuedouble;
        if (!o0->max_answer &&
            cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(split, "max_answer_length")))
            o.max_answer = (long)v->valuedouble;
    }
    if (o.limit > 0 && s.n > o.limit) s.n = o.limit;
    if (s.n == 0) {
        cli_error(CMD, "no questions selected from %s", o.data);
        goto out;
    }
    if (!o.max_len || o.max_len > r->max_tokens)
        o.max_len = o.max_len ? r->max_tokens : (r->max_tokens < 384 ? r->max_tokens : 384);
    if (!o.max_answer) o.max_answer = 30;
    if (o.stride < 0) o.stride = o.max_len / 3 < 128 ? o.max_len / 3 : 128;
    if (o.stride >= o.max_len / 2) {
        cli_error(CMD, "--stride %ld must be below half of max_length %ld", o.stride, o.max_len);
        goto out;
    }
    bert8_qa_options qo = bert8_default_qa_options();
    qo.max_length = o.max_len;
    qo.doc_stride = o.stride;
    qo.max_answer_len = o.max_answer;
    qo.score_logits = !o.prob;
    if (!(spans = calloc((size_t)o.batch, sizeof *spans)) || !(qs = calloc((size_t)o.batch, sizeof *qs)) ||
        !(cs = calloc((size_t)o.batch, sizeof *cs)))
        goto oom;
    double em = 0, f1 = 0, t0 = now_s();
    int64_t failed = 0;
    text_progress pg;
    text_progress_start(&pg, "squad", s.n, o.progress);
    for (int64_t i0 = 0; i0 < s.n; i0 += o.batch) {
        int64_t nb = s.n - i0 < o.batch ? s.n - i0 : o.batch;
        squad_batch(r, &s, i0, nb, &qo, spans, qs, cs, &failed);
        for (int64_t i = 0; i < nb; i++) {
            const squad_question *sq = &s.q[i0 + i];
            size_t clen = strlen(sq->context);
            int64_t b0 = spans[i].found ? spans[i].start : 0,
                    b1 = spans[i].found ? spans[i].end : 0;
            if (b0 < 0) b0 = 0;
            if (b1 > (int64_t)clen) b1 = (int64_t)clen;
            if (b1 < b0) b1 = b0;
            char *pred = malloc((size_t)(b1 - b0) + 1);
            if (!pred) goto oom;
            memcpy(pred, sq->context + b0, (size_t)(b1 - b0));
            pred[b1 - b0] = 0;
            double e1 = squad_exact_match(pred, sq->golds, (size_t)sq->n_gold),
                   e2 = squad_f1(pred, sq->golds, (size_t)sq->n_gold);
            free(pred);
            if (e1 < 0 || e2 < 0) goto oom;
            em += e1;
            f1 += e2;
        }
        text_progress_update(&pg, i0 + nb);
    }
    text_progress_end(&pg);
    double secs = now_s() - t0;
    em /= (double)s.n;
    f1 /= (double)s.n;
    if (o.json) {
        printf("{\"task\":\"squad\",\"n\":%lld,\"exact_match\":", (long long)s.n);
        text_print_double(stdout, em);
        printf(",\"f1\":");
        text_print_double(stdout, f1);
        printf(",\"failed\":%lld,\"max_length\":%ld,\"stride\":%ld,\"score\":\"%s\",\"seconds\":",
               (long long)failed, o.max_len, o.stride, o.prob ? "prob" : "logit");
        text_print_double(stdout, round(secs * 1000) / 1000);
        printf(",\"quantized\":%s}\n", r->info->quantized ? "true" : "false");
    } else {
        printf("squad: n=%lld exact_match=%.4f f1=%.4f (max_length %ld, stride %ld%s) [%.2f s]\n",
               (long long)s.n, em, f1, o.max_len, o.stride, failed ? ", some questions failed" : "",
               secs);
    }
    rc = 0;
    goto out;
oom:
    cli_error(CMD, "out of memory");
out:
    free(spans);
    free(qs);
    free(cs);
    free(titles);
    squad_free(&s);
    return rc;
}

/* ---- the command --------------------------------------------------------------------------- */

static bool parse_rows(const char *v, eval_opts *o) {
    const char *colon = v ? strchr(v, ':') : NULL;
    if (!colon) return false;
    long long lo = 0, hi = -1;
    char buf[64];
    size_t n = (size_t)(colon - v);
    if (n >= sizeof buf) return false;
    memcpy(buf, v, n);
    buf[n] = 0;
    if (n && (!parse_int(buf, &lo) || lo < 0)) return false;
    if (colon[1] && (!parse_int(colon + 1, &hi) || hi < lo)) return false;
    o->row_lo = lo;
    o->row_hi = hi;
    return true;
}

int cmd_eval(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv);
    eval_opts o = {.row_hi = -1, .batch = 32, .stride = -1};
    const char *v;
    long limit = 0;
    if (cli_flag(&a, "--help") || cli_flag(&a, "-h")) {
        printf("usage: bert8 eval MODEL_DIR --task sst2|xnli|mrpc|stsb|squad --data PATH [--json] "
               "[--limit N]\n"
               "  [--batch N] [--threads N] [--max-length N] [--split split.json] [--rows A:B] "
               "[--lang xx]\n"
               "  [--stride N] [--max-answer-len N] [--score prob|logit] [--quiet|--progress]\n");
        return 0;
    }
    o.task_name = cli_opt(&a, "--task");
    o.data = cli_opt(&a, "--data");
    o.split_path = cli_opt(&a, "--split");
    o.lang = cli_opt(&a, "--lang");
    o.json = cli_flag(&a, "--json");
    bool quiet = cli_flag(&a, "--quiet"), progress = cli_flag(&a, "--progress");
    o.progress = !quiet && (progress || isatty(2));
    if ((v = cli_opt(&a, "--limit")) && !cli_int(CMD, "--limit", v, 1, 1L << 40, &limit)) return 1;
    o.limit = limit;
    if ((v = cli_opt(&a, "--batch")) && !cli_int(CMD, "--batch", v, 1, 4096, &o.batch)) return 1;
    if ((v = cli_opt(&a, "--threads")) && !cli_int(CMD, "--threads", v, 0, 1024, &o.threads))
        return 1;
    if ((v = cli_opt(&a, "--max-length")) &&
        !cli_int(CMD, "--max-length", v, 8, 1 << 20, &o.max_len))
        return 1;
    if ((v = cli_opt(&a, "--stride")) && !cli_int(CMD, "--stride", v, 0, 1 << 20, &o.stride))
        return 1;
    if ((v = cli_opt(&a, "--max-answer-len")) &&
        !cli_int(CMD, "--max-answer-len", v, 1, 1 << 20, &o.max_answer))
        return 1;
    if ((v = cli_opt(&a, "--rows")) && !parse_rows(v, &o))
        return cli_error(
            CMD,
            "--rows wants A:B (data rows A..B-1, 0-based, header excluded; A or B may be empty)");
    if ((v = cli_opt(&a, "--score")) && strcmp(v, "prob") && strcmp(v, "logit"))
        return cli_error(CMD, "--score must be prob or logit");
    o.prob = v && !strcmp(v, "prob");
    const char *dir = cli_positional(&a);
    const char *left = cli_leftover(&a);
    if (left) return cli_error(CMD, "unknown argument \"%s\"", left);
    if (!o.task_name || !*o.task_name)
        return cli_error(CMD, "missing --task sst2|xnli|mrpc|squad|stsb");
    static const struct {
        const char *name;
        task_kind k;
        bert8_head head;
    } tasks[] = {{"sst2", TASK_SST2, BERT8_HEAD_SEQ_CLS},
                 {"xnli", TASK_XNLI, BERT8_HEAD_SEQ_CLS},
                 {"mrpc", TASK_MRPC, BERT8_HEAD_SEQ_CLS},
                 {"stsb", TASK_STSB, BERT8_HEAD_SEQ_CLS},
                 {"squad", TASK_SQUAD, BERT8_HEAD_QA}};
    int ti = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(o.task_name, tasks[i].name)) ti = i;
    if (ti < 0)
        return cli_error(CMD, "unknown task \"%s\" (sst2, xnli, mrpc, squad or stsb)", o.task_name);
    o.task = tasks[ti].k;
    if (!o.data || !*o.data) return cli_error(CMD, "missing --data PATH");
    if (o.task == TASK_SQUAD && o.row_hi != -1)
        return cli_error(CMD, "--rows does not apply to squad");
    cJSON *split = NULL;
    char err[1024];
    if (o.split_path && !(split = json_load_file(o.split_path, err, sizeof err)))
        return cli_error(CMD, "%s", err);
    text_runner r;
    int rc = 1;
    text_runner_opts ro = {(int)o.threads, o.batch, 0, BERT8_POOLING_DEFAULT, -1, 0};
    if (text_runner_open(&r, CMD, dir, true, &ro)) {
        if (r.info->head != tasks[ti].head) {
            cli_error(CMD, "%s is not a %s model (architecture \"%s\")", dir,
                      o.task == TASK_SQUAD ? "question answering" : "sequence classification",
                      r.info->architecture);
        } else if (o.max_len > r.max_tokens) {
            cli_error(CMD, "--max-length %ld exceeds the model's limit of %lld tokens", o.max_len,
                      (long long)r.max_tokens);
        } else if (o.task == TASK_SQUAD) {
            rc = eval_squad(&o, &r, split);
        } else {
            if (!o.max_len) o.max_len = r.max_tokens < 128 ? r.max_tokens : 128;
            rc = eval_seq(&o, &r, split);
        }
        text_runner_close(&r);
    }
    cJSON_Delete(split);
    if (!rc && ferror(stdout)) rc = cli_error(CMD, "writing stdout failed");
    return rc;
}
