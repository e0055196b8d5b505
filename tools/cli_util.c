/* cli_util.c: argument parsing and JSON printing for the bert8 tool. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bert8 %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 1;
}

void cli_args_init(cli_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->argc = argc < 256 ? argc : 256;
    a->argv = argv;
}

const char *cli_opt(cli_args *a, const char *name) {
    for (int i = 0; i < a->argc; i++) {
        if (!a->used[i] && !strcmp(a->argv[i], name)) {
            a->used[i] = true;
            if (i + 1 < a->argc) {
                a->used[i + 1] = true;
                return a->argv[i + 1];
            }
            return "";
        }
    }
    return NULL;
}

bool cli_flag(cli_args *a, const char *name) {
    for (int i = 0; i < a->argc; i++)
        if (!a->used[i] && !strcmp(a->argv[i], name)) return a->used[i] = true;
    return false;
}

const char *cli_positional(cli_args *a) {
    for (int i = 0; i < a->argc; i++)
        if (!a->used[i] && a->argv[i][0] != '-') {
            a->used[i] = true;
            return a->argv[i];
        }
    return NULL;
}

const char *cli_leftover(cli_args *a) {
    for (int i = 0; i < a->argc; i++)
        if (!a->used[i]) return a->argv[i];
    return NULL;
}

bool cli_int(const char *cmd, const char *name, const char *val, long lo, long hi, long *out) {
    if (!val || !*val) {
        cli_error(cmd, "option %s needs a value", name);
        return false;
    }
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        cli_error(cmd, "option %s: \"%s\" is not an integer in [%ld, %ld]", name, val, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

void cli_print_float(FILE *f, float v) {
    if (isnan(v) || isinf(v)) {
        fputs("null", f); /* JSON has no NaN/Inf */
        return;
    }
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    fputs(buf, f);
}

void cli_print_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

static void print_dims(FILE *f, const float *d, const int64_t *shape, int ndim) {
    fputc('[', f);
    if (ndim == 1) {
        for (int64_t i = 0; i < shape[0]; i++) {
            if (i) fputc(',', f);
            cli_print_float(f, d[i]);
        }
    } else {
        int64_t inner = 1;
        for (int k = 1; k < ndim; k++) inner *= shape[k];
        for (int64_t i = 0; i < shape[0]; i++) {
            if (i) fputc(',', f);
            print_dims(f, d + i * inner, shape + 1, ndim - 1);
        }
    }
    fputc(']', f);
}

void cli_print_tensor(FILE *f, const bert8_tensor *t) { print_dims(f, t->data, t->shape, t->ndim); }

bert8_model *cli_load_model(const char *cmd, const char *dir, int threads, const char *lora_task) {
    if (!dir) {
        cli_error(cmd, "missing MODEL_DIR");
        return NULL;
    }
    bert8_load_params p = bert8_default_load_params();
    p.threads = threads;
    p.lora_task = lora_task;
    const char *v = getenv("BERT8_VERBOSE");
    p.verbose = v && *v && strcmp(v, "0") != 0;
    bert8_set_threads(threads);
    char err[1024];
    bert8_model *m = NULL;
    bert8_status st = bert8_model_load(dir, &p, &m, err, sizeof err);
    if (st) {
        cli_error(cmd, "%s (%s)", err, bert8_status_string(st));
        return NULL;
    }
    return m;
}
