/* test_budget_cli.c: `bert8 quantize --max-drop` end to end on the outlier variant of the SST-2
 * model (small slices so it runs in seconds): the search ends within the budget on its tuning
 * slice, the folder it writes loads with the units the report lists (`bert8 info --json`), the
 * table and the speed line are printed; bad budgets and flags without --max-drop are refused. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdlib.h>

#include "testutil.h"

#define MODEL "models/sst2-bert-mini-outlier"

TEST(max_drop_writes_a_model_within_budget_and_a_report) {
    const char *data = tu_shared_path("data/glue/SST-2.dev.tsv"), *calib = tu_shared_path("data/glue/SST-2.train10.tsv");
    char out[512], rep[512];
    snprintf(out, sizeof out, "%s/budgeted", tu_tmpdir());
    snprintf(rep, sizeof rep, "%s/report.json", tu_tmpdir());
    tu_run r = tu_bert8("quantize " MODEL " -o '%s' --calib '%s' --column sentence --samples 64 --alpha none --threads 1 "
                        "--max-drop 0.5 --eval-task sst2 --eval-data '%s' --eval-limit 60 --ranking output-error "
                        "--bench-seconds 0.2 --report '%s'",
                        out, calib, data, rep);
    CHECKF(r.rc == 0, "rc %d: %s", r.rc, r.err);
    CHECKF(strstr(r.out, "units kept out of int8_static") && strstr(r.out, "the all-INT8 speed") &&
               strstr(r.out, "30 examples tune the search, 30 held out"),
           "%s", r.out);
    CHECKF(strstr(r.err, "budget: FP32 scores") && strstr(r.err, "budget: all units int8_static"), "%s", r.err);
    tu_run_free(&r);
    char *text = tu_read_file(rep, NULL);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    CHECK(j != NULL);
    if (!j) return;
    CHECK(tu_json_num(j, "max_drop", NULL, NULL) == 0.5 && tu_json_num(j, "tune_examples", NULL, NULL) == 30 &&
          tu_json_num(j, "held_out_examples", NULL, NULL) == 30);
    /* the searched (conservative) score is within budget, and the plain tuning metric at least as close */
    const double fp32 = tu_json_num(j, "fp32", "searched", NULL), result = tu_json_num(j, "result", "searched", NULL);
    CHECKF(fp32 - result <= 0.5 + 1e-9, "fp32 %g, result %g", fp32, result);
    CHECK(tu_json_num(j, "result", "tune", NULL) >= result);
    CHECK(tu_json_num(j, "fp32", "tune", NULL) == fp32);
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "searched_score")), "conservative"));
    CHECK(isfinite(tu_json_num(j, "result", "held_out", NULL)) &&
          isfinite(tu_json_num(j, "all_int8", "held_out", NULL)));
    CHECK(tu_json_num(j, "speed", "result_over_all_int8", NULL) > 0);
    const cJSON *units = cJSON_GetObjectItemCaseSensitive(j, "units");
    CHECK(cJSON_GetArraySize(units) == 20);
    /* the folder loads with exactly the modes the report gives */
    r = tu_bert8("info '%s' --json", out);
    CHECKF(r.rc == 0, "%s", r.err);
    cJSON *info = cJSON_Parse(r.out);
    const cJSON *iu = cJSON_GetObjectItemCaseSensitive(info, "units");
    CHECK(cJSON_GetArraySize(iu) == 20);
    for (int u = 0; u < 20 && cJSON_GetArraySize(iu) == 20; u++) {
        const cJSON *a = cJSON_GetArrayItem(units, u), *b = cJSON_GetArrayItem(iu, u);
        const char *ma = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "mode"));
        const char *mb = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "mode"));
        CHECKF(ma && mb && !strcmp(ma, mb), "unit %d: report %s, info %s", u, ma ? ma : "?", mb ? mb : "?");
    }
    cJSON_Delete(info);
    tu_run_free(&r);
    r = tu_bert8("info '%s'", out);
    CHECK(r.rc == 0 && strstr(r.out, "units:") && strstr(r.out, "layer 3"));
    tu_run_free(&r);
    cJSON_Delete(j);
}

TEST(bad_budgets_and_stray_flags_are_refused) {
    const char *calib = tu_shared_path("data/glue/SST-2.train10.tsv"), *data = tu_shared_path("data/glue/SST-2.dev.tsv");
    const char *bad[] = {"-1", "nan", "inf", "abc", "0.5x", "101"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tu_run r = tu_bert8("quantize " MODEL " -o '%s/x' --calib '%s' --max-drop '%s' --eval-task sst2 --eval-data '%s'",
                            tu_tmpdir(), calib, bad[i], data);
        CHECKF(r.rc == 1 && strstr(r.err, "--max-drop must be a finite number"), "--max-drop %s: rc %d: %s", bad[i],
               r.rc, r.err);
        tu_run_free(&r);
    }
    tu_run r = tu_bert8("quantize " MODEL " -o '%s/x' --calib '%s' --eval-task sst2", tu_tmpdir(), calib);
    CHECKF(r.rc == 1 && strstr(r.err, "belong to --max-drop"), "%s", r.err);
    tu_run_free(&r);
    r = tu_bert8("quantize " MODEL " -o '%s/x' --calib '%s' --max-drop 0.5 --eval-data '%s'", tu_tmpdir(), calib, data);
    CHECKF(r.rc == 1 && strstr(r.err, "--eval-task"), "%s", r.err);
    tu_run_free(&r);
    r = tu_bert8("quantize " MODEL " -o '%s/x' --calib '%s' --max-drop 0.5 --eval-task sst2 --eval-data '%s' --ranking best",
                 tu_tmpdir(), calib, data);
    CHECKF(r.rc == 1 && strstr(r.err, "--ranking"), "%s", r.err);
    tu_run_free(&r);
    r = tu_bert8("quantize " MODEL " -o '%s/x' --calib '%s' --max-drop 0.5 --eval-task sst2 --eval-data '%s' --tune-score x",
                 tu_tmpdir(), calib, data);
    CHECKF(r.rc == 1 && strstr(r.err, "--tune-score"), "%s", r.err);
    tu_run_free(&r);
    r = tu_bert8("quantize " MODEL " -o '%s/x' --calib '%s' --max-drop 0.5 --eval-task squad --eval-data '%s'", tu_tmpdir(),
                 calib, data);
    CHECKF(r.rc == 1 && strstr(r.err, "question answering"), "%s", r.err);
    tu_run_free(&r);
}

int main(void) {
    RUN(max_drop_writes_a_model_within_budget_and_a_report);
    RUN(bad_budgets_and_stray_flags_are_refused);
    return tu_finish();
}
