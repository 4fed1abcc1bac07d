/* RNN (tanh, relu), LSTM and GRU against PyTorch: for each case of tests/rnn_ref.py (1 and 2
   layers, one and two directions, batch first or not, with and without initial states, unbatched
   input, without biases, dropout in evaluation mode) the state dict's names and shapes, the
   outputs and final states, and the gradients of the input, the initial states and every
   parameter, with torch's weights loaded by name. Then what only nabla can check: dropout acts
   between layers in training mode only, nb_forward gives the outputs, initialisation bounds, the
   printed form (torch's repr), and
   the errors of bad shapes and options.

   Usage: test_rnn_torch REFERENCE_FILE [NAME_SUBSTRING]. A missing reference is a failure. */
#include "ref_store.h"

#define MAX_CASES 64
#define MAX_NAMED 64
#define RTOL 1e-5
#define ATOL 1e-5

typedef struct rnn_config {
    const char *kind; /* RNN, LSTM, GRU */
    nb_rnn_opts opts;
    int64_t in, hidden;
    bool init, unbatched;
} rnn_config;

static nb_module *make_module(const rnn_config *c) {
    if (!strcmp(c->kind, "LSTM")) return nb_nn_lstm(c->in, c->hidden, c->opts);
    if (!strcmp(c->kind, "GRU")) return nb_nn_gru(c->in, c->hidden, c->opts);
    return nb_nn_rnn(c->in, c->hidden, c->opts);
}

/* Reads "rnn.<case>.config"; false when it is missing or malformed. */
static bool read_config(const char *name, rnn_config *c) {
    char ref[160];
    snprintf(ref, sizeof ref, "rnn.%s.config", name);
    const record *r = find(ref, true);
    if (!r || r->nwords != 11) return false;
    const char *const *w = r->words;
    *c = (rnn_config){ .kind = w[0], .in = atoll(w[2]), .hidden = atoll(w[3]), .init = atoi(w[9]), .unbatched = atoi(w[10]) };
    c->opts = (nb_rnn_opts){ .num_layers = atoi(w[4]), .no_bias = !atoi(w[5]), .batch_first = atoi(w[6]),
                             .bidirectional = atoi(w[7]), .dropout = atof(w[8]),
                             .nonlinearity = strcmp(w[1], "relu") ? NB_RNN_TANH : NB_RNN_RELU };
    return true;
}

/* The state dict's names are torch's, in torch's order; loads torch's values into them. */
static bool load_torch_weights(const char *cs, const char *name, nb_module *m) {
    char ref[256];
    nb_named_tensor ents[MAX_NAMED];
    int n = nb_module_state_entries(m, ents, MAX_NAMED);
    snprintf(ref, sizeof ref, "rnn.%s.params", name);
    const record *names = find(ref, true);
    bool ok = names && n == names->nwords;
    for (int i = 0; ok && i < n; i++) ok = strcmp(ents[i].name, names->words[i]) == 0;
    if (names && !ok) {
        fprintf(stderr, "  %s: nabla's state dict is", cs);
        for (int i = 0; i < n && i < MAX_NAMED; i++) fprintf(stderr, " %s", ents[i].name);
        fprintf(stderr, "; torch's is");
        for (int i = 0; i < names->nwords; i++) fprintf(stderr, " %s", names->words[i]);
        fprintf(stderr, "\n");
    }
    for (int i = 0; ok && i < n; i++) {
        snprintf(ref, sizeof ref, "rnn.%s.param.%s", name, ents[i].name);
        ok = load_into(cs, ents[i].tensor, ref); /* checks the shape first */
    }
    return ok;
}

static void test_case(void **state) {
    const char *name = *state;
    char cs[96], ref[256];
    snprintf(cs, sizeof cs, "rnn %s", name);
    size_t used;
    nb_memory_stats(NULL, &used, NULL);
    rnn_config c;
    bool ok = read_config(name, &c);
    nb_module *m = ok ? make_module(&c) : NULL;
    if (!m) {
        fprintf(stderr, "  %s: building the module failed: %s\n", cs, nb_error() ? nb_error() : "bad config");
        finish_case(cs, false, used);
        return;
    }
    bool lstm = !strcmp(c.kind, "LSTM");
    ok = load_torch_weights(cs, name, m);
    if (c.opts.dropout > 0) nb_module_train(m, false); /* evaluation mode: no dropout, as torch's */
    nb_scope *sc = nb_scope_begin();
    if (ok) {
        nb_tensor *x = nb_set_requires_grad(ref_tensor("rnn.%s.x", name), true);
        nb_tensor *h0 = c.init ? nb_set_requires_grad(ref_tensor("rnn.%s.h0", name), true) : NULL;
        nb_tensor *c0 = c.init && lstm ? nb_set_requires_grad(ref_tensor("rnn.%s.c0", name), true) : NULL;
        nb_tensor *hn = NULL, *cn = NULL;
        nb_tensor *y = nb_rnn_forward(m, x, h0, c0, &hn, lstm ? &cn : NULL);
        snprintf(ref, sizeof ref, "rnn.%s.y", name);
        ok = compare(cs, "output", y, ref, RTOL, ATOL);
        snprintf(ref, sizeof ref, "rnn.%s.h_n", name);
        ok = compare(cs, "h_n", hn, ref, RTOL, ATOL) && ok;
        if (lstm) {
            snprintf(ref, sizeof ref, "rnn.%s.c_n", name);
            ok = compare(cs, "c_n", cn, ref, RTOL, ATOL) && ok;
        }
        nb_tensor *loss = nb_add(nb_sum_all(nb_mul(y, ref_tensor("rnn.%s.gy", name))),
                                 nb_sum_all(nb_mul(hn, ref_tensor("rnn.%s.gh", name))));
        if (lstm) loss = nb_add(loss, nb_sum_all(nb_mul(cn, ref_tensor("rnn.%s.gc", name))));
        if (ok && nb_backward(loss) < 0) {
            fprintf(stderr, "  %s: backward failed: %s\n", cs, nb_error() ? nb_error() : "?");
            ok = false;
        }
        nb_tensor *leaves[3] = { x, h0, c0 };
        static const char *const leaf_names[3] = { "x", "h0", "c0" };
        for (int i = 0; ok && i < 3; i++) {
            if (!leaves[i]) continue;
            char what[64];
            snprintf(what, sizeof what, "gradient of %s", leaf_names[i]);
            snprintf(ref, sizeof ref, "rnn.%s.grad.%s", name, leaf_names[i]);
            ok = compare(cs, what, nb_grad_of(leaves[i]), ref, RTOL, ATOL) && ok;
        }
        nb_named_tensor params[MAX_NAMED];
        int np = nb_module_named_parameters(m, params, MAX_NAMED);
        for (int i = 0; ok && i < np; i++) {
            char what[128];
            snprintf(what, sizeof what, "gradient of %s", params[i].name);
            snprintf(ref, sizeof ref, "rnn.%s.grad.%s", name, params[i].name);
            ok = compare(cs, what, nb_grad_of(params[i].tensor), ref, RTOL, ATOL) && ok;
        }
    }
    nb_scope_end(sc);
    nb_module_free(m);
    finish_case(cs, ok, used);
}

/* The largest |a - b|. */
static double max_diff(nb_tensor *a, nb_tensor *b) {
    return nb_item(nb_max(nb_abs(nb_reshape(nb_sub(a, b), NB_SHAPE(-1))), 0, false));
}

/* Dropout acts on the outputs of every layer but the last, in training mode only; the
   backward runs through it; nb_forward gives nb_rnn_forward's outputs. */
static void test_dropout_and_forward(void **state) {
    (void)state;
    nb_manual_seed(7);
    nb_scope *sc = nb_scope_begin();
    nb_tensor *x = nb_randn(NB_SHAPE(6, 2, 3), NB_F32);
    nb_module *deep = nb_nn_lstm(3, 5, (nb_rnn_opts){ .num_layers = 2, .dropout = 0.5 });
    nb_module *one = nb_nn_gru(3, 5, (nb_rnn_opts){ .dropout = 0.5 });
    assert_non_null(deep);
    assert_non_null(one);
    nb_tensor *train = nb_forward(deep, x), *train_one = nb_forward(one, x);
    nb_module_train(deep, false);
    nb_module_train(one, false);
    nb_tensor *hn, *cn;
    nb_tensor *eval = nb_rnn_forward(deep, x, NULL, NULL, &hn, &cn), *eval_one = nb_forward(one, x);
    assert_non_null(train);
    assert_non_null(eval);
    assert_true(max_diff(train, eval) > 1e-3);         /* dropout between the two layers */
    assert_true(max_diff(train_one, eval_one) == 0);  /* one layer: nothing between layers */
    assert_true(max_diff(nb_forward(deep, x), eval) == 0);
    assert_int_equal(nb_dim(hn, 0), 2);
    assert_int_equal(nb_dim(cn, 2), 5);
    nb_module_train(deep, true);
    assert_int_equal(nb_backward(nb_sum_all(nb_forward(deep, x))), 0);
    assert_non_null(nb_grad_of(nb_module_get(deep, "weight_ih_l0")));
    nb_scope_end(sc);
    nb_module_free(deep);
    nb_module_free(one);
    assert_null(nb_error());
}

/* Every parameter lies in U(-1/sqrt(H), 1/sqrt(H)) and is not constant. */
static void test_init(void **state) {
    (void)state;
    nb_module *m = nb_nn_gru(4, 16, (nb_rnn_opts){ .num_layers = 2, .bidirectional = true });
    assert_non_null(m);
    nb_named_tensor ps[MAX_NAMED];
    int n = nb_module_named_parameters(m, ps, MAX_NAMED);
    assert_int_equal(n, 16);
    assert_int_equal(nb_dim(nb_module_get(m, "weight_ih_l1_reverse"), 1), 32);
    assert_int_equal(nb_dim(nb_module_get(m, "weight_hh_l0"), 0), 48);
    nb_scope *sc = nb_scope_begin();
    for (int i = 0; i < n; i++) {
        nb_tensor *flat = nb_reshape(ps[i].tensor, NB_SHAPE(-1));
        double hi = nb_item(nb_max(flat, 0, false)), lo = nb_item(nb_min(flat, 0, false));
        assert_true(hi <= 0.25 && lo >= -0.25 && hi - lo > 0.1);
    }
    nb_scope_end(sc);
    /* printed as torch prints them */
    nb_module *r = nb_nn_rnn(3, 5, (nb_rnn_opts){ .nonlinearity = NB_RNN_RELU, .no_bias = true, .batch_first = true, .dropout = 0.25 });
    nb_module *l = nb_nn_lstm(3, 5, (nb_rnn_opts){ 0 });
    char *reprs[3] = { nb_module_repr(m), nb_module_repr(r), nb_module_repr(l) };
    assert_string_equal(reprs[0], "GRU(4, 16, num_layers=2, bidirectional=True)");
    assert_string_equal(reprs[1], "RNN(3, 5, bias=False, batch_first=True, dropout=0.25)");
    assert_string_equal(reprs[2], "LSTM(3, 5)");
    for (int i = 0; i < 3; i++) free(reprs[i]);
    nb_module_free(r);
    nb_module_free(l);
    nb_module_free(m);
}

/* Bad shapes, states and options: NULL (and -1-free) with an error naming what was expected. */
static void test_errors(void **state) {
    (void)state;
    nb_scope *sc = nb_scope_begin();
    nb_module *lstm = nb_nn_lstm(4, 6, (nb_rnn_opts){ .num_layers = 2 });
    nb_module *gru = nb_nn_gru(4, 6, (nb_rnn_opts){ .batch_first = true, .bidirectional = true });
    nb_module *rnn = nb_nn_rnn(4, 6, (nb_rnn_opts){ 0 });
    nb_tensor *hn = nb_scalar(1), *cn = nb_scalar(1);
    nb_tensor *x = nb_zeros(NB_SHAPE(5, 3, 4), NB_F32);

    assert_null(nb_rnn_forward(lstm, nb_zeros(NB_SHAPE(5, 3, 7), NB_F32), NULL, NULL, &hn, &cn));
    assert_null(hn);
    assert_null(cn);
    ASSERT_ERROR_CONTAINS("expected input [T, N, in] of f32 with 4 features");
    assert_null(nb_forward(gru, nb_zeros(NB_SHAPE(2, 5, 3, 4), NB_F32)));
    ASSERT_ERROR_CONTAINS("expected input [N, T, in]");
    assert_null(nb_forward(lstm, nb_zeros(NB_SHAPE(5, 3, 4), NB_F64)));
    ASSERT_ERROR_CONTAINS("got [5, 3, 4] f64");
    assert_null(nb_forward(rnn, nb_zeros(NB_SHAPE(0, 3, 4), NB_F32)));
    ASSERT_ERROR_CONTAINS("T, N > 0");
    assert_null(nb_rnn_forward(lstm, x, nb_zeros(NB_SHAPE(1, 3, 6), NB_F32), NULL, NULL, NULL));
    ASSERT_ERROR_CONTAINS("LSTM (root): expected h0 [2, 3, 6] f32, got [1, 3, 6] f32");
    assert_null(nb_rnn_forward(lstm, x, NULL, nb_zeros(NB_SHAPE(2, 6), NB_F32), NULL, NULL));
    ASSERT_ERROR_CONTAINS("expected c0 [2, 3, 6] f32, got [2, 6] f32");
    /* unbatched input takes unbatched states */
    assert_null(nb_rnn_forward(rnn, nb_zeros(NB_SHAPE(5, 4), NB_F32), nb_zeros(NB_SHAPE(1, 1, 6), NB_F32), NULL, NULL, NULL));
    ASSERT_ERROR_CONTAINS("expected h0 [1, 6] f32");
    assert_null(nb_rnn_forward(gru, nb_zeros(NB_SHAPE(3, 5, 4), NB_F32), nb_zeros(NB_SHAPE(1, 3, 6), NB_F32), NULL, NULL, NULL));
    ASSERT_ERROR_CONTAINS("GRU (root): expected h0 [2, 3, 6] f32");
    assert_null(nb_rnn_forward(gru, nb_zeros(NB_SHAPE(3, 5, 4), NB_F32), NULL, nb_zeros(NB_SHAPE(2, 3, 6), NB_F32), NULL, NULL));
    ASSERT_ERROR_CONTAINS("only an LSTM has a cell state");
    assert_null(nb_rnn_forward(rnn, x, NULL, NULL, NULL, &cn));
    ASSERT_ERROR_CONTAINS("only an LSTM has a cell state");
    nb_module *lin = nb_nn_linear(4, 6);
    assert_null(nb_rnn_forward(lin, x, NULL, NULL, NULL, NULL));
    ASSERT_ERROR_CONTAINS("is a Linear, not an RNN, LSTM or GRU");
    assert_null(nb_rnn_forward(rnn, NULL, NULL, NULL, NULL, NULL));
    ASSERT_ERROR_CONTAINS("the input is NULL");
    assert_null(nb_nn_lstm(4, 0, (nb_rnn_opts){ 0 }));
    ASSERT_ERROR_CONTAINS("nb_nn_lstm: input_size 4 and hidden_size 0 must be positive");
    assert_null(nb_nn_gru(4, 6, (nb_rnn_opts){ .num_layers = -1 }));
    ASSERT_ERROR_CONTAINS("num_layers -1");
    assert_null(nb_nn_rnn(4, 6, (nb_rnn_opts){ .dropout = 1 }));
    ASSERT_ERROR_CONTAINS("dropout must be in [0, 1), got 1");
    assert_null(nb_nn_lstm(4, 6, (nb_rnn_opts){ .nonlinearity = NB_RNN_RELU }));
    ASSERT_ERROR_CONTAINS("only nb_nn_rnn takes relu");
    assert_null(nb_nn_rnn(4, 6, (nb_rnn_opts){ .nonlinearity = (nb_rnn_nonlinearity)5 }));
    ASSERT_ERROR_CONTAINS("nonlinearity 5");
    /* the modules still run after the errors */
    assert_non_null(nb_rnn_forward(lstm, x, NULL, NULL, &hn, &cn));
    assert_int_equal(nb_dim(cn, 0), 2);
    assert_null(nb_error());
    nb_scope_end(sc);
    nb_module_free(lstm);
    nb_module_free(gru);
    nb_module_free(rnn);
    nb_module_free(lin);
}

int main(int argc, char **argv) {
    char *text;
    if (!load_store(argc, argv, "test_rnn_torch", "tests/rnn_ref.py", &text)) return 1;
    const record *cases = find("rnn.cases", true);
    if (!cases || cases->nwords == 0 || cases->nwords > MAX_CASES) {
        fprintf(stderr, "test_rnn_torch: %s is not an RNN reference file\n", argv[1]);
        free_store();
        free(text);
        return 1;
    }
    warm_up_thread_state();
    struct CMUnitTest tests[MAX_CASES + 3];
    static char names[MAX_CASES][96];
    size_t nt = 0;
    const char *filter = argc > 2 ? argv[2] : NULL;
    for (int i = 0; i < cases->nwords; i++) {
        snprintf(names[i], sizeof names[i], "rnn_%s", cases->words[i]);
        if (!filter || strstr(names[i], filter))
            tests[nt++] = (struct CMUnitTest){ names[i], test_case, NULL, NULL, (void *)cases->words[i] };
    }
    tests[nt++] = (struct CMUnitTest)cmocka_unit_test_setup(test_dropout_and_forward, clear_error_setup);
    tests[nt++] = (struct CMUnitTest)cmocka_unit_test_setup(test_init, clear_error_setup);
    tests[nt++] = (struct CMUnitTest)cmocka_unit_test_setup(test_errors, clear_error_setup);
    int rc = _cmocka_run_group_tests("rnn_torch", tests, nt, NULL, NULL);
    free_store();
    free(text);
    return rc;
}
