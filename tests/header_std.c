/* Compiled by header_std_test.sh as C11, C17, gnu11 and C++17 with -Wall -Wextra -pedantic
   -Werror: every public header, the public macros, and the 0-d shape checked at run time. */
#include <nabla.h>
#include <nabla/autograd.h>
#include <nabla/compile.h>
#include <nabla/core.h>
#include <nabla/cuda.h>
#include <nabla/data.h>
#include <nabla/dist.h>
#include <nabla/functional.h>
#include <nabla/health.h>
#include <nabla/hf.h>
#include <nabla/io.h>
#include <nabla/model.h>
#include <nabla/nn.h>
#include <nabla/onnx.h>
#include <nabla/ops.h>
#include <nabla/optim.h>
#include <nabla/summary.h>
#include <stdio.h>
#include <string.h>

static int failures;

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "header_std: %s\n", what);
        failures++;
    }
}

static int64_t twice(int64_t v) { return 2 * v; }

int main(void) {
    nb_shape scalar = NB_SHAPE();
    nb_shape one = NB_SHAPE(5);
    nb_shape two = NB_SHAPE(64, 784);
    size_t n = 3;
    nb_shape eight = NB_SHAPE(1, 2, 3, 4, 5, 6, 7, n); /* a size_t dimension, as a loop gives */
    check(scalar.ndim == 0, "NB_SHAPE() is not 0-d");
    check(one.ndim == 1 && one.dim[0] == 5, "NB_SHAPE(5) is not [5]");
    check(two.ndim == 2 && two.dim[0] == 64 && two.dim[1] == 784, "NB_SHAPE(64, 784) is not [64, 784]");
    check(eight.ndim == NB_MAX_DIMS && eight.dim[7] == 3, "NB_SHAPE of eight dimensions");
    nb_shape paren = NB_SHAPE((n));                  /* a parenthesised first dimension */
    nb_shape call = NB_SHAPE(twice(2), (int64_t)n);  /* a call, a cast */
    check(paren.ndim == 1 && paren.dim[0] == 3, "NB_SHAPE((n)) is not [3]");
    check(call.ndim == 2 && call.dim[0] == 4 && call.dim[1] == 3, "NB_SHAPE(twice(2), n) is not [4, 3]");
    check(NB_ZERO == 0.0, "NB_ZERO is not zero");
    char text[64];
    snprintf(text, sizeof text, "%d.%d.%d", NB_VERSION_MAJOR, NB_VERSION_MINOR, NB_VERSION_PATCH);
    check(strcmp(text, nb_version()) == 0, "NB_VERSION_* differ from nb_version()");

    nb_model_compile_opts mopts;          /* nb_model_compile's options, and their older name */
    memset(&mopts, 0, sizeof mopts);
    mopts.lr = 0.5;
    nb_compile_opts old_name = mopts;
    nb_graph_opts gopts;                  /* nb_compile's */
    memset(&gopts, 0, sizeof gopts);
    check(old_name.lr == 0.5 && nb_model_compile(NULL, mopts) < 0, "nb_model_compile(NULL) did not fail");
    nb_error_clear();

    nb_scope *scope = nb_scope_begin();
    nb_tensor *s = nb_full(NB_SHAPE(), 2.5, NB_F32);
    check(nb_ndim(s) == 0 && nb_numel(s) == 1, "a tensor of NB_SHAPE() is not a 0-d scalar");
    nb_tensor *x = nb_set_requires_grad(nb_ones(NB_SHAPE(2, 3), NB_F32), true);
    nb_tensor *y = nb_sum_all(nb_mul(x, s));
    check(nb_ndim(y) == 0, "nb_sum_all is not 0-d");
    nb_backward(y);
    check(nb_item(y) == 15.0, "sum of 2.5 * ones(2, 3) is not 15");
    check(nb_item(nb_sum_all(nb_grad_of(x))) == 15.0, "the gradient is not 2.5 everywhere");
    nb_scope_end(scope);
    check(nb_error() == NULL, nb_error() ? nb_error() : "");
    if (failures == 0) printf("header_std: ok\n");
    return failures != 0;
}
