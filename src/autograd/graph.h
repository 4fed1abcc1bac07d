/* The graph record: nodes that ops attach to their outputs, grad mode and anomaly mode.
   This half of autograd sits below ops (dispatch records nodes); the engine sits above. */
#ifndef NB_GRAPH_H
#define NB_GRAPH_H

#include "../backend/kernel.h"
#include "nabla/autograd.h"


typedef struct nb_node {
    atomic_int refcount;
    int op;                     /* nb_op_id */
    int nin;
    nb_op_args args;
    nb_tensor **inputs;         /* owned references, dropped once backward has run */
    nb_tensor *inline_inputs[3];
    unsigned *versions;         /* each input's storage version when recorded */
    unsigned inline_versions[3];
    unsigned out_version;       /* the output's storage version when recorded (for saved_out) */
    nb_tensor *saved_out;       /* a detached alias of the output, for ops whose backward uses it */
    nb_shape out_shape;
    nb_dtype out_dtype;
    bool released;              /* inputs dropped: a second backward through it is an error */
    /* backward engine scratch */
    int deps;
    int visit;
    nb_tensor *grad_acc;
    nb_grad_hook_entry *hooks;  /* called on the output's gradient before the backward runs */
    /* a custom function's user state that lives as long as the node (module backward hooks) */
    void (*drop)(void *ctx);
    void *drop_ctx;
} nb_node;

/* A node for op over inputs, producing out (out's grad_fn is set; saves out when asked). */
nb_node *nb__node_new(int op, nb_tensor *const *inputs, int nin, const nb_op_args *args, nb_tensor *out, bool save_out);
/* Checks that no input was written in place since the node was recorded; names it if one was. */
int nb__node_check_versions(const nb_node *n);
/* Drops the node's inputs and saved output (after its backward has run). */
void nb__node_release_saved(nb_node *n);
/* Drops one reference to the node. */
void nb__node_unref(nb_node *n);
/* Whether this thread records graphs. */
bool nb__grad_enabled(void);
/* Whether anomaly detection is on. */
bool nb__anomaly_enabled(void);
/* Pauses the forward checks on this thread (the engine checks whole gradients instead, naming
   the backward formula); returns the previous setting. */
bool nb__anomaly_suspend(bool suspend);
/* Registers the op-name lookup used to name nodes (the op table lives above this layer). */
void nb__graph_set_op_name(const char *(*name)(int op));
/* The name of the op behind a node, as "mul". */
const char *nb__node_op_name(const nb_node *n);

#endif
