/* Graph mode, differentially: many small random programs, built from a fixed seed, run eagerly
   and compiled (default passes, the interpreter instead of compiled C, fusion off, and for every
   other program dynamic_batch, then at another batch size too), must agree. The programs mix f32 elementwise chains, row sums and means, broadcasts of [C] and
   [R, 1] operands, transposes and reshapes, layer norms, softmaxes, matmuls feeding elementwise
   ops, values used by several later ops and values read across rows, so the passes (DCE,
   folding, CSE, fusion, fused reductions, GEMM epilogues, row groups, memory planning) meet in
   combinations nobody wrote by hand. The training programs run nb_backward inside the traced
   function and compare the gradients the compiled graph hands to the captured leaves; half of
   them then take an SGD step in place (nb_assign) and read the updated values again. Every
   compiled run (the trace, a replay, a replay on new inputs) is checked against an eager run
   of the same step; a difference prints the program as C code.

   Bugs the programs found have regression tests of their own at the end.

   NABLA_RANDOM_PROGRAMS=n runs n programs of each kind instead of the default and
   NABLA_RANDOM_SEED=s starts from another seed (for hunting; the defaults are what CI runs).
   NABLA_RANDOM_ONLY=i runs program i alone, NABLA_RANDOM_VERBOSE=1 prints every program and
   NABLA_RANDOM_DUMP=1 dumps the graph of a program that differs. */
#include "test_util.h"
#include <stdint.h>

/* ---------------------------------------------------------------- a deterministic generator */

static uint64_t rng_state;

static void rng_seed(uint64_t s) {
    rng_state = s * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    if (!rng_state) rng_state = 1;
}

static uint32_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

static int rint_below(int n) { return (int)(rnd() % (uint32_t)n); }
static bool chance(double p) { return rnd() < p * 4294967296.0; }
static double runif(double lo, double hi) { return lo + (hi - lo) * (rnd() / 4294967296.0); }

/* ---------------------------------------------------------------- programs */

typedef enum {
    O_ADD, O_SUB, O_MUL, O_DIV, O_WHERE,                     /* binary, broadcasting */
    O_MULS, O_ADDS, O_RELU, O_GELU, O_EXP, O_TANH, O_SIGMOID, O_CLAMP, /* unary */
    O_SUM, O_MEAN,                                           /* over one axis */
    O_TRANSPOSE, O_RESHAPE, O_UNSQUEEZE,                     /* views (or copies) */
    O_LAYER_NORM, O_SOFTMAX,
    O_MATMUL,   /* a @ b */
    O_MATMUL_T, /* a @ b^T */
    O_COUNT
} opkind;

static const char *op_name[O_COUNT] = {
    [O_ADD] = "nb_add", [O_SUB] = "nb_sub", [O_MUL] = "nb_mul", [O_DIV] = "nb_div", [O_WHERE] = "nb_where",
    [O_MULS] = "nb_mul_scalar", [O_ADDS] = "nb_add_scalar", [O_RELU] = "nb_relu", [O_GELU] = "nb_gelu",
    [O_EXP] = "nb_exp", [O_TANH] = "nb_tanh", [O_SIGMOID] = "nb_sigmoid", [O_CLAMP] = "nb_clamp",
    [O_SUM] = "nb_sum", [O_MEAN] = "nb_mean", [O_TRANSPOSE] = "nb_transpose", [O_RESHAPE] = "nb_reshape",
    [O_UNSQUEEZE] = "nb_unsqueeze", [O_LAYER_NORM] = "nb_layer_norm", [O_SOFTMAX] = "nb_softmax",
    [O_MATMUL] = "nb_matmul", [O_MATMUL_T] = "nb_matmul",
};

#define MAX_SRC 12 /* inputs and captures */
#define MAX_INS 64
#define MAX_REG (MAX_SRC + MAX_INS)
#define SGD_LR 0.1 /* the learning rate of the programs' in-place update */

typedef struct {
    int op;
    int dst;        /* the register it writes */
    int a, b, c;    /* registers; -1 none (layer norm: b weight, c bias) */
    double s0, s1;  /* scalars */
    int ax0, ax1;   /* axes */
    bool keep;      /* keepdim */
    nb_shape shape; /* the result's shape (reshape's target) */
} instr;

enum { R_INPUT, R_CAPTURE, R_OP };

/* Registers are numbered as they are made: inputs first (0..nin-1), then captures and op
   results in any order. */
typedef struct {
    int nin, nsrc, nreg;       /* inputs, inputs and captures, registers */
    nb_shape shape[MAX_REG];
    signed char kind[MAX_REG];
    double scale[MAX_REG];     /* captures: randn times this */
    bool grad;                 /* captures require grad; the traced function runs backward */
    bool update;               /* with grad: then an SGD step in place, and the first op again */
    int n;
    instr ins[MAX_INS];
    int out;                   /* the result's register */
    int id;
    uint64_t seed;
} program;

static nb_shape reg_shape(const program *p, int r) { return p->shape[r]; }

static int shape_text(char *buf, size_t n, nb_shape s) {
    int w = snprintf(buf, n, "[");
    for (int d = 0; d < s.ndim; d++) w += snprintf(buf + w, n > (size_t)w ? n - (size_t)w : 0, d ? ", %lld" : "%lld", (long long)s.dim[d]);
    w += snprintf(buf + w, n > (size_t)w ? n - (size_t)w : 0, "]");
    return w;
}

/* The program as the C code that runs it, one register a line (a static buffer). */
static const char *program_text(const program *p) {
    static char buf[16384];
    size_t w = 0, n = sizeof buf;
#define OUT(...) (w += (size_t)snprintf(buf + w, w < n ? n - w : 0, __VA_ARGS__))
    char sh[128];
    OUT("program %d (seed %llu):\n", p->id, (unsigned long long)p->seed);
    for (int r = 0; r < p->nreg; r++) {
        if (p->kind[r] == R_OP) continue;
        shape_text(sh, sizeof sh, p->shape[r]);
        if (r < p->nin) OUT("  nb_tensor *r%d = in[%d]; /* %s, randn */\n", r, r, sh);
        else OUT("  nb_tensor *r%d = capture; /* %s, randn * %g%s */\n", r, sh, p->scale[r], p->grad ? ", requires grad" : "");
    }
    for (int i = 0; i < p->n; i++) {
        const instr *x = &p->ins[i];
        int a = x->a, b = x->b;
        OUT("  nb_tensor *r%d = %s(", x->dst, op_name[x->op]);
        switch (x->op) {
        case O_ADD: case O_SUB: case O_MUL: case O_MATMUL: OUT("r%d, r%d)", a, b); break;
        case O_DIV: OUT("r%d, nb_add_scalar(nb_sigmoid(r%d), 0.25))", a, b); break;
        case O_WHERE: OUT("nb_gt(r%d, r%d), r%d, r%d)", a, b, a, b); break;
        case O_MATMUL_T: OUT("r%d, nb_transpose(r%d, -1, -2))", a, b); break;
        case O_EXP: OUT("nb_clamp(r%d, -4, 4))", a); break;
        case O_MULS: case O_ADDS: OUT("r%d, %.9g)", a, x->s0); break;
        case O_CLAMP: OUT("r%d, %.9g, %.9g)", a, x->s0, x->s1); break;
        case O_SUM: case O_MEAN: OUT("r%d, %d, %s)", a, x->ax0, x->keep ? "true" : "false"); break;
        case O_TRANSPOSE: OUT("r%d, %d, %d)", a, x->ax0, x->ax1); break;
        case O_UNSQUEEZE: case O_SOFTMAX: OUT("r%d, %d)", a, x->ax0); break;
        case O_RESHAPE:
            shape_text(sh, sizeof sh, x->shape);
            sh[0] = '(';
            sh[strlen(sh) - 1] = ')';
            OUT("r%d, NB_SHAPE%s)", a, sh);
            break;
        case O_LAYER_NORM:
            OUT("r%d, ", a);
            if (b >= 0) OUT("r%d, ", b); else OUT("NULL, ");
            if (x->c >= 0) OUT("r%d, ", x->c); else OUT("NULL, ");
            OUT("1e-5)");
            break;
        default: OUT("r%d)", a); break;
        }
        shape_text(sh, sizeof sh, x->shape);
        OUT("; /* %s */\n", sh);
    }
    if (p->grad) OUT("  nb_backward(nb_mul_scalar(nb_sum_all(nb_mul(r%d, r%d)), 0.5)); /* captures' grads zeroed first */\n", p->out, p->out);
    if (p->update) {
        OUT("  /* grad off: */ for each capture r: nb_assign(r, nb_sub(r, nb_mul_scalar(nb_grad_of(r), %g)));\n", SGD_LR);
        OUT("  r%d = nb_add(r%d, nb_mean_all(<the first op again>));\n", p->out, p->out);
    }
    OUT("  return r%d;\n", p->out);
#undef OUT
    return buf;
}

/* ---------------------------------------------------------------- eager interpreter */

static nb_tensor *apply(const instr *x, nb_tensor *const *r) {
    nb_tensor *a = r[x->a], *b = x->b >= 0 ? r[x->b] : NULL;
    switch (x->op) {
    case O_ADD: return nb_add(a, b);
    case O_SUB: return nb_sub(a, b);
    case O_MUL: return nb_mul(a, b);
    case O_DIV: return nb_div(a, nb_add_scalar(nb_sigmoid(b), 0.25));
    case O_WHERE: return nb_where(nb_gt(a, b), a, b);
    case O_MULS: return nb_mul_scalar(a, x->s0);
    case O_ADDS: return nb_add_scalar(a, x->s0);
    case O_RELU: return nb_relu(a);
    case O_GELU: return nb_gelu(a);
    case O_EXP: return nb_exp(nb_clamp(a, -4, 4));
    case O_TANH: return nb_tanh(a);
    case O_SIGMOID: return nb_sigmoid(a);
    case O_CLAMP: return nb_clamp(a, x->s0, x->s1);
    case O_SUM: return nb_sum(a, x->ax0, x->keep);
    case O_MEAN: return nb_mean(a, x->ax0, x->keep);
    case O_TRANSPOSE: return nb_transpose(a, x->ax0, x->ax1);
    case O_RESHAPE: return nb_reshape(a, x->shape);
    case O_UNSQUEEZE: return nb_unsqueeze(a, x->ax0);
    case O_LAYER_NORM: return nb_layer_norm(a, b, x->c >= 0 ? r[x->c] : NULL, 1e-5);
    case O_SOFTMAX: return nb_softmax(a, x->ax0);
    case O_MATMUL: return nb_matmul(a, b);
    case O_MATMUL_T: return nb_matmul(a, nb_transpose(b, -1, -2));
    }
    return NULL;
}

/* A program with its own set of captures: the eager runs and each compiled function get one
   each, made alike, so in-place updates stay in step. */
typedef struct {
    const program *p;
    nb_tensor *cap[MAX_REG]; /* caller-owned; NULL for registers that are not captures */
} binding;

/* The program as an nb_graph_fn (ctx is a binding): the same code runs eagerly and under the
   tracer. With grad, the captures' gradients are dropped, then 0.5 * sum(out * out) is
   backpropagated; with update, every capture then takes an SGD step in place (grad off, as an
   optimizer does), the first op runs again on the updated values and its mean joins the result
   (so nothing may reuse what it computed before the write). */
static nb_tensor *run_program(nb_tensor *const *in, int n, void *ctx) {
    const binding *bd = ctx;
    const program *p = bd->p;
    if (n != p->nin) return NULL;
    nb_tensor *r[MAX_REG];
    for (int k = 0; k < p->nreg; k++) r[k] = k < p->nin ? in[k] : bd->cap[k];
    if (p->grad)
        for (int k = p->nin; k < p->nreg; k++)
            if (p->kind[k] == R_CAPTURE) nb_zero_grad(bd->cap[k]);
    for (int i = 0; i < p->n; i++)
        if (!(r[p->ins[i].dst] = apply(&p->ins[i], r))) return NULL;
    nb_tensor *out = r[p->out];
    if (p->grad) {
        nb_tensor *loss = nb_mul_scalar(nb_sum_all(nb_mul(out, out)), 0.5);
        if (nb_backward(loss) < 0) return NULL;
    }
    if (p->grad && p->update) {
        bool prev = nb_set_grad_enabled(false);
        for (int k = p->nin; k < p->nreg; k++) {
            nb_tensor *gk = p->kind[k] == R_CAPTURE ? nb_grad_of(bd->cap[k]) : NULL;
            if (gk && nb_assign(bd->cap[k], nb_sub(bd->cap[k], nb_mul_scalar(gk, SGD_LR))) < 0) out = NULL;
        }
        out = nb_add(out, nb_mean_all(apply(&p->ins[0], r)));
        nb_set_grad_enabled(prev);
    }
    return out;
}

/* ---------------------------------------------------------------- generator */

typedef struct {
    double mag[MAX_REG]; /* a rough typical magnitude of each register's values */
    int uses[MAX_REG];
    bool dep[MAX_REG]; /* depends on a capture (a parameter, when grad is on) */
} gen_state;

static bool broadcast(nb_shape a, nb_shape b, nb_shape *out) {
    int nd = a.ndim > b.ndim ? a.ndim : b.ndim;
    nb_shape s = { .ndim = nd };
    for (int d = 0; d < nd; d++) {
        int da = d - (nd - a.ndim), db = d - (nd - b.ndim);
        int64_t x = da < 0 ? 1 : a.dim[da], y = db < 0 ? 1 : b.dim[db];
        if (x != y && x != 1 && y != 1) return false;
        s.dim[d] = x > y ? x : y;
    }
    if (out) *out = s;
    return true;
}

static bool shape_eq(nb_shape a, nb_shape b) {
    if (a.ndim != b.ndim) return false;
    for (int d = 0; d < a.ndim; d++)
        if (a.dim[d] != b.dim[d]) return false;
    return true;
}

static int64_t numel_of(nb_shape s) {
    int64_t n = 1;
    for (int d = 0; d < s.ndim; d++) n *= s.dim[d];
    return n;
}

#define MAX_NUMEL 60000

static int add_source(program *p, gen_state *g, nb_shape s, double scale, bool input) {
    if (p->nsrc >= MAX_SRC) return -1;
    int r = p->nreg++;
    p->nsrc++;
    if (input) p->nin++;
    p->shape[r] = s;
    p->kind[r] = input ? R_INPUT : R_CAPTURE;
    p->scale[r] = scale;
    g->mag[r] = scale;
    g->dep[r] = !input;
    return r;
}

static int push(program *p, gen_state *g, instr x, double mag) {
    if (p->n >= MAX_INS) return -1;
    int r = x.dst = p->nreg++;
    p->shape[r] = x.shape;
    p->kind[r] = R_OP;
    p->ins[p->n++] = x;
    g->mag[r] = mag;
    g->uses[r] = 0;
    g->dep[r] = g->dep[x.a] || (x.b >= 0 && g->dep[x.b]) || (x.c >= 0 && g->dep[x.c]);
    g->uses[x.a]++;
    if (x.b >= 0) g->uses[x.b]++;
    if (x.c >= 0) g->uses[x.c]++;
    return r;
}

/* Keeps values near magnitude 1: a register far from it is scaled (an extra mul_scalar). */
static int rescale(program *p, gen_state *g, int r) {
    double m = g->mag[r];
    if (m <= 6 && m >= 0.05) return r;
    double s = fmin(fmax(1.0 / m, 1e-3), 1e3);
    s = (double)(float)s; /* a scalar printed and read back exactly */
    int q = push(p, g, (instr){ .op = O_MULS, .a = r, .b = -1, .c = -1, .s0 = s, .shape = reg_shape(p, r) }, 1.0);
    return q < 0 ? r : q;
}

/* A register whose shape broadcasts with a's to at most MAX_NUMEL elements; prefers ones
   that no op has read yet (so little is dead) and ones of a's own shape. -1 when none. */
static int pick_partner(const program *p, const gen_state *g, int a, bool same_only) {
    int cand[3 * MAX_REG], nc = 0, nregs = p->nreg;
    nb_shape sa = reg_shape(p, a), s;
    for (int r = 0; r < nregs; r++) {
        if (!broadcast(sa, reg_shape(p, r), &s) || numel_of(s) > MAX_NUMEL) continue;
        if (same_only && !shape_eq(s, sa)) continue;
        cand[nc++] = r;
        if (g->uses[r] == 0) cand[nc++] = r; /* twice the chance */
        if (shape_eq(reg_shape(p, r), sa) && r != a) cand[nc++] = r;
    }
    return nc ? cand[rint_below(nc)] : -1;
}

static const nb_shape base_shapes[] = {
    { 2, { 7, 13 } },   { 3, { 3, 5, 17 } }, { 2, { 37, 129 } }, { 2, { 64, 64 } }, { 2, { 1, 9 } },
    { 2, { 130, 300 } }, { 2, { 9, 9 } },    { 3, { 8, 8, 16 } }, { 2, { 33, 33 } }, { 3, { 2, 70, 70 } },
    { 1, { 19 } },
};
#define NSHAPES ((int)(sizeof base_shapes / sizeof base_shapes[0]))

/* A random program: inputs of the base shape and of broadcast shapes ([C], [R, 1], [1, C]),
   then 4 to 18 ops, each on the newest value or an earlier one, then the values nothing read
   added into the result where their shapes allow. */
static void program_generate(program *p, int id, uint64_t seed, bool grad) {
    memset(p, 0, sizeof *p);
    p->id = id;
    p->seed = seed;
    p->grad = grad;
    rng_seed(seed);
    p->update = grad && chance(0.5);
    gen_state g;
    memset(&g, 0, sizeof g);
    nb_shape S = base_shapes[rint_below(NSHAPES)];
    int64_t C = S.dim[S.ndim - 1];
    nb_shape col = S, row1 = { 1, { C } }, rowk = S;
    col.dim[S.ndim - 1] = 1;
    for (int d = 0; d < S.ndim - 1; d++) rowk.dim[d] = 1;
    /* inputs */
    add_source(p, &g, S, 1, true);
    if (chance(0.4)) add_source(p, &g, S, 1, true);
    if (chance(0.35)) add_source(p, &g, row1, 1, true);
    if (S.ndim > 1 && chance(0.35)) add_source(p, &g, col, 1, true);
    if (S.ndim > 1 && chance(0.15)) add_source(p, &g, rowk, 1, true);
    /* captures the elementwise ops may read (parameters when grad is on) */
    if (grad || chance(0.3)) add_source(p, &g, S, 0.5, false);
    if (chance(0.3)) add_source(p, &g, row1, 1, false);
    int nops = 4 + rint_below(15);
    if (grad) { /* the first op reads the parameter, so gradients flow */
        static const int first[] = { O_MUL, O_ADD, O_SUB, O_DIV };
        int op = first[rint_below(4)];
        push(p, &g, (instr){ .op = op, .a = 0, .b = p->nin, .c = -1, .shape = S }, op == O_MUL ? 0.5 : op == O_DIV ? 1.4 : 1.2);
    }
    for (int step = 0; step < nops && p->n < MAX_INS - 4; step++) {
        int nregs = p->nreg;
        int a = chance(0.65) ? nregs - 1 : rint_below(nregs);
        nb_shape sa = reg_shape(p, a);
        double ma = g.mag[a];
        int64_t last = sa.ndim ? sa.dim[sa.ndim - 1] : 1;
        int pick = rint_below(100);
        instr x = { .a = a, .b = -1, .c = -1, .shape = sa };
        double m = ma;
        if (pick < 34) { /* binary elementwise */
            static const int bin[] = { O_ADD, O_SUB, O_MUL, O_DIV, O_WHERE, O_ADD, O_MUL };
            x.op = bin[rint_below(7)];
            x.b = pick_partner(p, &g, a, chance(0.3));
            if (x.b < 0) x.b = a;
            nb_shape sb = reg_shape(p, x.b);
            broadcast(sa, sb, &x.shape);
            double mb = g.mag[x.b];
            m = x.op == O_MUL ? ma * mb : x.op == O_DIV ? ma / 0.75 : x.op == O_WHERE ? fmax(ma, mb) : ma + mb;
        } else if (pick < 58) { /* unary */
            static const int un[] = { O_MULS, O_ADDS, O_RELU, O_GELU, O_EXP, O_TANH, O_SIGMOID, O_CLAMP };
            x.op = un[rint_below(8)];
            switch (x.op) {
            case O_MULS: x.s0 = (double)(float)(runif(0.3, 2) * (chance(0.5) ? -1 : 1)); m = ma * fabs(x.s0); break;
            case O_ADDS: x.s0 = (double)(float)runif(-1, 1); m = ma + fabs(x.s0); break;
            case O_EXP: m = exp(fmin(ma, 4)); break;
            case O_TANH: m = fmin(ma, 1); break;
            case O_SIGMOID: m = 0.6; break;
            case O_CLAMP:
                x.s0 = (double)(float)runif(-2, -0.2);
                x.s1 = (double)(float)runif(0.2, 2);
                m = fmin(ma, x.s1);
                break;
            default: m = ma; break;
            }
        } else if (pick < 68) { /* sum or mean over the last axis (sometimes the first) */
            if (sa.ndim == 0) continue;
            x.op = chance(0.5) ? O_SUM : O_MEAN;
            x.ax0 = sa.ndim > 1 && chance(0.2) ? 0 : -1;
            x.keep = chance(0.5);
            int ax = x.ax0 < 0 ? sa.ndim - 1 : 0;
            nb_shape s = { 0 };
            for (int d = 0; d < sa.ndim; d++) {
                if (d == ax && !x.keep) continue;
                s.dim[s.ndim++] = d == ax ? 1 : sa.dim[d];
            }
            x.shape = s;
            m = x.op == O_SUM ? ma * pow((double)sa.dim[ax], 0.75) : ma;
        } else if (pick < 78) { /* views */
            int v = rint_below(3);
            if (v == 0 && sa.ndim >= 2) {
                x.op = O_TRANSPOSE;
                x.ax0 = sa.ndim == 3 && chance(0.4) ? 0 : -2;
                x.ax1 = x.ax0 == 0 ? 1 : -1;
                int d0 = x.ax0 < 0 ? sa.ndim + x.ax0 : x.ax0, d1 = x.ax1 < 0 ? sa.ndim + x.ax1 : x.ax1;
                x.shape.dim[d0] = sa.dim[d1];
                x.shape.dim[d1] = sa.dim[d0];
            } else if (v == 1 && sa.ndim >= 1) {
                x.op = O_RESHAPE;
                nb_shape s = sa;
                int how = rint_below(3);
                if (how == 0 && sa.ndim >= 3) { /* merge the leading axes */
                    s.ndim = 2;
                    s.dim[0] = numel_of(sa) / last;
                    s.dim[1] = last;
                } else if (how == 1 && sa.ndim >= 2) { /* the last two sizes swapped */
                    s.dim[sa.ndim - 2] = sa.dim[sa.ndim - 1];
                    s.dim[sa.ndim - 1] = sa.dim[sa.ndim - 2];
                } else if (sa.dim[0] % 2 == 0 && sa.ndim < 4) { /* the first axis split */
                    s.ndim = sa.ndim + 1;
                    s.dim[0] = 2;
                    s.dim[1] = sa.dim[0] / 2;
                    for (int d = 1; d < sa.ndim; d++) s.dim[d + 1] = sa.dim[d];
                } else { /* everything in one row */
                    s.ndim = 2;
                    s.dim[0] = 1;
                    s.dim[1] = numel_of(sa);
                }
                x.shape = s;
            } else if (sa.ndim < 4) {
                x.op = O_UNSQUEEZE;
                x.ax0 = chance(0.5) ? 0 : -1;
                nb_shape s = { .ndim = sa.ndim + 1 };
                if (x.ax0 == 0) {
                    s.dim[0] = 1;
                    for (int d = 0; d < sa.ndim; d++) s.dim[d + 1] = sa.dim[d];
                } else {
                    for (int d = 0; d < sa.ndim; d++) s.dim[d] = sa.dim[d];
                    s.dim[sa.ndim] = 1;
                }
                x.shape = s;
            } else continue;
        } else if (pick < 86) { /* layer norm or softmax */
            if (sa.ndim == 0) continue;
            if (chance(0.55)) {
                x.op = O_LAYER_NORM;
                nb_shape wshape = { 1, { last } };
                if (chance(0.7) && p->nsrc + 2 <= MAX_SRC) {
                    x.b = add_source(p, &g, wshape, 1, false);
                    x.c = chance(0.7) ? add_source(p, &g, wshape, 0.5, false) : -1;
                }
                m = 1.5;
            } else {
                x.op = O_SOFTMAX;
                x.ax0 = sa.ndim > 1 && chance(0.25) ? 0 : -1;
                int ax = x.ax0 < 0 ? sa.ndim - 1 : 0;
                m = 1.0 / (double)sa.dim[ax];
            }
        } else { /* a product, then (usually) elementwise ops on it */
            if (sa.ndim < 2) continue;
            if (chance(0.5) && p->nsrc < MAX_SRC) {
                static const int64_t outs[] = { 5, 16, 33, 64 };
                int64_t k2 = chance(0.5) ? last : outs[rint_below(4)];
                x.shape.dim[sa.ndim - 1] = k2;
                if (numel_of(x.shape) > MAX_NUMEL) continue;
                x.op = O_MATMUL;
                x.b = add_source(p, &g, (nb_shape){ 2, { last, k2 } }, 1.0 / sqrt((double)last), false);
                m = ma;
            } else {
                /* a @ b^T for some b with a's leading axes and last axis (often a itself) */
                int cand[MAX_REG], nc = 0;
                for (int r = 0; r < nregs; r++) {
                    nb_shape sr = reg_shape(p, r);
                    if (sr.ndim != sa.ndim || sr.dim[sa.ndim - 1] != last) continue;
                    bool ok = true;
                    for (int d = 0; d < sa.ndim - 2; d++) ok = ok && sr.dim[d] == sa.dim[d];
                    if (ok) cand[nc++] = r;
                }
                x.op = O_MATMUL_T;
                x.b = cand[rint_below(nc)]; /* a itself is always there */
                x.shape.dim[sa.ndim - 1] = reg_shape(p, x.b).dim[sa.ndim - 2];
                m = ma * g.mag[x.b] * sqrt((double)last);
            }
            if (numel_of(x.shape) > MAX_NUMEL) continue;
        }
        int r = push(p, &g, x, m);
        if (r >= 0) rescale(p, &g, r);
    }
    /* the result: the newest value, plus every value nothing read that broadcasts into it */
    int out = p->n ? p->ins[p->n - 1].dst : 0;
    for (int i = p->n - 1; grad && i >= 0 && !g.dep[out]; i--) out = p->ins[i].dst; /* the loss must reach a parameter */
    nb_shape so = reg_shape(p, out), s;
    for (int r = 0; r < p->nreg && p->n < MAX_INS; r++) {
        if (p->kind[r] != R_OP || g.uses[r] || r == out || !broadcast(so, reg_shape(p, r), &s) || !shape_eq(s, so)) continue;
        out = push(p, &g, (instr){ .op = O_ADD, .a = out, .b = r, .c = -1, .shape = so }, 1);
    }
    p->out = out;
}

/* ---------------------------------------------------------------- running and comparing */

/* Largest |a - b| / max(|b|, 1e-3) over the elements (equal infinities and NaNs agree); 1e30
   when one is NULL and the other not or the shapes differ. */
static double max_rel(nb_tensor *a, nb_tensor *b) {
    if (!a || !b) return a == b ? 0 : 1e30;
    if (!shape_eq(nb_shape_of(a), nb_shape_of(b))) return 1e30;
    nb_scope *s = nb_scope_begin();
    nb_tensor *ad = nb_contiguous(nb_cast(nb_detach(a), NB_F64)), *bd = nb_contiguous(nb_cast(nb_detach(b), NB_F64));
    assert_non_null(ad);
    assert_non_null(bd);
    const double *x = nb_data_ptr(ad), *y = nb_data_ptr(bd);
    double m = 0;
    for (int64_t i = 0; i < nb_numel(ad); i++) {
        if (x[i] == y[i] || (isnan(x[i]) && isnan(y[i]))) continue;
        double d = fabs(x[i] - y[i]) / fmax(fabs(y[i]), 1e-3);
        if (!(d <= m)) m = isnan(d) ? 1e30 : d;
    }
    nb_scope_end(s);
    return m;
}

#define TOL 1e-5

static bool verbose;

/* Binds the program to a fresh set of captures, the same values every time. */
static void bind(binding *b, const program *p) {
    memset(b, 0, sizeof *b);
    b->p = p;
    nb_manual_seed(p->seed + 17);
    for (int r = p->nin; r < p->nreg; r++) {
        if (p->kind[r] != R_CAPTURE) continue;
        nb_scope *s = nb_scope_begin();
        b->cap[r] = nb_keep(nb_mul_scalar(nb_randn(p->shape[r], NB_F32), p->scale[r]));
        nb_scope_end(s);
        assert_non_null(b->cap[r]);
        if (p->grad) nb_set_requires_grad(b->cap[r], true);
    }
}

static void unbind(binding *b) {
    for (int r = 0; r < MAX_REG; r++) nb_release(b->cap[r]);
    memset(b, 0, sizeof *b);
}

/* One eager run: the result and the captures' gradients, all caller-owned. */
typedef struct {
    nb_tensor *out;
    nb_tensor *grad[MAX_REG];
} reference;

static void reference_free(reference *e) {
    nb_release(e->out);
    for (int k = 0; k < MAX_REG; k++) nb_release(e->grad[k]);
    memset(e, 0, sizeof *e);
}

/* Reports a failing program (its op list, what differed, the graph when given) on stderr. */
static void report(const program *p, nb_compiled *c, const char *fmt, ...) {
    char msg[1000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s", program_text(p));
    fprintf(stderr, "MISMATCH in program %d: %s\n", p->id, msg);
    if (c && getenv("NABLA_RANDOM_DUMP")) nb_compiled_dump(c, stderr);
}

/* The eager run on in, or false (reported) when it fails. */
static bool run_eager(binding *b, nb_tensor *const *in, reference *e) {
    const program *p = b->p;
    memset(e, 0, sizeof *e);
    nb_scope *s = nb_scope_begin();
    nb_tensor *out = run_program(in, p->nin, b);
    if (!out) {
        report(p, NULL, "eager run failed: %s", nb_error() ? nb_error() : "(no error)");
        nb_scope_end(s);
        return false;
    }
    e->out = nb_keep(nb_detach(out));
    nb_scope_end(s);
    for (int k = p->nin; k < p->nreg; k++)
        if (b->cap[k] && nb_grad_of(b->cap[k])) e->grad[k] = nb_retain(nb_grad_of(b->cap[k]));
    return true;
}

/* One compiled run checked against the eager run of the same step: its result, the gradients
   it left on its captures and the captures themselves (updated in place by some programs).
   False (reported) on a difference. */
static bool check_run(binding *b, nb_compiled *c, nb_tensor *const *in, const reference *e, const binding *eb,
                      const char *mode, int run) {
    const program *p = b->p;
    nb_scope *s = nb_scope_begin();
    bool ok = true;
    nb_tensor *out = nb_compiled_run(c, in, p->nin);
    double rel;
    if (!out) {
        report(p, c, "%s run %d failed: %s", mode, run, nb_error() ? nb_error() : "(no error)");
        ok = false;
    } else if ((rel = max_rel(out, e->out)) > TOL) {
        report(p, c, "%s run %d: the result differs from eager by %g (max relative)", mode, run, rel);
        ok = false;
    } else if (nb_requires_grad(out)) {
        report(p, c, "%s run %d: the result requires grad", mode, run);
        ok = false;
    }
    for (int k = p->nin; k < p->nreg && ok; k++) {
        if (p->kind[k] != R_CAPTURE) continue;
        nb_tensor *gc = nb_grad_of(b->cap[k]);
        double gr = max_rel(gc, e->grad[k]), vr = max_rel(b->cap[k], eb->cap[k]);
        if (gr > TOL) {
            report(p, c, "%s run %d: the gradient of r%d differs from eager by %g (max relative)%s", mode, run, k, gr,
                   !gc ? ", missing" : !e->grad[k] ? ", unexpected" : "");
            ok = false;
        } else if (vr > TOL) {
            report(p, c, "%s run %d: capture r%d after the update differs from eager by %g (max relative)", mode, run, k, vr);
            ok = false;
        }
    }
    nb_scope_end(s);
    return ok;
}

typedef struct {
    int programs, with_groups, row_groups, kernels, native, ops_traced, ops_after;
    int dynamic, dynamic_other, dynamic_fitted; /* dynamic-batch programs, those run at another batch
                                                   size, and those of which the fit made that graph */
} coverage;

/* The program compiled three ways (default passes, interpreted kernels, fusion off), and every
   other program a fourth, with dynamic_batch; each compiled function traces on a first set of
   inputs, replays it, then replays on a second, and each of its runs is checked against an eager
   run of the same step on captures of its own. The dynamic one then runs at batch size + 3 (the
   inputs whose dimension 0 is the first input's grow by 3) where the eager program accepts it:
   a graph the fit made, or a trace with a note saying why not. False (reported) at the first
   difference. */
static bool check_program(program *p, coverage *cov) {
    if (verbose) fprintf(stderr, "%s", program_text(p));
    nb_tensor *inA[MAX_SRC], *inB[MAX_SRC], *inC[MAX_SRC];
    nb_manual_seed(p->seed);
    for (int k = 0; k < p->nin; k++) inA[k] = nb_randn(p->shape[k], NB_F32);
    for (int k = 0; k < p->nin; k++) inB[k] = nb_randn(p->shape[k], NB_F32);
    for (int k = 0; k < p->nin; k++) {
        nb_shape sh = p->shape[k];
        if (sh.ndim && p->shape[0].ndim && sh.dim[0] == p->shape[0].dim[0]) sh.dim[0] += 3;
        inC[k] = nb_randn(sh, NB_F32);
    }
    static const struct {
        const char *name;
        nb_graph_opts opts;
    } modes[] = {
        { "compiled", { 0 } },
        { "interpreted", { .interpret = true } },
        { "unfused", { .disable = NB_PASS_FUSE } },
        { "dynamic", { .dynamic_batch = true } },
    };
    int nmodes = p->id % 2 == 0 ? 4 : 3;
    bool ok = true;
    binding *be = malloc(sizeof *be), *bc = malloc(sizeof *bc);
    assert_non_null(be);
    assert_non_null(bc);
    for (int m = 0; m < nmodes && ok; m++) {
        bind(be, p);
        bind(bc, p);
        nb_compiled *c = nb_compile(run_program, bc, modes[m].opts);
        assert_non_null(c);
        /* run 1 is the trace (an eager run), 2 a replay, 3 a replay on new inputs */
        for (int run = 1; run <= 3 && ok; run++) {
            reference e;
            nb_tensor *const *in = run < 3 ? inA : inB;
            ok = run_eager(be, in, &e) && check_run(bc, c, in, &e, be, modes[m].name, run);
            reference_free(&e);
        }
        nb_compiled_stats st = nb_compiled_get_stats(c);
        /* the dynamic mode traces twice more at its first call (probes), unless the first probe
           fails (a size another input or a capture fixes), which ends the probing */
        int probes = st.probe_traces;
        if (ok && (st.traces != 1 + probes || st.runs != 2 || (m == 3) != (probes > 0))) {
            report(p, c, "%s: %d traces (%d probes) and %lld replays, expected 1 and 2", modes[m].name, st.traces,
                   probes, (long long)st.runs);
            ok = false;
        }
        if (ok && m == 3) {
            cov->dynamic++;
            /* the eager step first: a program whose shapes tie the batch to a fixed size fails
               there (a capture's rows, a reshape's target), and the run is skipped */
            reference e;
            nb_tensor *probe = NULL;
            bool other = false;
            nb_scope *s = nb_scope_begin();
            binding *bt = malloc(sizeof *bt);
            assert_non_null(bt);
            bind(bt, p);
            probe = run_program(inC, p->nin, bt);
            other = probe != NULL;
            nb_scope_end(s);
            unbind(bt);
            free(bt);
            nb_error_clear();
            if (other) {
                cov->dynamic_other++;
                ok = run_eager(be, inC, &e) && check_run(bc, c, inC, &e, be, "dynamic (batch + 3)", 4);
                reference_free(&e);
                nb_compiled_stats s4 = nb_compiled_get_stats(c);
                cov->dynamic_fitted += s4.instantiations;
                if (ok && s4.instantiations + (s4.traces - st.traces) != 1) {
                    report(p, c, "dynamic: the new batch size made %d graphs from the fit and %d traces, expected 1 in all",
                           s4.instantiations, s4.traces - st.traces);
                    ok = false;
                }
                if (verbose && !s4.instantiations) fprintf(stderr, "  -> traced at batch + 3: %s\n", nb_compiled_note(c));
                if (ok && !s4.instantiations && !nb_compiled_note(c)) {
                    report(p, c, "dynamic: the new batch size was traced, and the note does not say why");
                    ok = false;
                }
            }
        }
        if (m == 0) {
            cov->programs++;
            cov->with_groups += st.row_groups > 0;
            cov->row_groups += st.row_groups;
            cov->kernels += st.kernels;
            cov->native += st.kernels_native;
            cov->ops_traced += st.ops_traced;
            cov->ops_after += st.ops_after;
            if (verbose)
                fprintf(stderr, "  -> %d ops traced, %d after, %d kernels, %d row groups\n", st.ops_traced, st.ops_after,
                        st.kernels, st.row_groups);
        }
        nb_compiled_free(c);
        unbind(be);
        unbind(bc);
    }
    free(be);
    free(bc);
    for (int k = 0; k < p->nin; k++) {
        nb_release(inA[k]);
        nb_release(inB[k]);
        nb_release(inC[k]);
    }
    if (ok && nb_error()) {
        report(p, NULL, "an error was left behind: %s", nb_error());
        ok = false;
    }
    nb_error_clear();
    return ok;
}

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* Runs `count` programs from seed0 on; fails listing every program that differed, or when
   fewer than min_groups of the default programs formed a row group (so the generator keeps
   reaching the pass it is here for). */
static void run_many(bool grad, int count, uint64_t seed0, int min_groups) {
    coverage covs = { 0 }, *cov = &covs;
    bool defaults = !getenv("NABLA_RANDOM_PROGRAMS") && !getenv("NABLA_RANDOM_SEED") && !getenv("NABLA_RANDOM_ONLY");
    count = env_int("NABLA_RANDOM_PROGRAMS", count);
    seed0 += (uint64_t)env_int("NABLA_RANDOM_SEED", 0) * 1000003ull;
    program *p = malloc(sizeof *p);
    assert_non_null(p);
    int failed = 0;
    char ids[512] = "";
    int only = env_int("NABLA_RANDOM_ONLY", -1);
    for (int i = 0; i < count; i++) {
        if (only >= 0 && i != only) continue;
        program_generate(p, i, seed0 + (uint64_t)i, grad);
        bool ok = check_program(p, cov);
        if (!ok) {
            size_t w = strlen(ids);
            snprintf(ids + w, sizeof ids - w, "%s%d", failed ? ", " : "", i);
            failed++;
        }
    }
    free(p);
    print_message("%d %s programs: %d ops traced, %d after the passes, %d fused kernels (%d compiled C), %d row groups "
                  "in %d programs\n",
                  cov->programs, grad ? "training" : "forward", cov->ops_traced, cov->ops_after, cov->kernels, cov->native,
                  cov->row_groups, cov->with_groups);
    print_message("%d %s programs compiled with dynamic_batch: %d ran at another batch size, %d of them on a graph "
                  "the fit made\n", cov->dynamic, grad ? "training" : "forward", cov->dynamic_other, cov->dynamic_fitted);
    if (failed) fail_msg("%d of %d %s programs differ from eager (their op lists are above): %s", failed, count,
                         grad ? "training" : "forward", ids);
    if (defaults) {
        assert_true(cov->with_groups >= min_groups);
        /* the fit's path is reached, not only its fallback (a training program's parameter has
           the input's shape, which ties its batch: there the probes are what is checked) */
        if (!grad) assert_true(cov->dynamic_fitted > 0);
#ifdef NABLA_WITH_JIT
        assert_true(cov->native > 0);
#endif
    }
}

/* 150 programs without gradients. */
static void test_random_forward_programs(void **state) {
    (void)state;
    run_many(false, 150, 1000, 30);
}

/* 50 programs that run backward inside the traced function. */
static void test_random_training_programs(void **state) {
    (void)state;
    run_many(true, 50, 5000, 15);
}

/* ---------------------------------------------------------------- hand-written programs */

/* Builds a program by hand: sources and ops with the shapes given. */
typedef struct {
    program p;
    gen_state g;
} builder;

static builder *hand_begin(int id, bool grad) {
    builder *b = calloc(1, sizeof *b);
    assert_non_null(b);
    b->p.id = id;
    b->p.seed = 77 + (uint64_t)id;
    b->p.grad = grad;
    return b;
}

static int hand_input(builder *b, nb_shape s) { return add_source(&b->p, &b->g, s, 1, true); }
static int hand_capture(builder *b, nb_shape s, double scale) { return add_source(&b->p, &b->g, s, scale, false); }

static int hand_op(builder *b, int op, int a, int bb, nb_shape shape) {
    int r = push(&b->p, &b->g, (instr){ .op = op, .a = a, .b = bb, .c = -1, .ax0 = -1, .ax1 = -2, .shape = shape }, 1);
    b->p.out = r;
    return r;
}

static int hand_sum(builder *b, int a, int axis, bool keep, nb_shape shape) {
    int r = push(&b->p, &b->g, (instr){ .op = O_SUM, .a = a, .b = -1, .c = -1, .ax0 = axis, .keep = keep, .shape = shape }, 1);
    b->p.out = r;
    return r;
}

/* Checks the program as the random ones are; cov (may be NULL) gets the default variant's counts. */
static bool hand_check(builder *b, coverage *cov) {
    coverage c = { 0 };
    bool ok = check_program(&b->p, cov ? cov : &c);
    free(b);
    return ok;
}

/* Row groups next to values read across rows, in several chunks of rows: a layer norm's
   kernels group, and its row sum [R] (value i feeds column i of every row) may not join. */
static void test_row_group_and_sum_read_across_rows(void **state) {
    (void)state;
    for (int t = 0; t < 2; t++) {
        int64_t R = t ? 130 : 64;
        builder *b = hand_begin(1000 + t, t == 1);
        int x = hand_input(b, NB_SHAPE(R, R));
        int w = hand_capture(b, NB_SHAPE(R), 1), bias = hand_capture(b, NB_SHAPE(R), 0.5);
        int y = push(&b->p, &b->g, (instr){ .op = O_LAYER_NORM, .a = x, .b = w, .c = bias, .shape = NB_SHAPE(R, R) }, 1);
        int s = hand_sum(b, y, -1, false, NB_SHAPE(R));
        int z = hand_op(b, O_ADD, y, s, NB_SHAPE(R, R));   /* z[i][j] = y[i][j] + s[j] */
        int k = hand_sum(b, z, -1, true, NB_SHAPE(R, 1));
        hand_op(b, O_MUL, z, k, NB_SHAPE(R, R));           /* a row value again */
        coverage cov = { 0 };
        assert_true(hand_check(b, &cov));
        assert_true(cov.row_groups >= 1);
    }
}

/* A kernel of a would-be row group reads another member's result transposed. */
static void test_row_group_and_transposed_member(void **state) {
    (void)state;
    builder *b = hand_begin(1010, false);
    int x = hand_input(b, NB_SHAPE(64, 64));
    int t = hand_op(b, O_TANH, x, -1, NB_SHAPE(64, 64));
    int e = hand_op(b, O_EXP, t, -1, NB_SHAPE(64, 64));
    int s = hand_sum(b, e, -1, true, NB_SHAPE(64, 1));
    int tr = push(&b->p, &b->g, (instr){ .op = O_TRANSPOSE, .a = e, .b = -1, .c = -1, .ax0 = -2, .ax1 = -1, .shape = NB_SHAPE(64, 64) }, 1);
    int m = hand_op(b, O_MUL, e, s, NB_SHAPE(64, 64));
    hand_op(b, O_ADD, m, tr, NB_SHAPE(64, 64));
    assert_true(hand_check(b, NULL));
}

/* ---------------------------------------------------------------- regressions: bugs the programs found */

/* Memory planning let a fused row reduction write its [R] result over an operand of the same
   shape that it reads along the reduced axis: y[i] = sum_j x[i][j] * s[j] with s = sum(x, -1)
   (x of ones [4, 4]: eager 16 16 16 16, compiled was 16 28 52 100; the dump said "in place of"
   s). Found by program 73 of the forward programs; reductions now never run in place. */
static void test_row_sum_not_in_place_of_operand_read_across_columns(void **state) {
    (void)state;
    builder *b = hand_begin(2000, false);
    int x = hand_input(b, NB_SHAPE(4, 4));
    int s = hand_sum(b, x, -1, false, NB_SHAPE(4));
    int m = hand_op(b, O_MUL, x, s, NB_SHAPE(4, 4)); /* m[i][j] = x[i][j] * s[j] */
    int y = hand_sum(b, m, -1, false, NB_SHAPE(4));
    push(&b->p, &b->g, (instr){ .op = O_MULS, .a = y, .b = -1, .c = -1, .s0 = 1, .shape = NB_SHAPE(4) }, 1);
    b->p.out = b->p.ins[b->p.n - 1].dst;
    assert_true(hand_check(b, NULL));
}

/* An input marked requires_grad got its gradient from the eager run and from the trace, but
   no replay handed it one (only captures got theirs): after a replay nb_grad_of(x) was NULL
   where eager code leaves d(sum(tanh(x)^2))/dx. */
static nb_tensor *input_grad_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    (void)ctx;
    nb_zero_grad(in[0]);
    nb_tensor *y = nb_tanh(in[0]);
    if (nb_backward(nb_sum_all(nb_mul(y, y))) < 0) return NULL;
    return y;
}

static void test_replay_gives_inputs_their_gradient(void **state) {
    (void)state;
    nb_tensor *x = nb_set_requires_grad(nb_randn(NB_SHAPE(4, 4), NB_F32), true);
    nb_scope *s = nb_scope_begin();
    assert_non_null(input_grad_fn(&x, 1, NULL));
    nb_tensor *eager = nb_retain(nb_grad_of(x));
    assert_non_null(eager);
    nb_compiled *c = nb_compile(input_grad_fn, NULL, (nb_graph_opts){ 0 });
    int bad = 0;
    const char *what = "";
    for (int run = 1; run <= 2 && !bad; run++) {
        nb_zero_grad(x);
        assert_non_null(nb_compiled_run(c, &x, 1));
        if (max_rel(nb_grad_of(x), eager) > TOL) {
            bad = run;
            what = nb_grad_of(x) ? "wrong" : "missing";
        }
    }
    nb_scope_end(s);
    nb_compiled_free(c);
    nb_release(eager);
    nb_release(x);
    if (bad) fail_msg("run %d (%s): the input's gradient is %s", bad, bad == 1 ? "the trace" : "a replay", what);
}

/* A gradient that a replay handed to a capture changed when the next replay ran: the graph
   wrote the next gradient into the same tensor, so a reference kept from run k (nb_retain of
   nb_grad_of) read run k+1's values, where an eager run leaves the old gradient tensor alone
   ("gradients are never written in place"). Gradients are now new tensors each run. */
static nb_tensor *kept_grad_w;

static nb_tensor *kept_grad_fn(nb_tensor *const *in, int n, void *ctx) {
    (void)n;
    (void)ctx;
    nb_zero_grad(kept_grad_w);
    nb_tensor *y = nb_mul(nb_tanh(in[0]), kept_grad_w);
    if (nb_backward(nb_sum_all(nb_mul(y, y))) < 0) return NULL;
    return y;
}

static void test_replay_keeps_old_gradients(void **state) {
    (void)state;
    kept_grad_w = nb_set_requires_grad(nb_randn(NB_SHAPE(4, 4), NB_F32), true);
    nb_tensor *x1 = nb_randn(NB_SHAPE(4, 4), NB_F32), *x2 = nb_randn(NB_SHAPE(4, 4), NB_F32);
    nb_compiled *c = nb_compile(kept_grad_fn, NULL, (nb_graph_opts){ 0 });
    nb_scope *s = nb_scope_begin();
    assert_non_null(nb_compiled_run(c, &x1, 1)); /* the trace */
    assert_non_null(nb_compiled_run(c, &x1, 1)); /* a replay */
    nb_tensor *kept = nb_retain(nb_grad_of(kept_grad_w));
    nb_tensor *copy = nb_keep(nb_clone(kept));
    assert_non_null(nb_compiled_run(c, &x2, 1)); /* another replay, on other inputs */
    double rel = max_rel(kept, copy);
    nb_scope_end(s);
    nb_compiled_free(c);
    nb_release(kept);
    nb_release(copy);
    nb_release(x1);
    nb_release(x2);
    nb_release(kept_grad_w);
    if (rel != 0) fail_msg("a gradient kept from one replay changed in the next (by %g, max relative)", rel);
}

int main(void) {
    nb_set_num_threads(2); /* row groups of the large shapes run several chunks in parallel */
    verbose = env_int("NABLA_RANDOM_VERBOSE", 0) != 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_random_forward_programs, clear_error_setup),
        cmocka_unit_test_setup(test_random_training_programs, clear_error_setup),
        cmocka_unit_test_setup(test_row_group_and_sum_read_across_rows, clear_error_setup),
        cmocka_unit_test_setup(test_row_group_and_transposed_member, clear_error_setup),
        cmocka_unit_test_setup(test_row_sum_not_in_place_of_operand_read_across_columns, clear_error_setup),
        cmocka_unit_test_setup(test_replay_gives_inputs_their_gradient, clear_error_setup),
        cmocka_unit_test_setup(test_replay_keeps_old_gradients, clear_error_setup),
    };
    return RUN_TESTS(tests);
}
