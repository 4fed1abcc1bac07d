/* nabla io: NumPy arrays, safetensors state dicts and checkpoints. */
#ifndef NABLA_IO_H
#define NABLA_IO_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads a NumPy .npy file (v1-v3, little or big endian, C or Fortran order) as a new tensor. */
NB_API nb_tensor *nb_load_npy(const char *path);
/* Writes t as a NumPy .npy file (v1, little endian, C order), atomically; 0 or <0. */
NB_API int nb_save_npy(const nb_tensor *t, const char *path);

#ifdef __cplusplus
}
#endif
#endif
