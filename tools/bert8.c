/* bert8.c: the command-line tool: one sub-command per job, each on the public API. */
#include "cli.h"

#include <string.h>

int cmd_info(int argc, char **argv);
int cmd_forward(int argc, char **argv);

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
} command;

static const command COMMANDS[] = {
    {"info", cmd_info, "info MODEL_DIR [--json]                  architecture, sizes, heads, tensors"},
    {"forward", cmd_forward,
     "forward MODEL_DIR --input FILE.json [--threads N]   token ids in, outputs out (JSON)"},
};

static void usage(FILE *f) {
    fprintf(f, "bert8 %s: BERT-family encoders on CPUs, in FP32 and INT8\n\nusage: bert8 COMMAND ...\n",
            bert8_version());
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++) fprintf(f, "  bert8 %s\n", COMMANDS[i].usage);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("bert8 %s\n", bert8_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) return COMMANDS[i].run(argc - 2, argv + 2);
    fprintf(stderr, "bert8: unknown command \"%s\"\n\n", argv[1]);
    usage(stderr);
    return 2;
}
