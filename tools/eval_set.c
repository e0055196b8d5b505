/* eval_set.c: evaluation sets loaded once and scored with any pipeline (see eval_set.h). */
#include "eval_set.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "metrics.h"
#include "text_io.h"
#include "text_runner.h"

static const char *const SST2_LABELS[] = {"negative", "positive"};
static const char *const MRPC_LABELS[] = {"not_equivalent", "equivalent"};
static const char *const XNLI_LABELS[] = {"entailment", "neutral", "contradiction"};

bool eval_task_parse(const char *name, eval_task *task, bert8_head *head) {
    static const struct {
        const char *name;
        eval_task k;
        bert8_head head;
    } tasks[] = {{"sst2", TASK_SST2, BERT8_HEAD_SEQ_CLS},
                 {"xnli", TASK_XNLI, BERT8_HEAD_SEQ_CLS},
                 {"mrpc", TASK_MRPC, BERT8_HEAD_SEQ_CLS},
                 {"stsb", TASK_STSB, BERT8_HEAD_SEQ_CLS},
                 {"squad", TASK_SQUAD, BERT8_HEAD_QA}};
    for (size_t i = 0; name && i < sizeof tasks / sizeof *tasks; i++)
        if (!strcmp(name, tasks[i].name)) {
            *task = tasks[i].k;
            if (head) *head = tasks[i].head;
            return true;
        }
    return false;
}

double eval_headline(eval_task task, const eval_result *r) {
    switch (task) {
    case TASK_STSB: return 100.0 * r->spearman;
    case TASK_SQUAD: return 100.0 * r->squad_f1;
    default: return 100.0 * r->accuracy;
    }
}

const char *eval_headline_name(eval_task task) {
    switch (task) {
    case TASK_STSB: return "spearman";
    case TASK_SQUAD: return "f1";
    default: return "accuracy";
    }
}

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
static bool map_labels(const bert8_model *m, int64_t L, const char *const *names, int nt, int *map, bool notes,
                       char *err, size_t err_len) {
    if (L != nt) {
        snprintf(err, err_len, "the model has %lld labels but the task has %d", (long long)L, nt);
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
    if (!identity && notes) fprintf(stderr, "bert8 eval: model labels are mapped to the task's labels by name\n");
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

static void seq_free(seq_set *s) {
    free(s->a);
    free(s->b);
    free(s->gold);
    free(s->score);
    memset(s, 0, sizeof *s);
}

static int64_t need_col(const char *cmd, const tsv_table *t, const char *path, const char *name) {
    int64_t c = tsv_col(t, name);
    if (c < 0) cli_error(cmd, "%s has no column \"%s\" in its header", path, name);
    return c;
}

/* The rows split.json keeps ("eval_index": values of the index column), when it lists any. */
static bool split_index(const char *cmd, const cJSON *split, const tsv_table *t, const eval_opts *o, bool *keep) {
    const cJSON *idx = cJSON_GetObjectItemCaseSensitive(split, "eval_index");
    if (!idx) {
        fprintf(stderr, "bert8 %s: %s lists no eval_index; scoring every row\n", cmd, o->split_path);
        for (int64_t r = 0; r < t->rows; r++)
            keep[r] = true;
        return true;
    }
    int64_t ci = need_col(cmd, t, o->data, "index");
    if (ci < 0 || !cJSON_IsArray(idx)) {
        if (ci >= 0) cli_error(cmd, "%s: eval_index is not an array", o->split_path);
        return false;
    }
    for (int64_t r = 0; r < t->rows; r++)
        keep[r] = false;
    int k = 0;
    for (const cJSON *v = idx->child; v; v = v->next, k++) {
        if (!cJSON_IsNumber(v))
            return cli_error(cmd, "%s: eval_index[%d] is not a number", o->split_path, k), false;
        bool found = false;
        for (int64_t r = 0; r < t->rows; r++) {
            long long x;
            if (parse_int(tsv_cell(t, r, ci), &x) && x == (long long)v->valuedouble)
                keep[r] = found = true;
        }
        if (!found)
            return cli_error(cmd, "%s: eval_index[%d] = %g is not in %s", o->split_path, k,
                             v->valuedouble, o->data),
                   false;
    }
    return true;
}

static bool load_seq(const char *cmd, const eval_opts *o, tsv_table *t, const cJSON *split, seq_set *s) {
    char err[1024];
    memset(s, 0, sizeof *s);
    if (!tsv_load(o->data, t, err, sizeof err)) return cli_error(cmd, "%s", err), false;
    int64_t ca = -1, cb = -1, cl = -1;
    char n1[64], n2[64];
    switch (o->task) {
    case TASK_SST2:
        ca = need_col(cmd, t, o->data, "sentence"), cl = need_col(cmd, t, o->data, "label");
        if (ca < 0 || cl < 0) return false;
        break;
    case TASK_MRPC:
        ca = need_col(cmd, t, o->data, "#1 String"), cb = need_col(cmd, t, o->data, "#2 String");
        cl = need_col(cmd, t, o->data, "Quality");
        if (ca < 0 || cb < 0 || cl < 0) return false;
        break;
    case TASK_STSB:
        ca = need_col(cmd, t, o->data, "sentence1"), cb = need_col(cmd, t, o->data, "sentence2");
        cl = need_col(cmd, t, o->data, "score");
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
        ca = need_col(cmd, t, o->data, n1), cb = need_col(cmd, t, o->data, n2),
        cl = need_col(cmd, t, o->data, "label");
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
    if (!ok) cli_error(cmd, "out of memory");
    if (ok && split && o->task == TASK_STSB)
        ok = split_index(cmd, split, t, o, keep);
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
                ok = !cli_error(cmd, "%s:%lld: score \"%s\" is not a number", o->data,
                                (long long)t->line[r], lab);
        } else if (o->task == TASK_XNLI) {
            s->gold[i] = -1;
            for (int k = 0; k < 3; k++)
                if (!strcmp(lab, XNLI_LABELS[k])) s->gold[i] = k;
            if (s->gold[i] < 0)
                ok = !cli_error(cmd,
                                "%s:%lld: label \"%s\" is not entailment, neutral or contradiction",
                                o->data, (long long)t->line[r], lab);
        } else if (!parse_int(lab, &v) || (v != 0 && v != 1)) {
            ok = !cli_error(cmd, "%s:%lld: label \"%s\" is not 0 or 1", o->data,
                            (long long)t->line[r], lab);
        } else {
            s->gold[i] = (int)v;
        }
        s->n++;
    }
    free(keep);
    if (ok && s->n == 0) ok = !cli_error(cmd, "no examples selected from %s", o->data);
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

static bert8_status score_seq(const eval_set *es, const bert8_pipeline *pl, const int64_t *idx, int64_t n,
                              unsigned flags, eval_result *res, double *per_example, char *err, size_t err_len) {
    const eval_opts *o = &es->o;
    const seq_set *s = &es->s;
    const int64_t L = bert8_pipeline_get_info(pl)->model->num_labels;
    const char *const *names = o->task == TASK_SST2   ? SST2_LABELS
                               : o->task == TASK_MRPC ? MRPC_LABELS
                                                      : XNLI_LABELS;
    int nt = o->task == TASK_XNLI ? 3 : 2, map[3] = {0, 1, 2};
    if (o->task == TASK_STSB && L != 1) {
        snprintf(err, err_len, "stsb needs a regression head (num_labels 1); the model has %lld labels",
                 (long long)L);
        return BERT8_ERR_UNSUPPORTED;
    }
    if (o->task != TASK_STSB &&
        !map_labels(bert8_pipeline_model(pl), L, names, nt, map, flags & EVAL_NOTES, err, err_len))
        return BERT8_ERR_UNSUPPORTED;
    bert8_status ok = BERT8_ERR_NOMEM;
    float *logits = NULL, *lb = NULL;
    int *pred = NULL, *gold = NULL;
    double *score = NULL, *want = NULL;
    int64_t *order = NULL;
    bert8_text *ta = NULL, *tb = NULL;
    len_idx *li = NULL;
    size_t cnt;
    if (n <= 0 || __builtin_mul_overflow((size_t)n, (size_t)L * sizeof(float), &cnt) || !(logits = malloc(cnt)) ||
        !(pred = calloc((size_t)n, sizeof *pred)) || !(gold = calloc((size_t)n, sizeof *gold)) ||
        !(score = calloc((size_t)n, sizeof *score)) || !(want = calloc((size_t)n, sizeof *want)) ||
        !(order = malloc((size_t)n * sizeof *order)) || !(ta = malloc((size_t)o->batch * sizeof *ta)) ||
        !(tb = malloc((size_t)o->batch * sizeof *tb)) ||
        !(lb = malloc((size_t)o->batch * (size_t)L * sizeof *lb)) || !(li = malloc((size_t)n * sizeof *li))) {
        snprintf(err, err_len, n <= 0 ? "no examples to score" : "out of memory");
        if (n <= 0) ok = BERT8_ERR_INVALID_ARG;
        goto out;
    }
    /* example i of this call is row ex(i) of the set */
#define EX(i) (idx ? idx[i] : (i))
    for (int64_t i = 0; i < n; i++) {
        const int64_t e = EX(i);
        li[i] = (len_idx){strlen(s->a[e]) + (s->b[e] ? strlen(s->b[e]) : 0), i};
        gold[i] = s->gold[e];
        want[i] = s->score[e];
    }
    qsort(li, (size_t)n, sizeof *li, by_length);
    for (int64_t i = 0; i < n; i++)
        order[i] = li[i].i;
    bert8_run_options ro = bert8_default_run_options();
    ro.max_length = o->max_len;
    text_progress pg;
    text_progress_start(&pg, o->task_name, n, flags & EVAL_PROGRESS);
    double t0 = now_s();
    for (int64_t i0 = 0; i0 < n; i0 += o->batch) {
        int64_t nb = n - i0 < o->batch ? n - i0 : o->batch;
        for (int64_t k = 0; k < nb; k++) {
            const int64_t e = EX(order[i0 + k]);
            const char *x = s->a[e], *y = s->b[e];
            ta[k] = (bert8_text){x, strlen(x)};
            tb[k] = (bert8_text){y, y ? strlen(y) : 0};
        }
        char msg[1024];
        bert8_status st = bert8_classify(pl, nb, ta, o->task == TASK_SST2 ? NULL : tb, &ro, BERT8_SCORE_NONE, lb, msg,
                                         sizeof msg);
        if (st) {
            text_progress_end(&pg);
            snprintf(err, err_len, "a batch holding example %lld: %s", (long long)EX(order[i0]), msg);
            ok = st;
            goto out;
        }
        for (int64_t k = 0; k < nb; k++)
            memcpy(logits + order[i0 + k] * L, lb + k * L, (size_t)L * sizeof(float));
        text_progress_update(&pg, i0 + nb);
    }
#undef EX
    text_progress_end(&pg);
    res->seconds = now_s() - t0;
    res->n = n;
    if (o->task == TASK_STSB) {
        for (int64_t i = 0; i < n; i++)
            score[i] = logits[i];
        res->spearman = metric_spearman(score, want, (size_t)n);
        res->pearson = metric_pearson(score, want, (size_t)n);
        for (int64_t i = 0; per_example && i < n; i++) per_example[i] = NAN;
    } else {
        float p[3];
        for (int64_t i = 0; i < n; i++)
            pred[i] = map[text_softmax(logits + i * L, L, p)];
        res->accuracy = metric_accuracy(pred, gold, (size_t)n);
        res->correct = 0;
        for (int64_t i = 0; i < n; i++) {
            res->correct += pred[i] == gold[i];
            if (per_example) per_example[i] = pred[i] == gold[i];
        }
        metric_prf f = metric_binary_f1(pred, gold, (size_t)n, 1);
        res->f1 = f.f1;
        res->precision = f.precision;
        res->recall = f.recall;
    }
    ok = BERT8_OK;
out:
    free(logits);
    free(pred);
    free(gold);
    free(score);
    free(want);
    free(order);
    free(ta);
    free(tb);
    free(lb);
    free(li);
    return ok;
}

/* ---- squad ----------------------------------------------------------------------------------- */

/* Predicts questions q[0..nb) into answers; a batch that fails is retried one question at a
 * time, and a question that still fails keeps found = 0 (an empty prediction). */
static void squad_batch(const bert8_pipeline *pl, const squad_question *const *q, int64_t nb,
                        const bert8_qa_options *qo, bert8_qa_answer *ans, bert8_text *qs, bert8_text *cs,
                        int64_t *failed) {
    for (int64_t i = 0; i < nb; i++) {
        const char *qq = q[i]->question;
        while (*qq == ' ' || *qq == '\t' || *qq == '\n')
            qq++; /* run_qa strips leading blanks */
        qs[i] = (bert8_text){qq, strlen(qq)};
        cs[i] = (bert8_text){q[i]->context, strlen(q[i]->context)};
    }
    char msg[1024];
    if (!bert8_qa(pl, nb, qs, cs, qo, ans, msg, sizeof msg)) return;
    if (nb == 1) {
        fprintf(stderr, "\nbert8 eval: question %s: %s (scored as an empty answer)\n", q[0]->id, msg);
        (*failed)++;
        memset(ans, 0, sizeof *ans);
        return;
    }
    for (int64_t i = 0; i < nb; i++) squad_batch(pl, q + i, 1, qo, ans + i, qs, cs, failed);
}

static bool load_squad(eval_set *es, int64_t max_tokens) {
    eval_opts *o = &es->o;
    const cJSON *split = es->split;
    squad_set *s = &es->q;
    char err[1024];
    if (!squad_load(o->data, s, err, sizeof err)) return cli_error(es->cmd, "%s", err), false;
    if (split) {
        const cJSON *arr = cJSON_IsArray(split) ? split : cJSON_GetObjectItemCaseSensitive(split, "eval_articles");
        if (!cJSON_IsArray(arr)) return cli_error(es->cmd, "%s has no \"eval_articles\" list of titles", o->split_path), false;
        int64_t nt = cJSON_GetArraySize(arr), k = 0;
        if (!(es->titles = calloc((size_t)nt + 1, sizeof *es->titles))) return cli_error(es->cmd, "out of memory"), false;
        for (const cJSON *v = arr->child; v; v = v->next, k++) {
            if (!cJSON_IsString(v))
                return cli_error(es->cmd, "%s: eval_articles[%lld] is not a string", o->split_path, (long long)k), false;
            es->titles[k] = v->valuestring;
            bool found = false;
            for (int64_t i = 0; i < s->n && !found; i++)
                found = !strcmp(s->q[i].title, es->titles[k]);
            if (!found)
                fprintf(stderr, "bert8 %s: %s: article \"%s\" is not in %s\n", es->cmd, o->split_path,
                        es->titles[k], o->data);
        }
        squad_keep_titles(s, es->titles, nt);
        /* The trainer records its window settings; flags still win. */
        const cJSON *v;
        if (!o->max_len && cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(split, "max_length")))
            o->max_len = (long)v->valuedouble;
        if (!o->max_answer && cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(split, "max_answer_length")))
            o->max_answer = (long)v->valuedouble;
    }
    if (o->limit > 0 && s->n > o->limit) s->n = o->limit;
    if (s->n == 0) return cli_error(es->cmd, "no questions selected from %s", o->data), false;
    if (!o->max_len || o->max_len > max_tokens)
        o->max_len = o->max_len ? (long)max_tokens : (max_tokens < 384 ? (long)max_tokens : 384);
    if (!o->max_answer) o->max_answer = 30;
    if (o->stride < 0) o->stride = o->max_len / 3 < 128 ? o->max_len / 3 : 128;
    if (o->stride >= o->max_len / 2)
        return cli_error(es->cmd, "--stride %ld must be below half of max_length %ld", o->stride, o->max_len), false;
    es->n = s->n;
    return true;
}

static bert8_status score_squad(const eval_set *es, const bert8_pipeline *pl, const int64_t *idx, int64_t n,
                                unsigned flags, eval_result *res, double *per_example, char *err, size_t err_len) {
    const eval_opts *o = &es->o;
    bert8_qa_options qo = bert8_default_qa_options();
    qo.max_length = o->max_len;
    qo.doc_stride = o->stride;
    qo.max_answer_len = o->max_answer;
    qo.score_logits = !o->prob;
    bert8_qa_answer *spans = calloc((size_t)o->batch, sizeof *spans);
    bert8_text *qs = calloc((size_t)o->batch, sizeof *qs), *cs = calloc((size_t)o->batch, sizeof *cs);
    const squad_question **qp = calloc((size_t)o->batch, sizeof *qp);
    bert8_status ok = BERT8_ERR_NOMEM;
    if (!spans || !qs || !cs || !qp) goto oom;
    double em = 0, f1 = 0, t0 = now_s();
    int64_t failed = 0;
    text_progress pg;
    text_progress_start(&pg, "squad", n, flags & EVAL_PROGRESS);
    for (int64_t i0 = 0; i0 < n; i0 += o->batch) {
        int64_t nb = n - i0 < o->batch ? n - i0 : o->batch;
        for (int64_t i = 0; i < nb; i++) qp[i] = &es->q.q[idx ? idx[i0 + i] : i0 + i];
        squad_batch(pl, qp, nb, &qo, spans, qs, cs, &failed);
        for (int64_t i = 0; i < nb; i++) {
            const squad_question *sq = qp[i];
            size_t clen = strlen(sq->context);
            int64_t b0 = spans[i].found ? spans[i].start : 0, b1 = spans[i].found ? spans[i].end : 0;
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
            if (per_example) per_example[i0 + i] = e2;
        }
        text_progress_update(&pg, i0 + nb);
    }
    text_progress_end(&pg);
    res->seconds = now_s() - t0;
    res->n = n;
    res->exact_match = em / (double)n;
    res->squad_f1 = f1 / (double)n;
    res->failed = failed;
    ok = BERT8_OK;
    goto out;
oom:
    snprintf(err, err_len, "out of memory");
out:
    free(spans);
    free(qs);
    free(cs);
    free(qp);
    return ok;
}

/* ---- the set --------------------------------------------------------------------------------- */

bool eval_set_load(eval_set *es, const char *cmd, const eval_opts *o, int64_t max_tokens) {
    memset(es, 0, sizeof *es);
    es->o = *o;
    es->cmd = cmd;
    char err[1024];
    if (o->split_path && !(es->split = json_load_file(o->split_path, err, sizeof err)))
        return cli_error(cmd, "%s", err), false;
    if (o->task == TASK_SQUAD) return load_squad(es, max_tokens);
    if (!load_seq(cmd, &es->o, &es->t, es->split, &es->s)) return false;
    es->n = es->s.n;
    return true;
}

void eval_set_free(eval_set *es) {
    if (!es) return;
    if (es->o.task == TASK_SQUAD) {
        squad_free(&es->q);
    } else {
        seq_free(&es->s);
        tsv_free(&es->t);
    }
    free(es->titles);
    cJSON_Delete(es->split);
    memset(es, 0, sizeof *es);
}

bert8_status eval_set_score(const eval_set *es, const bert8_pipeline *pl, const int64_t *idx, int64_t n,
                            unsigned flags, eval_result *r, double *per_example, char *err, size_t err_len) {
    memset(r, 0, sizeof *r);
    if (!idx) n = es->n;
    for (int64_t i = 0; idx && i < n; i++)
        if (idx[i] < 0 || idx[i] >= es->n) {
            snprintf(err, err_len, "example %lld is not in the set of %lld", (long long)idx[i], (long long)es->n);
            return BERT8_ERR_INVALID_ARG;
        }
    if (es->o.task == TASK_SQUAD) return score_squad(es, pl, idx, n, flags, r, per_example, err, err_len);
    return score_seq(es, pl, idx, n, flags, r, per_example, err, err_len);
}
