/* nabla onnx: ONNX files out (export of a module or of any traced function) and in (load an
   ONNX model and run it on nabla's kernels). docs/onnx.md lists the operators and opsets. */
#ifndef NABLA_ONNX_H
#define NABLA_ONNX_H

#include "compile.h"
#include "core.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- export ----
   The function is traced (as nb_compile traces it) and every recorded op becomes ONNX nodes by
   its entry in the op table (src/ops/ops.def's onnx column); an op with no ONNX form is an
   error naming the op and its node. Tensors the function captures (parameters, buffers) become
   initializers, named as in the module's state dict when a module is given. The file is written
   to a temporary next to path and renamed over it, so a failed export leaves path as it was. */

/* Options of the exporters; zero fields take the defaults. */
typedef struct nb_onnx_export_opts {
    int opset;                        /* 0: 17 (IR version 8, the widest reach); 11..26 */
    bool dynamic_batch;               /* dimension 0 of every input (and the output dimensions
                                         that follow it) is the symbolic "batch": the function is
                                         traced at two batch sizes to tell which arguments follow it */
    const char *const *input_names;   /* n names, or NULL: "input" (one input), else "input_0", ... */
    const char *const *output_names;  /* the output's name first, or NULL: "output" */
    const char *graph_name;           /* NULL: "nabla" */
    nb_module *names_from;            /* nb_onnx_export_fn: a module whose state-dict names the
                                         captured tensors it holds take (nb_onnx_export: the module) */
} nb_onnx_export_opts;

/* Exports m's forward pass on its example input (n is 1: a module takes one tensor), in eval
   mode: dropout off, batch norm on its running statistics; each module's mode is restored
   after. 0, or -1 with the error. */
NB_API int nb_onnx_export(nb_module *m, nb_tensor *const *example_inputs, int n, const char *path,
                          nb_onnx_export_opts opts);
/* Exports any function of tensors on the n example inputs (at most 32). 0, or -1 with the error. */
NB_API int nb_onnx_export_fn(nb_graph_fn fn, void *ctx, nb_tensor *const *example_inputs, int n, const char *path,
                             nb_onnx_export_opts opts);

/* ---- import ----
   A loaded model is checked whole before anything runs: every operator and attribute it uses is
   supported at the model's opset, the graph is acyclic, every initializer's bytes match its
   shape; the first problem is the error, naming the node, the operator and the opset. */

/* A loaded ONNX model. */
typedef struct nb_onnx_model nb_onnx_model;

/* Options of nb_onnx_load; zero fields take the defaults. */
typedef struct nb_onnx_load_opts {
    bool compile;         /* run through nb_compile (cpu, models with one output); else eagerly */
    nb_graph_opts graph;  /* nb_compile's options when compile is set */
} nb_onnx_load_opts;

/* Loads path (external data files are read from its folder; a location that leaves it is an
   error). NULL with the error. */
NB_API nb_onnx_model *nb_onnx_load(const char *path, nb_onnx_load_opts opts);
/* Loads a model from memory (external data: none allowed). NULL with the error. */
NB_API nb_onnx_model *nb_onnx_load_memory(const void *data, size_t size, nb_onnx_load_opts opts);
/* The number of the model's graph inputs (initializers excluded). */
NB_API int nb_onnx_num_inputs(const nb_onnx_model *m);
/* The number of the model's graph outputs. */
NB_API int nb_onnx_num_outputs(const nb_onnx_model *m);
/* Input i's name, or NULL out of range. */
NB_API const char *nb_onnx_input_name(const nb_onnx_model *m, int i);
/* Output i's name, or NULL out of range. */
NB_API const char *nb_onnx_output_name(const nb_onnx_model *m, int i);
/* Input i's declared dtype and shape: *ndim is -1 when the model declares no shape, and a
   dimension it leaves open (symbolic or missing) is -1; dims holds NB_MAX_DIMS. 0, or -1 out of
   range. */
NB_API int nb_onnx_input_info(const nb_onnx_model *m, int i, nb_dtype *dtype, int *ndim, int64_t *dims);
/* Output i's declared dtype and shape, as nb_onnx_input_info (an output of a dtype nabla lacks
   or of no tensor type is -1). */
NB_API int nb_onnx_output_info(const nb_onnx_model *m, int i, nb_dtype *dtype, int *ndim, int64_t *dims);
/* The model's default-domain opset version. */
NB_API int nb_onnx_opset(const nb_onnx_model *m);
/* Runs the model on its n inputs, in the model's order, and writes its outputs (owned by the
   caller, nout of them, at most the model's count) to out. 0, or -1 with the error (a wrong
   input count, dtype or shape names the input). */
NB_API int nb_onnx_run(nb_onnx_model *m, nb_tensor *const *inputs, int n, nb_tensor **out, int nout);
/* A description of the model: IR version, opsets, producer, inputs and outputs with dtypes and
   shapes, operator counts, initializers and their elements (malloc'ed; the caller frees it). */
NB_API char *nb_onnx_summary(const nb_onnx_model *m);
/* Frees the model; NULL is ignored. */
NB_API void nb_onnx_free(nb_onnx_model *m);

#ifdef __cplusplus
}
#endif

#endif
