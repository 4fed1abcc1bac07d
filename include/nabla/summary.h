/* nabla summary: TensorBoard event files, run-health helpers and curve plots. */
#ifndef NABLA_SUMMARY_H
#define NABLA_SUMMARY_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
