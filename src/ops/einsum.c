/* nb_einsum: Einstein summation as torch.einsum, composed from diagonal, squeeze, sum, permute,
   reshape, mul and matmul, so autograd (and double backward) runs through it.

   The equation becomes labels: the 52 letters (A-Z, then a-z, so that sorted labels read in
   ASCII order, as torch's implicit output does) and one label per dimension of the ellipsis,
   aligned from the right across operands as broadcasting aligns them. Each operand then
    1. takes the diagonal of a letter it repeats ("ii->i");
    2. drops an axis of size 1 whose letter is larger in another operand: the operand is
       constant along it, so broadcasting it is the same as leaving it out;
    3. sums out the letters that neither the output nor another operand has.
   Operands are then contracted two at a time along a greedy path: of all pairs, the one whose
   result has the fewest elements (ties: the fewest multiplications, then the first pair), as
   opt_einsum's "greedy" path chooses by size; the result goes to the end of the list. A pair
   A, B is permuted and reshaped into [batch, M, K] x [batch, K, N] (batch: letters of both still
   needed by the output or another operand; K: letters of both needed no more; M, N: letters of
   one of them) and multiplied by one batched nb_matmul, or by nb_mul when K is empty (an outer
   or elementwise product needs no GEMM). The last operand is permuted into the output's order.
   Dtypes promote as nb_matmul and nb_mul promote them. */
#include "einsum.h"
#include "ops_impl.h"
#include <stdio.h>
#include <string.h>

#define NLETTERS 52
#define NLABELS (NLETTERS + NB_MAX_DIMS) /* the letters, then the ellipsis' dimensions */
#define MAX_OPERANDS 64
#define MAX_EQUATION 1024
#define ELLIPSIS (-1) /* where "..." stands in parsed subscripts */

/* An operand on the way: its tensor and the label of each axis. */
typedef struct term {
    nb_tensor *t;
    int nd;
    int lab[NB_MAX_DIMS];
} term;

typedef struct plan {
    const char *eq;
    int out_n, out[NB_MAX_DIMS];
    int64_t size[NLABELS]; /* -1: in no operand */
} plan;

/* Records an error naming the equation: nb_einsum: "ij,jk->ik": ... */
#define EINSUM_ERROR(eq, fmt, ...) nb__error("nb_einsum: \"%s\": " fmt, (eq), ##__VA_ARGS__)
#define FAIL(pl, fmt, ...) \
    do { \
        EINSUM_ERROR((pl)->eq, fmt, ##__VA_ARGS__); \
        return -1; \
    } while (0)

static int letter_label(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
    return -1;
}

/* "subscript 'j'" or "dimension 2 of the ellipsis". */
static const char *label_name(int l, char *buf, size_t size) {
    if (l < NLETTERS) snprintf(buf, size, "subscript '%c'", l < 26 ? 'A' + l : 'a' + (l - 26));
    else snprintf(buf, size, "dimension %d of the ellipsis", l - NLETTERS);
    return buf;
}

/* The subscripts s[0..len) of what (an operand or the output) as labels, ELLIPSIS where "..."
   stands; the count, or -1. */
static int parse_subscripts(const plan *pl, const char *s, int len, const char *what, int *lab) {
    int k = 0;
    bool ell = false;
    for (int i = 0; i < len; i++) {
        int l = letter_label(s[i]);
        if (s[i] == '.') {
            if (i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.') FAIL(pl, "%s have a '.' outside an ellipsis '...'", what);
            if (ell) FAIL(pl, "%s have more than one ellipsis", what);
            ell = true;
            l = ELLIPSIS;
            i += 2;
        } else if (l < 0) {
            FAIL(pl, "%s have '%c', which is not a letter (subscripts are a-z and A-Z, with at most one '...')", what, s[i]);
        }
        if (k == NB_MAX_DIMS + (ell ? 1 : 0)) FAIL(pl, "%s name more than %d dimensions", what, NB_MAX_DIMS);
        lab[k++] = l;
    }
    return k;
}

static bool has_label(const term *t, int l) {
    for (int a = 0; a < t->nd; a++)
        if (t->lab[a] == l) return true;
    return false;
}

/* Parses the equation (spaces stripped) into pl and the operands' labels into op; 0 or -1. */
static int parse(plan *pl, nb_tensor *const *operands, int n, term *op) {
    char eq[MAX_EQUATION];
    int len = 0;
    for (const char *c = pl->eq; *c; c++) {
        if (*c == ' ' || *c == '\t' || *c == '\n') continue;
        if (len == MAX_EQUATION - 1) FAIL(pl, "longer than %d characters", MAX_EQUATION - 1);
        eq[len++] = *c;
    }
    eq[len] = 0;
    const char *arrow = strstr(eq, "->");
    if (arrow && strstr(arrow + 2, "->")) FAIL(pl, "more than one '->'");
    int lhs = arrow ? (int)(arrow - eq) : len, terms = 1;
    for (int i = 0; i < lhs; i++) terms += eq[i] == ',';
    if (terms != n) FAIL(pl, "the subscripts name %d operand%s but %d %s given", terms, terms == 1 ? "" : "s", n, n == 1 ? "was" : "were");

    /* each operand's subscripts; the ellipsis spans the dimensions its letters leave */
    int raw[MAX_OPERANDS][NB_MAX_DIMS + 1], nraw[MAX_OPERANDS], nell[MAX_OPERANDS], ell = 0;
    for (int k = 0, start = 0; k < n; k++) {
        int end = start;
        while (end < lhs && eq[end] != ',') end++;
        char what[48];
        snprintf(what, sizeof what, "the subscripts of operand %d", k);
        if ((nraw[k] = parse_subscripts(pl, eq + start, end - start, what, raw[k])) < 0) return -1;
        bool has_ell = false;
        for (int i = 0; i < nraw[k]; i++) has_ell |= raw[k][i] == ELLIPSIS;
        int letters = nraw[k] - has_ell, nd = operands[k]->shape.ndim;
        if (has_ell ? nd < letters : nd != letters)
            FAIL(pl, "operand %d has %d dimension%s but its subscripts \"%.*s\" name %s%d", k, nd, nd == 1 ? "" : "s",
                 end - start, eq + start, has_ell ? "at least " : "", letters);
        nell[k] = nd - letters;
        if (nell[k] > ell) ell = nell[k];
        start = end + 1;
    }

    /* labels per axis, and each label's size (1 broadcasts) */
    int owner[NLABELS];
    for (int l = 0; l < NLABELS; l++) pl->size[l] = -1, owner[l] = -1;
    char name[48];
    for (int k = 0; k < n; k++) {
        term *t = &op[k];
        t->t = operands[k];
        t->nd = 0;
        for (int i = 0; i < nraw[k]; i++)
            if (raw[k][i] == ELLIPSIS)
                for (int e = 0; e < nell[k]; e++) t->lab[t->nd++] = NLETTERS + ell - nell[k] + e;
            else t->lab[t->nd++] = raw[k][i];
        for (int a = 0; a < t->nd; a++) {
            int l = t->lab[a];
            int64_t s = t->t->shape.dim[a];
            for (int b = 0; b < a; b++)
                if (t->lab[b] == l && t->t->shape.dim[b] != s)
                    FAIL(pl, "%s is repeated in operand %d with sizes %lld and %lld", label_name(l, name, sizeof name), k,
                         (long long)t->t->shape.dim[b], (long long)s);
            if (pl->size[l] < 0 || pl->size[l] == 1) {
                if (pl->size[l] < 0 || s != 1) owner[l] = k;
                pl->size[l] = s;
            } else if (s != 1 && s != pl->size[l]) {
                FAIL(pl, "%s has size %lld in operand %d but %lld in operand %d (sizes must match or be 1)",
                     label_name(l, name, sizeof name), (long long)pl->size[l], owner[l], (long long)s, k);
            }
        }
    }

    /* the output: as written, or the ellipsis then the letters used once, sorted */
    pl->out_n = 0;
    if (arrow) {
        int rhs[NB_MAX_DIMS + 1];
        int nr = parse_subscripts(pl, arrow + 2, len - lhs - 2, "the output subscripts", rhs);
        if (nr < 0) return -1;
        for (int i = 0; i < nr; i++) {
            int first = rhs[i] == ELLIPSIS ? NLETTERS : rhs[i], count = rhs[i] == ELLIPSIS ? ell : 1;
            if (rhs[i] != ELLIPSIS && pl->size[first] < 0)
                FAIL(pl, "output %s appears in no operand", label_name(first, name, sizeof name));
            for (int o = 0; o < pl->out_n; o++)
                if (pl->out[o] == first)
                    FAIL(pl, "output %s appears more than once", label_name(first, name, sizeof name));
            if (pl->out_n + count > NB_MAX_DIMS) FAIL(pl, "the output has more than %d dimensions", NB_MAX_DIMS);
            for (int e = 0; e < count; e++) pl->out[pl->out_n++] = first + e;
        }
    } else {
        int uses[NLETTERS] = { 0 };
        for (int k = 0; k < n; k++)
            for (int i = 0; i < nraw[k]; i++)
                if (raw[k][i] != ELLIPSIS) uses[raw[k][i]]++;
        for (int e = 0; e < ell; e++) pl->out[pl->out_n++] = NLETTERS + e;
        for (int l = 0; l < NLETTERS; l++)
            if (uses[l] == 1) {
                if (pl->out_n == NB_MAX_DIMS) FAIL(pl, "the output has more than %d dimensions", NB_MAX_DIMS);
                pl->out[pl->out_n++] = l;
            }
    }
    return 0;
}

/* Whether label l is needed beyond the terms i and j: by the output or another term. */
static bool needed(const plan *pl, const term *list, int count, int l, int i, int j) {
    for (int o = 0; o < pl->out_n; o++)
        if (pl->out[o] == l) return true;
    for (int k = 0; k < count; k++)
        if (k != i && k != j && has_label(&list[k], l)) return true;
    return false;
}

static void drop_axis(term *t, int a) {
    memmove(t->lab + a, t->lab + a + 1, sizeof(int) * (size_t)(t->nd - a - 1));
    t->nd--;
}

/* Steps 1 and 2 of the file's comment on one term; 0 or -1. */
static int diagonals_and_broadcast(const plan *pl, term *t) {
    for (int p = 0; p < t->nd; p++)
        for (int q = p + 1; q < t->nd; q++)
            if (t->lab[p] == t->lab[q]) { /* the diagonal comes last; look again from the start */
                int l = t->lab[p];
                if (!(t->t = nb_diagonal(t->t, 0, p, q))) return -1;
                drop_axis(t, q);
                drop_axis(t, p);
                t->lab[t->nd++] = l;
                p = -1;
                break;
            }
    for (int a = t->nd - 1; a >= 0; a--)
        if (t->t->shape.dim[a] == 1 && pl->size[t->lab[a]] != 1) {
            if (!(t->t = nb_squeeze(t->t, a))) return -1;
            drop_axis(t, a);
        }
    return 0;
}

/* Step 3 on term i of the list; 0 or -1. */
static int sum_unneeded(const plan *pl, term *list, int count, int i) {
    term *t = &list[i];
    for (int a = t->nd - 1; a >= 0; a--)
        if (!needed(pl, list, count, t->lab[a], i, -1)) {
            if (!(t->t = nb_sum(t->t, a, false))) return -1;
            drop_axis(t, a);
        }
    return 0;
}

/* The number of elements of the product of terms i and j, and of multiplications it takes. */
static double pair_cost(const plan *pl, const term *list, int count, int i, int j, double *mults) {
    double elems = 1;
    *mults = 1;
    for (int side = 0; side < 2; side++) {
        const term *t = &list[side ? j : i];
        for (int a = 0; a < t->nd; a++) {
            int l = t->lab[a];
            if (side && has_label(&list[i], l)) continue;
            *mults *= (double)pl->size[l];
            if (needed(pl, list, count, l, i, j)) elems *= (double)pl->size[l];
        }
    }
    return elems;
}

/* The greedy choice: the pair i < j whose product is smallest. */
static void choose_pair(const plan *pl, const term *list, int count, int *bi, int *bj) {
    double best = 0, best_mults = 0;
    *bi = -1;
    for (int i = 0; i < count; i++)
        for (int j = i + 1; j < count; j++) {
            double mults, elems = pair_cost(pl, list, count, i, j, &mults);
            if (*bi < 0 || elems < best || (elems == best && mults < best_mults)) {
                best = elems, best_mults = mults;
                *bi = i, *bj = j;
            }
        }
}

/* The permutation that puts t's axes in the order of the three label groups, into perm, and each
   group's size (the product of its axes' sizes) into sizes. */
static void gather(const term *t, const int *const *groups, const int *ngroups, int64_t *sizes, int *perm) {
    int k = 0;
    for (int g = 0; g < 3; g++) {
        sizes[g] = 1;
        for (int x = 0; x < ngroups[g]; x++)
            for (int a = 0; a < t->nd; a++)
                if (t->lab[a] == groups[g][x]) {
                    perm[k++] = a;
                    sizes[g] *= t->t->shape.dim[a];
                }
    }
}

/* The product of terms i < j of the list (batched nb_matmul, or nb_mul when nothing is
   contracted), or NULL. */
static nb_tensor *contract(const plan *pl, const term *list, int count, int i, int j, term *r) {
    const term *a = &list[i], *b = &list[j];
    int batch[NB_MAX_DIMS], k[NB_MAX_DIMS], m[NB_MAX_DIMS], nn[NB_MAX_DIMS], nbatch = 0, nk = 0, nm = 0, nnn = 0;
    for (int x = 0; x < a->nd; x++) {
        int l = a->lab[x];
        if (!has_label(b, l)) m[nm++] = l;
        else if (needed(pl, list, count, l, i, j)) batch[nbatch++] = l;
        else k[nk++] = l;
    }
    for (int x = 0; x < b->nd; x++)
        if (!has_label(a, b->lab[x])) nn[nnn++] = b->lab[x];
    if (nbatch + nm + nnn > NB_MAX_DIMS) {
        EINSUM_ERROR(pl->eq, "contracting two operands gives %d dimensions, more than %d", nbatch + nm + nnn, NB_MAX_DIMS);
        return NULL;
    }
    const int *ga[3] = { batch, m, k }, *gb[3] = { batch, k, nn };
    const int na[3] = { nbatch, nm, nk }, nb[3] = { nbatch, nk, nnn };
    int pa[NB_MAX_DIMS], pb[NB_MAX_DIMS];
    int64_t sa[3], sb[3];
    gather(a, ga, na, sa, pa);
    gather(b, gb, nb, sb, pb);
    nb_tensor *a3 = nb_reshape(nb_permute(a->t, pa), NB_SHAPE(sa[0], sa[1], sa[2]));
    nb_tensor *b3 = nb_reshape(nb_permute(b->t, pb), NB_SHAPE(sb[0], sb[1], sb[2]));
    nb_tensor *p = nk ? nb_matmul(a3, b3) : nb_mul(a3, b3);
    /* [batch..., M..., N...] */
    r->nd = 0;
    nb_shape s = { 0, { 0 } };
    for (int g = 0; g < 3; g++) {
        const term *from = g == 2 ? b : a;
        const int *labs = g == 0 ? batch : g == 1 ? m : nn;
        int cnt = g == 0 ? nbatch : g == 1 ? nm : nnn;
        for (int x = 0; x < cnt; x++) {
            r->lab[r->nd++] = labs[x];
            for (int y = 0; y < from->nd; y++)
                if (from->lab[y] == labs[x]) s.dim[s.ndim++] = from->t->shape.dim[y];
        }
    }
    return r->t = nb_reshape(p, s);
}

/* Runs the plan on the operands' terms; the result (belonging to the current scope) or NULL. */
static nb_tensor *run(const plan *pl, term *list, int count, int *path) {
    for (int i = 0; i < count; i++)
        if (diagonals_and_broadcast(pl, &list[i]) < 0) return NULL;
    for (int i = 0; i < count; i++)
        if (sum_unneeded(pl, list, count, i) < 0) return NULL;
    for (int step = 0; count > 1; step++) {
        int i = 0, j = 1;
        choose_pair(pl, list, count, &i, &j);
        if (path) path[2 * step] = i, path[2 * step + 1] = j;
        term r;
        if (!contract(pl, list, count, i, j, &r)) return NULL;
        memmove(list + j, list + j + 1, sizeof(term) * (size_t)(count - j - 1));
        memmove(list + i, list + i + 1, sizeof(term) * (size_t)(count - i - 2));
        list[count - 2] = r;
        count--;
    }
    const term *f = &list[0];
    int perm[NB_MAX_DIMS];
    for (int o = 0; o < pl->out_n; o++) {
        perm[o] = -1;
        for (int a = 0; a < f->nd; a++)
            if (f->lab[a] == pl->out[o]) perm[o] = a;
        if (perm[o] < 0) {
            EINSUM_ERROR(pl->eq, "internal error: output dimension %d was lost", o);
            return NULL;
        }
    }
    if (f->nd != pl->out_n) {
        EINSUM_ERROR(pl->eq, "internal error: %d dimensions left for an output of %d", f->nd, pl->out_n);
        return NULL;
    }
    return nb_permute(f->t, perm); /* a new tensor even when nothing else happened */
}

nb_tensor *nb__einsum_path(const char *equation, nb_tensor *const *operands, int n, int *path) {
    if (!equation) {
        nb__error("nb_einsum: the equation is NULL");
        return NULL;
    }
    plan pl = { .eq = equation };
    if (n < 1 || n > MAX_OPERANDS || !operands) {
        EINSUM_ERROR(equation, "%d operands given (1 to %d)", n, MAX_OPERANDS);
        return NULL;
    }
    for (int k = 0; k < n; k++)
        if (!operands[k]) {
            if (!nb__has_error()) EINSUM_ERROR(equation, "operand %d is NULL", k);
            return NULL;
        }
    term list[MAX_OPERANDS];
    if (parse(&pl, operands, n, list) < 0) return NULL;
    nb_scope *scope = nb_scope_begin();
    nb_tensor *r = nb_keep(run(&pl, list, n, path));
    nb_scope_end(scope);
    return nb__own(r);
}

nb_tensor *nb_einsum(const char *equation, nb_tensor *const *operands, int n) {
    return nb__einsum_path(equation, operands, n, NULL);
}
