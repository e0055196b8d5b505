/* test_cli.c: the text commands (tokenize, classify, embed, qa, ner) and `bert8 eval`, run as
 * subprocesses of the built tool on the golden models. Expected values come from the golden
 * cases (transformers' ids and outputs) or from the tool's lower-level commands (tokenize +
 * forward) with the selection rule recomputed here. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "golden.h"
#include "metrics.h"
#include "io/safetensors.h"
#include "testutil.h"

/* ---- helpers ---------------------------------------------------------------------------- */

static const char *tmp_path(const char *name) {
    static char buf[8][1024];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", tu_tmpdir(), name);
    return b;
}

static tu_run run_str(const char *input, const char *fmt, const char *a1, const char *a2) {
    return tu_cli(input, strlen(input), fmt, a1, a2);
}

static const char *gpath(const char *model) {
    static char buf[4][1024];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s", tu_shared_path("golden/models"));
    size_t n = strlen(b);
    snprintf(b + n, sizeof buf[0] - n, "/%s", model);
    return b;
}

static int copy_file(const char *from, const char *to) {
    size_t n;
    char *d = tu_read_file(from, &n);
    if (!d) return -1;
    int rc = tu_write_file(to, d, n);
    free(d);
    return rc;
}

/* A model folder in the temp dir: config.json + model.safetensors of `model`, with bert_e2e's
 * WordPiece files when `bert_tokenizer` (the golden task models have vocabulary size 1000 and
 * no tokenizer files). */
static const char *make_folder(const char *name, const char *model, bool bert_tokenizer) {
    static char dirs[8][1024];
    static int k;
    char *d = dirs[k++ % 8];
    snprintf(d, sizeof dirs[0], "%s", tmp_path(name));
    mkdir(d, 0755);
    char from[1200], to[1200];
    const char *files[] = {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json",
                           "special_tokens_map.json"};
    for (int i = 0; i < 5; i++) {
        snprintf(from, sizeof from, "%s/%s", gpath(i < 2 ? model : "bert_e2e"), files[i]);
        snprintf(to, sizeof to, "%s/%s", d, files[i]);
        if ((i < 2 || bert_tokenizer) && copy_file(from, to)) return NULL;
    }
    return d;
}

/* Replaces config.json's id2label (and drops label2id) of a folder. */
static int set_labels(const char *dir, const char *const *labels, int n) {
    char path[1200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = tu_read_file(path, NULL);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!root) return -1;
    cJSON_DeleteItemFromObject(root, "id2label");
    cJSON_DeleteItemFromObject(root, "label2id");
    cJSON *m = cJSON_AddObjectToObject(root, "id2label");
    for (int i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        cJSON_AddStringToObject(m, key, labels[i]);
    }
    char *out = cJSON_Print(root);
    int rc = out ? tu_write_file(path, out, strlen(out)) : -1;
    free(out);
    cJSON_Delete(root);
    return rc;
}

/* Keeps the first `keep` rows of the classifier of a folder's checkpoint (e.g. 1 for a
 * regression head). */
static int shrink_classifier(const char *dir, int64_t keep) {
    char path[1200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    b8_st *st = NULL;
    b8_err e;
    if (b8_st_open(path, &st, &e)) return -1;
    size_t n = b8_st_count(st);
    b8_st_write_item *items = calloc(n, sizeof *items);
    void **copies = calloc(n, sizeof *copies);
    int rc = items && copies ? 0 : -1;
    for (size_t i = 0; i < n && !rc; i++) {
        const b8_st_tensor *t = b8_st_at(st, i);
        items[i].name = t->name;
        items[i].dtype = t->dtype;
        items[i].ndim = t->ndim;
        memcpy(items[i].shape, t->shape, sizeof t->shape);
        if (!strcmp(t->name, "classifier.weight") || !strcmp(t->name, "classifier.bias"))
            items[i].shape[0] = keep;
        copies[i] = malloc(t->nbytes ? t->nbytes : 1);
        if (!copies[i])
            rc = -1;
        else
            memcpy(copies[i], t->data, t->nbytes); /* the first rows are a prefix */
        items[i].data = copies[i];
    }
    if (!rc) {
        /* write next to the mapped file, then replace it */
        char tmp[1300];
        snprintf(tmp, sizeof tmp, "%s.new", path);
        rc = b8_st_write(tmp, items, n, NULL, &e) ? -1 : 0;
        if (!rc) rc = rename(tmp, path);
    }
    for (size_t i = 0; copies && i < n; i++)
        free(copies[i]);
    free(copies);
    free(items);
    b8_st_close(st);
    return rc;
}

static double jnum(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Appends one JSON line {"k1": v1, "k2": v2} (v2 NULL: omitted) to a growing buffer. */
static void add_line(char **buf, const char *k1, const char *v1, const char *k2, const char *v2) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, k1, v1);
    if (v2) cJSON_AddStringToObject(o, k2, v2);
    char *s = cJSON_PrintUnformatted(o);
    size_t old = *buf ? strlen(*buf) : 0;
    *buf = realloc(*buf, old + strlen(s) + 2);
    memcpy(*buf + old, s, strlen(s));
    (*buf)[old + strlen(s)] = '\n';
    (*buf)[old + strlen(s) + 1] = 0;
    free(s);
    cJSON_Delete(o);
}

/* The golden cases of a model as parallel arrays of rows (text, pair, case, row). */
typedef struct golden_rows {
    cJSON *root;
    const char *text[32], *pair[32];
    int kase[32], row[32], n;
    char *input; /* the rows as JSON lines */
} golden_rows;

static void golden_rows_load(golden_rows *g, const char *model) {
    memset(g, 0, sizeof *g);
    g->root = golden_load(model);
    if (!g->root) return;
    for (int c = 0; c < golden_case_count(g->root); c++) {
        const cJSON *cs = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(g->root, "cases"), c);
        const cJSON *texts = cJSON_GetObjectItemCaseSensitive(cs, "texts");
        const cJSON *pairs = cJSON_GetObjectItemCaseSensitive(cs, "text_pairs");
        for (int i = 0; i < cJSON_GetArraySize(texts) && g->n < 32; i++) {
            const cJSON *p = cJSON_GetArrayItem(pairs, i);
            g->text[g->n] = cJSON_GetArrayItem(texts, i)->valuestring;
            g->pair[g->n] = cJSON_IsString(p) ? p->valuestring : NULL;
            g->kase[g->n] = c;
            g->row[g->n] = i;
            add_line(&g->input, "text", g->text[g->n], "text_pair", g->pair[g->n]);
            g->n++;
        }
    }
}

static void golden_rows_free(golden_rows *g) {
    cJSON_Delete(g->root);
    free(g->input);
}

static int64_t case_length(const cJSON *root, int kase, int row) {
    const cJSON *cs = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "cases"), kase);
    return (int64_t)cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cs, "lengths"), row)
        ->valuedouble;
}

/* ---- tokenize --------------------------------------------------------------------------- */

static void check_tokenize_golden(const char *model, bool types) {
    golden_rows g;
    golden_rows_load(&g, model);
    CHECK(g.root && g.n >= 4);
    if (!g.root) return;
    tu_run r = tu_cli(g.input, strlen(g.input), "tokenize '%s'", gpath(model));
    CHECKF(r.rc == 0 && r.n == g.n, "rc %d, %d lines for %d inputs: %s", r.rc, r.n, g.n, r.err);
    for (int i = 0; i < g.n && i < r.n; i++) {
        golden_case c;
        if (golden_case_get(g.root, g.kase[i], &c)) {
            CHECK(0);
            continue;
        }
        int64_t L = case_length(g.root, g.kase[i], g.row[i]);
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(r.lines[i], "input_ids");
        const cJSON *tt = cJSON_GetObjectItemCaseSensitive(r.lines[i], "token_type_ids");
        const cJSON *toks = cJSON_GetObjectItemCaseSensitive(r.lines[i], "tokens");
        const cJSON *gtoks =
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c.json, "tokens"), g.row[i]);
        CHECKF(cJSON_GetArraySize(ids) == L, "%s input %d: %d ids, golden %lld", model, i,
               cJSON_GetArraySize(ids), (long long)L);
        int bad = 0;
        for (int64_t j = 0; j < L && j < cJSON_GetArraySize(ids); j++) {
            bad += cJSON_GetArrayItem(ids, (int)j)->valueint != c.ids[g.row[i] * c.T + j];
            bad += cJSON_GetArrayItem(tt, (int)j)->valueint !=
                   (types ? c.types[g.row[i] * c.T + j] : 0);
            const char *a = cJSON_GetArrayItem(toks, (int)j)->valuestring,
                       *b = cJSON_GetArrayItem(gtoks, (int)j)->valuestring;
            bad += !a || !b || strcmp(a, b);
        }
        CHECKF(bad == 0, "%s input %d (\"%s\"): %d ids/types/tokens differ from transformers",
               model, i, g.text[i], bad);
        golden_case_free(&c);
    }
    tu_run_free(&r);
    golden_rows_free(&g);
}

TEST(tokenize_matches_golden_ids_bert) {
    check_tokenize_golden("bert_e2e", true);
}
TEST(tokenize_matches_golden_ids_xlmr) {
    check_tokenize_golden("xlmr_e2e", false);
}

TEST(tokenize_plain_lines_tab_pairs_and_offsets) {
    const char *in = "How old are you?\tI am 6 years old.\nCaf\xC3\xA9 na\xC3\xAFve\n";
    tu_run r = run_str(in, "tokenize '%s'", gpath("bert_e2e"), NULL);
    CHECKF(r.rc == 0 && r.n == 2, "%s", r.err);
    if (r.n == 2) {
        /* golden single_1: the same pair */
        static const int want[] = {2, 691, 333, 307, 834, 35, 3, 51, 614, 26, 833, 333, 18, 3};
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(r.lines[0], "input_ids");
        CHECK(cJSON_GetArraySize(ids) == 14);
        for (int j = 0; j < 14 && j < cJSON_GetArraySize(ids); j++)
            CHECK(cJSON_GetArrayItem(ids, j)->valueint == want[j]);
        /* "naïve": characters 5..10, bytes 6..12 */
        const cJSON *co =
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r.lines[1], "offsets"), 2);
        const cJSON *bo =
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r.lines[1], "byte_offsets"), 2);
        CHECK(cJSON_GetArrayItem(co, 0)->valueint == 5 &&
              cJSON_GetArrayItem(co, 1)->valueint == 10);
        CHECK(cJSON_GetArrayItem(bo, 0)->valueint == 6 &&
              cJSON_GetArrayItem(bo, 1)->valueint == 12);
    }
    tu_run_free(&r);
}

TEST(tokenize_max_length_truncates) {
    tu_run r = run_str("one two three four five six seven eight nine ten eleven twelve\n",
                        "tokenize '%s' --max-length 8", gpath("bert_e2e"), NULL);
    CHECK(r.rc == 0 && r.n == 1);
    if (r.n == 1)
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r.lines[0], "input_ids")) == 8);
    tu_run_free(&r);
}

/* ---- classify --------------------------------------------------------------------------- */

TEST(classify_scores_match_softmax_of_golden_logits) {
    golden_rows g;
    golden_rows_load(&g, "xlmr_e2e");
    CHECK(g.root != NULL);
    if (!g.root) return;
    tu_run r = tu_cli(g.input, strlen(g.input), "classify '%s' --batch 2", gpath("xlmr_e2e"));
    CHECKF(r.rc == 0 && r.n == g.n, "rc %d: %s", r.rc, r.err);
    for (int i = 0; i < g.n && i < r.n; i++) {
        golden_case c;
        if (golden_case_get(g.root, g.kase[i], &c)) continue;
        const cJSON *lg = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(c.outputs, "logits"), "data");
        double l[3], mx = -1e30, sum = 0;
        int arg = 0;
        for (int k = 0; k < 3; k++) {
            l[k] = cJSON_GetArrayItem(lg, g.row[i] * 3 + k)->valuedouble;
            if (l[k] > mx) mx = l[k], arg = k;
        }
        for (int k = 0; k < 3; k++)
            sum += exp(l[k] - mx);
        const cJSON *scores = cJSON_GetObjectItemCaseSensitive(r.lines[i], "scores");
        for (int k = 0; k < 3; k++) {
            char name[16];
            snprintf(name, sizeof name, "LABEL_%d", k);
            double want = exp(l[k] - mx) / sum, got = jnum(scores, name);
            CHECKF(fabs(got - want) < 1e-4, "input %d class %d: %g vs golden softmax %g", i, k, got,
                   want);
        }
        CHECK(jnum(r.lines[i], "label_id") == arg);
        char want[32];
        snprintf(want, sizeof want, "LABEL_%d", arg);
        CHECK(jstr(r.lines[i], "label") && !strcmp(jstr(r.lines[i], "label"), want));
        CHECK(fabs(jnum(r.lines[i], "score") - 1.0 / sum) < 1e-4);
        golden_case_free(&c);
    }
    tu_run_free(&r);
    golden_rows_free(&g);
}

TEST(classify_regression_head_prints_the_value) {
    const char *d = make_folder("reg", "bert_seqcls", true);
    static const char *lab[] = {"LABEL_0"};
    CHECK(d && !set_labels(d, lab, 1) && !shrink_classifier(d, 1));
    tu_run r = run_str("A man is dancing.\tA man dances.\n", "classify '%s' --logits", d, NULL);
    CHECKF(r.rc == 0 && r.n == 1, "%s", r.err);
    if (r.n == 1) {
        CHECK(!cJSON_GetObjectItemCaseSensitive(r.lines[0], "label"));
        const cJSON *lg = cJSON_GetObjectItemCaseSensitive(r.lines[0], "logits");
        CHECK(cJSON_GetArraySize(lg) == 1 &&
              jnum(r.lines[0], "score") == cJSON_GetArrayItem(lg, 0)->valuedouble);
    }
    tu_run_free(&r);
}

/* ---- embed ------------------------------------------------------------------------------ */

/* Pools golden last_hidden_state row `row` of a case: cls or the mean over the mask. */
static void golden_pool(const golden_case *c, int row, bool cls, double *out, int H) {
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(c->outputs, "last_hidden_state"), "data");
    int cnt = 0;
    for (int d = 0; d < H; d++)
        out[d] = 0;
    for (int64_t t = 0; t < (cls ? 1 : c->T); t++) {
        if (!c->mask[row * c->T + t]) continue;
        cnt++;
        for (int d = 0; d < H; d++)
            out[d] += cJSON_GetArrayItem(h, (int)((row * c->T + t) * H + d))->valuedouble;
    }
    for (int d = 0; d < H; d++)
        out[d] /= cnt;
}

static void check_embed(const char *dir, const char *flags, bool cls, bool norm) {
    golden_rows g;
    golden_rows_load(&g, "bert_e2e");
    if (!g.root) {
        CHECK(0);
        return;
    }
    tu_run r = tu_cli(g.input, strlen(g.input), "embed '%s' %s", dir, flags);
    CHECKF(r.rc == 0 && r.n == g.n, "rc %d: %s", r.rc, r.err);
    for (int i = 0; i < g.n && i < r.n; i++) {
        golden_case c;
        if (golden_case_get(g.root, g.kase[i], &c)) continue;
        double want[32], nrm = 0, worst = 0;
        golden_pool(&c, g.row[i], cls, want, 32);
        for (int d = 0; d < 32; d++)
            nrm += want[d] * want[d];
        nrm = norm ? sqrt(nrm) : 1;
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(r.lines[i], "embedding");
        CHECK(cJSON_GetArraySize(e) == 32);
        for (int d = 0; d < 32 && d < cJSON_GetArraySize(e); d++)
            worst = fmax(worst, fabs(cJSON_GetArrayItem(e, d)->valuedouble - want[d] / nrm));
        CHECKF(worst < 1e-4, "%s input %d: max error %g against pooled golden hidden states", flags,
               i, worst);
        golden_case_free(&c);
    }
    tu_run_free(&r);
    golden_rows_free(&g);
}

TEST(embed_mean_and_cls_match_pooled_golden_hidden_states) {
    check_embed(gpath("bert_e2e"), "", false, false); /* mean is the default */
    check_embed(gpath("bert_e2e"), "--pooling cls", true, false);
    check_embed(gpath("bert_e2e"), "--pooling mean --normalize --batch 1", false, true);
}

TEST(embed_follows_sentence_transformers_pooling_config) {
    const char *d = make_folder("st", "bert_e2e", true);
    char p[1200];
    snprintf(p, sizeof p, "%s/1_Pooling", d);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/1_Pooling/config.json", d);
    const char *pool = "{\"word_embedding_dimension\": 32, \"pooling_mode_cls_token\": true, "
                       "\"pooling_mode_mean_tokens\": false, \"pooling_mode_max_tokens\": false}";
    CHECK(!tu_write_file(p, pool, strlen(pool)));
    snprintf(p, sizeof p, "%s/modules.json", d);
    const char *mods = "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers."
                       "models.Transformer\"},"
                       "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_"
                       "transformers.models.Pooling\"},"
                       "{\"idx\":2,\"name\":\"2\",\"path\":\"2_Normalize\",\"type\":\"sentence_"
                       "transformers.models.Normalize\"}]";
    CHECK(!tu_write_file(p, mods, strlen(mods)));
    check_embed(d, "", true, true);
    check_embed(d, "--pooling mean --no-normalize", false, false); /* flags override */
}

/* An empty text is a bad line naming its field, as TEI refuses an empty input ("`inputs` cannot be
 * empty"; a pair only when both texts are empty) and the library does: not [CLS] [SEP]. */
TEST(embed_refuses_an_empty_text_by_name) {
    const char *in = "{\"text\": \"\"}\n{\"text\": \"hello\"}\n{\"text\": \"\", \"text_pair\": \"x\"}\n"
                     "{\"text\": \"\", \"text_pair\": \"\"}\n";
    tu_run r = tu_cli(in, strlen(in), "embed '%s' --threads 1", gpath("bert_e2e"));
    CHECKF(r.rc == 1 && r.n == 4, "rc %d, %d lines: %s", r.rc, r.n, r.err);
    if (r.n == 4) {
        const char *e0 = jstr(r.lines[0], "error"), *e3 = jstr(r.lines[3], "error");
        CHECKF(e0 && strstr(e0, "\"text\" is empty") && strstr(e0, "`inputs` cannot be empty"), "%s", r.out);
        CHECK(jnum(r.lines[0], "line") == 1 && jnum(r.lines[3], "line") == 4);
        CHECKF(e3 && strstr(e3, "and so is its pair"), "%s", r.out);
        CHECK(cJSON_GetObjectItemCaseSensitive(r.lines[1], "embedding") &&
              cJSON_GetObjectItemCaseSensitive(r.lines[2], "embedding"));
    }
    CHECK(strstr(r.err, "line 1: \"text\" is empty") != NULL);
    tu_run_free(&r);
}

/* ---- quantize: calibration text ----------------------------------------------------------- */

/* The calibration rows `bert8 quantize --calib FILE` reads (the count its closing line gives). */
static long calib_rows(const char *name, const char *content, const char *extra) {
    char path[1100], out[1200];
    snprintf(path, sizeof path, "%s", tmp_path(name));
    snprintf(out, sizeof out, "%s.int8", path);
    if (tu_write_file(path, content, strlen(content))) return -1;
    tu_run r = tu_bert8("quantize '%s' -o '%s' --calib '%s' --threads 1 %s", gpath("bert_e2e"), out, path, extra);
    const char *w = strstr(r.err, "attention, ");
    long n = r.rc == 0 && w ? strtol(w + strlen("attention, "), NULL, 10) : -1;
    CHECKF(n >= 0, "%s: rc %d: %s", name, r.rc, r.err);
    tu_run_free(&r);
    return n;
}

/* A .tsv without --column: the first line is a header only when it names a text column
 * (sentence, text, sentence1, question, premise), otherwise the first calibration sentence. */
TEST(quantize_reads_a_tsv_header_only_when_it_names_a_text_column) {
    char rows[2048] = "";
    for (int i = 0; i < 20; i++) strcat(rows, i % 2 ? "a dull film\t0\n" : "the movie was great\t1\n");
    char with[2200];
    CHECK(calib_rows("plain.tsv", rows, "") == 20); /* no header: every line calibrates */
    snprintf(with, sizeof with, "sentence\tlabel\n%s", rows);
    CHECK(calib_rows("sst2.tsv", with, "") == 20);
    snprintf(with, sizeof with, "label\ttext\n%s", rows);
    CHECK(calib_rows("text.tsv", with, "") == 20);
    snprintf(with, sizeof with, "a first sentence\t1\n%s", rows);
    CHECK(calib_rows("first.tsv", with, "") == 21);
    snprintf(with, sizeof with, "s\tl\n%s", rows); /* --column: the first line names the columns */
    CHECK(calib_rows("named.tsv", with, "--column s") == 20);
    tu_run r = tu_bert8("quantize '%s' -o '%s' --calib '%s' --column nope", gpath("bert_e2e"),
                        tmp_path("x.int8"), tmp_path("named.tsv"));
    CHECKF(r.rc == 1 && strstr(r.err, "header has no column \"nope\""), "%s", r.err);
    tu_run_free(&r);
}

/* ---- qa --------------------------------------------------------------------------------- */

/* The best span recomputed from `tokenize` + `forward` outputs: context tokens only, start <=
 * end, at most 30 tokens, score = softmax(start)[s] * softmax(end)[e] over context tokens. */
static void qa_reference(const char *dir, const char *question, const char *context, int64_t *b0,
                         int64_t *b1, double *score) {
    char *line = NULL;
    add_line(&line, "text", question, "text_pair", context);
    tu_run t = tu_cli(line, strlen(line), "tokenize '%s'", dir);
    free(line);
    *b0 = *b1 = -1;
    *score = -1;
    if (t.n != 1 || !t.lines[0]) {
        tu_run_free(&t);
        return;
    }
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(t.lines[0], "input_ids");
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(t.lines[0], "token_type_ids");
    cJSON *req = cJSON_CreateObject();
    cJSON *a = cJSON_AddArrayToObject(req, "input_ids"),
          *b = cJSON_AddArrayToObject(req, "token_type_ids");
    cJSON_AddItemToArray(a, cJSON_Duplicate(ids, 1));
    cJSON_AddItemToArray(b, cJSON_Duplicate(tt, 1));
    char *js = cJSON_PrintUnformatted(req);
    tu_write_file(tmp_path("fwd.json"), js, strlen(js));
    free(js);
    cJSON_Delete(req);
    tu_run f = tu_cli("", 0, "forward '%s' --input '%s'", dir, tmp_path("fwd.json"));
    if (f.n == 1 && f.lines[0]) {
        const cJSON *sl =
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(f.lines[0], "start_logits"), 0);
        const cJSON *el =
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(f.lines[0], "end_logits"), 0);
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(t.lines[0], "sequence_ids");
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(t.lines[0], "byte_offsets");
        int T = cJSON_GetArraySize(ids);
        double zs = 0, ze = 0;
        for (int k = 0; k < T; k++)
            if (cJSON_GetArrayItem(seq, k)->valueint == 1 &&
                cJSON_IsNumber(cJSON_GetArrayItem(seq, k))) {
                zs += exp(cJSON_GetArrayItem(sl, k)->valuedouble);
                ze += exp(cJSON_GetArrayItem(el, k)->valuedouble);
            }
        *score = -1;
        for (int s = 0; s < T; s++)
            for (int e = s; e < T && e - s < 30; e++) {
                const cJSON *qs = cJSON_GetArrayItem(seq, s), *qe = cJSON_GetArrayItem(seq, e);
                if (!cJSON_IsNumber(qs) || !cJSON_IsNumber(qe) || qs->valueint != 1 ||
                    qe->valueint != 1)
                    continue;
                double sc = exp(cJSON_GetArrayItem(sl, s)->valuedouble) / zs *
                            exp(cJSON_GetArrayItem(el, e)->valuedouble) / ze;
                if (sc > *score) {
                    *score = sc;
                    *b0 = cJSON_GetArrayItem(cJSON_GetArrayItem(off, s), 0)->valueint;
                    *b1 = cJSON_GetArrayItem(cJSON_GetArrayItem(off, e), 1)->valueint;
                }
            }
    }
    tu_run_free(&f);
    tu_run_free(&t);
}

TEST(qa_picks_the_best_span_of_the_context) {
    const char *d = make_folder("qa", "bert_qa", true);
    static const char *qs[] = {"How old are you?", "Where is the city?", "What is it?"};
    static const char *cs[] = {
        "I am 6 years old. Caf\xC3\xA9 na\xC3\xAFve \xC3\x85ngstr\xC3\xB6m and more.",
        "The city of T\xC5\x8Dky\xC5\x8D lies on the bay, east of Mount Fuji.",
        "It is a small end-to-end test of question answering."};
    char *in = NULL;
    for (int i = 0; i < 3; i++)
        add_line(&in, "question", qs[i], "context", cs[i]);
    tu_run r = tu_cli(in, strlen(in), "qa '%s' --batch 2", d);
    free(in);
    CHECKF(r.rc == 0 && r.n == 3, "rc %d: %s", r.rc, r.err);
    for (int i = 0; i < 3 && i < r.n; i++) {
        int64_t b0, b1;
        double sc = -1;
        qa_reference(d, qs[i], cs[i], &b0, &b1, &sc);
        CHECKF(jnum(r.lines[i], "start_byte") == b0 && jnum(r.lines[i], "end_byte") == b1,
               "question %d: span [%g, %g) but the reference picks [%lld, %lld)", i,
               jnum(r.lines[i], "start_byte"), jnum(r.lines[i], "end_byte"), (long long)b0,
               (long long)b1);
        CHECKF(fabs(jnum(r.lines[i], "score") - sc) < 1e-5 * fmax(sc, 1e-3),
               "question %d: score %g vs %g", i, jnum(r.lines[i], "score"), sc);
        const char *ans = jstr(r.lines[i], "answer");
        CHECK(ans && b0 >= 0 && strlen(ans) == (size_t)(b1 - b0) &&
              !strncmp(ans, cs[i] + b0, (size_t)(b1 - b0)));
        /* character offsets count code points before the byte offsets */
        int64_t chars = 0;
        for (int64_t k = 0; k < b0; k++)
            chars += (cs[i][k] & 0xC0) != 0x80;
        CHECK(jnum(r.lines[i], "start") == chars);
    }
    tu_run_free(&r);
}

TEST(qa_long_contexts_and_long_questions_use_windows) {
    const char *d = make_folder("qa2", "bert_qa", true);
    char ctx[8192] = "", q[4096] = "", q2[4096] = "";
    for (int i = 0; i < 300; i++)
        strcat(ctx, i % 7 ? "word " : "answer here. ");
    for (int i = 0; i < 100; i++)
        strcat(q, "what ");
    for (int i = 0; i < 130; i++)
        strcat(q2, "what ");
    char *in = NULL;
    add_line(&in, "question", "where?", "context", ctx);
    add_line(&in, "question", q, "context", ctx);  /* 100 tokens: the stride must shrink */
    add_line(&in, "question", q2, "context", ctx); /* 130 tokens: no room at all */
    add_line(&in, "question", "where?", "context", "");
    tu_run r = tu_cli(in, strlen(in), "qa '%s'", d); /* the model takes 128 positions */
    free(in);
    CHECKF(r.rc == 1 && r.n == 4, "rc %d, %d lines: %s", r.rc, r.n, r.err);
    for (int i = 0; i < 2 && i < r.n; i++) {
        const char *ans = jstr(r.lines[i], "answer");
        double b0 = jnum(r.lines[i], "start_byte"), b1 = jnum(r.lines[i], "end_byte");
        CHECKF(ans && b0 >= 0 && b1 >= b0 && b1 <= (double)strlen(ctx) &&
                   !strncmp(ans, ctx + (int64_t)b0, strlen(ans)),
               "line %d: %s", i + 1, r.out);
    }
    if (r.n >= 4) {
        CHECK(jnum(r.lines[2], "line") == 3 && jstr(r.lines[2], "error") &&
              strstr(jstr(r.lines[2], "error"), "no room"));
        CHECK(cJSON_IsNull(
            cJSON_GetObjectItemCaseSensitive(r.lines[3], "answer"))); /* empty context */
    }
    tu_run_free(&r);
}

/* ---- ner -------------------------------------------------------------------------------- */

TEST(ner_labels_each_word_by_its_first_subtoken) {
    const char *d = make_folder("ner", "bert_tokcls", true);
    const char *text = "Hello world! Pneumonoultramicroscopic Caf\xC3\xA9 in T\xC5\x8Dky\xC5\x8D.";
    char *in = NULL;
    add_line(&in, "text", text, NULL, NULL);
    tu_run r = tu_cli(in, strlen(in), "ner '%s'", d);
    tu_run t = tu_cli(in, strlen(in), "tokenize '%s'", d);
    free(in);
    CHECKF(r.rc == 0 && r.n == 1 && t.n == 1, "%s", r.err);
    if (r.n == 1 && t.n == 1) {
        cJSON *req = cJSON_CreateObject();
        cJSON_AddItemToArray(
            cJSON_AddArrayToObject(req, "input_ids"),
            cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(t.lines[0], "input_ids"), 1));
        char *js = cJSON_PrintUnformatted(req);
        tu_write_file(tmp_path("fwd.json"), js, strlen(js));
        free(js);
        cJSON_Delete(req);
        tu_run f = tu_cli("", 0, "forward '%s' --input '%s'", d, tmp_path("fwd.json"));
        const cJSON *lg =
            f.n == 1 ? cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(f.lines[0], "logits"), 0)
                     : NULL;
        const cJSON *wid = cJSON_GetObjectItemCaseSensitive(t.lines[0], "word_ids");
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(t.lines[0], "byte_offsets");
        const cJSON *words = cJSON_GetObjectItemCaseSensitive(r.lines[0], "words");
        CHECK(lg != NULL);
        int prev = -1, nw = 0;
        for (int k = 0; lg && k < cJSON_GetArraySize(wid); k++) {
            const cJSON *w = cJSON_GetArrayItem(wid, k);
            if (!cJSON_IsNumber(w) || w->valueint == prev) continue;
            prev = w->valueint;
            const cJSON *row = cJSON_GetArrayItem(lg, k);
            int arg = 0;
            for (int j = 1; j < cJSON_GetArraySize(row); j++)
                if (cJSON_GetArrayItem(row, j)->valuedouble >
                    cJSON_GetArrayItem(row, arg)->valuedouble)
                    arg = j;
            const cJSON *ow = cJSON_GetArrayItem(words, nw++);
            char want[32];
            snprintf(want, sizeof want, "LABEL_%d", arg);
            CHECKF(jstr(ow, "entity") && !strcmp(jstr(ow, "entity"), want),
                   "word %d: %s, first sub-token says %s", nw - 1, jstr(ow, "entity"), want);
            CHECK(jnum(ow, "start_byte") ==
                  cJSON_GetArrayItem(cJSON_GetArrayItem(off, k), 0)->valueint);
        }
        CHECKF(nw == cJSON_GetArraySize(words) && nw == 8, "%d words from word_ids, %d printed", nw,
               cJSON_GetArraySize(words));
        /* "Pneumonoultramicroscopic" is several sub-tokens but one word */
        const cJSON *w3 = cJSON_GetArrayItem(words, 3);
        CHECK(jstr(w3, "word") && !strcmp(jstr(w3, "word"), "Pneumonoultramicroscopic"));
        const cJSON *w4 = cJSON_GetArrayItem(words, 4);
        CHECK(jnum(w4, "start") == 38 && jnum(w4, "end") == 42 && jnum(w4, "end_byte") == 43);
        tu_run_free(&f);
    }
    tu_run_free(&r);
    tu_run_free(&t);
}

TEST(ner_merges_bio_labels_into_entities) {
    const char *d = make_folder("ner_bio", "bert_tokcls", true);
    static const char *lab[] = {"O", "B-PER", "I-PER", "B-LOC", "I-LOC"};
    CHECK(d && !set_labels(d, lab, 5));
    const char *text =
        "Alice and Bob went to the small town of Springfield near the river Thames today";
    char *in = NULL;
    add_line(&in, "text", text, NULL, NULL);
    tu_run r = tu_cli(in, strlen(in), "ner '%s'", d);
    free(in);
    CHECKF(r.rc == 0 && r.n == 1, "%s", r.err);
    if (r.n == 1) {
        /* Rebuild the entities from the printed words with the B-/I- rule. */
        const cJSON *words = cJSON_GetObjectItemCaseSensitive(r.lines[0], "words");
        const cJSON *ents = cJSON_GetObjectItemCaseSensitive(r.lines[0], "entities");
        int ne = 0, n = cJSON_GetArraySize(words);
        char open[8] = "";
        double b0 = 0, b1 = 0;
        for (int i = 0; i <= n; i++) {
            const char *lb = i < n ? jstr(cJSON_GetArrayItem(words, i), "entity") : "O";
            bool outside = !strcmp(lb, "O"), begin = lb[0] == 'B';
            const char *type = outside ? "" : lb + 2;
            if (open[0] && (outside || begin || strcmp(type, open))) {
                const cJSON *e = cJSON_GetArrayItem(ents, ne++);
                CHECKF(jstr(e, "entity_group") && !strcmp(jstr(e, "entity_group"), open) &&
                           jnum(e, "start_byte") == b0 && jnum(e, "end_byte") == b1,
                       "entity %d", ne - 1);
                const char *w = jstr(e, "word");
                CHECK(w && strlen(w) == (size_t)(b1 - b0) &&
                      !strncmp(w, text + (int)b0, strlen(w)));
                open[0] = 0;
            }
            if (outside) continue;
            if (!open[0]) {
                snprintf(open, sizeof open, "%s", type);
                b0 = jnum(cJSON_GetArrayItem(words, i), "start_byte");
            }
            b1 = jnum(cJSON_GetArrayItem(words, i), "end_byte");
        }
        CHECKF(ne == cJSON_GetArraySize(ents) && ne > 0, "%d entities expected, %d printed", ne,
               cJSON_GetArraySize(ents));
    }
    tu_run_free(&r);
}

TEST(ner_long_text_labels_every_word_across_windows) {
    const char *d = make_folder("ner_long", "bert_tokcls", true);
    static char text[16384];
    text[0] = 0;
    for (int i = 0; i < 1000; i++)
        strcat(text, i % 3 ? "river " : "Springfield ");
    char *in = NULL;
    add_line(&in, "text", text, NULL, NULL);
    tu_run r = tu_cli(in, strlen(in), "ner '%s' --max-length 64 --stride 16", d);
    free(in);
    CHECKF(r.rc == 0 && r.n == 1, "%s", r.err);
    if (r.n == 1) {
        const cJSON *words = cJSON_GetObjectItemCaseSensitive(r.lines[0], "words");
        CHECK(cJSON_GetArraySize(words) == 1000);
        double prev = -1;
        int bad = 0;
        for (int i = 0; i < cJSON_GetArraySize(words); i++) {
            const cJSON *w = cJSON_GetArrayItem(words, i);
            const char *s = jstr(w, "word");
            bad +=
                !s || jnum(w, "start_byte") <= prev || strcmp(s, i % 3 ? "river" : "Springfield");
            prev = jnum(w, "start_byte");
        }
        CHECK(bad == 0);
    }
    tu_run_free(&r);
}

/* ---- bad input -------------------------------------------------------------------------- */

TEST(bad_lines_give_errors_naming_the_line_and_the_rest_runs) {
    static const char in[] =
        "{\"text\": \"fine\"}\n"     /* 1 ok */
        "{\"text\": \n"              /* 2 invalid JSON */
        "caf\xC3 broken \xFF utf8\n" /* 3 invalid UTF-8 */
        "{\"txt\": \"x\"}\n"         /* 4 missing field */
        "abc\0def\n"                 /* 5 NUL byte */
        "\n"                         /* 6 empty: skipped */
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n" /* 7
                                                                                                long
                                                                                              */
        "{\"text\": \"ok\", \"text_pair\": 3}\n"    /* 8 pair not a string */
        "{\"text\": \"\\ud800\"}\n"                 /* 9 lone surrogate escape */
        "[1, 2] is plain text\n"                    /* 10 ok */
        "{\"text\": \"x\", \"id\": {\"k\": [1]}}\n" /* 11 ok */
        "{\"text\": \"a\\u0000b\"}\n"               /* 12 escaped NUL */
        "{\"text\": \"a\\\\u0000b\"}";              /* 13 ok: a backslash, no final newline */
    tu_run r = tu_cli(in, sizeof in - 1, "classify '%s' --max-line-bytes 100 --batch 4",
                        gpath("xlmr_e2e"));
    CHECKF(r.rc == 1 && r.n == 12, "rc %d, %d lines: %s", r.rc, r.n, r.out);
    static const int line_of[] = {1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13};
    static const bool ok[] = {1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1};
    for (int i = 0; i < 12 && i < r.n; i++) {
        CHECKF(r.lines[i] != NULL, "output line %d is not JSON", i + 1);
        if (ok[i]) {
            CHECKF(jstr(r.lines[i], "label") != NULL, "input line %d should work: %s", line_of[i],
                   r.out);
        } else {
            CHECKF(jnum(r.lines[i], "line") == line_of[i] && jstr(r.lines[i], "error"),
                   "output %d: want an error for line %d", i, line_of[i]);
            char want[32];
            snprintf(want, sizeof want, "line %d: ", line_of[i]);
            CHECKF(strstr(r.err, want) != NULL, "stderr does not name %s", want);
        }
    }
    if (r.n == 12) {
        CHECK(strstr(jstr(r.lines[10], "error"), "NUL"));
        CHECK(strstr(jstr(r.lines[2], "error"), "UTF-8") &&
              strstr(jstr(r.lines[3], "error"), "\"text\""));
        CHECK(strstr(jstr(r.lines[4], "error"), "NUL") &&
              strstr(jstr(r.lines[5], "error"), "longer"));
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(r.lines[9], "id");
        CHECK(cJSON_IsObject(id) &&
              cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(id, "k")) == 1);
    }
    tu_run_free(&r);
}

TEST(binary_input_never_crashes) {
    static unsigned char junk[20000];
    uint64_t s = 88172645463325252ULL;
    for (size_t i = 0; i < sizeof junk; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        junk[i] = (unsigned char)(s >> 24);
    }
    static const char *cmds[] = {"tokenize", "classify", "embed"};
    for (int c = 0; c < 3; c++) {
        tu_run r = tu_cli(junk, sizeof junk, "%s '%s' --batch 7", cmds[c],
                            gpath(c == 1 ? "xlmr_e2e" : "bert_e2e"));
        CHECKF(r.rc == 0 || r.rc == 1, "%s exited with %d: %.300s", cmds[c], r.rc, r.err);
        int bad = 0;
        for (int i = 0; i < r.n; i++)
            bad += r.lines[i] == NULL;
        CHECKF(bad == 0 && r.n > 0, "%s: %d of %d output lines are not JSON", cmds[c], bad, r.n);
        tu_run_free(&r);
    }
    static char huge[3 << 20]; /* one 3 MiB line of words, within the default limit */
    for (size_t i = 0; i + 1 < sizeof huge; i++)
        huge[i] = i % 6 == 5 ? ' ' : 'a' + (char)(i % 26);
    huge[sizeof huge - 1] = '\n';
    tu_run r = tu_cli(huge, sizeof huge, "classify '%s'", gpath("xlmr_e2e"));
    CHECKF(r.rc == 0 && r.n == 1 && jstr(r.lines[0], "label"), "rc %d: %.300s", r.rc, r.err);
    tu_run_free(&r);
}

TEST(strict_stops_after_the_first_bad_line) {
    tu_run r = run_str("fine\n{bad\nnever read\n", "tokenize '%s' --strict --batch 1",
                        gpath("bert_e2e"), NULL);
    CHECK(r.rc == 1 && r.n == 2);
    tu_run_free(&r);
}

TEST(wrong_model_kind_or_arguments_fail_clearly) {
    tu_run r = run_str("x\n", "classify '%s'", gpath("bert_e2e"), NULL);
    CHECK(r.rc == 1 && strstr(r.err, "not a sequence classification model"));
    tu_run_free(&r);
    r = run_str("x\ty\n", "qa '%s'", gpath("xlmr_e2e"), NULL);
    CHECK(r.rc == 1 && strstr(r.err, "not a question answering model"));
    tu_run_free(&r);
    r = run_str("x\n", "embed '%s' --pooling median", gpath("bert_e2e"), NULL);
    CHECK(r.rc == 1 && strstr(r.err, "--pooling"));
    tu_run_free(&r);
    r = run_str("x\n", "classify '%s' --max-length 4096", gpath("xlmr_e2e"), NULL);
    CHECK(r.rc == 1 && strstr(r.err, "limit"));
    tu_run_free(&r);
    r = run_str("x\n", "ner '%s'", gpath("bert_tokcls"), NULL); /* no tokenizer files */
    CHECK(r.rc == 1 && strstr(r.err, "tokenizer"));
    tu_run_free(&r);
    r = run_str("x\n", "tokenize %s --bogus", tu_tmpdir(), NULL);
    CHECK(r.rc == 1 && r.n == 0);
    tu_run_free(&r);
}

/* ---- eval ------------------------------------------------------------------------------- */

/* label_id of `classify` for each input, or the regression score. */
static int classify_ids(const char *dir, const char *input, int *ids, double *score, int max) {
    tu_run r = tu_cli(input, strlen(input), "classify '%s' --max-length 128", dir);
    int n = 0;
    for (; n < r.n && n < max; n++) {
        ids[n] = (int)jnum(r.lines[n], "label_id");
        score[n] = jnum(r.lines[n], "score");
    }
    tu_run_free(&r);
    return n;
}

static cJSON *eval_json(const char *args_fmt, const char *a1, const char *a2, const char *a3) {
    char args[4096];
    snprintf(args, sizeof args, args_fmt, a1, a2, a3);
    tu_run r = tu_cli("", 0, "eval %s --json --quiet", args);
    CHECKF(r.rc == 0 && r.n == 1, "eval %s: rc %d: %s", args, r.rc, r.err);
    cJSON *o = r.n == 1 ? cJSON_Duplicate(r.lines[0], 1) : NULL;
    tu_run_free(&r);
    return o;
}

static const char *SST[] = {"it 's a charming and often affecting journey . ",
                            "unflinchingly bleak and desperate ",
                            "allows us to hope that nolan is poised to embark a major career as a "
                            "commercial yet inventive filmmaker . ",
                            "the acting , costumes , music , cinematography and sound are all "
                            "astounding given the production 's austere locales . ",
                            "it 's slow -- very , very slow . ",
                            "although laced with humor and a few fanciful touches , the film is a "
                            "refreshingly serious look at young women . "};
static const int SST_GOLD[] = {1, 0, 1, 1, 0, 1};

TEST(eval_sst2_on_a_tiny_file_matches_classify) {
    const char *d = make_folder("sst2", "distilbert_seqcls", true);
    char tsv[4096] = "sentence\tlabel\n", *in = NULL;
    for (int i = 0; i < 6; i++) {
        char row[512];
        snprintf(row, sizeof row, "%s\t%d\n", SST[i], SST_GOLD[i]);
        strcat(tsv, row);
        add_line(&in, "text", SST[i], NULL, NULL);
    }
    tu_write_file(tmp_path("sst2.tsv"), tsv, strlen(tsv));
    int ids[8];
    double sc[8];
    CHECK(classify_ids(d, in, ids, sc, 8) == 6);
    free(in);
    int right = 0, right4 = 0, right25 = 0;
    for (int i = 0; i < 6; i++) {
        right += ids[i] == SST_GOLD[i];
        if (i < 4) right4 += ids[i] == SST_GOLD[i];
        if (i >= 2 && i < 5) right25 += ids[i] == SST_GOLD[i];
    }
    cJSON *o = eval_json("'%s' --task sst2 --data '%s' --batch 4%s", d, tmp_path("sst2.tsv"), "");
    CHECK(o && jnum(o, "n") == 6 && fabs(jnum(o, "accuracy") - right / 6.0) < 1e-12 &&
          jnum(o, "correct") == right);
    CHECK(o && !strcmp(jstr(o, "task"), "sst2"));
    cJSON_Delete(o);
    o = eval_json("'%s' --task sst2 --data '%s'%s", d, tmp_path("sst2.tsv"), " --limit 4");
    CHECK(o && jnum(o, "n") == 4 && fabs(jnum(o, "accuracy") - right4 / 4.0) < 1e-12);
    cJSON_Delete(o);
    o = eval_json("'%s' --task sst2 --data '%s'%s", d, tmp_path("sst2.tsv"), " --rows 2:5");
    CHECK(o && jnum(o, "n") == 3 && fabs(jnum(o, "accuracy") - right25 / 3.0) < 1e-12);
    cJSON_Delete(o);
    /* the text form */
    tu_run r = tu_cli("", 0, "eval '%s' --task sst2 --data '%s'", d, tmp_path("sst2.tsv"));
    CHECK(r.rc == 0 && strstr(r.out, "accuracy="));
    tu_run_free(&r);
    /* named labels map by name even in the other order */
    static const char *lab[] = {"POSITIVE", "NEGATIVE"};
    CHECK(!set_labels(d, lab, 2));
    o = eval_json("'%s' --task sst2 --data '%s'%s", d, tmp_path("sst2.tsv"), "");
    CHECK(o && fabs(jnum(o, "accuracy") - (6 - right) / 6.0) < 1e-12);
    cJSON_Delete(o);
}

TEST(eval_mrpc_with_bom_header_reports_accuracy_and_f1) {
    const char *d = make_folder("mrpc", "distilbert_seqcls", true);
    static const char *a[] = {"He said hello.", "The cat sat.", "Stocks fell sharply.",
                              "It rained all day.", "She left early."};
    static const char *b[] = {"He greeted us.", "A dog ran.", "Shares dropped a lot.",
                              "The sun was out.", "She departed early."};
    static const int gold[] = {1, 0, 1, 0, 1};
    char tsv[4096] = "\xEF\xBB\xBFQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n", *in = NULL;
    for (int i = 0; i < 5; i++) {
        char row[512];
        snprintf(row, sizeof row, "%d\t%d\t%d\t%s\t%s\r\n", gold[i], 100 + i, 200 + i, a[i], b[i]);
        strcat(tsv, row);
        add_line(&in, "text", a[i], "text_pair", b[i]);
    }
    tu_write_file(tmp_path("mrpc.txt"), tsv, strlen(tsv));
    int ids[8];
    double sc[8];
    CHECK(classify_ids(d, in, ids, sc, 8) == 5);
    free(in);
    metric_prf f = metric_binary_f1(ids, gold, 5, 1);
    cJSON *o = eval_json("'%s' --task mrpc --data '%s'%s", d, tmp_path("mrpc.txt"), "");
    CHECK(o && jnum(o, "n") == 5 &&
          fabs(jnum(o, "accuracy") - metric_accuracy(ids, gold, 5)) < 1e-12);
    CHECK(o && fabs(jnum(o, "f1") - f.f1) < 1e-12);
    cJSON_Delete(o);
}

TEST(eval_xnli_maps_label_names) {
    const char *d = gpath("xlmr_e2e");
    static const char *names[] = {"entailment", "neutral", "contradiction"};
    char tsv[4096] = "genre\tlabel\tsentence1_en\tsentence2_en\tsentence1_xx\tsentence2_xx\n",
         *in = NULL;
    static const char *p[] = {
        "And he said, Mama, I'm home.", "He didn't say a word.", "The new rights are nice enough.",
        "Everyone really likes the newest benefits.", "This site includes a list of winners."};
    int gold[5];
    for (int i = 0; i < 5; i++) {
        char row[512];
        gold[i] = (i * 2) % 3;
        snprintf(row, sizeof row, "fiction\t%s\t%s\t%s\tx\ty\n", names[gold[i]], p[i],
                 p[(i + 1) % 5]);
        strcat(tsv, row);
        add_line(&in, "text", p[i], "text_pair", p[(i + 1) % 5]);
    }
    tu_write_file(tmp_path("xnli.tsv"), tsv, strlen(tsv));
    int ids[8];
    double sc[8];
    CHECK(classify_ids(d, in, ids, sc, 8) == 5);
    free(in);
    cJSON *o = eval_json("'%s' --task xnli --data '%s'%s", d, tmp_path("xnli.tsv"), "");
    CHECK(o && jnum(o, "n") == 5 &&
          fabs(jnum(o, "accuracy") - metric_accuracy(ids, gold, 5)) < 1e-12);
    cJSON_Delete(o);
}

TEST(eval_stsb_correlates_the_regression_output) {
    const char *d = make_folder("stsb", "bert_seqcls", true);
    static const char *lab[] = {"LABEL_0"};
    CHECK(d && !set_labels(d, lab, 1) && !shrink_classifier(d, 1));
    char tsv[8192] =
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n",
         *in = NULL;
    double gold[6], pred[6];
    static const char *s1[] = {"A man is dancing.",      "A child rides a horse.",
                               "A woman slices onions.", "Two dogs play.",
                               "The sky is blue.",       "A car drives fast."};
    static const char *s2[] = {"A man dances.", "A kid is on a horse.", "Onions are cut.",
                               "Cats sleep.",   "It is raining.",       "A vehicle speeds."};
    for (int i = 0; i < 6; i++) {
        char row[512];
        gold[i] = (i * 7 % 6) * 0.8;
        snprintf(row, sizeof row, "%d\tmain\tf\t2012\t%04d\tnone\tnone\t%s\t%s\t%.3f\n", i, i,
                 s1[i], s2[i], gold[i]);
        strcat(tsv, row);
        add_line(&in, "text", s1[i], "text_pair", s2[i]);
    }
    tu_write_file(tmp_path("stsb.tsv"), tsv, strlen(tsv));
    int ids[8];
    CHECK(classify_ids(d, in, ids, pred, 8) == 6);
    free(in);
    cJSON *o = eval_json("'%s' --task stsb --data '%s'%s", d, tmp_path("stsb.tsv"), "");
    CHECK(o && jnum(o, "n") == 6 &&
          fabs(jnum(o, "spearman") - metric_spearman(pred, gold, 6)) < 1e-9);
    CHECK(o && fabs(jnum(o, "pearson") - metric_pearson(pred, gold, 6)) < 1e-6);
    cJSON_Delete(o);
    /* split.json's eval_index keeps rows by their index column */
    const char *split = "{\"eval_index\": [1, 3, 5, 0]}";
    tu_write_file(tmp_path("stsb_split.json"), split, strlen(split));
    o = eval_json("'%s' --task stsb --data '%s' --split '%s'", d, tmp_path("stsb.tsv"),
                  tmp_path("stsb_split.json"));
    double g4[4] = {gold[0], gold[1], gold[3], gold[5]},
           p4[4] = {pred[0], pred[1], pred[3], pred[5]};
    CHECK(o && jnum(o, "n") == 4 && fabs(jnum(o, "spearman") - metric_spearman(p4, g4, 4)) < 1e-9);
    cJSON_Delete(o);
}

TEST(eval_squad_scores_held_out_articles) {
    const char *d = make_folder("squad", "bert_qa", true);
    static const char *ctx[] = {
        "The Broncos defeated the Panthers in Santa Clara, California, in February 2016.",
        "Oxygen is a chemical element with symbol O and atomic number 8."};
    static const char *q[] = {"Who won?", "Where was the game?", "What is oxygen?"};
    static const int qc[] = {0, 0, 1};
    /* the answers `bert8 qa` gives become the golds of article A: EM and F1 must be 1 there */
    char *in = NULL;
    for (int i = 0; i < 3; i++)
        add_line(&in, "question", q[i], "context", ctx[qc[i]]);
    tu_run r = tu_cli(in, strlen(in), "qa '%s'", d);
    free(in);
    CHECK(r.rc == 0 && r.n == 3);
    if (r.n != 3) {
        tu_run_free(&r);
        return;
    }
    cJSON *root = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(root, "data");
    cJSON_AddStringToObject(root, "version", "1.1");
    for (int a = 0; a < 2; a++) {
        cJSON *art = cJSON_CreateObject();
        cJSON_AddStringToObject(art, "title", a ? "Oxygen" : "Super_Bowl_50");
        cJSON *para = cJSON_CreateObject();
        cJSON_AddStringToObject(para, "context", ctx[a]);
        cJSON *qas = cJSON_AddArrayToObject(para, "qas");
        for (int i = 0; i < 3; i++) {
            if (qc[i] != a) continue;
            cJSON *qa = cJSON_CreateObject();
            cJSON_AddStringToObject(qa, "id", q[i]);
            cJSON_AddStringToObject(qa, "question", q[i]);
            cJSON *ans = cJSON_AddArrayToObject(qa, "answers"), *x = cJSON_CreateObject(),
                  *y = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "text", a ? "zzz" : jstr(r.lines[i], "answer"));
            cJSON_AddNumberToObject(x, "answer_start", 0);
            cJSON_AddStringToObject(y, "text", "qqq");
            cJSON_AddNumberToObject(y, "answer_start", 0);
            cJSON_AddItemToArray(ans, y);
            cJSON_AddItemToArray(ans, x);
            cJSON_AddItemToArray(qas, qa);
        }
        cJSON *paras = cJSON_AddArrayToObject(art, "paragraphs");
        cJSON_AddItemToArray(paras, para);
        cJSON_AddItemToArray(data, art);
    }
    char *js = cJSON_Print(root);
    tu_write_file(tmp_path("squad.json"), js, strlen(js));
    free(js);
    cJSON_Delete(root);
    tu_run_free(&r);
    const char *split =
        "{\"eval_articles\": [\"Super_Bowl_50\"], \"max_length\": 128, \"max_answer_length\": 30}";
    tu_write_file(tmp_path("squad_split.json"), split, strlen(split));
    cJSON *o = eval_json("'%s' --task squad --data '%s' --split '%s' --score prob", d,
                         tmp_path("squad.json"), tmp_path("squad_split.json"));
    CHECK(o && jnum(o, "n") == 2 && jnum(o, "exact_match") == 1 && jnum(o, "f1") == 1 &&
          jnum(o, "failed") == 0);
    cJSON_Delete(o);
    o = eval_json("'%s' --task squad --data '%s' --score prob --batch 1%s", d,
                  tmp_path("squad.json"), "");
    CHECK(o && jnum(o, "n") == 3 && fabs(jnum(o, "exact_match") - 2.0 / 3) < 1e-12);
    cJSON_Delete(o);
}

TEST(eval_bad_data_names_the_file_and_line) {
    const char *d = make_folder("sst2b", "distilbert_seqcls", true);
    const char *tsv = "sentence\tlabel\ngood .\t1\nbad .\tmaybe\n";
    tu_write_file(tmp_path("bad.tsv"), tsv, strlen(tsv));
    tu_run r = tu_cli("", 0, "eval '%s' --task sst2 --data '%s'", d, tmp_path("bad.tsv"));
    CHECK(r.rc == 1 && strstr(r.err, "bad.tsv:3") && strstr(r.err, "maybe"));
    tu_run_free(&r);
    tsv = "sentence\tlabel\ngood .\t1\textra\n";
    tu_write_file(tmp_path("bad2.tsv"), tsv, strlen(tsv));
    r = tu_cli("", 0, "eval '%s' --task sst2 --data '%s'", d, tmp_path("bad2.tsv"));
    CHECK(r.rc == 1 && strstr(r.err, "bad2.tsv:2"));
    tu_run_free(&r);
    r = tu_cli("", 0, "eval '%s' --task mrpc --data '%s'", d, tmp_path("bad.tsv"));
    CHECK(r.rc == 1 && strstr(r.err, "#1 String"));
    tu_run_free(&r);
    r = tu_cli("", 0, "eval '%s' --task squad --data '%s'", d, tmp_path("bad.tsv"));
    CHECK(r.rc == 1 && strstr(r.err, "not a question answering model"));
    tu_run_free(&r);
}

int main(void) {
    RUN(tokenize_matches_golden_ids_bert);
    RUN(tokenize_matches_golden_ids_xlmr);
    RUN(tokenize_plain_lines_tab_pairs_and_offsets);
    RUN(tokenize_max_length_truncates);
    RUN(classify_scores_match_softmax_of_golden_logits);
    RUN(classify_regression_head_prints_the_value);
    RUN(embed_mean_and_cls_match_pooled_golden_hidden_states);
    RUN(embed_follows_sentence_transformers_pooling_config);
    RUN(embed_refuses_an_empty_text_by_name);
    RUN(quantize_reads_a_tsv_header_only_when_it_names_a_text_column);
    RUN(qa_picks_the_best_span_of_the_context);
    RUN(qa_long_contexts_and_long_questions_use_windows);
    RUN(ner_labels_each_word_by_its_first_subtoken);
    RUN(ner_merges_bio_labels_into_entities);
    RUN(ner_long_text_labels_every_word_across_windows);
    RUN(bad_lines_give_errors_naming_the_line_and_the_rest_runs);
    RUN(binary_input_never_crashes);
    RUN(strict_stops_after_the_first_bad_line);
    RUN(wrong_model_kind_or_arguments_fail_clearly);
    RUN(eval_sst2_on_a_tiny_file_matches_classify);
    RUN(eval_mrpc_with_bom_header_reports_accuracy_and_f1);
    RUN(eval_xnli_maps_label_names);
    RUN(eval_stsb_correlates_the_regression_output);
    RUN(eval_squad_scores_held_out_articles);
    RUN(eval_bad_data_names_the_file_and_line);
    return tu_finish();
}
