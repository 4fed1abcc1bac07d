/* nabla data: datasets, the data loader with worker threads, readers and transforms. */
#ifndef NABLA_DATA_H
#define NABLA_DATA_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
