/* cli_util.c */
typedef int b8_cli_unused;
