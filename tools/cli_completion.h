/* `nabla completion bash|zsh` and `nabla manpage` (tools/cli_completion.c). */
#ifndef NABLA_CLI_COMPLETION_H
#define NABLA_CLI_COMPLETION_H

/* argv[0] is "completion" or "manpage"; prints the script or the page; 0, or 2 on bad arguments. */
int cli_completion_main(int argc, char **argv);

#endif
