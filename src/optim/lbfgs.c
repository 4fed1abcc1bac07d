/* LBFGS as torch.optim.LBFGS (torch 1.13's lbfgs.py, itself after minFunc): the parameters
   flattened into one vector, a history of steps and gradient changes, the two-loop recursion for
   the direction, and a fixed step or the strong-Wolfe line search. The vectors are tensors in
   the parameters' dtype on their device, worked with ops; the scalars (dot products, step
   lengths, losses) are doubles on the host, where torch keeps 0-d tensors. */
#include "../ops/ops_impl.h"
#include "lbfgs.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct nb__lbfgs {
    int max_iter, max_eval, history;
    double tolerance_grad, tolerance_change;
    bool strong_wolfe;
    double (*closure)(void *ctx);
    void *ctx;
    /* kept between steps, as torch keeps them in the first parameter's state */
    int64_t n_iter, func_evals;
    nb_tensor *d, *prev_flat_grad; /* owned references */
    double t, h_diag, prev_loss;
    nb_tensor **old_dirs, **old_stps; /* owned, nold of them, oldest first */
    double *ro, *al;
    int nold;
};

/* The parameters a step works on. */
typedef struct {
    nb_tensor *const *p;
    int n;
} params;

static const char *const FN = "nb_optim_step";

static double zero_or(double v, double dflt) { return v == 0 && !signbit(v) ? dflt : (v == 0 ? 0.0 : v); }

nb__lbfgs *nb__lbfgs_new(const nb_lbfgs_opts *o) {
    if (!o->closure) {
        nb__error("nb_optim_lbfgs: needs a closure that recomputes the loss and the gradients");
        return NULL;
    }
    int max_iter = o->max_iter ? o->max_iter : 20, history = o->history_size ? o->history_size : 100;
    int max_eval = o->max_eval ? o->max_eval : max_iter * 5 / 4;
    double tol_grad = zero_or(o->tolerance_grad, 1e-7), tol_change = zero_or(o->tolerance_change, 1e-9);
    if (max_iter < 1 || max_eval < 1 || history < 1 || !(tol_grad >= 0) || !(tol_change >= 0) || !(o->lr >= 0)) {
        nb__error("nb_optim_lbfgs: max_iter, max_eval and history_size must be positive, lr and the tolerances "
                  "non-negative (got max_iter %d, max_eval %d, history_size %d, lr %g, tolerance_grad %g, "
                  "tolerance_change %g)", max_iter, max_eval, history, o->lr, tol_grad, tol_change);
        return NULL;
    }
    if (!nb__enum_ok("nb_optim_lbfgs", "line_search", (int)o->line_search, NB_LINE_SEARCH_STRONG_WOLFE + 1, "nb_line_search",
                     "NB_LINE_SEARCH_NONE, NB_LINE_SEARCH_STRONG_WOLFE"))
        return NULL;
    nb__lbfgs *l = calloc(1, sizeof *l);
    if (l) {
        l->old_dirs = calloc((size_t)history, sizeof(nb_tensor *));
        l->old_stps = calloc((size_t)history, sizeof(nb_tensor *));
        l->ro = calloc((size_t)history, sizeof(double));
        l->al = calloc((size_t)history, sizeof(double));
    }
    if (!l || !l->old_dirs || !l->old_stps || !l->ro || !l->al) {
        nb__lbfgs_free(l);
        nb__error("nb_optim_lbfgs: out of memory for a history of %d", history);
        return NULL;
    }
    l->max_iter = max_iter;
    l->max_eval = max_eval;
    l->history = history;
    l->tolerance_grad = tol_grad;
    l->tolerance_change = tol_change;
    l->strong_wolfe = o->line_search == NB_LINE_SEARCH_STRONG_WOLFE;
    l->closure = o->closure;
    l->ctx = o->ctx;
    l->h_diag = 1;
    return l;
}

void nb__lbfgs_free(nb__lbfgs *l) {
    if (!l) return;
    nb_release(l->d);
    nb_release(l->prev_flat_grad);
    for (int i = 0; i < l->nold; i++) {
        nb_release(l->old_dirs[i]);
        nb_release(l->old_stps[i]);
    }
    free(l->old_dirs);
    free(l->old_stps);
    free(l->ro);
    free(l->al);
    free(l);
}

/* Makes *slot an owned reference to t (which may be NULL), letting the old one go. */
static void hold(nb_tensor **slot, nb_tensor *t) {
    nb_tensor *old = *slot;
    *slot = t ? nb_retain(t) : NULL;
    nb_release(old);
}

/* Python's max and min: the first argument unless the second is strictly past it. */
static double py_max(double a, double b) { return b > a ? b : a; }
static double py_min(double a, double b) { return b < a ? b : a; }

static double dot(nb_tensor *a, nb_tensor *b) { return nb_item(nb_sum_all(nb_mul(a, b))); }
static double abs_max(nb_tensor *v) { return nb_item(nb_max(nb_abs(v), 0, false)); }

/* Every gradient, flattened and joined (zeros for a parameter without one), in the current scope. */
static nb_tensor *flat_grad(params ps) {
    nb_tensor *stack[16] = { 0 }, **views = ps.n <= 16 ? stack : malloc(sizeof(nb_tensor *) * (size_t)ps.n);
    if (!views) {
        nb__error("%s: out of memory", FN);
        return NULL;
    }
    for (int i = 0; i < ps.n; i++) {
        nb_tensor *g = nb_grad_of(ps.p[i]);
        nb_shape flat = NB_SHAPE(nb_numel(ps.p[i]));
        views[i] = g ? nb_reshape(g, flat) : nb__full_on(flat, 0, nb_dtype_of(ps.p[i]), nb_device_of(ps.p[i]));
    }
    nb_tensor *r = nb_cat(views, ps.n, 0);
    if (views != stack) free(views);
    return r;
}

/* Each parameter += step * its piece of the flat update. */
static void add_update(params ps, double step, nb_tensor *update) {
    int64_t off = 0;
    for (int i = 0; i < ps.n; i++) {
        int64_t k = nb_numel(ps.p[i]);
        nb_tensor *piece = nb_reshape(nb_slice(update, 0, off, off + k, 1), nb_shape_of(ps.p[i]));
        nb_assign(ps.p[i], nb_add(ps.p[i], nb_mul_scalar(piece, step)));
        off += k;
    }
}

/* Runs the closure with grad enabled, its tensors released after; 0, or -1 when it returned NaN. */
static int evaluate(nb__lbfgs *l, double *loss) {
    bool prev = nb_set_grad_enabled(true);
    nb_scope *sc = nb_scope_begin();
    double v = l->closure(l->ctx);
    nb_scope_end(sc);
    nb_set_grad_enabled(prev);
    if (isnan(v)) {
        nb__error("%s: the LBFGS closure returned NaN", FN);
        return -1;
    }
    *loss = v;
    return 0;
}

/* torch's _directional_evaluate: the loss and flat gradient at x + t d, the parameters put back
   to x after. The gradient is held in *g. */
static int directional(nb__lbfgs *l, params ps, nb_tensor *const *x, double t, nb_tensor *d, double *f, nb_tensor **g) {
    nb_scope *sc = nb_scope_begin();
    add_update(ps, t, d);
    int rc = evaluate(l, f);
    if (rc == 0) hold(g, flat_grad(ps));
    for (int i = 0; i < ps.n; i++) nb_assign(ps.p[i], x[i]);
    nb_scope_end(sc);
    return rc;
}

/* torch's _cubic_interpolate: the minimiser of the cubic through two points with their values and
   derivatives, within bounds (NULL: between the points). */
static double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2, const double *bounds) {
    double lo = bounds ? bounds[0] : x1 <= x2 ? x1 : x2, hi = bounds ? bounds[1] : x1 <= x2 ? x2 : x1;
    double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
    double d2_square = d1 * d1 - g1 * g2;
    if (d2_square >= 0) {
        double d2 = sqrt(d2_square), min_pos;
        if (x1 <= x2) min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2));
        else min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
        return py_min(py_max(min_pos, lo), hi);
    }
    return (lo + hi) / 2.;
}

/* A bracket of the line search: one or two step lengths with their losses, held gradients and
   directional derivatives. */
typedef struct {
    int n;
    double t[2], f[2], gtd[2];
    nb_tensor *g[2];
} bracket;

static void bracket_set(bracket *b, int i, double t, double f, nb_tensor *g, double gtd) {
    b->t[i] = t;
    b->f[i] = f;
    hold(&b->g[i], g);
    b->gtd[i] = gtd;
}

/* torch's _strong_wolfe with its defaults (c1 1e-4, c2 0.9, tolerance_change 1e-9, 25 evaluations):
   from step length *t along d at loss f, gradient g and derivative gtd, finds a step meeting
   the strong Wolfe conditions. Sets *t, *f_out and the held *g_out, adds the evaluations to *evals. */
static int strong_wolfe(nb__lbfgs *l, params ps, nb_tensor *const *x, double *t_io, nb_tensor *d, double f, nb_tensor *g,
                        double gtd, double *f_out, nb_tensor **g_out, int *evals) {
    const double c1 = 1e-4, c2 = 0.9, tolerance_change = 1e-9;
    const int max_ls = 25;
    double t = *t_io, d_norm = abs_max(d), f_new;
    nb_tensor *g_new = NULL, *g_prev = NULL;
    int rc = directional(l, ps, x, t, d, &f_new, &g_new), ls_evals = 1, ls_iter = 0;
    double gtd_new = rc == 0 ? dot(g_new, d) : 0, t_prev = 0, f_prev = f, gtd_prev = gtd;
    hold(&g_prev, g);
    bool done = false;
    bracket b = { 0 };
    while (rc == 0 && ls_iter < max_ls) {
        bool armijo_fails = f_new > (f + c1 * t * gtd) || (ls_iter > 1 && f_new >= f_prev);
        if (!armijo_fails && fabs(gtd_new) <= -c2 * gtd) {
            b.n = 1;
            bracket_set(&b, 0, t, f_new, g_new, gtd_new);
            done = true;
            break;
        }
        if (armijo_fails || gtd_new >= 0) {
            b.n = 2;
            bracket_set(&b, 0, t_prev, f_prev, g_prev, gtd_prev);
            bracket_set(&b, 1, t, f_new, g_new, gtd_new);
            break;
        }
        /* interpolate, within [t + 0.01 (t - t_prev), 10 t] */
        double bounds[2] = { t + 0.01 * (t - t_prev), t * 10 }, tmp = t;
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds);
        t_prev = tmp;
        f_prev = f_new;
        hold(&g_prev, g_new);
        gtd_prev = gtd_new;
        rc = directional(l, ps, x, t, d, &f_new, &g_new);
        ls_evals++;
        if (rc == 0) gtd_new = dot(g_new, d);
        ls_iter++;
    }
    if (rc == 0 && ls_iter == max_ls) {
        b.n = 2;
        bracket_set(&b, 0, 0, f, g, 0);
        bracket_set(&b, 1, t, f_new, g_new, 0);
    }
    /* zoom: refine the bracket until a point meets the conditions */
    bool insuf_progress = false;
    int low = b.n && !(b.f[0] <= b.f[b.n - 1]) ? 1 : 0, high = 1 - low;
    while (rc == 0 && !done && ls_iter < max_ls) {
        if (fabs(b.t[1] - b.t[0]) * d_norm < tolerance_change) break;
        t = cubic_interpolate(b.t[0], b.f[0], b.gtd[0], b.t[1], b.f[1], b.gtd[1], NULL);
        /* too close to a boundary: move 0.1 of the bracket's length inside when the last step also
           made too little progress or t is at the boundary */
        double bmax = py_max(b.t[0], b.t[1]), bmin = py_min(b.t[0], b.t[1]), eps = 0.1 * (bmax - bmin);
        if (py_min(bmax - t, t - bmin) < eps) {
            if (insuf_progress || t >= bmax || t <= bmin) {
                t = fabs(t - bmax) < fabs(t - bmin) ? bmax - eps : bmin + eps;
                insuf_progress = false;
            } else insuf_progress = true;
        } else insuf_progress = false;
        rc = directional(l, ps, x, t, d, &f_new, &g_new);
        ls_evals++;
        if (rc < 0) break;
        gtd_new = dot(g_new, d);
        ls_iter++;
        if (f_new > (f + c1 * t * gtd) || f_new >= b.f[low]) {
            /* Armijo not met, or not below the lowest point */
            bracket_set(&b, high, t, f_new, g_new, gtd_new);
            low = b.f[0] <= b.f[1] ? 0 : 1;
            high = 1 - low;
        } else {
            if (fabs(gtd_new) <= -c2 * gtd) done = true;
            else if (gtd_new * (b.t[high] - b.t[low]) >= 0)
                bracket_set(&b, high, b.t[low], b.f[low], b.g[low], b.gtd[low]); /* the old high becomes the new low */
            bracket_set(&b, low, t, f_new, g_new, gtd_new);
        }
    }
    if (rc == 0) {
        *t_io = b.t[low];
        *f_out = b.f[low];
        hold(g_out, b.g[low]);
    }
    *evals += ls_evals;
    for (int i = 0; i < 2; i++) hold(&b.g[i], NULL);
    hold(&g_new, NULL);
    hold(&g_prev, NULL);
    return rc;
}

/* The L-BFGS direction from the flat gradient: updates the history with the last step (when
   its curvature y.s is positive enough) and runs the two-loop recursion. Held in l->d. */
static void lbfgs_direction(nb__lbfgs *l, nb_tensor *flat) {
    nb_tensor *y = nb_sub(flat, l->prev_flat_grad), *s = nb_mul_scalar(l->d, l->t);
    double ys = dot(y, s);
    if (ys > 1e-10) {
        if (l->nold == l->history) { /* the oldest pair goes */
            nb_release(l->old_dirs[0]);
            nb_release(l->old_stps[0]);
            memmove(l->old_dirs, l->old_dirs + 1, sizeof(nb_tensor *) * (size_t)(l->nold - 1));
            memmove(l->old_stps, l->old_stps + 1, sizeof(nb_tensor *) * (size_t)(l->nold - 1));
            memmove(l->ro, l->ro + 1, sizeof(double) * (size_t)(l->nold - 1));
            l->nold--;
        }
        l->old_dirs[l->nold] = NULL;
        l->old_stps[l->nold] = NULL;
        hold(&l->old_dirs[l->nold], y);
        hold(&l->old_stps[l->nold], s);
        l->ro[l->nold++] = 1. / ys;
        l->h_diag = ys / dot(y, y); /* the scale of the initial inverse Hessian */
    }
    nb_tensor *q = nb_neg(flat);
    for (int i = l->nold - 1; i >= 0; i--) {
        l->al[i] = dot(l->old_stps[i], q) * l->ro[i];
        q = nb_add(q, nb_mul_scalar(l->old_dirs[i], -l->al[i]));
    }
    nb_tensor *r = nb_mul_scalar(q, l->h_diag);
    for (int i = 0; i < l->nold; i++) {
        double be = dot(l->old_dirs[i], r) * l->ro[i];
        r = nb_add(r, nb_mul_scalar(l->old_stps[i], l->al[i] - be));
    }
    hold(&l->d, r);
}

/* Checks that the parameters share one float dtype and device, as torch's flat vectors need. */
static int check_params(params ps) {
    if (ps.n < 1) {
        nb__error("%s: LBFGS has no parameters", FN);
        return -1;
    }
    nb_dtype dt = nb_dtype_of(ps.p[0]);
    nb_device dev = nb_device_of(ps.p[0]);
    for (int i = 1; i < ps.n; i++) {
        nb_device di = nb_device_of(ps.p[i]);
        if (nb_dtype_of(ps.p[i]) != dt || di.type != dev.type || di.index != dev.index) {
            char a[200], b[200];
            nb__error("%s: LBFGS needs every parameter in one dtype on one device: parameter 0 is %s, parameter %d %s",
                      FN, nb__describe(ps.p[0], a, sizeof a), i, nb__describe(ps.p[i], b, sizeof b));
            return -1;
        }
    }
    return 0;
}

int nb__lbfgs_step(nb__lbfgs *l, nb_tensor *const *p, int n, double lr) {
    params ps = { p, n };
    if (check_params(ps) < 0) return -1;
    uint64_t errors = nb__error_count();
    bool prev_grad = nb_set_grad_enabled(false);
    nb_scope *sc = nb_scope_begin();
    nb_tensor *flat = NULL; /* held */
    double loss = 0;
    int rc = evaluate(l, &loss), current_evals = 1;
    l->func_evals++;
    if (rc == 0) hold(&flat, flat_grad(ps));
    bool opt_cond = rc == 0 && abs_max(flat) <= l->tolerance_grad;
    for (int n_iter = 1; rc == 0 && !opt_cond && n_iter <= l->max_iter; n_iter++) {
        nb_scope *it = nb_scope_begin();
        l->n_iter++;
        /* the descent direction */
        if (l->n_iter == 1) {
            hold(&l->d, nb_neg(flat));
            for (int i = 0; i < l->nold; i++) {
                hold(&l->old_dirs[i], NULL);
                hold(&l->old_stps[i], NULL);
            }
            l->nold = 0;
            l->h_diag = 1;
        } else lbfgs_direction(l, flat);
        hold(&l->prev_flat_grad, flat); /* never written in place, so shared rather than copied */
        l->prev_loss = loss;
        /* the step length: the first ever is scaled by the gradient's L1 norm */
        l->t = l->n_iter == 1 ? py_min(1., 1. / nb_item(nb_sum_all(nb_abs(flat)))) * lr : lr;
        double gtd = dot(flat, l->d); /* the directional derivative */
        bool stop = gtd > -l->tolerance_change;
        int ls_evals = 0;
        if (!stop && l->strong_wolfe) {
            nb_tensor **x = malloc(sizeof(nb_tensor *) * (size_t)n);
            if (!x) nb__error("%s: out of memory", FN);
            for (int i = 0; x && i < n; i++) x[i] = nb_clone(p[i]);
            rc = x ? strong_wolfe(l, ps, x, &l->t, l->d, loss, flat, gtd, &loss, &flat, &ls_evals) : -1;
            free(x);
            if (rc == 0) add_update(ps, l->t, l->d);
            opt_cond = rc == 0 && abs_max(flat) <= l->tolerance_grad;
        } else if (!stop) {
            add_update(ps, l->t, l->d); /* a fixed step; evaluated again unless it is the last */
            if (n_iter != l->max_iter) {
                rc = evaluate(l, &loss);
                if (rc == 0) hold(&flat, flat_grad(ps));
                opt_cond = rc == 0 && abs_max(flat) <= l->tolerance_grad;
                ls_evals = 1;
            }
        }
        current_evals += ls_evals;
        l->func_evals += ls_evals;
        /* lack of progress: the step or the change of the loss below tolerance_change */
        stop = stop || n_iter == l->max_iter || current_evals >= l->max_eval || opt_cond ||
               (rc == 0 && abs_max(nb_mul_scalar(l->d, l->t)) <= l->tolerance_change) ||
               fabs(loss - l->prev_loss) < l->tolerance_change;
        nb_scope_end(it);
        if (nb__error_count() != errors) rc = -1;
        if (stop) break;
    }
    hold(&flat, NULL);
    nb_scope_end(sc);
    nb_set_grad_enabled(prev_grad);
    if (nb__error_count() != errors) rc = -1;
    return rc;
}
