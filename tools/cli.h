/* cli.h: shared helpers of the bert8 command-line tool (argument parsing, JSON output).
 * The tool uses only the public API in bert8.h. */
#ifndef BERT8_CLI_H
#define BERT8_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "bert8.h"

/* Prints "bert8 <cmd>: message" to stderr; returns 1 (the exit code). */
int cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Option lookup: returns the value after `name` in argv (or NULL); marks consumed entries. */
typedef struct cli_args {
    int argc;
    char **argv;
    bool used[256];
} cli_args;
void cli_args_init(cli_args *a, int argc, char **argv);
const char *cli_opt(cli_args *a, const char *name);
bool cli_flag(cli_args *a, const char *name);
/* The first unused positional argument, or NULL. */
const char *cli_positional(cli_args *a);
/* Returns the first unused argument (an unknown option), or NULL when all were consumed. */
const char *cli_leftover(cli_args *a);
/* Parses an integer option in [lo, hi]; returns false (with a message) when malformed. */
bool cli_int(const char *cmd, const char *name, const char *val, long lo, long hi, long *out);

/* JSON output of float arrays with shortest round-trip formatting. */
void cli_print_float(FILE *f, float v);
void cli_print_json_string(FILE *f, const char *s);
/* Prints a tensor as nested arrays. */
void cli_print_tensor(FILE *f, const bert8_tensor *t);

/* Loads a model folder, applying --threads and --lora-task (NULL: none); prints the error and
 * returns NULL on failure. */
bert8_model *cli_load_model(const char *cmd, const char *dir, int threads, const char *lora_task);

#endif
