/* cmd_eval.c: `bert8 eval`. Being written. */
#include "cli.h"
int cmd_eval(int argc, char **argv) { (void)argc, (void)argv; return cli_error("eval", "not implemented yet"); }
