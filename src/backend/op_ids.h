/* The op ids, one per line of ops.def, alone: what both compilers read (the CUDA kernels take
   the op's id and generate their elementwise cases from the same list). */
#ifndef NB_OP_IDS_H
#define NB_OP_IDS_H

/* One id per op of the one list (src/ops/ops.def). */
typedef enum nb_op_id {
#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx) NB_OP_##ID,
#include "../ops/ops.def"
#undef NB_OP
    NB_OP_COUNT
} nb_op_id;

#endif
