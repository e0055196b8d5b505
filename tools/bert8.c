/* bert8.c: the command-line tool: one sub-command per job, each on the public API. */
#include "cli.h"

#include <string.h>

int cmd_info(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_classify(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_qa(int argc, char **argv);
int cmd_ner(int argc, char **argv);
int cmd_fill_mask(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
} command;

static const command COMMANDS[] = {
    {"info", cmd_info, "info MODEL_DIR [--json]                  architecture, sizes, heads, tensors"},
    {"forward", cmd_forward,
     "forward MODEL_DIR --input FILE.json [--threads N]   token ids in, outputs out (JSON)"},
    /* info, forward, the text commands, quantize, bench and serve take --lora-task NAME: the task
     * whose LoRA adapters (Jina v3) are folded into the weights at load */
    {"tokenize", cmd_tokenize, "tokenize MODEL_DIR < lines                 text -> ids, tokens, offsets (JSON lines)"},
    {"classify", cmd_classify, "classify MODEL_DIR < lines                 sequence classification (JSON lines)"},
    {"embed", cmd_embed, "embed MODEL_DIR [--pooling cls|mean] [--normalize] < lines   sentence embeddings"},
    {"qa", cmd_qa, "qa MODEL_DIR < lines                       extractive question answering"},
    {"ner", cmd_ner, "ner MODEL_DIR < lines                      token classification, word-level"},
    {"fill-mask", cmd_fill_mask, "fill-mask MODEL_DIR [--top-k N] < lines    masked-LM predictions at mask tokens"},
    {"eval", cmd_eval, "eval MODEL_DIR --task T --data PATH [--limit N] [--json]   accuracy on a data set"},
    {"quantize", cmd_quantize,
     "quantize MODEL_DIR -o OUT_DIR --calib FILE [--samples N] [--alpha A|auto] [--scheme static|dynamic] "
     "[--attention fp32|int8] [--embeddings fp32|int8] [--weight-bits 7|8] [--keep-fp32 PATTERN]\n"
     "          [--ffn-out dynamic|static] [--ffn-in dynamic|static] [--outliers N] [--unit-modes KIND=MODE,...]\n"
     "          [--max-drop POINTS --eval-task T --eval-data PATH [--eval-split split.json] [--eval-limit N] "
     "[--tune-fraction F]\n"
     "           [--tune-score conservative|plain] [--ranking both|output-error|metric] [--no-dynamic] [--no-trim] "
     "[--report FILE.json] [--bench-seconds S]]\n"
     "          [--min-cosine MEAN[,P1] [--eval-data TEXTFILE] [--eval-limit N] [--tune-fraction F] "
     "[--ranking ...] [--no-dynamic] [--no-trim]\n"
     "           [--report FILE.json] [--bench-seconds S]]   embedding models: cosine to FP32 on held-out text"},
    {"bench", cmd_bench,
     "bench MODEL_DIR [--batch B] [--seq S] [--threads T] [--scheme static|dynamic] [--attention fp32|int8] "
     "[--calib FILE] [--lengths FILE] [--roofline [--plot FILE.svg|png]] [--json]"},
    {"serve", cmd_serve,
     "serve MODEL_DIR [--port N] [--hostname H] [options]   HTTP server with TEI's API (serve --help)"},
};

static void usage(FILE *f) {
    fprintf(f, "bert8 %s: BERT-family encoders on CPUs, in FP32 and INT8\n\nusage: bert8 COMMAND ...\n",
            bert8_version());
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++) fprintf(f, "  bert8 %s\n", COMMANDS[i].usage);
    fprintf(f, "  (info, forward, the text commands, quantize, bench and serve take --lora-task NAME: the task whose\n"
               "   LoRA adapters, Jina v3's, are folded into the weights; default none)\n");
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
