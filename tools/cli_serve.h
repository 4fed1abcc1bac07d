/* The nabla command's model server (tools/cli_serve.c). */
#ifndef NABLA_CLI_SERVE_H
#define NABLA_CLI_SERVE_H

/* `nabla serve --model_name N --model_base_path DIR | --model_config_file F [...]`; argv[0] is
   "serve". Runs until SIGTERM or SIGINT; the exit status. */
int cli_serve_main(int argc, char **argv);

#endif
