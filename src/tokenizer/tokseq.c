/* tokseq.c: the token list of one sequence, which the models append to, and the per-call
 * scratch, freed with the encode and tokenize results that keep it. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokseq.h"
#include "tokenizer/unicode_text.h"

bool b8_tokseq_reserve(b8_tokseq *s, int64_t n) {
    if (n <= s->cap) return true;
    int64_t nc = s->cap ? s->cap : 64;
    while (nc < n)
        nc *= 2;
    int32_t **arrs[4] = {&s->id, &s->os, &s->oe, &s->word};
    for (int i = 0; i < 4; i++) {
        int32_t *p = realloc(*arrs[i], (size_t)nc * sizeof *p);
        if (!p) return false;
        *arrs[i] = p;
    }
    if (s->want_strings) {
        int64_t *p = realloc(s->str_off, (size_t)(nc + 1) * sizeof *p);
        if (!p) return false;
        if (!s->str_off) p[0] = 0;
        s->str_off = p;
    }
    s->cap = nc;
    return true;
}

void b8_tokseq_free(b8_tokseq *s) {
    free(s->id);
    free(s->os);
    free(s->oe);
    free(s->word);
    free(s->str);
    free(s->str_off);
    memset(s, 0, sizeof *s);
}

bool b8_tokseq_push(b8_tokseq *s, int32_t id, int32_t os, int32_t oe, int32_t word, const char *str,
                    size_t len) {
    if (s->n == s->cap && !b8_tokseq_reserve(s, s->n + 1)) return false;
    if (s->want_strings) {
        if (!s->str_off && !b8_tokseq_reserve(s, s->cap + 1)) return false;
        int64_t need = s->str_n + (int64_t)len + 1;
        if (need > s->str_cap) {
            int64_t nc = s->str_cap ? s->str_cap : 256;
            while (nc < need)
                nc *= 2;
            char *p = realloc(s->str, (size_t)nc);
            if (!p) return false;
            s->str = p;
            s->str_cap = nc;
        }
        s->str_off[s->n] = s->str_n;
        if (len) memcpy(s->str + s->str_n, str, len);
        s->str[s->str_n + (int64_t)len] = 0;
        s->str_n += (int64_t)len + 1;
        s->str_off[s->n + 1] = s->str_n;
    }
    s->id[s->n] = id;
    s->os[s->n] = os;
    s->oe[s->n] = oe;
    s->word[s->n] = word;
    s->n++;
    return true;
}

bool b8_scratch_bytes(b8_tok_scratch *s, size_t n) {
    if (n <= s->nb_cap) return true;
    size_t nc = s->nb_cap ? s->nb_cap : 256;
    while (nc < n)
        nc *= 2;
    uint8_t *nb = realloc(s->nb, nc);
    if (!nb) return false;
    s->nb = nb;
    int32_t *os = realloc(s->nos, nc * sizeof *os);
    if (!os) return false;
    s->nos = os;
    int32_t *oe = realloc(s->noe, nc * sizeof *oe);
    if (!oe) return false;
    s->noe = oe;
    s->nb_cap = nc;
    return true;
}

void b8_scratch_free(b8_tok_scratch *s) {
    if (!s) return;
    b8_ucps_free(&s->word);
    b8_ucps_free(&s->tmp);
    free(s->nfc.g);
    free(s->nfc.u);
    free(s->nfc.m);
    free(s->nb);
    free(s->nos);
    free(s->noe);
    free(s->lattice);
    for (int64_t i = 0; i < s->nseqs; i++)
        b8_tokseq_free(&s->seqs[i]);
    free(s->seqs);
    free(s->plan);
    free(s->bpe_sym);
    free(s->bpe_heap);
    free(s->bpe_cache);
    memset(s, 0, sizeof *s);
}
