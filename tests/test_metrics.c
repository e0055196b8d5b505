/* test_metrics.c: the evaluation metrics of `bert8 eval` on hand-made cases whose values were
 * worked out by hand (or are the documented outputs of the reference implementations). */
#include <stdlib.h>

#include "metrics.h"
#include "testutil.h"

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

TEST(accuracy_counts_matches) {
    int pred[] = {1, 0, 1, 1}, gold[] = {1, 1, 1, 0};
    CHECK(NEAR(metric_accuracy(pred, gold, 4), 0.5));
    CHECK(NEAR(metric_accuracy(pred, pred, 4), 1.0));
    CHECK(isnan(metric_accuracy(pred, gold, 0)));
}

TEST(f1_of_the_positive_class) {
    int pred[] = {1, 0, 1, 1, 0}, gold[] = {1, 1, 1, 0, 0};
    metric_prf r = metric_binary_f1(pred, gold, 5, 1);
    CHECK(r.tp == 2 && r.fp == 1 && r.fn == 1);
    CHECK(NEAR(r.precision, 2.0 / 3) && NEAR(r.recall, 2.0 / 3) && NEAR(r.f1, 2.0 / 3));
    /* the other class as positive: tp 1 (index 4), fp 1 (index 1), fn 1 (index 3) */
    r = metric_binary_f1(pred, gold, 5, 0);
    CHECK(r.tp == 1 && r.fp == 1 && r.fn == 1 && NEAR(r.f1, 0.5));
}

TEST(f1_without_positives_is_zero) {
    int none[] = {0, 0, 0}, some[] = {0, 1, 0};
    metric_prf r = metric_binary_f1(none, none, 3, 1); /* no positive predicted or gold */
    CHECK(r.tp == 0 && r.fp == 0 && r.fn == 0 && r.f1 == 0 && r.precision == 0 && r.recall == 0);
    r = metric_binary_f1(none, some, 3, 1); /* positives missed */
    CHECK(r.fn == 1 && r.f1 == 0 && r.recall == 0 && r.precision == 0);
    r = metric_binary_f1(some, none, 3, 1); /* only false positives */
    CHECK(r.fp == 1 && r.f1 == 0 && r.precision == 0);
}

TEST(pearson_on_known_values) {
    /* mean 3 and 4; sxy 6, sxx 10, syy 6: r = 6 / sqrt(60) */
    double x[] = {1, 2, 3, 4, 5}, y[] = {2, 4, 5, 4, 5};
    CHECK(NEAR(metric_pearson(x, y, 5), 6.0 / sqrt(60.0)));
    double neg[] = {10, 8, 6, 4, 2};
    CHECK(NEAR(metric_pearson(x, neg, 5), -1.0));
    double flat[] = {3, 3, 3, 3, 3};
    CHECK(isnan(metric_pearson(x, flat, 5)));
    CHECK(isnan(metric_pearson(x, y, 1)));
}

TEST(average_ranks_share_ties) {
    double x[] = {10, 20, 20, 5, 20}, r[5];
    CHECK(metric_average_ranks(x, 5, r) == 0);
    /* 5 -> 1, 10 -> 2, the three 20s share ranks 3, 4, 5 -> 4 */
    CHECK(NEAR(r[0], 2) && NEAR(r[1], 4) && NEAR(r[2], 4) && NEAR(r[3], 1) && NEAR(r[4], 4));
}

TEST(spearman_with_ties_uses_average_ranks) {
    /* ranks x: 1, 2.5, 2.5, 4 and y: 1..4 -> sxy 4.5, sxx 4.5, syy 5: 4.5 / sqrt(22.5)
     * (scipy.stats.spearmanr gives 0.9486832980505138) */
    double x[] = {1, 2, 2, 3}, y[] = {10, 20, 30, 40};
    CHECK(NEAR(metric_spearman(x, y, 4), 4.5 / sqrt(22.5)));
    double mono[] = {1, 4, 9, 16}; /* monotone but not linear */
    CHECK(NEAR(metric_spearman(mono, y, 4), 1.0));
    CHECK(metric_pearson(mono, y, 4) < 1.0 - 1e-3);
    double rev[] = {4, 3, 2, 1};
    CHECK(NEAR(metric_spearman(rev, y, 4), -1.0));
}

static int norm_is(const char *in, const char *want) {
    char *got = squad_normalize(in);
    int ok = got && !strcmp(got, want);
    if (!ok) printf("  normalize(\"%s\") = \"%s\", want \"%s\"\n", in, got ? got : "(null)", want);
    free(got);
    return ok;
}

TEST(squad_normalize_case_punctuation_articles_whitespace) {
    CHECK(norm_is("The Quick, Brown  fox!", "quick brown fox"));
    CHECK(norm_is("an apple a day", "apple day"));
    CHECK(norm_is("  Hello\tWorld \n", "hello world"));
    CHECK(norm_is("theater anthem Ant", "theater anthem ant")); /* only whole words are articles */
    CHECK(norm_is("A-team", "ateam"));   /* punctuation goes before articles are found */
    CHECK(norm_is("the_end", "theend")); /* '_' is punctuation, removed first */
    CHECK(norm_is("$1,000.50", "100050"));
    CHECK(norm_is("THE", ""));
    CHECK(norm_is("", ""));
    CHECK(norm_is("\xC3\x89"
                  "COLE Ang\xC3\xA9lique",
                  "\xC3\xA9"
                  "cole ang\xC3\xA9lique")); /* Unicode lower-casing */
    CHECK(norm_is("a\xC2\xA0"
                  "b\xE3\x80\x80"
                  "c",
                  "b c")); /* NBSP and ideographic space split */
    /* curly quotes are not string.punctuation but do end a word */
    CHECK(norm_is("\xE2\x80\x9Cthe\xE2\x80\x9D film", "\xE2\x80\x9C \xE2\x80\x9D film"));
    /* str.lower()'s final sigma: "Σ ΣΑΣ ΑΣ." -> "σ σας ας" */
    CHECK(norm_is("\xCE\xA3 \xCE\xA3\xCE\x91\xCE\xA3 \xCE\x91\xCE\xA3.",
                  "\xCF\x83 \xCF\x83\xCE\xB1\xCF\x82 \xCE\xB1\xCF\x82"));
    /* a combining accent is not \w, so a decomposed "a\u0301" still holds the article "a" */
    CHECK(norm_is("\xC3\xA1 a\xCC\x81", "\xC3\xA1 \xCC\x81"));
}

TEST(squad_exact_match_and_f1_take_the_best_gold) {
    /* the official script's behaviour on SQuAD dev's first question */
    const char *golds[] = {"Denver Broncos", "Denver Broncos", "Denver Broncos"};
    CHECK(NEAR(squad_exact_match("Denver Broncos", golds, 3), 1));
    CHECK(NEAR(squad_exact_match("the Denver Broncos.", golds, 3), 1));
    CHECK(NEAR(squad_exact_match("Broncos", golds, 3), 0));
    /* p = {broncos}, g = {denver, broncos}: precision 1, recall 1/2 */
    CHECK(NEAR(squad_f1("Broncos", golds, 3), 2.0 / 3));
    const char *multi[] = {"October 1973", "October", "1973"};
    CHECK(NEAR(squad_exact_match("1973", multi, 3), 1));
    CHECK(NEAR(squad_f1("in October of 1973", multi, 3), 2 * (2.0 / 4) * 1.0 / (2.0 / 4 + 1.0)));
    const char *nearly[] = {"nearly $12", "$12"};
    CHECK(NEAR(squad_exact_match("12", nearly, 2), 1));
    CHECK(NEAR(squad_f1("nearly 12 dollars", nearly, 2), 2 * (2.0 / 3) * 1.0 / (2.0 / 3 + 1.0)));
}

TEST(squad_f1_counts_repeated_tokens_once_each) {
    const char *g[] = {"y y z"};
    /* Counter(x y y) & Counter(y y z) = {y: 2}: precision 2/3, recall 2/3 */
    CHECK(NEAR(squad_f1("x y y", g, 1), 2.0 / 3));
    const char *g2[] = {"y"};
    CHECK(NEAR(squad_f1("y y", g2, 1), 2 * 0.5 * 1.0 / 1.5));
}

TEST(squad_no_overlap_and_empty_answers_score_zero) {
    const char *g[] = {"Paris"};
    CHECK(squad_f1("London", g, 1) == 0 && squad_exact_match("London", g, 1) == 0);
    CHECK(squad_f1("", g, 1) == 0);
    const char *art[] = {"the"}; /* normalises to "" on both sides: EM 1, but v1.1 F1 gives 0 */
    CHECK(squad_exact_match("a", art, 1) == 1 && squad_f1("a", art, 1) == 0);
    CHECK(squad_f1("x", g, 0) == -1); /* no golds is an error, not a score */
}

int main(void) {
    RUN(accuracy_counts_matches);
    RUN(f1_of_the_positive_class);
    RUN(f1_without_positives_is_zero);
    RUN(pearson_on_known_values);
    RUN(average_ranks_share_ties);
    RUN(spearman_with_ties_uses_average_ranks);
    RUN(squad_normalize_case_punctuation_articles_whitespace);
    RUN(squad_exact_match_and_f1_take_the_best_gold);
    RUN(squad_f1_counts_repeated_tokens_once_each);
    RUN(squad_no_overlap_and_empty_answers_score_zero);
    return tu_finish();
}
