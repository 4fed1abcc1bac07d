/* nabla: a deep-learning framework in C11. The umbrella header. */
#ifndef NABLA_H
#define NABLA_H

#include "nabla/core.h"
#include "nabla/ops.h"
#include "nabla/functional.h"
#include "nabla/nn.h"
#include "nabla/autograd.h"
#include "nabla/optim.h"
#include "nabla/data.h"
#include "nabla/io.h"
#include "nabla/summary.h"
#include "nabla/health.h"
#include "nabla/doctor.h"
#include "nabla/model.h"
#include "nabla/compile.h"
#include "nabla/dist.h"
#include "nabla/onnx.h"
#include "nabla/hf.h"
#include "nabla/serve.h"
#include "nabla/cuda.h"

#endif
