/* CUDA kernel of the fused optimizer updates: one thread per element of a parameter, with
   src/backend/cpu/optim.c's per-element formulas in the parameter's precision and the
   coefficients the host formed in double once per step (nb__optim_begin's). */
#include "k_common.cuh"
#include <math.h>

template <typename T> __global__ void optim_kernel(nb__k_optim u) {
    T *p = (T *)u.t[0];
    const T *g = (const T *)u.t[1];
    T *s0 = (T *)u.t[2], *s1 = (T *)u.t[3], *s2 = (T *)u.t[4];
    const double *f = u.f;
    NBC_GRID_LOOP(i, u.n) {
        switch (u.kind) {
        case NBC_UPDATE_SGD: { /* s0: the momentum buffer, if any */
            const T lr = (T)f[0], mom = (T)f[1], keep = (T)(1 - f[2]), wd = (T)f[3];
            T d = g[i];
            if (wd != 0) d += wd * p[i];
            if (s0) {
                T b = u.i[2] ? d : s0[i] * mom + keep * d;
                s0[i] = b;
                d = u.i[1] ? d + mom * b : b;
            }
            p[i] -= lr * d;
            break;
        }
        case NBC_UPDATE_ADAM: { /* s0 exp_avg, s1 exp_avg_sq, s2 max_exp_avg_sq (amsgrad) */
            const T b2 = (T)f[2], eps = (T)f[3], wd = (T)f[4];
            const T omb1 = (T)(1 - f[1]), omb2 = (T)(1 - f[2]), decay = (T)(1 - f[0] * f[4]);
            const T bc2_sqrt = (T)f[6], step_size = (T)f[7];
            T gi = g[i], pi = p[i];
            if (u.i[2]) pi *= decay;
            else if (wd != 0) gi += wd * pi;
            T mi = s0[i] + omb1 * (gi - s0[i]);
            T vi = s1[i] * b2 + omb2 * gi * gi;
            s0[i] = mi;
            s1[i] = vi;
            if (s2) {
                if (vi > s2[i]) s2[i] = vi;
                vi = s2[i];
            }
            T denom = sqrt(vi) / bc2_sqrt + eps;
            p[i] = pi - step_size * (mi / denom);
            break;
        }
        case NBC_UPDATE_RMSPROP: { /* s0 square_avg, then the momentum buffer (i[3]) and grad_avg (i[1]) */
            const T lr = (T)f[0], alpha = (T)f[1], oma = (T)(1 - f[1]), eps = (T)f[2], wd = (T)f[3], mom = (T)f[4];
            T *buf = u.i[3] ? s1 : NULL, *gavg = u.i[1] ? (u.i[3] ? s2 : s1) : NULL;
            T gi = g[i];
            if (wd != 0) gi += wd * p[i];
            T s = s0[i] * alpha + oma * gi * gi;
            s0[i] = s;
            T avg;
            if (gavg) {
                T ga = gavg[i] + oma * (gi - gavg[i]);
                gavg[i] = ga;
                avg = sqrt(s - ga * ga) + eps;
            } else avg = sqrt(s) + eps;
            if (buf) {
                T b = buf[i] * mom + gi / avg;
                buf[i] = b;
                p[i] -= lr * b;
            } else p[i] -= lr * (gi / avg);
            break;
        }
        case NBC_UPDATE_ADAGRAD: { /* s0 sum */
            const T clr = (T)f[0], eps = (T)f[1], wd = (T)f[2];
            T gi = g[i];
            if (wd != 0) gi += wd * p[i];
            T s = s0[i] + gi * gi;
            s0[i] = s;
            p[i] -= clr * (gi / (sqrt(s) + eps));
            break;
        }
        case NBC_UPDATE_ADADELTA: { /* s0 square_avg, s1 acc_delta */
            const T lr = (T)f[0], rho = (T)f[1], omr = (T)(1 - f[1]), eps = (T)f[2], wd = (T)f[3];
            T gi = g[i];
            if (wd != 0) gi += wd * p[i];
            T s = s0[i] * rho + omr * gi * gi;
            s0[i] = s;
            T delta = sqrt(s1[i] + eps) / sqrt(s + eps) * gi;
            s1[i] = s1[i] * rho + omr * delta * delta;
            p[i] -= lr * delta;
            break;
        }
        default: { /* NAdam, RAdam, Adamax: f[1..4] beta1, beta2, eps, weight decay; s0 exp_avg */
            const T b1 = (T)f[1], b2 = (T)f[2], eps = (T)f[3], wd = (T)f[4], omb1 = (T)(1 - f[1]), omb2 = (T)(1 - f[2]);
            T gi = g[i];
            if (wd != 0) gi += wd * p[i];
            s0[i] = s0[i] * b1 + omb1 * gi;
            if (u.kind == NBC_UPDATE_NADAM) { /* s1 exp_avg_sq; f[0], f[5] the step coefficients, f[6] bias_correction2 */
                T vi = s1[i] * b2 + omb2 * gi * gi;
                s1[i] = vi;
                T denom = sqrt(vi / (T)f[6]) + eps;
                T pi = p[i] + (T)f[0] * gi / denom;
                p[i] = pi + (T)f[5] * s0[i] / denom;
            } else if (u.kind == NBC_UPDATE_RADAM) { /* s1 exp_avg_sq; f[5] bc1, f[6] sqrt(bc2), f[7] rectification */
                T vi = s1[i] * b2 + omb2 * gi * gi;
                s1[i] = vi;
                T corrected = s0[i] / (T)f[5];
                if (u.i[4]) p[i] -= corrected * (T)f[0] * ((T)f[6] / (sqrt(vi) + eps)) * (T)f[7];
                else p[i] -= corrected * (T)f[0];
            } else { /* Adamax: s1 exp_inf; f[6] lr / bias_correction1 */
                T decayed = s1[i] * b2, fresh = (gi < 0 ? -gi : gi) + eps;
                T ui = decayed > fresh || decayed != decayed ? decayed : fresh; /* torch.amax: NaN wins */
                s1[i] = ui;
                p[i] += (T)(-f[6]) * s0[i] / ui;
            }
        }
        }
    }
}

extern "C" int nb__k_optim_update(const nb__k_optim *u) {
    if (u->n == 0) return 0;
    return nb__k_by_float_dtype(u->dtype, [&](auto z) {
        optim_kernel<decltype(z)><<<nb__k_blocks(u->n), NBC_BLOCK, 0, nb__k_queue()>>>(*u);
        return nb__k_launched();
    });
}
