/* The mapping between nabla's dtypes and ONNX's TensorProto data types. */
#include "onnx_impl.h"

int nb__onnx_dtype(nb_dtype d) {
    switch (d) {
    case NB_F32: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    case NB_F64: return ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    case NB_F16: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    case NB_BF16: return ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    case NB_I64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    case NB_I32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    case NB_U8: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    case NB_BOOL: return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    case NB_I8: return ONNX__TENSOR_PROTO__DATA_TYPE__INT8;
    default: return ONNX__TENSOR_PROTO__DATA_TYPE__UNDEFINED;
    }
}

bool nb__onnx_to_dtype(int onnx_type, nb_dtype *d) {
    for (int k = 0; k < NB_DTYPE_COUNT; k++)
        if (nb__onnx_dtype((nb_dtype)k) == onnx_type && onnx_type != 0) {
            *d = (nb_dtype)k;
            return true;
        }
    return false;
}
