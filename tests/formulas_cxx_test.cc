/* Checks that src/backend/formulas.h gives the same values read as C++ (the templates that nvcc
   compiles into the CUDA kernels) as read as C (the _Generic macros of the CPU kernels and the
   JIT): every formula op of ops.def, at every dtype it takes, over edge values (signed zeros,
   infinities, NaN, halves, integer extremes), compared bit for bit. Built and run by
   formulas_cxx_test.sh, which links the evaluator compiled both ways (and by nvcc, when found). */
#include "../src/backend/op_ids.h"
#include "nabla/core.h"
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

extern "C" int eval_c(int op, int dtype, const void *x, const void *y, double s0, double s1, void *out);
extern "C" int eval_cxx(int op, int dtype, const void *x, const void *y, double s0, double s1, void *out);
#ifdef WITH_NVCC
extern "C" int eval_nvcc(int op, int dtype, const void *x, const void *y, double s0, double s1, void *out);
#endif

#include "../src/ops/dtype_masks.h"

static unsigned dtypes_of(int op) {
    switch (op) {
#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx) case NB_OP_##ID: return dtypes;
#include "../src/ops/ops.def"
#undef NB_OP
    default: return 0;
    }
}
static const char *name_of(int op) {
    switch (op) {
#define NB_OP(ID, name, nin, infer, bwd, flags, dtypes, fuse, onnx) case NB_OP_##ID: return #name;
#include "../src/ops/ops.def"
#undef NB_OP
    default: return "?";
    }
}

template <class T> static std::vector<T> values() {
    std::vector<T> v;
    if (std::is_floating_point<T>::value) {
        const double f[] = { 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-3, 3.7, -7.25, 100.0, 1e30,
                             -1e-30, 88.5, -103.0, 3.999, std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(), std::nan("") };
        for (double d : f) v.push_back((T)d);
    } else {
        const long long f[] = { 0, 1, -1, 2, -2, 7, -7, 100, -100, 127, -128, 255 };
        for (long long d : f) v.push_back((T)d);
        v.push_back(std::numeric_limits<T>::max());
        v.push_back(std::numeric_limits<T>::min());
    }
    return v;
}

static int failures = 0, checked = 0;

template <class T> static void check_dtype(int dtype, int (*other)(int, int, const void *, const void *, double, double, void *),
                                           const char *other_name) {
    const double scalars[][2] = { { 0.5, 2.0 }, { -3.0, 3.0 }, { 2.0, 0.0 }, { -1e20, 1e20 }, { std::nan(""), 1.0 } };
    std::vector<T> xs = values<T>();
    for (int op = 0; op < NB_OP_COUNT; op++) {
        if (!(dtypes_of(op) & NB_T(dtype))) continue;
        for (T x : xs)
            for (T y : xs)
                for (const auto &s : scalars) {
                    unsigned char a[16] = { 0 }, b[16] = { 0 };
                    int ka = eval_c(op, dtype, &x, &y, s[0], s[1], a);
                    int kb = other(op, dtype, &x, &y, s[0], s[1], b);
                    if (ka != kb) {
                        std::printf("FAIL %s: op %s is a formula in one and not the other\n", other_name, name_of(op));
                        failures++;
                        goto next_op;
                    }
                    if (!ka) goto next_op;
                    checked++;
                    T ra, rb;
                    std::memcpy(&ra, a, sizeof ra);
                    std::memcpy(&rb, b, sizeof rb);
                    bool both_nan = ra != ra && rb != rb;
                    if (std::memcmp(a, b, sizeof(T)) != 0 && !both_nan && failures < 20) {
                        std::printf("FAIL %s: %s at dtype %d, x=%.17g y=%.17g s0=%g s1=%g: C gives %.17g, other %.17g\n",
                                    other_name, name_of(op), dtype, (double)x, (double)y, s[0], s[1], (double)ra, (double)rb);
                        failures++;
                    }
                }
    next_op:;
    }
}

static void check_all(int (*other)(int, int, const void *, const void *, double, double, void *), const char *name) {
    check_dtype<float>(NB_F32, other, name);
    check_dtype<double>(NB_F64, other, name);
    check_dtype<int64_t>(NB_I64, other, name);
    check_dtype<int32_t>(NB_I32, other, name);
    check_dtype<uint8_t>(NB_U8, other, name);
    check_dtype<int8_t>(NB_I8, other, name);
}

int main() {
    check_all(eval_cxx, "c++");
#ifdef WITH_NVCC
    check_all(eval_nvcc, "nvcc");
#endif
    std::printf("%d formula values compared, %d differ\n", checked, failures);
    return failures ? 1 : 0;
}
