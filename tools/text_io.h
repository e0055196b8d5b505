/* text_io.h: input and output helpers of the text-level commands: bounded line reading,
 * byte -> character offsets, JSON number printing and a progress bar. */
#ifndef BERT8_TEXT_IO_H
#define BERT8_TEXT_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One line of input. Lines longer than max_bytes are consumed but not kept (too_long). */
typedef struct text_line {
    char *buf; /* NUL-terminated; the line may also hold NUL bytes (has_nul) */
    size_t len, cap;
    int64_t lineno; /* 1-based number of the line just read */
    bool too_long, has_nul;
} text_line;

/* Reads the next line without its "\n" / "\r\n". Returns 1 with a line, 0 at the end of
 * input, -1 on a read error or when out of memory. */
int text_read_line(FILE *f, text_line *l, size_t max_bytes);
void text_line_free(text_line *l);


/* Converts byte offsets into code-point offsets of one text. Cheap for increasing offsets
 * (the cursor moves forward); a smaller offset restarts from the beginning. */
typedef struct text_chars {
    const char *s;
    size_t len, byte;
    int64_t chr;
} text_chars;
void text_chars_init(text_chars *c, const char *s, size_t len);
int64_t text_chars_at(text_chars *c, int64_t byte);

/* Prints a double as JSON (shortest round-trip up to 17 digits; null for NaN and Inf). */
void text_print_double(FILE *f, double v);
/* Prints bytes [s, s+n) as a JSON string (the bytes must be valid UTF-8 without NUL). */
void text_print_json_bytes(FILE *f, const char *s, size_t n);

/* A progress bar on stderr, redrawn when the shown percentage changes. */
typedef struct text_progress {
    const char *label;
    int64_t total, shown;
    bool on;
} text_progress;
void text_progress_start(text_progress *p, const char *label, int64_t total, bool on);
void text_progress_update(text_progress *p, int64_t done);
void text_progress_end(text_progress *p);

#endif
