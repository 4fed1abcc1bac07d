/* The nabla command's pretrained-model subcommands (tools/cli_hf.c). */
#ifndef NABLA_CLI_HF_H
#define NABLA_CLI_HF_H

/* `nabla generate DIR --prompt TEXT [...]`; argv[0] is "generate". The exit status. */
int cli_generate_main(int argc, char **argv);
/* `nabla embed DIR --text TEXT | --file FILE [-o OUT.npy]`; the exit status. */
int cli_embed_main(int argc, char **argv);

#endif
