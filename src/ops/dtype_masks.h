/* The dtype masks of ops.def's dtypes column, alone: what C and C++ readers of the table share. */
#ifndef NB_DTYPE_MASKS_H
#define NB_DTYPE_MASKS_H

#include "nabla/core.h"

#define NB_T(d) (1u << (d))
#define NB_T_FLOAT (NB_T(NB_F32) | NB_T(NB_F64))
#define NB_T_INT (NB_T(NB_I64) | NB_T(NB_I32) | NB_T(NB_U8) | NB_T(NB_I8))
#define NB_T_NUM (NB_T_FLOAT | NB_T_INT)
#define NB_T_B NB_T(NB_BOOL)
#define NB_T_ALL (NB_T_NUM | NB_T_B | NB_T(NB_F16) | NB_T(NB_BF16))

#endif
