/* metrics.c: evaluation metrics (see metrics.h). The SQuAD normaliser follows the official
 * script's Python semantics on Unicode text: str.lower(), string.punctuation (ASCII only),
 * re's Unicode \b for the articles and str.split()'s whitespace set. */
#include "metrics.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

double metric_accuracy(const int *pred, const int *gold, size_t n) {
    if (n == 0) return NAN;
    size_t ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += pred[i] == gold[i];
    return (double)ok / (double)n;
}

metric_prf metric_binary_f1(const int *pred, const int *gold, size_t n, int positive) {
    metric_prf r = {0, 0, 0, 0.0, 0.0, 0.0};
    for (size_t i = 0; i < n; i++) {
        bool p = pred[i] == positive, g = gold[i] == positive;
        r.tp += p && g;
        r.fp += p && !g;
        r.fn += !p && g;
    }
    if (r.tp + r.fp) r.precision = (double)r.tp / (double)(r.tp + r.fp);
    if (r.tp + r.fn) r.recall = (double)r.tp / (double)(r.tp + r.fn);
    if (r.tp) r.f1 = 2.0 * (double)r.tp / (double)(2 * r.tp + r.fp + r.fn);
    return r;
}

double metric_pearson(const double *x, const double *y, size_t n) {
    if (n < 2) return NAN;
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++)
        mx += x[i], my += y[i];
    mx /= (double)n;
    my /= (double)n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        double dx = x[i] - mx, dy = y[i] - my;
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    if (!(sxx > 0) || !(syy > 0)) return NAN;
    double r = sxy / sqrt(sxx * syy);
    return r > 1 ? 1 : (r < -1 ? -1 : r); /* rounding can step just outside */
}

typedef struct ranked {
    double v;
    size_t i;
} ranked;

static int ranked_cmp(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->v < y->v) return -1;
    if (x->v > y->v) return 1;
    return x->i < y->i ? -1 : (x->i > y->i);
}

int metric_average_ranks(const double *x, size_t n, double *ranks) {
    if (n == 0) return 0;
    ranked *r = malloc(n * sizeof *r); /* n * 16 cannot overflow for an array that exists */
    if (!r) return -1;
    for (size_t i = 0; i < n; i++)
        r[i] = (ranked){x[i], i};
    qsort(r, n, sizeof *r, ranked_cmp);
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && r[j].v == r[i].v)
            j++;
        double avg = ((double)(i + 1) + (double)j) / 2.0; /* mean of the 1-based ranks i+1 .. j */
        for (size_t k = i; k < j; k++)
            ranks[r[k].i] = avg;
        i = j;
    }
    free(r);
    return 0;
}

double metric_spearman(const double *x, const double *y, size_t n) {
    if (n < 2) return NAN;
    double *rx = malloc(2 * n * sizeof *rx);
    if (!rx) return NAN;
    double *ry = rx + n, out = NAN;
    if (!metric_average_ranks(x, n, rx) && !metric_average_ranks(y, n, ry))
        out = metric_pearson(rx, ry, n);
    free(rx);
    return out;
}

/* ---- SQuAD ------------------------------------------------------------------------------ */

/* Python's str.isspace(): bidi classes WS, B, S and category Zs. */
static bool py_space(int32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* re's \w on str patterns: alphanumerics (letters and numbers) and the underscore. */
static bool py_word(int32_t c) {
    if (c == '_') return true;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
        return true;
    default:
        return false;
    }
}

static bool py_cased(int32_t c) {
    utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

static bool py_case_ignorable(int32_t c) {
    utf8proc_category_t k = utf8proc_category(c);
    return c == '\'' || c == '.' || c == ':' || c == 0x2019 || k == UTF8PROC_CATEGORY_MN ||
           k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_LM ||
           k == UTF8PROC_CATEGORY_SK;
}

static bool ascii_punct(int32_t c) {
    return c < 128 && c > 32 && c != 127 && strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", (int)c);
}

/* str.lower() of cp[0..n) into out (room for 2n: U+0130 becomes two code points). Python
 * applies the Final_Sigma rule, so a capital sigma ending a word lowers to U+03C2. */
static size_t py_lower(const int32_t *cp, size_t n, int32_t *out) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t c = cp[i];
        if (c == 0x130) {
            out[m++] = 'i';
            out[m++] = 0x307;
        } else if (c == 0x3A3) {
            bool before = false, after = false;
            for (size_t j = i; j-- > 0;)
                if (!py_case_ignorable(cp[j])) {
                    before = py_cased(cp[j]);
                    break;
                }
            for (size_t j = i + 1; j < n; j++)
                if (!py_case_ignorable(cp[j])) {
                    after = py_cased(cp[j]);
                    break;
                }
            out[m++] = before && !after ? 0x3C2 : 0x3C3;
        } else {
            out[m++] = utf8proc_tolower(c);
        }
    }
    return m;
}

static bool is_article(const int32_t *w, size_t n) {
    if (n == 1) return w[0] == 'a';
    if (n == 2) return w[0] == 'a' && w[1] == 'n';
    if (n == 3) return w[0] == 't' && w[1] == 'h' && w[2] == 'e';
    return false;
}

char *squad_normalize(const char *s) {
    size_t len = strlen(s), n = 0, cap;
    /* 2 code points per input byte bounds every stage (lowering at most doubles). */
    if (len > SIZE_MAX / (4 * sizeof(int32_t)) - 1) return NULL;
    cap = 2 * len + 1;
    int32_t *a = malloc(cap * sizeof *a), *b = malloc(cap * sizeof *b);
    char *out = NULL;
    if (!a || !b) goto done;
    for (size_t off = 0; off < len;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k =
            utf8proc_iterate((const utf8proc_uint8_t *)s + off, (utf8proc_ssize_t)(len - off), &c);
        if (k <= 0) goto done;
        a[n++] = c;
        off += (size_t)k;
    }
    n = py_lower(a, n, b);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!ascii_punct(b[i])) a[m++] = b[i];
    /* Articles are whole \w-runs; each becomes one space, as re.sub(r"\b(a|an|the)\b", " ") does.
     */
    n = 0;
    for (size_t i = 0; i < m;) {
        if (!py_word(a[i])) {
            b[n++] = a[i++];
            continue;
        }
        size_t j = i;
        while (j < m && py_word(a[j]))
            j++;
        if (is_article(a + i, j - i)) {
            b[n++] = ' ';
        } else {
            memcpy(b + n, a + i, (j - i) * sizeof *a);
            n += j - i;
        }
        i = j;
    }
    out = malloc(4 * n + 1);
    if (!out) goto done;
    size_t o = 0;
    bool pending = false; /* ' '.join(text.split()) */
    for (size_t i = 0; i < n; i++) {
        if (py_space(b[i])) {
            pending = o > 0;
            continue;
        }
        if (pending) out[o++] = ' ';
        pending = false;
        o += (size_t)utf8proc_encode_char(b[i], (utf8proc_uint8_t *)out + o);
    }
    out[o] = 0;
done:
    free(a);
    free(b);
    return out;
}

static int str_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Splits a normalised string (single spaces) in place into sorted tokens; returns the count. */
static size_t split_sorted(char *s, char **tok) {
    size_t n = 0;
    for (char *p = s; *p;) {
        tok[n++] = p;
        char *sp = strchr(p, ' ');
        if (!sp) break;
        *sp = 0;
        p = sp + 1;
    }
    qsort(tok, n, sizeof *tok, str_cmp);
    return n;
}

/* Token F1 of two normalised strings (the v1.1 rule: no common token gives 0). */
static double f1_normalized(const char *pn, const char *gn, bool *oom) {
    size_t lp = strlen(pn), lg = strlen(gn);
    char *bp = malloc(lp + 1), *bg = malloc(lg + 1);
    char **tp = malloc((lp / 2 + 1) * sizeof *tp), **tg = malloc((lg / 2 + 1) * sizeof *tg);
    double f1 = 0;
    if (!bp || !bg || !tp || !tg) {
        *oom = true;
        goto done;
    }
    memcpy(bp, pn, lp + 1);
    memcpy(bg, gn, lg + 1);
    size_t np = split_sorted(bp, tp), ng = split_sorted(bg, tg), same = 0;
    /* Counter(p) & Counter(g): the multiset intersection of two sorted lists. */
    for (size_t i = 0, j = 0; i < np && j < ng;) {
        int c = strcmp(tp[i], tg[j]);
        if (c == 0)
            same++, i++, j++;
        else if (c < 0)
            i++;
        else
            j++;
    }
    if (same) {
        double prec = (double)same / (double)np, rec = (double)same / (double)ng;
        f1 = 2 * prec * rec / (prec + rec);
    }
done:
    free(bp);
    free(bg);
    free(tp);
    free(tg);
    return f1;
}

static double squad_max(const char *pred, const char *const *golds, size_t n_gold, bool f1) {
    if (!n_gold) return -1;
    char *pn = squad_normalize(pred);
    if (!pn) return -1;
    double best = 0;
    bool oom = false;
    for (size_t i = 0; i < n_gold && !oom; i++) {
        char *gn = squad_normalize(golds[i]);
        if (!gn) {
            oom = true;
            break;
        }
        double v = f1 ? f1_normalized(pn, gn, &oom) : (double)(strcmp(pn, gn) == 0);
        if (v > best) best = v;
        free(gn);
    }
    free(pn);
    return oom ? -1 : best;
}

double squad_exact_match(const char *pred, const char *const *golds, size_t n_gold) {
    return squad_max(pred, golds, n_gold, false);
}

double squad_f1(const char *pred, const char *const *golds, size_t n_gold) {
    return squad_max(pred, golds, n_gold, true);
}
