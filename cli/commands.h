/* commands.h: one entry point per subcommand; argv[0] is the subcommand name. Exit codes: 0 ok,
 * 1 the work failed (message on stderr), 2 bad usage. */
#ifndef NB_CLI_COMMANDS_H
#define NB_CLI_COMMANDS_H

#define NB_VERSION "0.1.0" /* `nibble version`, `nibble bench`'s build line */

int cmd_version(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_explain(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_imatrix(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* Catches sig with handler unless the process started with sig ignored (nibble.c). */
void cli_catch(int sig, void (*handler)(int));

#endif
