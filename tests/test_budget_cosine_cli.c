/* test_budget_cosine_cli.c: `bert8 quantize --min-cosine` end to end on the small STS-B model
 * (its sentence embeddings: mean pooling, L2-normalized; small slices so it runs in seconds): a
 * loose target writes a folder that loads, with the held-out mean cosine of the result reported at
 * or above the target; --eval-data texts are scored instead of the held-out calibration rows; an
 * impossible target either ends with units moved and the target met on the tuning slice or fails
 * with the documented error; bad targets, both budgets, --eval-task and too little held-out text
 * are refused without writing OUT. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "testutil.h"

#define MODEL "models/stsb-bert-mini"

static cJSON *read_json(const char *path) {
    char *text = tu_read_file(path, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    return j;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* The folder loads, with the unit modes the report gives. */
static void check_folder(const char *out, const cJSON *report) {
    tu_run r = tu_bert8("info '%s' --json", out);
    CHECKF(r.rc == 0, "%s", r.err);
    cJSON *info = cJSON_Parse(r.out);
    const cJSON *iu = cJSON_GetObjectItemCaseSensitive(info, "units"), *units = cJSON_GetObjectItemCaseSensitive(report, "units");
    CHECK(cJSON_GetArraySize(iu) == 20 && cJSON_GetArraySize(units) == 20);
    for (int u = 0; u < 20 && cJSON_GetArraySize(iu) == 20 && cJSON_GetArraySize(units) == 20; u++) {
        const char *ma = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(units, u), "mode"));
        const char *mb = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(iu, u), "mode"));
        CHECKF(ma && mb && !strcmp(ma, mb), "unit %d: report %s, info %s", u, ma ? ma : "?", mb ? mb : "?");
    }
    cJSON_Delete(info);
    tu_run_free(&r);
}

TEST(loose_target_writes_a_model_that_meets_it_held_out) {
    const char *calib = tu_shared_path("data/glue/SST-2.train10.tsv");
    char out[512], rep[512];
    snprintf(out, sizeof out, "%s/cos_loose", tu_tmpdir());
    snprintf(rep, sizeof rep, "%s/cos_loose.json", tu_tmpdir());
    tu_run r = tu_bert8("quantize " MODEL " -o '%s' --calib '%s' --samples 64 --eval-limit 64 --threads 1 "
                        "--min-cosine 0.99,0.98 --ranking output-error --bench-seconds 0.2 --report '%s'",
                        out, calib, rep);
    CHECKF(r.rc == 0, "rc %d: %s", r.rc, r.err);
    CHECKF(strstr(r.out, "budget: cosine to the FP32 embedding, mean >= 0.99, 1st percentile >= 0.98") &&
               strstr(r.out, "32 texts tune the search, 32 held out") && strstr(r.out, "search start") &&
               strstr(r.out, "the all-INT8 speed") && strstr(r.out, "mean pooling"),
           "%s", r.out);
    CHECKF(strstr(r.err, "budget: FP32 scores 1.0000") && strstr(r.err, "budget: all units int8_static"), "%s", r.err);
    tu_run_free(&r);
    cJSON *j = read_json(rep);
    CHECK(j != NULL);
    if (!j) return;
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "budget")), "min_cosine"));
    CHECK(tu_json_num(j, "min_cosine_mean", NULL, NULL) == 0.99 && tu_json_num(j, "min_cosine_p1", NULL, NULL) == 0.98);
    CHECK(tu_json_num(j, "tune_texts", NULL, NULL) == 32 && tu_json_num(j, "held_out_texts", NULL, NULL) == 32);
    /* FP32 against itself: exactly 1 */
    CHECK(tu_json_num(j, "fp32", "score", NULL) == 1 && tu_json_num(j, "fp32", "tune", "mean") == 1 &&
          tu_json_num(j, "fp32", "held_out", "p1") == 1);
    /* within the budget on the tuning slice, and (a loose target) on the held-out one */
    CHECK(tu_json_num(j, "result", "score", NULL) >= 0);
    CHECK(tu_json_num(j, "result", "tune", "mean") >= 0.99 && tu_json_num(j, "result", "tune", "p1") >= 0.98);
    const double held = tu_json_num(j, "result", "held_out", "mean");
    CHECKF(held >= 0.99, "held-out mean %g", held);
    const double mean = tu_json_num(j, "result", "held_out", "mean"), p1 = tu_json_num(j, "result", "held_out", "p1"),
                 mn = tu_json_num(j, "result", "held_out", "min");
    CHECK(mn <= p1 && p1 <= mean && mean <= 1);
    CHECK(isfinite(tu_json_num(j, "all_int8", "held_out", "mean")) &&
          isfinite(tu_json_num(j, "search_start", "tune", "mean")));
    CHECK(tu_json_num(j, "speed", "result_over_all_int8", NULL) > 0);
    check_folder(out, j);
    cJSON_Delete(j);
}

TEST(eval_data_lines_are_scored) {
    const char *calib = tu_shared_path("data/glue/SST-2.train10.tsv");
    char out[512], rep[512], data[512];
    snprintf(out, sizeof out, "%s/cos_data", tu_tmpdir());
    snprintf(rep, sizeof rep, "%s/cos_data.json", tu_tmpdir());
    snprintf(data, sizeof data, "%s/lines.txt", tu_tmpdir());
    FILE *f = fopen(data, "w");
    CHECK(f != NULL);
    if (!f) return;
    for (int i = 0; i < 40; i++)
        fprintf(f, "Sentence number %d says something %s about the film.\n", i, i % 2 ? "kind" : "unkind");
    fclose(f);
    tu_run r = tu_bert8("quantize " MODEL " -o '%s' --calib '%s' --samples 32 --threads 1 --min-cosine 0.9 "
                        "--eval-data '%s' --tune-fraction 0.25 --bench-seconds 0 --report '%s' --quiet",
                        out, calib, data, rep);
    CHECKF(r.rc == 0, "rc %d: %s", r.rc, r.err);
    CHECKF(strstr(r.out, "texts: 40 lines of") && strstr(r.out, "10 texts tune the search, 30 held out"), "%s", r.out);
    tu_run_free(&r);
    cJSON *j = read_json(rep);
    CHECK(j != NULL);
    if (!j) return;
    CHECK(tu_json_num(j, "tune_texts", NULL, NULL) == 10 && tu_json_num(j, "held_out_texts", NULL, NULL) == 30);
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "min_cosine_p1")));
    CHECK(tu_json_num(j, "result", "held_out", "mean") >= 0.9);
    CHECK(!cJSON_GetObjectItemCaseSensitive(j, "speed")); /* --bench-seconds 0 */
    check_folder(out, j);
    cJSON_Delete(j);
}

TEST(impossible_target_moves_units_or_fails_clearly) {
    const char *calib = tu_shared_path("data/glue/SST-2.train10.tsv");
    char out[512], rep[512];
    snprintf(out, sizeof out, "%s/cos_tight", tu_tmpdir());
    snprintf(rep, sizeof rep, "%s/cos_tight.json", tu_tmpdir());
    tu_run r = tu_bert8("quantize " MODEL " -o '%s' --calib '%s' --samples 64 --eval-limit 64 --threads 1 "
                        "--min-cosine 0.9999999 --ranking output-error --no-dynamic --no-trim --bench-seconds 0 "
                        "--report '%s' --quiet",
                        out, calib, rep);
    if (r.rc == 0) {
        cJSON *j = read_json(rep);
        CHECK(j != NULL);
        CHECK(tu_json_num(j, "result", "int8_dynamic", NULL) + tu_json_num(j, "result", "fp32", NULL) > 0);
        CHECK(tu_json_num(j, "result", "tune", "mean") >= 0.9999999 && tu_json_num(j, "result", "score", NULL) >= 0);
        check_folder(out, j);
        cJSON_Delete(j);
    } else {
        CHECKF(r.rc == 1 && strstr(r.err, "--min-cosine: no configuration with an INT8 unit reaches mean >= 0.9999999") &&
                   strstr(r.err, "use the FP32 model"),
               "rc %d: %s", r.rc, r.err);
        CHECK(!exists(out) && !exists(rep));
    }
    tu_run_free(&r);
}

TEST(bad_targets_and_combinations_are_refused) {
    const char *calib = tu_shared_path("data/glue/SST-2.train10.tsv");
    char out[512];
    snprintf(out, sizeof out, "%s/cos_bad", tu_tmpdir());
    const char *bad[] = {"1.5", "1", "0", "-0.5", "nan", "abc", "0.99,1", "0.99,0", "0.99,", "0.99,0.9,0.8", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tu_run r = tu_bert8("quantize " MODEL " -o '%s' --calib '%s' --samples 64 --min-cosine '%s'", out, calib, bad[i]);
        CHECKF(r.rc == 1 && strstr(r.err, "--min-cosine must be MEAN or MEAN,P1"), "--min-cosine %s: rc %d: %s",
               bad[i], r.rc, r.err);
        tu_run_free(&r);
    }
    tu_run r = tu_bert8("quantize " MODEL " -o '%s' --calib '%s' --min-cosine 0.99 --max-drop 1 --eval-task stsb "
                        "--eval-data '%s'",
                        out, calib, tu_shared_path("data/glue/STS-B.dev.tsv"));
    CHECKF(r.rc == 1 && strstr(r.err, "mutually exclusive"), "%s", r.err);
    tu_run_free(&r);
    r = tu_bert8("quantize " MODEL " -o '%s' --calib '%s' --min-cosine 0.99 --eval-task stsb", out, calib);
    CHECKF(r.rc == 1 && strstr(r.err, "--eval-task makes no sense with --min-cosine"), "%s", r.err);
    tu_run_free(&r);
    /* held-out text: none left after --samples, too few --eval-data lines, too low an --eval-limit */
    r = tu_bert8("quantize " MODEL " -o '%s' --calib '%s' --samples 100000 --min-cosine 0.99", out, calib);
    CHECKF(r.rc == 1 && strstr(r.err, "--min-cosine needs held-out text: give --eval-data or fewer --samples"), "%s",
           r.err);
    tu_run_free(&r);
    char data[512];
    snprintf(data, sizeof data, "%s/few.txt", tu_tmpdir());
    FILE *f = fopen(data, "w");
    CHECK(f != NULL);
    for (int i = 0; f && i < 10; i++) fprintf(f, "line %d\n", i);
    if (f) fclose(f);
    r = tu_bert8("quantize " MODEL " -o '%s' --calib '%s' --samples 64 --min-cosine 0.99 --eval-data '%s'", out, calib, data);
    CHECKF(r.rc == 1 && strstr(r.err, "--min-cosine needs held-out text"), "%s", r.err);
    tu_run_free(&r);
    r = tu_bert8("quantize " MODEL " -o '%s' --calib '%s' --samples 64 --min-cosine 0.99 --eval-limit 8", out, calib);
    CHECKF(r.rc == 1 && strstr(r.err, "--min-cosine needs held-out text"), "%s", r.err);
    tu_run_free(&r);
    CHECK(!exists(out));
}

int main(void) {
    RUN(bad_targets_and_combinations_are_refused);
    RUN(loose_target_writes_a_model_that_meets_it_held_out);
    RUN(eval_data_lines_are_scored);
    RUN(impossible_target_moves_units_or_fails_clearly);
    return tu_finish();
}
