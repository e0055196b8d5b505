/* cmd_eval.c: `bert8 eval`: runs a model over a task's evaluation set and prints the task's
 * standard metric (text, or one JSON object with --json). The sets and their scoring are in
 * eval_set.c (shared with `bert8 quantize --max-drop`):
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
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "eval_set.h"
#include "text_io.h"
#include "text_runner.h"

#define CMD "eval"

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

/* Scores the whole set and prints the task's metrics. */
static int eval_print(const eval_set *es, text_runner *r) {
    const eval_opts *o = &es->o;
    eval_result res;
    if (eval_set_score(es, r->pl, NULL, 0, (o->progress ? EVAL_PROGRESS : 0) | EVAL_NOTES, &res, NULL, r->err,
                       sizeof r->err))
        return cli_error(CMD, "%s", r->err);
    const char *name = o->task_name;
    if (o->task == TASK_SQUAD) {
        if (o->json) {
            printf("{\"task\":\"squad\",\"n\":%lld,\"exact_match\":", (long long)res.n);
            text_print_double(stdout, res.exact_match);
            printf(",\"f1\":");
            text_print_double(stdout, res.squad_f1);
            printf(",\"failed\":%lld,\"max_length\":%ld,\"stride\":%ld,\"score\":\"%s\",\"seconds\":",
                   (long long)res.failed, o->max_len, o->stride, o->prob ? "prob" : "logit");
            text_print_double(stdout, round(res.seconds * 1000) / 1000);
            printf(",\"quantized\":%s}\n", r->info->quantized ? "true" : "false");
        } else {
            printf("squad: n=%lld exact_match=%.4f f1=%.4f (max_length %ld, stride %ld%s) [%.2f s]\n",
                   (long long)res.n, res.exact_match, res.squad_f1, o->max_len, o->stride,
                   res.failed ? ", some questions failed" : "", res.seconds);
        }
        return 0;
    }
    if (o->task == TASK_STSB) {
        if (o->json) {
            printf("{\"task\":\"%s\",\"n\":%lld,\"spearman\":", name, (long long)res.n);
            text_print_double(stdout, res.spearman);
            printf(",\"pearson\":");
            text_print_double(stdout, res.pearson);
        } else {
            printf("%s: n=%lld spearman=%.4f pearson=%.4f", name, (long long)res.n, res.spearman, res.pearson);
        }
    } else {
        if (o->json) {
            printf("{\"task\":\"%s\",\"n\":%lld,\"accuracy\":", name, (long long)res.n);
            text_print_double(stdout, res.accuracy);
            printf(",\"correct\":%lld", (long long)res.correct);
            if (o->task == TASK_MRPC) {
                printf(",\"f1\":");
                text_print_double(stdout, res.f1);
                printf(",\"precision\":");
                text_print_double(stdout, res.precision);
                printf(",\"recall\":");
                text_print_double(stdout, res.recall);
            }
        } else {
            printf("%s: n=%lld accuracy=%.4f (%lld/%lld)", name, (long long)res.n, res.accuracy,
                   (long long)res.correct, (long long)res.n);
            if (o->task == TASK_MRPC)
                printf(" f1=%.4f precision=%.4f recall=%.4f", res.f1, res.precision, res.recall);
        }
    }
    if (o->json) {
        printf(",\"seconds\":");
        text_print_double(stdout, round(res.seconds * 1000) / 1000);
        printf(",\"quantized\":%s}\n", r->info->quantized ? "true" : "false");
    } else {
        printf(" [%.2f s]\n", res.seconds);
    }
    return 0;
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
    const char *lora_task = cli_opt(&a, "--lora-task");
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
    bert8_head head;
    if (!eval_task_parse(o.task_name, &o.task, &head))
        return cli_error(CMD, "unknown task \"%s\" (sst2, xnli, mrpc, squad or stsb)", o.task_name);
    if (!o.data || !*o.data) return cli_error(CMD, "missing --data PATH");
    if (o.task == TASK_SQUAD && o.row_hi != -1)
        return cli_error(CMD, "--rows does not apply to squad");
    text_runner r;
    int rc = 1;
    text_runner_opts ro = {(int)o.threads, o.batch, 0, BERT8_POOLING_DEFAULT, -1, 0, lora_task};
    if (text_runner_open(&r, CMD, dir, true, &ro)) {
        eval_set es;
        if (r.info->head != head) {
            cli_error(CMD, "%s is not a %s model (architecture \"%s\")", dir,
                      o.task == TASK_SQUAD ? "question answering" : "sequence classification",
                      r.info->architecture);
        } else if (o.max_len > r.max_tokens) {
            cli_error(CMD, "--max-length %ld exceeds the model's limit of %lld tokens", o.max_len,
                      (long long)r.max_tokens);
        } else {
            if (o.task != TASK_SQUAD && !o.max_len) o.max_len = r.max_tokens < 128 ? r.max_tokens : 128;
            if (eval_set_load(&es, CMD, &o, r.max_tokens)) rc = eval_print(&es, &r);
            eval_set_free(&es);
        }
        text_runner_close(&r);
    }
    if (!rc && ferror(stdout)) rc = cli_error(CMD, "writing stdout failed");
    return rc;
}
