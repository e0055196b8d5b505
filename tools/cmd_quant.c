/* cmd_quant.c: `bert8 quantize` and `bert8 bench`. Being written. */
#include "cli.h"
int cmd_quantize(int argc, char **argv) { (void)argc, (void)argv; return cli_error("quantize", "not implemented yet"); }
int cmd_bench(int argc, char **argv) { (void)argc, (void)argv; return cli_error("bench", "not implemented yet"); }
