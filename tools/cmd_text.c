/* cmd_text.c: text-level commands (tokenize, classify, embed, qa, ner). Being written. */
#include "cli.h"
static int todo(const char *c) { return cli_error(c, "not implemented yet"); }
int cmd_tokenize(int argc, char **argv) { (void)argc, (void)argv; return todo("tokenize"); }
int cmd_classify(int argc, char **argv) { (void)argc, (void)argv; return todo("classify"); }
int cmd_embed(int argc, char **argv) { (void)argc, (void)argv; return todo("embed"); }
int cmd_qa(int argc, char **argv) { (void)argc, (void)argv; return todo("qa"); }
int cmd_ner(int argc, char **argv) { (void)argc, (void)argv; return todo("ner"); }
