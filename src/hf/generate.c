/* Text generation with a causal LM from nb_hf_load: the prompt runs once, then one token at a
   time against a key/value cache; each next token is the argmax (temperature 0) or a draw from
   the softmax of the logits over temperature, cut to the top k and to the smallest set whose
   probability reaches top_p, from a generator seeded by the options. */
#include "hf_model.h"
#include "nabla/hf.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

/* splitmix64: the draws of one seed are the same on every machine */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct {
    float p;
    int64_t id;
} cand;

static int by_prob(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->p != y->p) return x->p < y->p ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id); /* ties: the lower id first, as argmax */
}

/* The next token from one row of logits. */
static int64_t choose(const float *logits, int64_t V, const nb_generate_opts *o, uint64_t *rng, cand *c) {
    if (o->temperature <= 0) {
        int64_t best = 0;
        for (int64_t j = 1; j < V; j++)
            if (logits[j] > logits[best]) best = j;
        return best;
    }
    float mx = -INFINITY;
    for (int64_t j = 0; j < V; j++) mx = logits[j] > mx ? logits[j] : mx;
    for (int64_t j = 0; j < V; j++) c[j] = (cand){ (float)exp((logits[j] - mx) / o->temperature), j };
    int64_t keep = o->top_k > 0 && o->top_k < V ? o->top_k : V;
    bool cut_p = o->top_p > 0 && o->top_p < 1;
    /* the order matters only to a cut; plain sampling draws from the ids as they are */
    if (keep < V || cut_p) qsort(c, (size_t)V, sizeof *c, by_prob);
    double kept = 0;
    for (int64_t j = 0; j < keep; j++) kept += c[j].p;
    if (cut_p) { /* the smallest prefix whose share reaches top_p */
        double cum = 0;
        for (int64_t j = 0; j < keep; j++) {
            cum += c[j].p;
            if (cum >= o->top_p * kept) {
                keep = j + 1;
                kept = cum;
                break;
            }
        }
    }
    double u = (double)(next_u64(rng) >> 11) * 0x1.0p-53 * kept, cum = 0;
    for (int64_t j = 0; j < keep; j++) {
        cum += c[j].p;
        if (u < cum) return c[j].id;
    }
    return c[keep - 1].id;
}

static bool is_stop(const nb_generate_opts *o, int64_t id) {
    for (int k = 0; k < o->nstop; k++)
        if (o->stop[k] == id) return true;
    return false;
}

/* A causal LM's class has the LM step as its forward (gpt2.c, llama.c): that is the kind's mark,
   so generation names no model family. */
hf_lm *nb__hf_lm(const nb_module *m) { return m && m->cls && m->cls->forward == nb__hf_lm_forward ? (hf_lm *)m : NULL; }

bool nb_hf_is_causal_lm(const nb_module *m) { return nb__hf_lm(m) != NULL; }

nb_tensor *nb__hf_lm_forward(nb_module *m, nb_tensor *ids) { return ((hf_lm *)m)->step(m, ids, NULL, 0, NULL, NULL); }

int64_t nb_hf_eos_id(const nb_module *m) { return nb__hf_lm(m) && nb__hf_lm(m)->neos ? nb__hf_lm(m)->eos[0] : -1; }

int nb_hf_eos_ids(const nb_module *m, int64_t *ids, int cap) {
    const hf_lm *lm = nb__hf_lm(m);
    if (!lm) return 0;
    for (int i = 0; i < lm->neos && i < cap && ids; i++) ids[i] = lm->eos[i];
    return lm->neos;
}

int nb__hf_lm_check_ids(const hf_lm *lm, const char *fn, nb_tensor *ids, int64_t past) {
    if (!ids || nb_ndim(ids) != 2) {
        if (ids || !nb__has_error()) nb__error("%s takes token ids [batch, tokens]", fn); /* NULL: the error made it */
        return -1;
    }
    if (past + nb_dim(ids, 1) > lm->positions) {
        nb__error("%s: %lld tokens, but the model has %lld positions", fn, (long long)(past + nb_dim(ids, 1)),
                  (long long)lm->positions);
        return -1;
    }
    return 0;
}

nb_tensor *nb__hf_cache_put(hf_cache *c, int64_t layer, int which, nb_tensor *x, int64_t past) {
    nb_tensor **slot = &c->kv[2 * layer + which];
    int64_t T = x ? nb_dim(x, 2) : 0;
    if (!x) return NULL;
    if (past + T > c->cap) {
        nb__error("nb_generate: %lld positions pass the key/value cache's %lld", (long long)(past + T), (long long)c->cap);
        return NULL;
    }
    if (!*slot) {
        nb_shape sh = nb_shape_of(x);
        sh.dim[2] = c->cap;
        if (!(*slot = nb_keep(nb_empty(sh, nb_dtype_of(x))))) return NULL;
    }
    if (nb_assign(nb_slice(*slot, 2, past, past + T, 1), x) < 0) return NULL;
    return nb_slice(*slot, 2, 0, past + T, 1);
}

nb_tensor *nb_generate(nb_module *m, nb_tensor *ids, nb_generate_opts opts) {
    const char *fn = "nb_generate";
    hf_lm *lm = nb__hf_lm(m);
    if (!lm) {
        nb__error("%s: the module is not a causal LM that nb_hf_load made", fn);
        return NULL;
    }
    if (!ids || nb_ndim(ids) != 2 || nb_dim(ids, 1) < 1 || nb_dtype_of(ids) != NB_I64) {
        nb__error("%s: ids must be i64 [batch, tokens] with at least one token", fn);
        return NULL;
    }
    /* what `nabla generate` checks, and NaN, which no comparison would refuse: a NaN temperature
       or top_p made every draw from NaN weights */
    if (opts.max_new_tokens < 0 || opts.top_k < 0 || !(opts.top_p >= 0 && opts.top_p <= 1) ||
        !(opts.temperature >= 0 && isfinite(opts.temperature)) || opts.nstop < 0 || (opts.nstop > 0 && !opts.stop)) {
        nb__error("%s: bad options (max_new_tokens %lld >= 0, temperature %g finite and >= 0, top_k %lld >= 0, top_p %g in "
                  "[0, 1], nstop %d >= 0 with stop %s)", fn, (long long)opts.max_new_tokens, opts.temperature,
                  (long long)opts.top_k, opts.top_p, opts.nstop, opts.stop ? "given" : "NULL");
        return NULL;
    }
    int64_t B = nb_dim(ids, 0), T0 = nb_dim(ids, 1), N = opts.max_new_tokens;
    /* N against the room left, not T0 + N against the total: N may be anything up to INT64_MAX */
    if (N > lm->positions - T0) {
        nb__error("%s: %lld prompt tokens and %lld new ones pass the model's %lld positions", fn, (long long)T0,
                  (long long)N, (long long)lm->positions);
        return NULL;
    }
    for (int64_t b = 0; opts.prompt_lengths && b < B; b++)
        if (opts.prompt_lengths[b] < 1 || opts.prompt_lengths[b] > T0) {
            nb__error("%s: prompt_lengths[%lld] is %lld; each row's prompt has 1 to %lld tokens", fn, (long long)b,
                      (long long)opts.prompt_lengths[b], (long long)T0);
            return NULL;
        }
    int64_t cells;
    if (nb__mul_overflows(B, T0 + N, &cells) || (uint64_t)cells > SIZE_MAX / sizeof(int64_t)) {
        nb__error("%s: %lld rows of %lld tokens are too many to hold", fn, (long long)B, (long long)(T0 + N));
        return NULL;
    }
    int64_t L = lm->layers;
    hf_cache cache = { calloc((size_t)(2 * L), sizeof(nb_tensor *)), T0 + N };
    int64_t *all = malloc(sizeof(int64_t) * (size_t)(B * (T0 + N)));
    bool *done = calloc((size_t)B, 1);
    int64_t *next = malloc(sizeof(int64_t) * (size_t)B);
    nb_tensor *out = NULL;
    if (!cache.kv || !all || !done || !next) {
        nb__error("%s: out of memory", fn);
        goto end;
    }
    if (nb_copy_to(ids, all, sizeof(int64_t) * (size_t)(B * T0)) < 0) goto end;
    /* all holds row-major [B, T0 + N]: spread the prompt rows out */
    for (int64_t b = B - 1; b >= 0; b--) memmove(all + b * (T0 + N), all + b * T0, sizeof(int64_t) * (size_t)T0);
    bool grad = nb_is_grad_enabled();
    nb_set_grad_enabled(false);
    uint64_t rng = opts.seed;
    int64_t made = 0;
    nb_tensor *input = nb_retain(ids);
    cand *c = NULL;
    int64_t V = 0;
    int rc = 0;
    /* left padding: each row's positions count from its first real token, and its padding is
       masked out of every key; both as transformers computes them */
    float *keymask = opts.prompt_lengths ? calloc((size_t)(B * (T0 + N)), sizeof(float)) : NULL;
    int64_t *pos = opts.prompt_lengths ? malloc(sizeof(int64_t) * (size_t)(B * T0)) : NULL;
    if (opts.prompt_lengths && (!keymask || !pos)) { nb__error("%s: out of memory", fn); rc = -1; }
    for (int64_t step = 0; step < N && rc == 0; step++) {
        nb_scope *s = nb_scope_begin();
        int64_t past = step == 0 ? 0 : T0 + step - 1, tn = step == 0 ? T0 : 1;
        nb_tensor *pos_ids = NULL, *mask = NULL;
        if (keymask) {
            for (int64_t b = 0; b < B; b++) {
                int64_t pad = T0 - opts.prompt_lengths[b];
                for (int64_t t = 0; t < tn; t++) {
                    int64_t at = past + t;
                    pos[b * tn + t] = at < pad ? 1 : at - pad; /* padding's own positions are never read */
                    keymask[b * (past + tn) + at] = at < pad ? -FLT_MAX : 0.0f;
                }
                for (int64_t t = 0; t < past; t++) keymask[b * (past + tn) + t] = t < pad ? -FLT_MAX : 0.0f;
            }
            pos_ids = nb_from_data(pos, NB_SHAPE(B, tn), NB_I64);
            mask = nb_from_data(keymask, NB_SHAPE(B, 1, 1, past + tn), NB_F32);
        }
        nb_tensor *logits = (!keymask || (pos_ids && mask)) ? lm->step(m, input, &cache, past, pos_ids, mask) : NULL;
        int64_t t = logits ? nb_dim(logits, 1) : 0;
        nb_tensor *last = logits ? nb_contiguous(nb_cast(nb_reshape(nb_slice(logits, 1, t - 1, t, 1),
                                                                    NB_SHAPE(B, nb_dim(logits, 2))), NB_F32)) : NULL;
        if (!last) rc = -1;
        if (rc == 0 && !c) {
            V = nb_dim(last, 1);
            if (!(c = malloc(sizeof *c * (size_t)V))) { nb__error("%s: out of memory", fn); rc = -1; }
        }
        const float *lp = rc == 0 ? nb_data_ptr(last) : NULL;
        bool any = false;
        for (int64_t b = 0; b < B && lp; b++) {
            next[b] = done[b] ? (opts.nstop ? opts.stop[0] : 0) : choose(lp + b * V, V, &opts, &rng, c);
            all[b * (T0 + N) + T0 + step] = next[b];
            if (!done[b] && opts.on_token) opts.on_token(b, next[b], opts.ctx);
            if (!done[b] && is_stop(&opts, next[b])) done[b] = true;
            any |= !done[b];
        }
        nb_scope_end(s);
        if (rc < 0 || !lp) { rc = -1; break; }
        made = step + 1;
        nb_release(input);
        input = nb_keep(nb_from_data(next, NB_SHAPE(B, 1), NB_I64));
        if (!input) rc = -1;
        if (!any) break;
    }
    nb_release(input);
    nb_set_grad_enabled(grad);
    free(c);
    free(keymask);
    free(pos);
    if (rc == 0) {
        /* the rows as made: the prompt and `made` tokens (a row that stopped repeats its stop token) */
        for (int64_t b = 0; b < B; b++) memmove(all + b * (T0 + made), all + b * (T0 + N), sizeof(int64_t) * (size_t)(T0 + made));
        out = nb_from_data(all, NB_SHAPE(B, T0 + made), NB_I64);
    }
end:
    for (int64_t k = 0; cache.kv && k < 2 * L; k++) nb_release(cache.kv[k]);
    free(cache.kv);
    free(all);
    free(done);
    free(next);
    return out;
}
