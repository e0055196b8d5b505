/* tasks.h: readers for the evaluation data of `bert8 eval`: GLUE-style TSV files (columns by
 * header name) and SQuAD v1.1 JSON, plus the split files the trainer writes next to a model.
 * Every reader checks UTF-8 and names the file and line (or JSON path) that is wrong. */
#ifndef BERT8_TASKS_H
#define BERT8_TASKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* A TSV file with a header row, held in memory. Fields are NUL-terminated in place; a
 * leading UTF-8 BOM and "\r" line ends are dropped; fields are not quoted (as GLUE's
 * loaders read them with quoting off). */
typedef struct tsv_table {
    char *data;
    char **cells;       /* [(rows + 1) * cols]: the header row first */
    int64_t rows, cols; /* data rows (header excluded) */
    int64_t *line;      /* [rows] 1-based line number of each data row in the file */
} tsv_table;

/* Loads path; every row must have as many fields as the header. Blank lines are skipped. */
bool tsv_load(const char *path, tsv_table *t, char *err, size_t err_len);
void tsv_free(tsv_table *t);
/* Column index of a header name, or -1. */
int64_t tsv_col(const tsv_table *t, const char *name);
static inline const char *tsv_cell(const tsv_table *t, int64_t row, int64_t col) {
    return t->cells[(row + 1) * t->cols + col];
}

/* SQuAD v1.1: one entry per question, pointing into the parsed JSON. */
typedef struct squad_question {
    const char *title, *context, *question, *id;
    const char **golds; /* gold answer texts */
    int64_t n_gold;
} squad_question;

typedef struct squad_set {
    cJSON *root;
    squad_question *q;
    int64_t n;
    const char **gold_store;
} squad_set;

bool squad_load(const char *path, squad_set *s, char *err, size_t err_len);
void squad_free(squad_set *s);
/* Keeps only the questions whose article title is in titles[0..n). */
void squad_keep_titles(squad_set *s, const char *const *titles, int64_t n);

/* Reads a JSON file (split.json); NULL with a message on failure. */
cJSON *json_load_file(const char *path, char *err, size_t err_len);

#endif
