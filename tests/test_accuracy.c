/* test_accuracy.c: the accuracy regression test. Runs the built bert8 tool on the embedded
 * SST-2 model (FP32, and INT8 quantized here with a fixed calibration) over the first 200
 * SST-2 dev rows and requires exactly the counts scripts/accuracy_report.sh recorded in
 * docs/accuracy.json. Any change to the FP32 maths, calibration, smoothing or the INT8 kernels
 * that moves a single prediction fails here; rerun the report script when that is intended. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "testutil.h"

static const char *SRC = BERT8_SOURCE_DIR;

/* The setting the report script records under "regression"; both sides must agree. */
#define MODEL "models/sst2-bert-mini"
#define DEV "glue/SST-2.dev.tsv"
#define CALIB "glue/SST-2.train10.tsv"
#define CALIB_ROWS 256
#define LIMIT 200

/* Runs `bert8 ARGS`; returns the exit status and the last stdout line parsed as JSON (or NULL). */
#define run_bert8(json, ...) run_bert8_((json), tu_bert8(__VA_ARGS__))
static int run_bert8_(cJSON **json, tu_run r) {
    CHECKF(r.rc == 0, "exit %d: %s", r.rc, r.err);
    if (json) {
        *json = r.n > 0 ? cJSON_Duplicate(r.lines[r.n - 1], 1) : NULL;
        CHECKF(*json != NULL, "stdout is not JSON: %s", r.out);
    }
    int rc = r.rc;
    tu_run_free(&r);
    return rc;
}

static cJSON *g_report; /* docs/accuracy.json */

static const cJSON *item(const cJSON *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
        o = cJSON_GetObjectItemCaseSensitive(o, k);
    return o;
}

static double num(const cJSON *o, const char *path) {
    const cJSON *v = item(o, path);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *path) {
    const cJSON *v = item(o, path);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* eval of `dir` over the first LIMIT dev rows, compared with the report's regression.<key>. */
static void check_eval(const char *dir, const char *key, bool quantized) {
    char path[256];
    snprintf(path, sizeof path, "regression.%s", key);
    const cJSON *want = item(g_report, path);
    CHECKF(cJSON_IsObject(want), "docs/accuracy.json has no %s: run scripts/accuracy_report.sh",
           path);
    if (!cJSON_IsObject(want)) return;
    cJSON *got = NULL;
    run_bert8(&got, "eval '%s' --task sst2 --data '%s' --limit %d --json --quiet --threads 1", dir,
              tu_shared_path("data/" DEV), LIMIT);
    if (!got) return;
    CHECKF(num(got, "n") == LIMIT, "%s: n = %g", key, num(got, "n"));
    CHECKF(num(got, "n") == num(want, "n"), "%s: n = %g, the report has %g", key, num(got, "n"),
           num(want, "n"));
    CHECKF(num(got, "correct") == num(want, "correct"), "%s: %g/%d correct, the report has %g", key,
           num(got, "correct"), LIMIT, num(want, "correct"));
    CHECKF(num(got, "accuracy") == num(want, "accuracy"),
           "%s: accuracy %.17g, the report has %.17g", key, num(got, "accuracy"),
           num(want, "accuracy"));
    CHECK(cJSON_IsBool(item(got, "quantized")) &&
          cJSON_IsTrue(item(got, "quantized")) == quantized);
    cJSON_Delete(got);
}

TEST(report_records_the_tests_setting) {
    const cJSON *r = item(g_report, "regression");
    CHECKF(cJSON_IsObject(r), "docs/accuracy.json has no \"regression\" object");
    CHECK(!strcmp(str(r, "model"), MODEL));
    CHECK(!strcmp(str(r, "data"), DEV));
    CHECK(!strcmp(str(r, "calibration"), CALIB));
    CHECK(num(r, "calibration_rows") == CALIB_ROWS);
    CHECK(num(r, "limit") == LIMIT);
    CHECK(!strcmp(str(r, "scheme"), "static"));
    CHECK(!strcmp(str(r, "alpha"), "0.5"));
    /* the counts must be real measurements, not placeholders */
    CHECK(num(r, "fp32.correct") > LIMIT / 2 && num(r, "fp32.correct") <= LIMIT);
    CHECK(num(r, "int8.correct") > LIMIT / 2 && num(r, "int8.correct") <= LIMIT);
}

TEST(fp32_first_200_dev_rows_match_the_report) {
    check_eval(MODEL, "fp32", false);
}

TEST(int8_static_alpha_half_first_200_dev_rows_match_the_report) {
    char out[1024];
    snprintf(out, sizeof out, "%s/sst2-int8", tu_tmpdir());
    int rc =
        run_bert8(NULL,
                  "quantize %s -o '%s' --calib '%s' --column sentence --samples %d --scheme static "
                  "--alpha 0.5 --threads 1 --quiet",
                  MODEL, out, tu_shared_path("data/" CALIB), CALIB_ROWS);
    if (rc) return;
    check_eval(out, "int8", true);
}

int main(void) {
    if (chdir(SRC)) {
        printf("cannot enter %s\n", SRC);
        return 1;
    }
    char *text = tu_read_file("docs/accuracy.json", NULL);
    g_report = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!g_report) printf("docs/accuracy.json is missing or not JSON\n");
    RUN(report_records_the_tests_setting);
    RUN(fp32_first_200_dev_rows_match_the_report);
    RUN(int8_static_alpha_half_first_200_dev_rows_match_the_report);
    cJSON_Delete(g_report);
    return tu_finish();
}
