/* test_pipeline.c: the task pipelines of the library (bert8_pipeline.h).
 *  - the same numbers as the CLI printed before the task logic moved into the library
 *    (tests/data/cli_reference, made by tests/data/make_cli_reference.py from commit 08fd953);
 *  - padded and padding-free runs agree; results do not depend on the batch budget;
 *  - several threads share one pipeline and get exactly the single-threaded results;
 *  - bad calls fail with the status and a message naming the input. */
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bert8_pipeline.h"
#include "testutil.h"

/* ---- inputs from ../shared ------------------------------------------------------------------ */

typedef struct table {
    char *data;
    char **cell;
    int rows, cols;
} table;

static bool table_load(const char *path, table *t) {
    memset(t, 0, sizeof *t);
    if (!(t->data = tu_read_file(path, NULL))) return false;
    int cap = 1024, n = 0;
    t->cell = malloc((size_t)cap * sizeof *t->cell);
    char *p = t->data;
    int cols = 0, c = 0;
    t->cell[n++] = p;
    for (; *p; p++) {
        if (*p != '\t' && *p != '\n') continue;
        bool eol = *p == '\n';
        *p = 0;
        if (p > t->data && p[-1] == '\r') p[-1] = 0;
        c++;
        if (eol) {
            if (!cols) cols = c;
            c = 0;
        }
        if (p[1]) {
            if (n == cap) t->cell = realloc(t->cell, (size_t)(cap *= 2) * sizeof *t->cell);
            t->cell[n++] = p + 1;
        }
    }
    t->cols = cols;
    t->rows = cols ? n / cols - 1 : 0;
    return cols > 0;
}

static const char *cell(const table *t, int row, const char *col) {
    for (int j = 0; j < t->cols; j++)
        if (!strcmp(t->cell[j], col)) return t->cell[(row + 1) * t->cols + j];
    return NULL;
}

static void table_free(table *t) {
    free(t->data);
    free(t->cell);
}

static cJSON *load_json(const char *path) {
    char *s = tu_read_file(path, NULL);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    free(s);
    return j;
}

static bert8_text txt(const char *s) { return (bert8_text){s, s ? strlen(s) : 0}; }

static double rel(double a, double b) { return fabs(a - b) / (1.0 + fabs(b)); }

static bert8_pipeline *open_p(const char *dir, const bert8_pipeline_params *pp) {
    char err[1024];
    bert8_pipeline *p = NULL;
    bert8_status st = bert8_pipeline_open(dir, pp, &p, err, sizeof err);
    if (st) printf("  opening %s: %s\n", dir, err);
    return p;
}

/* ---- the reference CLI outputs --------------------------------------------------------------- */

static void check_classify(const char *fixture) {
    cJSON *ref = load_json(fixture);
    CHECK(ref != NULL);
    if (!ref) return;
    const char *model = cJSON_GetObjectItem(ref, "model")->valuestring;
    table t;
    CHECK(table_load(tu_shared_path(cJSON_GetObjectItem(ref, "data")->valuestring), &t));
    const cJSON *rows = cJSON_GetObjectItem(ref, "rows"), *pc = cJSON_GetObjectItem(ref, "pair_column");
    const int n = cJSON_GetArraySize(rows);
    bert8_text a[64], b[64];
    for (int i = 0; i < n; i++) {
        int r = cJSON_GetArrayItem(rows, i)->valueint;
        a[i] = txt(cell(&t, r, cJSON_GetObjectItem(ref, "column")->valuestring));
        b[i] = txt(pc ? cell(&t, r, pc->valuestring) : NULL);
    }
    for (int pf = 0; pf < 2; pf++) {
        bert8_pipeline_params pp = bert8_default_pipeline_params();
        pp.padding_free = pf;
        pp.max_batch_tokens = pf ? 300 : 8192; /* several passes */
        bert8_pipeline *p = open_p(model, &pp);
        CHECK(p != NULL);
        if (!p) continue;
        const int64_t L = bert8_pipeline_get_info(p)->num_labels;
        float *lg = malloc((size_t)(n * L) * sizeof(float));
        char err[1024];
        CHECKF(bert8_classify(p, n, a, pc ? b : NULL, NULL, BERT8_SCORE_NONE, lg, err, sizeof err) == BERT8_OK, "%s", err);
        double worst = 0;
        int labels_ok = 1;
        for (int i = 0; i < n; i++) {
            const cJSON *want = cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "logits"), i);
            int64_t arg = 0;
            for (int64_t j = 0; j < L; j++) {
                double d = rel(lg[i * L + j], cJSON_GetArrayItem(want, (int)j)->valuedouble);
                if (d > worst) worst = d;
                if (lg[i * L + j] > lg[i * L + arg]) arg = j;
            }
            labels_ok &= !strcmp(bert8_pipeline_label(p, arg), cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "labels"), i)->valuestring);
        }
        CHECKF(worst < 1e-5 && labels_ok, "%s (padding_free %d): logits deviate %.3g, labels %s", model, pf, worst,
               labels_ok ? "same" : "differ");
        free(lg);
        bert8_pipeline_free(p);
    }
    table_free(&t);
    cJSON_Delete(ref);
}

TEST(classify_gives_the_cli_reference_logits) {
    check_classify("tests/data/cli_reference/classify_sst2.json");
    check_classify("tests/data/cli_reference/classify_xnli.json");
}

static void check_embed(const char *fixture, bert8_pooling pool, int normalize) {
    cJSON *ref = load_json(fixture);
    CHECK(ref != NULL);
    if (!ref) return;
    table t;
    CHECK(table_load(tu_shared_path(cJSON_GetObjectItem(ref, "data")->valuestring), &t));
    const cJSON *rows = cJSON_GetObjectItem(ref, "rows");
    const int n = cJSON_GetArraySize(rows);
    bert8_text a[64];
    for (int i = 0; i < n; i++) a[i] = txt(cell(&t, cJSON_GetArrayItem(rows, i)->valueint, "sentence"));
    bert8_pipeline *p = open_p(cJSON_GetObjectItem(ref, "model")->valuestring, NULL);
    CHECK(p != NULL);
    if (p) {
        const int64_t H = bert8_pipeline_get_info(p)->dim;
        float *e = malloc((size_t)(n * H) * sizeof(float));
        bert8_embed_options eo = bert8_default_embed_options();
        eo.pooling = pool;
        eo.normalize = normalize;
        char err[1024];
        CHECKF(bert8_embed(p, n, a, NULL, NULL, &eo, e, err, sizeof err) == BERT8_OK, "%s", err);
        double worst = 0;
        for (int i = 0; i < n; i++) {
            const cJSON *want = cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "embeddings"), i);
            for (int64_t j = 0; j < H; j++) {
                double d = rel(e[i * H + j], cJSON_GetArrayItem(want, (int)j)->valuedouble);
                if (d > worst) worst = d;
            }
        }
        CHECKF(worst < 1e-5, "%s: embeddings deviate %.3g", fixture, worst);
        free(e);
        bert8_pipeline_free(p);
    }
    table_free(&t);
    cJSON_Delete(ref);
}

TEST(embed_gives_the_cli_reference_embeddings) {
    check_embed("tests/data/cli_reference/embed_stsb_mean.json", BERT8_POOLING_DEFAULT, -1);
    check_embed("tests/data/cli_reference/embed_stsb_cls_norm.json", BERT8_POOLING_CLS, 1);
}

static const cJSON *squad_par(const cJSON *root, int a, int p) {
    const cJSON *art = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "data"), a);
    return cJSON_GetArrayItem(cJSON_GetObjectItem(art, "paragraphs"), p);
}

TEST(qa_gives_the_cli_reference_spans) {
    cJSON *ref = load_json("tests/data/cli_reference/qa_squad.json");
    cJSON *sq = load_json(tu_shared_path("data/squad/dev-v1.1.rebuilt.json"));
    CHECK(ref && sq);
    bert8_pipeline *p = ref ? open_p("models/squad-bert-mini", NULL) : NULL;
    CHECK(p != NULL);
    if (ref && sq && p) {
        const cJSON *picks = cJSON_GetObjectItem(ref, "picks");
        const int n = cJSON_GetArraySize(picks);
        bert8_text q[32], c[32];
        for (int i = 0; i < n; i++) {
            const cJSON *pk = cJSON_GetArrayItem(picks, i);
            const cJSON *par = squad_par(sq, cJSON_GetArrayItem(pk, 0)->valueint, cJSON_GetArrayItem(pk, 1)->valueint);
            const cJSON *qa = cJSON_GetArrayItem(cJSON_GetObjectItem(par, "qas"), cJSON_GetArrayItem(pk, 2)->valueint);
            q[i] = txt(cJSON_GetObjectItem(qa, "question")->valuestring);
            c[i] = txt(cJSON_GetObjectItem(par, "context")->valuestring);
        }
        bert8_qa_answer ans[32];
        char err[1024];
        CHECKF(bert8_qa(p, n, q, c, NULL, ans, err, sizeof err) == BERT8_OK, "%s", err);
        int bad = 0;
        for (int i = 0; i < n; i++) {
            const cJSON *w = cJSON_GetArrayItem(cJSON_GetObjectItem(ref, "answers"), i);
            bad += !ans[i].found || ans[i].start != cJSON_GetArrayItem(w, 0)->valueint ||
                   ans[i].end != cJSON_GetArrayItem(w, 1)->valueint ||
                   rel(ans[i].score, cJSON_GetArrayItem(w, 2)->valuedouble) > 1e-4;
        }
        CHECKF(bad == 0, "%d of %d answers differ", bad, n);
        /* one long context in 96-token windows */
        const cJSON *lg = cJSON_GetObjectItem(ref, "long"), *qi = cJSON_GetObjectItem(lg, "question");
        size_t len = 0;
        char *ctx = calloc(1 << 16, 1);
        for (int k = 0; k < cJSON_GetObjectItem(lg, "paragraphs")->valueint; k++) {
            const char *s = cJSON_GetObjectItem(squad_par(sq, 0, k), "context")->valuestring;
            if (k) ctx[len++] = ' ';
            memcpy(ctx + len, s, strlen(s));
            len += strlen(s);
        }
        const cJSON *qa = cJSON_GetArrayItem(cJSON_GetObjectItem(squad_par(sq, 0, cJSON_GetArrayItem(qi, 1)->valueint), "qas"),
                                             cJSON_GetArrayItem(qi, 2)->valueint);
        bert8_text lq = txt(cJSON_GetObjectItem(qa, "question")->valuestring), lc = {ctx, len};
        bert8_qa_options qo = bert8_default_qa_options();
        qo.max_length = cJSON_GetObjectItem(lg, "max_length")->valueint;
        qo.doc_stride = cJSON_GetObjectItem(lg, "stride")->valueint;
        CHECKF(bert8_qa(p, 1, &lq, &lc, &qo, ans, err, sizeof err) == BERT8_OK, "%s", err);
        const cJSON *w = cJSON_GetObjectItem(lg, "answer");
        CHECKF(ans[0].start == cJSON_GetArrayItem(w, 0)->valueint && ans[0].end == cJSON_GetArrayItem(w, 1)->valueint &&
                   rel(ans[0].score, cJSON_GetArrayItem(w, 2)->valuedouble) < 1e-4,
               "long context: [%lld, %lld) %g", (long long)ans[0].start, (long long)ans[0].end, ans[0].score);
        free(ctx);
    }
    bert8_pipeline_free(p);
    cJSON_Delete(ref);
    cJSON_Delete(sq);
}

/* The golden token classifier with the bert_e2e tokenizer and the fixture's labels. */
static const char *ner_folder(const cJSON *labels) {
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s/ner", tu_tmpdir());
    mkdir(dir, 0755);
    const char *files[] = {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"};
    for (int i = 0; i < 5; i++) {
        char from[1200], to[1200];
        snprintf(from, sizeof from, "%s/%s", tu_shared_path(i < 2 ? "golden/models/bert_tokcls" : "golden/models/bert_e2e"),
                 files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        size_t n;
        char *d = tu_read_file(from, &n);
        if (i == 0 && d) { /* give it the fixture's id2label */
            cJSON *cfg = cJSON_Parse(d);
            cJSON_DeleteItemFromObject(cfg, "id2label");
            cJSON_DeleteItemFromObject(cfg, "label2id");
            cJSON *m = cJSON_AddObjectToObject(cfg, "id2label");
            for (int k = 0; k < cJSON_GetArraySize(labels); k++) {
                char key[16];
                snprintf(key, sizeof key, "%d", k);
                cJSON_AddStringToObject(m, key, cJSON_GetArrayItem(labels, k)->valuestring);
            }
            free(d);
            d = cJSON_Print(cfg);
            n = strlen(d);
            cJSON_Delete(cfg);
        }
        if (!d || tu_write_file(to, d, n)) {
            free(d);
            return NULL;
        }
        free(d);
    }
    return dir;
}

static int cmp_items(const bert8_entity *x, int64_t n, const cJSON *want, const char *strip) {
    int bad = n != cJSON_GetArraySize(want);
    for (int64_t i = 0; !bad && i < n; i++) {
        const cJSON *w = cJSON_GetArrayItem(want, (int)i);
        const char *label = cJSON_GetArrayItem(w, 0)->valuestring;
        (void)strip;
        bad += strcmp(x[i].label, label) || x[i].start != cJSON_GetArrayItem(w, 2)->valueint ||
               x[i].end != cJSON_GetArrayItem(w, 3)->valueint ||
               rel(x[i].score, cJSON_GetArrayItem(w, 1)->valuedouble) > 1e-5;
    }
    return bad;
}

TEST(ner_gives_the_cli_reference_words_and_entities) {
    cJSON *ref = load_json("tests/data/cli_reference/ner.json");
    CHECK(ref != NULL);
    if (!ref) return;
    const char *dir = ner_folder(cJSON_GetObjectItem(ref, "labels"));
    table t;
    CHECK(dir && table_load(tu_shared_path(cJSON_GetObjectItem(ref, "data")->valuestring), &t));
    const cJSON *rows = cJSON_GetObjectItem(ref, "rows");
    const int n = cJSON_GetArraySize(rows);
    bert8_text a[32];
    for (int i = 0; i < n; i++) a[i] = txt(cell(&t, cJSON_GetArrayItem(rows, i)->valueint, "sentence"));
    const char *runs[] = {"default", "windows"};
    for (int r = 0; r < 2; r++) {
        const cJSON *run = cJSON_GetObjectItem(cJSON_GetObjectItem(ref, "runs"), runs[r]);
        bert8_pipeline_params pp = bert8_default_pipeline_params();
        bert8_ner_options no = bert8_default_ner_options();
        if (r == 1) pp.max_length = 24, no.stride = 6;
        bert8_pipeline *p = open_p(dir, &pp);
        CHECK(p != NULL);
        if (!p) continue;
        bert8_ner_result res = {0};
        char err[1024];
        CHECKF(bert8_ner(p, n, a, &no, &res, err, sizeof err) == BERT8_OK, "%s", err);
        int bad = 0;
        for (int i = 0; i < n && res.n == n; i++) {
            bad += cmp_items(res.words + res.word_offsets[i], res.word_offsets[i + 1] - res.word_offsets[i],
                             cJSON_GetArrayItem(cJSON_GetObjectItem(run, "words"), i), NULL);
            bad += cmp_items(res.entities + res.entity_offsets[i], res.entity_offsets[i + 1] - res.entity_offsets[i],
                             cJSON_GetArrayItem(cJSON_GetObjectItem(run, "entities"), i), NULL);
        }
        CHECKF(bad == 0 && res.n == n, "run %s: %d texts differ", runs[r], bad);
        bert8_ner_result_free(&res);
        bert8_pipeline_free(p);
    }
    table_free(&t);
    cJSON_Delete(ref);
}

/* The transformers aggregation strategies on hand-made label runs: a text whose words all get
 * the same B-/I- label groups as transformers' group_entities does. */
TEST(ner_aggregation_strategies_group_as_transformers_does) {
    cJSON *labels = cJSON_CreateArray();
    const char *names[] = {"O", "B-PER", "I-PER", "B-LOC", "I-LOC"};
    for (int i = 0; i < 5; i++) cJSON_AddItemToArray(labels, cJSON_CreateString(names[i]));
    const char *dir = ner_folder(labels);
    cJSON_Delete(labels);
    bert8_pipeline *p = dir ? open_p(dir, NULL) : NULL;
    CHECK(p != NULL);
    if (!p) return;
    bert8_text t = txt("Hello worldwide unbelievable things, Tokyo and Paris.");
    bert8_ner_result r[5] = {{0}};
    char err[1024];
    for (int agg = BERT8_AGG_NONE; agg <= BERT8_AGG_MAX; agg++) {
        bert8_ner_options o = bert8_default_ner_options();
        o.aggregation = (bert8_aggregation)agg;
        o.keep_outside = 1;
        CHECKF(bert8_ner(p, 1, &t, &o, &r[agg], err, sizeof err) == BERT8_OK, "%s", err);
    }
    /* none: one item per token; simple: items are tokens too; first/average/max: words */
    CHECK(r[BERT8_AGG_NONE].word_offsets[1] == r[BERT8_AGG_SIMPLE].word_offsets[1]);
    CHECK(r[BERT8_AGG_FIRST].word_offsets[1] == r[BERT8_AGG_AVERAGE].word_offsets[1]);
    CHECK(r[BERT8_AGG_FIRST].word_offsets[1] < r[BERT8_AGG_NONE].word_offsets[1]); /* sub-words merged */
    for (int agg = BERT8_AGG_SIMPLE; agg <= BERT8_AGG_MAX; agg++) {
        const bert8_ner_result *x = &r[agg];
        /* groups: consecutive items of one type, a B- item starting a new group */
        int64_t expect = 0;
        const char *open = NULL;
        for (int64_t i = 0; i < x->word_offsets[1]; i++) {
            const char *l = x->words[i].label;
            const char *tag = strchr(l, '-') ? l + 2 : l;
            if (!open || l[0] == 'B' || strcmp(tag, open)) expect++;
            open = tag;
        }
        CHECKF(x->entity_offsets[1] == expect, "aggregation %d: %lld groups, expected %lld", agg,
               (long long)x->entity_offsets[1], (long long)expect);
        for (int64_t i = 0; i < x->entity_offsets[1]; i++)
            CHECK(x->entities[i].end > x->entities[i].start && x->entities[i].end <= (int64_t)t.len &&
                  x->entities[i].score > 0 && x->entities[i].score <= 1 && x->entities[i].index == -1);
    }
    for (int64_t i = 0; i < r[0].entity_offsets[1]; i++) CHECK(r[0].entities[i].index >= 1);
    /* without keep_outside, "O" groups are dropped */
    bert8_ner_result d = {0};
    bert8_ner_options o = bert8_default_ner_options();
    CHECK(bert8_ner(p, 1, &t, &o, &d, err, sizeof err) == BERT8_OK);
    for (int64_t i = 0; i < d.entity_offsets[1]; i++) CHECK(strcmp(d.entities[i].label, "O") != 0);
    bert8_ner_result_free(&d);
    for (int agg = 0; agg < 5; agg++) bert8_ner_result_free(&r[agg]);
    bert8_pipeline_free(p);
}

/* ---- batching and threads ------------------------------------------------------------------- */

static table g_sst;

TEST(results_do_not_depend_on_padding_or_the_batch_budget) {
    CHECK(g_sst.rows > 300);
    const int n = 300;
    bert8_text *a = malloc(n * sizeof *a);
    for (int i = 0; i < n; i++) a[i] = txt(cell(&g_sst, i, "sentence"));
    float *ref = NULL;
    const int64_t budgets[] = {8192, 700, 64};
    for (int k = 0; k < 6; k++) {
        bert8_pipeline_params pp = bert8_default_pipeline_params();
        pp.padding_free = k % 2;
        pp.max_batch_tokens = budgets[k / 2];
        pp.max_batch_size = k / 2 == 2 ? 1 : 64;
        bert8_pipeline *p = open_p("models/stsb-bert-mini", &pp);
        CHECK(p != NULL);
        if (!p) continue;
        const int64_t H = bert8_pipeline_get_info(p)->dim;
        float *e = malloc((size_t)(n * H) * sizeof(float));
        char err[1024];
        CHECKF(bert8_embed(p, n, a, NULL, NULL, NULL, e, err, sizeof err) == BERT8_OK, "%s", err);
        if (!ref) {
            ref = e;
        } else {
            double worst = 0;
            for (int64_t i = 0; i < n * H; i++) worst = fmax(worst, rel(e[i], ref[i]));
            CHECKF(worst < 1e-5, "padding_free %d, budget %lld: deviates %.3g", k % 2, (long long)budgets[k / 2], worst);
            free(e);
        }
        bert8_pipeline_free(p);
    }
    free(ref);
    free(a);
}

typedef struct job {
    const bert8_pipeline *p;
    const bert8_text *a;
    int n;
    float *out;
    int rc;
} job;

static void *worker(void *arg) {
    job *j = arg;
    char err[256];
    const int64_t L = bert8_pipeline_get_info(j->p)->num_labels;
    for (int rep = 0; rep < 3 && !j->rc; rep++)
        j->rc = bert8_classify(j->p, j->n, j->a, NULL, NULL, BERT8_SCORE_AUTO, j->out + (size_t)rep * j->n * L, err,
                               sizeof err);
    return NULL;
}

TEST(threads_sharing_one_pipeline_get_the_single_threaded_results) {
    bert8_pipeline *p = open_p("models/sst2-bert-mini", NULL);
    CHECK(p != NULL);
    if (!p) return;
    const int n = 96, T = 4;
    const int64_t L = bert8_pipeline_get_info(p)->num_labels;
    bert8_text *a = malloc(n * sizeof *a);
    for (int i = 0; i < n; i++) a[i] = txt(cell(&g_sst, 400 + i, "sentence"));
    float *ref = malloc((size_t)(n * L) * sizeof(float));
    char err[256];
    CHECK(bert8_classify(p, n, a, NULL, NULL, BERT8_SCORE_AUTO, ref, err, sizeof err) == BERT8_OK);
    job jobs[4];
    pthread_t th[4];
    for (int t = 0; t < T; t++) {
        jobs[t] = (job){p, a, n, malloc((size_t)(3 * n * L) * sizeof(float)), 0};
        pthread_create(&th[t], NULL, worker, &jobs[t]);
    }
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        CHECK(jobs[t].rc == BERT8_OK);
        for (int rep = 0; rep < 3; rep++)
            CHECKF(!memcmp(jobs[t].out + (size_t)rep * n * L, ref, (size_t)(n * L) * sizeof(float)),
                   "thread %d, repeat %d differs", t, rep);
        free(jobs[t].out);
    }
    free(ref);
    free(a);
    bert8_pipeline_free(p);
}

/* ---- errors ------------------------------------------------------------------------------------ */

TEST(bad_calls_fail_with_a_status_and_a_message_naming_the_input) {
    bert8_pipeline_params pp = bert8_default_pipeline_params();
    pp.max_text_bytes = 1000;
    pp.max_inputs = 10;
    bert8_pipeline *p = open_p("models/sst2-bert-mini", &pp);
    CHECK(p != NULL);
    if (!p) return;
    char err[1024];
    float out[64];
    bert8_text a[12];
    for (int i = 0; i < 12; i++) a[i] = txt("fine");
    a[2] = (bert8_text){"ok \xC3\x28 no", 9};
    CHECK(bert8_classify(p, 3, a, NULL, NULL, BERT8_SCORE_AUTO, out, err, sizeof err) == BERT8_ERR_ENCODING &&
          strstr(err, "text 2") && strstr(err, "byte 3"));
    a[2] = txt("fine");
    CHECK(bert8_classify(p, 11, a, NULL, NULL, BERT8_SCORE_AUTO, out, err, sizeof err) == BERT8_ERR_TOO_LARGE);
    static char big[2000];
    memset(big, 'a', sizeof big);
    a[1] = (bert8_text){big, sizeof big};
    CHECK(bert8_classify(p, 2, a, NULL, NULL, BERT8_SCORE_AUTO, out, err, sizeof err) == BERT8_ERR_TOO_LARGE &&
          strstr(err, "text 1"));
    /* too long without truncation */
    char words[1000] = "";
    for (int i = 0; i < 300; i++) strcat(words, "ab ");
    a[1] = txt(words);
    bert8_run_options ro = bert8_default_run_options();
    ro.truncate = 0;
    CHECK(bert8_classify(p, 2, a, NULL, &ro, BERT8_SCORE_AUTO, out, err, sizeof err) == BERT8_ERR_TOO_LARGE &&
          strstr(err, "input 1"));
    ro.truncate = 1;
    CHECK(bert8_classify(p, 2, a, NULL, &ro, BERT8_SCORE_AUTO, out, err, sizeof err) == BERT8_OK);
    ro.truncation_side = BERT8_SIDE_LEFT;
    CHECK(bert8_classify(p, 2, a, NULL, &ro, BERT8_SCORE_AUTO, out, err, sizeof err) == BERT8_OK);
    ro.truncation_side = (bert8_side)7;
    CHECK(bert8_classify(p, 2, a, NULL, &ro, BERT8_SCORE_AUTO, out, err, sizeof err) == BERT8_ERR_INVALID_ARG);
    CHECK(bert8_classify(p, 1, a, NULL, NULL, (bert8_score_fn)9, out, err, sizeof err) == BERT8_ERR_INVALID_ARG);
    /* the wrong task */
    bert8_qa_answer ans;
    CHECK(bert8_qa(p, 1, a, a, NULL, &ans, err, sizeof err) == BERT8_ERR_UNSUPPORTED && strstr(err, "question answering"));
    bert8_ner_result r = {0};
    CHECK(bert8_ner(p, 1, a, NULL, &r, err, sizeof err) == BERT8_ERR_UNSUPPORTED && r.n == 0);
    bert8_embed_options eo = bert8_default_embed_options();
    eo.dimensions = 100000;
    CHECK(bert8_embed(p, 1, a, NULL, NULL, &eo, out, err, sizeof err) == BERT8_ERR_INVALID_ARG);
    /* no inputs is fine */
    CHECK(bert8_classify(p, 0, NULL, NULL, NULL, BERT8_SCORE_AUTO, NULL, err, sizeof err) == BERT8_OK);
    bert8_pipeline_free(p);
    /* a folder that is not there */
    bert8_pipeline *q = NULL;
    CHECK(bert8_pipeline_open("/nonexistent/model", NULL, &q, err, sizeof err) != BERT8_OK && !q && err[0]);
    pp.max_batch_tokens = 0;
    CHECK(bert8_pipeline_open("models/sst2-bert-mini", &pp, &q, err, sizeof err) == BERT8_ERR_INVALID_ARG && !q);
}

TEST(rerank_sorts_by_score_and_embed_tokens_returns_every_token) {
    bert8_pipeline *p = open_p("models/stsb-bert-mini", NULL);
    CHECK(p != NULL);
    if (!p) return;
    bert8_text q = txt("A man is playing a guitar."), d[4] = {txt("A man plays the guitar."), txt("A woman is slicing an onion."),
                                                                 txt("Someone plays an instrument."), txt("The sky is blue.")};
    float s[4], raw[4];
    int64_t order[4];
    char err[256];
    CHECK(bert8_rerank(p, q, 4, d, NULL, 0, s, order, err, sizeof err) == BERT8_OK);
    CHECK(bert8_rerank(p, q, 4, d, NULL, 1, raw, NULL, err, sizeof err) == BERT8_OK);
    for (int i = 0; i < 4; i++) CHECK(fabs(s[i] - 1.0 / (1.0 + exp(-raw[i]))) < 1e-6);
    for (int i = 1; i < 4; i++) CHECK(s[order[i - 1]] >= s[order[i]]);
    bert8_pipeline_free(p);
    p = open_p("models/sst2-bert-mini", NULL);
    bert8_token_embeddings te = {0};
    CHECK(p && bert8_embed_tokens(p, 4, d, NULL, &te, err, sizeof err) == BERT8_OK);
    CHECK(te.n == 4 && te.dim == bert8_pipeline_get_info(p)->dim && te.offsets[0] == 0);
    for (int i = 0; i < 4 && te.n == 4; i++) CHECK(te.offsets[i + 1] - te.offsets[i] >= 3); /* [CLS] words [SEP] */
    bert8_token_embeddings_free(&te);
    bert8_pipeline_free(p);
}

/* The pre-tokenized entry points give what the text calls give, and refuse bad ids by name. */
/* TEI refuses an empty input (its tokenization's is_empty: a text with no bytes; a pair only when
 * both are empty) with "`inputs` cannot be empty"; the embedding and reranking calls say the same
 * and name the input, instead of embedding [CLS] [SEP]. */
TEST(an_empty_text_is_refused_by_name_as_tei_refuses_it) {
    bert8_pipeline *p = open_p("models/stsb-bert-mini", NULL);
    CHECK(p != NULL);
    if (!p) return;
    char err[256];
    const int64_t D = bert8_pipeline_get_info(p)->dim;
    float *out = calloc((size_t)(3 * D), sizeof *out), s[2];
    bert8_text a[3] = {txt("a man plays"), txt(""), txt("x")}, b[3] = {txt(""), txt(""), txt("")};
    CHECK(bert8_embed(p, 3, a, NULL, NULL, NULL, out, err, sizeof err) == BERT8_ERR_INVALID_ARG &&
          strstr(err, "text 1 is empty") && strstr(err, "`inputs` cannot be empty"));
    CHECK(bert8_embed(p, 3, a, b, NULL, NULL, out, err, sizeof err) == BERT8_ERR_INVALID_ARG &&
          strstr(err, "text 1 is empty, and so is its pair"));
    b[1] = txt("a pair"); /* one text of the pair holds something: embedded, as TEI does */
    CHECK(bert8_embed(p, 3, a, b, NULL, NULL, out, err, sizeof err) == BERT8_OK);
    bert8_token_embeddings te = {0};
    CHECK(bert8_embed_tokens(p, 3, a, NULL, &te, err, sizeof err) == BERT8_ERR_INVALID_ARG && strstr(err, "text 1"));
    bert8_token_embeddings_free(&te);
    bert8_text d[2] = {txt("a man plays"), txt("")};
    CHECK(bert8_rerank(p, txt(""), 2, d, NULL, 0, s, NULL, err, sizeof err) == BERT8_ERR_INVALID_ARG &&
          strstr(err, "the query and text 1 are empty"));
    CHECK(bert8_rerank(p, txt("q"), 2, d, NULL, 0, s, NULL, err, sizeof err) == BERT8_OK);
    CHECK(bert8_rerank(p, txt(""), 1, d, NULL, 0, s, NULL, err, sizeof err) == BERT8_OK);
    free(out);
    bert8_pipeline_free(p);
}

TEST(pre_tokenized_inputs_equal_the_text_calls) {
    bert8_pipeline *p = open_p("models/sst2-bert-mini", NULL);
    CHECK(p != NULL);
    if (!p) return;
    bert8_text t[3] = {txt("a gripping, beautifully acted film"), txt("dull"),
                       txt("it is neither good nor bad , just long and long and long")};
    char err[512];
    bert8_encoding enc = {0};
    int64_t plen = -1;
    bert8_run_options ro = bert8_default_run_options();
    ro.max_length = 8; /* the third is cut */
    CHECKF(bert8_pipeline_encode(p, 3, t, NULL, &ro, NULL, &enc, &plen, err, sizeof err) == BERT8_OK, "%s", err);
    CHECK(enc.rows == 3 && plen == 0 && enc.lengths[2] == 8);
    bert8_token_ids in[3];
    for (int i = 0; i < 3 && enc.rows == 3; i++)
        in[i] = (bert8_token_ids){enc.input_ids + i * enc.seq, enc.token_type_ids + i * enc.seq, enc.lengths[i], 0};
    const int64_t L = bert8_pipeline_get_info(p)->num_labels, D = bert8_pipeline_get_info(p)->dim;
    float a[3 * 8], b[3 * 8], *ea = malloc(3 * (size_t)D * sizeof(float)), *eb = malloc(3 * (size_t)D * sizeof(float));
    CHECK(L <= 8 && ea && eb);
    CHECK(bert8_classify(p, 3, t, NULL, &ro, BERT8_SCORE_NONE, a, err, sizeof err) == BERT8_OK);
    CHECK(bert8_classify_ids(p, 3, in, BERT8_SCORE_NONE, b, err, sizeof err) == BERT8_OK);
    for (int64_t i = 0; i < 3 * L; i++) CHECKF(a[i] == b[i], "logit %lld: %g vs %g", (long long)i, a[i], b[i]);
    CHECK(bert8_embed(p, 3, t, NULL, &ro, NULL, ea, err, sizeof err) == BERT8_OK);
    CHECK(bert8_embed_ids(p, 3, in, NULL, eb, err, sizeof err) == BERT8_OK);
    for (int64_t i = 0; i < 3 * D; i++) CHECKF(ea[i] == eb[i], "embedding value %lld differs", (long long)i);
    bert8_token_embeddings te = {0};
    CHECK(bert8_embed_tokens_ids(p, 3, in, &te, err, sizeof err) == BERT8_OK && te.n == 3 && te.offsets[3] == enc.lengths[0] + enc.lengths[1] + 8);
    bert8_token_embeddings_free(&te);
    /* bad rows, each named */
    int32_t bad_ids[2] = {101, 1 << 30};
    bert8_token_ids bad = {bad_ids, NULL, 2, 0};
    CHECK(bert8_embed_ids(p, 1, &bad, NULL, eb, err, sizeof err) == BERT8_ERR_INVALID_ARG && strstr(err, "outside the vocabulary"));
    bad = in[0];
    bad.prompt_len = bad.len + 1;
    CHECK(bert8_embed_ids(p, 1, &bad, NULL, eb, err, sizeof err) == BERT8_ERR_INVALID_ARG && strstr(err, "prompt_len"));
    bad.prompt_len = 0;
    bad.len = bert8_pipeline_get_info(p)->max_length + 1;
    CHECK(bert8_classify_ids(p, 1, &bad, BERT8_SCORE_NONE, b, err, sizeof err) == BERT8_ERR_TOO_LARGE);
    bad.len = 0;
    CHECK(bert8_embed_tokens_ids(p, 1, &bad, &te, err, sizeof err) == BERT8_ERR_INVALID_ARG);
    /* a prompt on a folder without prompts: the named prompt is unknown, a text prompt works */
    bert8_embed_options eo = bert8_default_embed_options();
    eo.prompt_name = "query";
    CHECK(bert8_embed(p, 1, t, NULL, NULL, &eo, ea, err, sizeof err) == BERT8_ERR_INVALID_ARG &&
          strstr(err, "no prompts were found"));
    eo.prompt_name = NULL;
    eo.prompt = txt("query: ");
    const int64_t len1 = in[1].len; /* in[] points into enc: keep what is compared below */
    const int32_t word1 = in[1].ids[1];
    bert8_encoding_free(&enc);
    /* [CLS] + the prompt's pieces ("query" may be two) + ":" lead the row; the prompt's own [SEP]
     * is not counted (sentence-transformers' prompt_length) */
    CHECKF(bert8_pipeline_encode(p, 1, t + 1, NULL, NULL, &eo, &enc, &plen, err, sizeof err) == BERT8_OK && plen >= 3 &&
           enc.lengths[0] == len1 + plen - 1 && enc.input_ids[plen] == word1,
           "prompt_len %lld, row %lld tokens", (long long)plen, (long long)enc.lengths[0]);
    eo.prompt = (bert8_text){"\xff", 1};
    CHECK(bert8_embed(p, 1, t, NULL, NULL, &eo, ea, err, sizeof err) == BERT8_ERR_ENCODING && strstr(err, "prompt"));
    free(ea);
    free(eb);
    bert8_encoding_free(&enc);
    bert8_pipeline_free(p);
}

int main(void) {
    if (!table_load(tu_shared_path("data/glue/SST-2.dev.tsv"), &g_sst)) {
        printf("cannot read %s\n", tu_shared_path("data/glue/SST-2.dev.tsv"));
        return 1;
    }
    RUN(classify_gives_the_cli_reference_logits);
    RUN(embed_gives_the_cli_reference_embeddings);
    RUN(qa_gives_the_cli_reference_spans);
    RUN(ner_gives_the_cli_reference_words_and_entities);
    RUN(ner_aggregation_strategies_group_as_transformers_does);
    RUN(results_do_not_depend_on_padding_or_the_batch_budget);
    RUN(threads_sharing_one_pipeline_get_the_single_threaded_results);
    RUN(bad_calls_fail_with_a_status_and_a_message_naming_the_input);
    RUN(rerank_sorts_by_score_and_embed_tokens_returns_every_token);
    RUN(an_empty_text_is_refused_by_name_as_tei_refuses_it);
    RUN(pre_tokenized_inputs_equal_the_text_calls);
    table_free(&g_sst);
    return tu_finish();
}
