/* The nabla command's ONNX subcommands (tools/cli_onnx.c). */
#ifndef NABLA_CLI_ONNX_H
#define NABLA_CLI_ONNX_H

/* `nabla export MODEL.safetensors -o OUT.onnx [...]`; argv[0] is "export". The exit status. */
int cli_export_main(int argc, char **argv);
/* `nabla run MODEL.onnx --input X.npy ... [-o OUT.npy | --outputs DIR]`; the exit status. */
int cli_run_main(int argc, char **argv);

#endif
