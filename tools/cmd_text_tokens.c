/* cmd_text_tokens.c: `bert8 qa`, `bert8 ner` and `bert8 fill-mask`, text commands whose results point
 * at tokens and spans of the input (the input, the batch loop and the common options: text_cmd.c).
 *
 * What each prints:
 *   qa        answer, score, start/end: the best span over all windows (only_second
 *             truncation, overflow windows of --max-length, default 384 or the model's
 *             limit, overlapping by --stride, default min(128, max_length / 3)) with start <=
 *             end, both in the context, at most --max-answer-len tokens (30). score is the
 *             product of the start and end softmax probabilities, each taken over the
 *             window's context tokens (HF's pipeline); --score logit ranks by the sum of
 *             the two logits instead (the SQuAD reference post-processing). An empty
 *             context gives "answer": null.
 *   ner       words: each pre-tokenized word with the label and probability of its first
 *             sub-token (long texts run in overlapping windows; a word seen twice takes
 *             the window where it has more context); entities: runs of words merged by
 *             B-X / I-X (a bare label X acts as I-X, "O" is outside), score = mean word
 *             score, text = the span from the first word's start to the last word's end.
 *   fill-mask predictions: for each mask token, the --top-k (5) most likely tokens with their
 *             softmax score, token id, token_str and the text with the token in place
 *             (transformers' fill-mask pipeline: a list for one mask, a list per mask for several).
 */
#include "text_cmd.h"

#include <stdlib.h>
#include <string.h>

/* ---- qa ------------------------------------------------------------------------------------ */

static bert8_status qa_compute(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b) {
    if (!tcmd_grow((void **)&c->answers, (size_t)n, sizeof *c->answers)) {
        snprintf(c->r.err, sizeof c->r.err, "out of memory");
        return BERT8_ERR_NOMEM;
    }
    return bert8_qa(c->r.pl, n, a, b, &c->qo, c->answers, c->r.err, sizeof c->r.err);
}

static void qa_print(tcmd *c, const item *it, int64_t k) {
    const bert8_qa_answer *s = &c->answers[k];
    tcmd_print_head(it);
    if (!s->found) {
        printf("\"answer\":null,\"score\":null}\n");
        return;
    }
    text_chars tc;
    text_chars_init(&tc, it->b, strlen(it->b));
    printf("\"answer\":");
    text_print_json_bytes(stdout, it->b + s->start, (size_t)(s->end - s->start));
    printf(",\"score\":");
    cli_print_float(stdout, (float)s->score);
    putchar(',');
    tcmd_print_span(&tc, s->start, s->end);
    printf("}\n");
}

/* ---- ner ----------------------------------------------------------------------------------- */

static bert8_status ner_compute(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b) {
    (void)b;
    bert8_ner_result_free(&c->ner);
    bert8_ner_options o = bert8_default_ner_options();
    o.stride = c->stride;
    return bert8_ner(c->r.pl, n, a, &o, &c->ner, c->r.err, sizeof c->r.err);
}

static void print_entity(const char *text, const bert8_entity *x, const char *key, bool first) {
    printf("%s{\"%s\":", first ? "" : ",", key);
    cli_print_json_string(stdout, x->label ? x->label : "");
    printf(",\"score\":");
    cli_print_float(stdout, x->score);
    printf(",\"word\":");
    text_print_json_bytes(stdout, text + x->start, (size_t)(x->end - x->start));
    printf(",\"start\":%lld,\"end\":%lld,\"start_byte\":%lld,\"end_byte\":%lld}", (long long)x->start_char,
           (long long)x->end_char, (long long)x->start, (long long)x->end);
}

static void ner_print(tcmd *c, const item *it, int64_t k) {
    const bert8_ner_result *r = &c->ner;
    tcmd_print_head(it);
    printf("\"words\":[");
    for (int64_t i = r->word_offsets[k]; i < r->word_offsets[k + 1]; i++)
        print_entity(it->a, &r->words[i], "entity", i == r->word_offsets[k]);
    printf("],\"entities\":[");
    for (int64_t i = r->entity_offsets[k]; i < r->entity_offsets[k + 1]; i++)
        print_entity(it->a, &r->entities[i], "entity_group", i == r->entity_offsets[k]);
    printf("]}\n");
}

/* ---- fill-mask ------------------------------------------------------------------------------ */

static bert8_status fill_mask_compute(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b) {
    (void)b;
    bert8_fill_mask_result_free(&c->fm);
    bert8_run_options o = tcmd_run_opts(c);
    return bert8_fill_mask(c->r.pl, n, a, &o, c->top_k, &c->fm, c->r.err, sizeof c->r.err);
}

/* transformers' output: one mask gives a list of predictions, several a list per mask. */
static void fill_mask_print(tcmd *c, const item *it, int64_t k) {
    const bert8_fill_mask_result *r = &c->fm;
    const int64_t m0 = r->mask_offsets[k], m1 = r->mask_offsets[k + 1];
    tcmd_print_head(it);
    printf("\"predictions\":");
    if (m1 - m0 > 1) putchar('[');
    for (int64_t m = m0; m < m1; m++) {
        printf("%s[", m > m0 ? "," : "");
        for (int64_t j = 0; j < r->top_k; j++) {
            const bert8_fill_mask_pred *p = &r->preds[m * r->top_k + j];
            printf("%s{\"score\":", j ? "," : "");
            cli_print_float(stdout, p->score);
            printf(",\"token\":%d,\"token_str\":", p->token);
            cli_print_json_string(stdout, p->token_str);
            printf(",\"sequence\":");
            cli_print_json_string(stdout, p->sequence);
            putchar('}');
        }
        putchar(']');
    }
    if (m1 - m0 > 1) putchar(']');
    printf("}\n");
}


/* ---- commands ------------------------------------------------------------------------------- */

int cmd_qa(int argc, char **argv) {
    tcmd c = {
        .name = "qa", .fa = "question", .fb = "context", .pair_needed = true, .with_model = true};
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (tcmd_want_help(
            &a,
            "usage: bert8 qa MODEL_DIR [--stride N] [--max-answer-len N] [--score prob|logit] < "
            "lines\n  input: {\"question\": ..., \"context\": ...} or question<TAB>context\n"))
        return 0;
    long threads, max_len, stride = -1, max_answer = 30;
    if (!tcmd_options(&c, &a, &threads, &max_len)) return 1;
    const char *v;
    if ((v = cli_opt(&a, "--stride")) && !cli_int(c.name, "--stride", v, 0, 1 << 20, &stride))
        return 1;
    if ((v = cli_opt(&a, "--max-answer-len")) &&
        !cli_int(c.name, "--max-answer-len", v, 1, 1 << 20, &max_answer))
        return 1;
    c.qo = bert8_default_qa_options();
    if ((v = cli_opt(&a, "--score"))) {
        if (strcmp(v, "prob") && strcmp(v, "logit"))
            return cli_error(c.name, "--score must be prob or logit");
        c.qo.score_logits = !strcmp(v, "logit");
    }
    const char *dir = cli_positional(&a);
    int rc = tcmd_finish(&c, &a, dir, threads, max_len, BERT8_HEAD_QA, 384);
    if (rc < 0 && stride >= c.max_len / 2) {
        rc = cli_error(c.name, "--stride %ld must be below half of max_length %lld", stride,
                       (long long)c.max_len);
    } else if (rc < 0) {
        c.qo.max_answer_len = max_answer;
        c.qo.doc_stride = stride;
        c.qo.max_length = c.max_len;
        c.compute = qa_compute;
        c.print = qa_print;
        rc = tcmd_drive(&c);
    }
    tcmd_free(&c);
    return rc;
}

int cmd_ner(int argc, char **argv) {
    tcmd c = {.name = "ner", .fa = "text", .with_model = true};
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (tcmd_want_help(&a, "usage: bert8 ner MODEL_DIR [--stride N] < lines\n")) return 0;
    long threads, max_len, stride = -1;
    if (!tcmd_options(&c, &a, &threads, &max_len)) return 1;
    const char *v;
    if ((v = cli_opt(&a, "--stride")) && !cli_int(c.name, "--stride", v, 0, 1 << 20, &stride))
        return 1;
    const char *dir = cli_positional(&a);
    int rc = tcmd_finish(&c, &a, dir, threads, max_len, BERT8_HEAD_TOKEN_CLS, 0);
    if (rc < 0 && stride >= c.max_len / 2) {
        rc = cli_error(c.name, "--stride %ld must be below half of max_length %lld", stride,
                       (long long)c.max_len);
    } else if (rc < 0) {
        c.width = c.r.info->num_labels;
        c.stride = stride;
        c.compute = ner_compute;
        c.print = ner_print;
        rc = tcmd_drive_labels(&c);
    }
    tcmd_free(&c);
    return rc;
}

int cmd_fill_mask(int argc, char **argv) {
    tcmd c = {.name = "fill-mask", .fa = "text", .with_model = true};
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (tcmd_want_help(&a, "usage: bert8 fill-mask MODEL_DIR [--top-k N] < lines\n"
                      "  each text holds the tokenizer's mask token ([MASK], <mask>) once or more\n"))
        return 0;
    long threads, max_len, top_k = 5;
    if (!tcmd_options(&c, &a, &threads, &max_len)) return 1;
    const char *v;
    if ((v = cli_opt(&a, "--top-k")) && !cli_int(c.name, "--top-k", v, 1, 1 << 20, &top_k)) return 1;
    const char *dir = cli_positional(&a);
    int rc = tcmd_finish(&c, &a, dir, threads, max_len, -1, 0);
    if (rc < 0 && !c.r.info->has_mlm_head) {
        rc = cli_error(c.name, "%s has no masked-LM head (architecture \"%s\")", dir, c.r.info->architecture);
    } else if (rc < 0) {
        c.top_k = top_k;
        c.compute = fill_mask_compute;
        c.print = fill_mask_print;
        rc = tcmd_drive(&c);
    }
    tcmd_free(&c);
    return rc;
}
