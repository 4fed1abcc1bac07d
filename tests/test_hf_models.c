/* Hugging Face checkpoints against transformers and sentence-transformers (tests/hf_ref.py
   writes the references into DIR): a small random BertModel saved whole and in shards gives
   transformers' hidden states on a padded batch; the real all-MiniLM-L6-v2 checkpoint gives
   sentence-transformers' embeddings of a few hundred sentences; a small random GPT-2 gives
   transformers' logits and greedy tokens, and its sampling keeps its promises; small random
   Llama decoders (grouped-query attention; tied, biased, rope-scaled) give transformers' logits
   and greedy tokens, and train; broken checkpoints (a
   missing shard, a truncated file, an unknown model type or activation, a shape the config
   does not make, a key no layer uses) are errors naming what is wrong.
   Usage: test_hf_models DIR */
#include "test_util.h"
#include <sys/stat.h>
#include <unistd.h>

static const char *ref;
static char tmp[128];

static int setup(void **state) {
    (void)state;
    nb_error_clear();
    return 0;
}

static nb_tensor *load_ref(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", ref, name);
    nb_tensor *t = nb_load_npy(p);
    if (!t) fail_msg("cannot read %s: %s", p, nb_error());
    return t;
}

/* The largest element of t. */
static double max_of(nb_tensor *t) { return nb_item(nb_max(nb_reshape(t, NB_SHAPE(-1)), 0, false)); }

/* max |a - b| / max |b| */
static double rel_err(nb_tensor *a, nb_tensor *b) {
    nb_scope *s = nb_scope_begin();
    double d = max_of(nb_abs(nb_sub(a, b))), m = max_of(nb_abs(b));
    nb_scope_end(s);
    return d / (m > 0 ? m : 1);
}

/* How many positions of two token tensors of one size hold the same id (-1: sizes differ). */
static int64_t same_tokens(nb_tensor *got, nb_tensor *want) {
    int64_t n = nb_numel(want), a[128], b[128];
    if (nb_numel(got) != n || n > 128) return -1;
    assert_int_equal(nb_copy_to(got, a, sizeof(int64_t) * (size_t)n), 0);
    assert_int_equal(nb_copy_to(want, b, sizeof(int64_t) * (size_t)n), 0);
    int64_t same = 0;
    for (int64_t i = 0; i < n; i++) same += a[i] == b[i];
    return same;
}

/* A checkpoint of the reference folder, loaded (the test fails when it does not load). */
static nb_module *load_sub(const char *sub) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", ref, sub);
    nb_module *m = nb_hf_load(dir, (nb_hf_opts){ 0 });
    if (!m) fail_msg("nb_hf_load %s: %s", dir, nb_error());
    return m;
}

static void check_tiny(const char *sub) {
    nb_module *m = load_sub(sub);
    nb_tensor *h = nb_hf_encode(m, load_ref("tiny_ids.npy"), load_ref("tiny_mask.npy"), load_ref("tiny_types.npy"));
    assert_non_null(h);
    double e = rel_err(h, load_ref("tiny_hidden.npy"));
    printf("tiny BERT (%s): relative error %.2e against transformers (floor 1e-4)\n", sub, e);
    assert_true(e <= 1e-4);
    /* the parameters carry Hugging Face's names */
    assert_non_null(nb_module_get(m, "encoder.layer.1.attention.self.query.weight"));
    assert_non_null(nb_module_get(m, "embeddings.LayerNorm.bias"));
    nb_module_free(m);
}

static void test_tiny_bert(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    check_tiny("tiny");
    check_tiny("tiny_sharded");
    nb_scope_end(s);
}

/* sentence-transformers' all-MiniLM-L6-v2 embeddings: cosine distance at most 1e-5 each */
static void test_minilm_embeddings(void **state) {
    (void)state;
    char p[512];
    snprintf(p, sizeof p, "%s/minilm.txt", ref);
    char *model_dir = read_whole_file(p);
    assert_non_null(model_dir);
    snprintf(p, sizeof p, "%s/sentences.txt", ref);
    char *text = read_whole_file(p);
    assert_non_null(text);
    const char *lines[1024];
    int n = 0;
    for (char *q = text, *nl; *q && n < 1024; q = nl + 1) {
        nl = strchr(q, '\n');
        if (!nl) break;
        *nl = 0;
        lines[n++] = q;
    }
    nb_module *m = nb_hf_load(model_dir, (nb_hf_opts){ 0 });
    if (!m) fail_msg("nb_hf_load %s: %s", model_dir, nb_error());
    snprintf(p, sizeof p, "%s/tokenizer.json", model_dir);
    nb_tokenizer *tok = nb_tokenizer_load(p);
    if (!tok) fail_msg("nb_tokenizer_load %s: %s", p, nb_error());
    nb_scope *s = nb_scope_begin();
    nb_tensor *want = load_ref("minilm_emb.npy");
    assert_int_equal(nb_dim(want, 0), n);
    /* all at once, as encode(sentences, batch_size=32): sorted by length into batches of 32,
       the rows back in the texts' order */
    size_t held0, held1;
    nb_memory_stats(&held0, NULL, NULL);
    nb_tensor *e = nb_hf_embed(m, tok, lines, n, (nb_hf_embed_opts){ .model_dir = model_dir });
    if (!e) fail_msg("nb_hf_embed: %s", nb_error());
    /* inference keeps no graph and one layer's activations at a time: the allocator's cache grew
       by about 1 GB for these batches (6.4 GB when the graph was recorded) */
    nb_memory_stats(&held1, NULL, NULL);
    printf("all-MiniLM-L6-v2: the allocator holds %.0f MB more after embedding\n", (double)(held1 - held0) / 1e6);
    assert_true(held1 - held0 < ((size_t)2 << 30));
    /* cosine distance 1 - <e, w> / |w| (e is normalised) */
    nb_tensor *dot = nb_sum(nb_mul(e, want), 1, false);
    nb_tensor *norm = nb_sqrt(nb_sum(nb_mul(want, want), 1, false));
    double worst = max_of(nb_add_scalar(nb_neg(nb_div(dot, norm)), 1.0));
    /* other batch sizes put other texts together: the same rows */
    nb_tensor *e7 = nb_hf_embed(m, tok, lines, n, (nb_hf_embed_opts){ .model_dir = model_dir, .batch_size = 7 });
    nb_tensor *e1 = nb_hf_embed(m, tok, lines + 3, 1, (nb_hf_embed_opts){ .model_dir = model_dir });
    assert_non_null(e7);
    assert_non_null(e1);
    assert_true(max_of(nb_abs(nb_sub(e7, e))) < 1e-5);
    assert_true(max_of(nb_abs(nb_sub(e1, nb_slice(e, 0, 3, 4, 1)))) < 1e-5);
    assert_null(nb_hf_embed(m, tok, lines, n, (nb_hf_embed_opts){ .batch_size = -1 }));
    ASSERT_ERROR_CONTAINS("batch_size -1 is negative");
    /* max_tokens: the two special tokens at least, the model's 512 positions at most */
    static const int64_t bad_max[] = { 1, -3, 513, INT64_MAX };
    for (int i = 0; i < 4; i++) {
        assert_null(nb_hf_embed(m, tok, lines, 2, (nb_hf_embed_opts){ .max_tokens = bad_max[i] }));
        ASSERT_ERROR_CONTAINS("is outside 2 to 512");
    }
    assert_non_null(nb_hf_embed(m, tok, lines, 2, (nb_hf_embed_opts){ .max_tokens = 2 }));
    printf("all-MiniLM-L6-v2: %d sentences, largest cosine distance to sentence-transformers %.2e (floor 1e-5)\n", n,
           worst);
    assert_true(worst <= 1e-5);
    nb_scope_end(s);
    nb_tokenizer_free(tok);
    nb_module_free(m);
    free(text);
    free(model_dir);
}

/* A reference file of a model: "<name>_<what>.npy". */
static nb_tensor *load_model_ref(const char *name, const char *what) {
    char f[128];
    snprintf(f, sizeof f, "%s_%s.npy", name, what);
    return load_ref(f);
}

/* A causal LM (name: gpt2, llama) loaded from sub: logits of two prompts within 1e-4 of
   transformers'; greedy generation gives transformers' 50 tokens. */
static void check_lm(const char *name, const char *sub) {
    nb_module *m = load_sub(sub);
    assert_true(nb_hf_is_causal_lm(m));
    nb_tensor *ids = load_model_ref(name, "ids");
    nb_tensor *logits = nb_forward(m, ids);
    assert_non_null(logits);
    double e = rel_err(logits, load_model_ref(name, "logits"));
    printf("%s (%s): logits relative error %.2e against transformers (floor 1e-4)\n", name, sub, e);
    assert_true(e <= 1e-4);
    nb_tensor *want = load_model_ref(name, "greedy");
    nb_tensor *got = nb_generate(m, nb_slice(ids, 0, 0, 1, 1), (nb_generate_opts){ .max_new_tokens = 50 });
    if (!got) fail_msg("nb_generate: %s", nb_error());
    assert_int_equal(nb_dim(got, 1), nb_dim(want, 1));
    int64_t same = same_tokens(got, want);
    printf("%s (%s): greedy generation: %lld of %lld tokens as transformers\n", name, sub, (long long)same,
           (long long)nb_numel(want));
    assert_int_equal(same, nb_numel(want));
    nb_module_free(m);
}

static void test_gpt2(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    check_lm("gpt2", "gpt2");
    check_lm("gpt2", "gpt2_sharded");
    nb_scope_end(s);
}

/* Prompts of different lengths in one batch (left padding): transformers' greedy tokens. */
static void check_ragged(const char *name) {
    nb_module *m = load_sub(name);
    nb_scope *s = nb_scope_begin();
    int64_t lens[2] = { 7, 4 };
    nb_tensor *got = nb_generate(m, load_model_ref(name, "ragged_ids"),
                                 (nb_generate_opts){ .max_new_tokens = 20, .prompt_lengths = lens });
    if (!got) fail_msg("nb_generate: %s", nb_error());
    nb_tensor *want = load_model_ref(name, "ragged");
    assert_int_equal(nb_numel(got), nb_numel(want));
    int64_t same = same_tokens(got, want);
    printf("%s: prompts of 7 and 4 tokens in one batch: %lld of %lld tokens as transformers\n", name, (long long)same,
           (long long)nb_numel(want));
    assert_int_equal(same, nb_numel(want));
    int64_t bad[2] = { 7, 0 };
    assert_null(nb_generate(m, load_model_ref(name, "ragged_ids"), (nb_generate_opts){ .max_new_tokens = 1, .prompt_lengths = bad }));
    ASSERT_ERROR_CONTAINS("prompt_lengths[1] is 0");
    nb_scope_end(s);
    nb_module_free(m);
}

static void test_gpt2_ragged(void **state) {
    (void)state;
    check_ragged("gpt2");
}

/* Llama: grouped-query attention with an untied head, whole and sharded; another config with
   tied embeddings, attention biases, full kv heads, rope_theta and linear rope scaling; prompts
   of different lengths; Hugging Face's parameter names; gradients reach every parameter. */
static void test_llama(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    check_lm("llama", "llama");
    check_lm("llama", "llama_sharded");
    check_ragged("llama");
    nb_module *v = load_sub("llama_var");
    nb_tensor *ids = load_ref("llama_ids.npy");
    double e = rel_err(nb_forward(v, ids), load_ref("llama_var_logits.npy"));
    printf("llama (tied, biases, rope scaling): logits relative error %.2e against transformers (floor 1e-4)\n", e);
    assert_true(e <= 1e-4);
    assert_non_null(nb_module_get(v, "model.layers.1.self_attn.k_proj.bias"));
    assert_null(nb_module_get(v, "lm_head.weight")); /* tied: the embedding serves */
    nb_module_free(v);
    nb_module *m = load_sub("llama");
    assert_non_null(nb_module_get(m, "model.layers.1.mlp.gate_proj.weight"));
    assert_non_null(nb_module_get(m, "model.layers.0.post_attention_layernorm.weight"));
    assert_non_null(nb_module_get(m, "lm_head.weight"));
    assert_int_equal(nb_hf_eos_id(m), 0);
    int64_t eos[4];
    assert_int_equal(nb_hf_eos_ids(m, eos, 4), 1);
    assert_int_equal(eos[0], 0);
    /* one training step's gradients reach every parameter */
    nb_module_train(m, true);
    nb_tensor *logits = nb_forward(m, ids);
    nb_tensor *loss = nb_cross_entropy(nb_reshape(logits, NB_SHAPE(-1, nb_dim(logits, 2))), nb_reshape(ids, NB_SHAPE(-1)), (nb_ce_opts){ 0 });
    assert_int_equal(nb_backward(loss), 0);
    nb_named_tensor ps[64];
    int np = nb_module_named_parameters(m, ps, 64), with_grad = 0;
    assert_true(np > 0 && np <= 64);
    for (int i = 0; i < np; i++) {
        nb_tensor *g = nb_grad_of(ps[i].tensor);
        with_grad += g && max_of(nb_abs(g)) > 0;
    }
    printf("llama: a backward step gives %d of %d parameters a gradient\n", with_grad, np);
    assert_int_equal(with_grad, np);
    nb_module_free(m);
    nb_scope_end(s);
}

/* Mistral: Llama's layers, one kv head and a sliding window of 4 keys that the prompts and the
   generation pass: transformers' logits, greedy tokens and left-padded batch. */
static void test_mistral(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    check_lm("mistral", "mistral");
    check_ragged("mistral");
    nb_scope_end(s);
}

/* Sampling: one seed, one output; top_k 1 and a tiny top_p are greedy; stop tokens end rows. */
static void test_gpt2_sampling(void **state) {
    (void)state;
    nb_module *m = load_sub("gpt2");
    nb_scope *s = nb_scope_begin();
    nb_tensor *ids = load_ref("gpt2_ids.npy");
    nb_generate_opts o = { .max_new_tokens = 20, .temperature = 1.0, .seed = 5 };
    nb_tensor *a = nb_generate(m, ids, o), *b = nb_generate(m, ids, o);
    o.seed = 6;
    nb_tensor *c = nb_generate(m, ids, o);
    assert_non_null(a);
    assert_non_null(c);
    assert_true(nb_item(nb_sum_all(nb_cast(nb_eq(a, b), NB_I64))) == (double)nb_numel(a));
    assert_true(nb_item(nb_sum_all(nb_cast(nb_eq(a, c), NB_I64))) < (double)nb_numel(a));
    nb_tensor *greedy = nb_generate(m, ids, (nb_generate_opts){ .max_new_tokens = 20 });
    nb_tensor *k1 = nb_generate(m, ids, (nb_generate_opts){ .max_new_tokens = 20, .temperature = 0.7, .top_k = 1, .seed = 3 });
    nb_tensor *p0 = nb_generate(m, ids, (nb_generate_opts){ .max_new_tokens = 20, .temperature = 1.3, .top_p = 1e-9, .seed = 4 });
    assert_true(nb_item(nb_sum_all(nb_cast(nb_eq(greedy, k1), NB_I64))) == (double)nb_numel(greedy));
    assert_true(nb_item(nb_sum_all(nb_cast(nb_eq(greedy, p0), NB_I64))) == (double)nb_numel(greedy));
    /* a stop token: the greedy row's 5th new token ends it there */
    int64_t row[64];
    assert_int_equal(nb_copy_to(nb_slice(greedy, 0, 0, 1, 1), row, sizeof(int64_t) * (size_t)nb_dim(greedy, 1)), 0);
    int64_t stop = row[7 + 4];
    int first = 0;
    while (row[7 + first] != stop) first++;
    nb_tensor *st = nb_generate(m, nb_slice(ids, 0, 0, 1, 1),
                                (nb_generate_opts){ .max_new_tokens = 20, .stop = &stop, .nstop = 1 });
    assert_non_null(st);
    assert_int_equal(nb_dim(st, 1), 7 + first + 1);
    /* bad options and inputs */
    assert_null(nb_generate(m, ids, (nb_generate_opts){ .max_new_tokens = 100 }));
    ASSERT_ERROR_CONTAINS("pass the model's 80 positions");
    /* a count near INT64_MAX is refused, not added to the prompt's length (signed overflow) */
    assert_null(nb_generate(m, ids, (nb_generate_opts){ .max_new_tokens = INT64_MAX }));
    ASSERT_ERROR_CONTAINS("pass the model's 80 positions");
    assert_null(nb_generate(m, nb_cast(ids, NB_F32), (nb_generate_opts){ .max_new_tokens = 1 }));
    ASSERT_ERROR_CONTAINS("ids must be i64");
    assert_null(nb_generate(m, ids, (nb_generate_opts){ .max_new_tokens = 1, .top_p = 2 }));
    ASSERT_ERROR_CONTAINS("bad options");
    /* NaN passes every comparison that a range test makes with < and > */
    assert_null(nb_generate(m, ids, (nb_generate_opts){ .max_new_tokens = 1, .temperature = NAN }));
    ASSERT_ERROR_CONTAINS("temperature nan");
    assert_null(nb_generate(m, ids, (nb_generate_opts){ .max_new_tokens = 1, .temperature = INFINITY }));
    ASSERT_ERROR_CONTAINS("temperature inf");
    assert_null(nb_generate(m, ids, (nb_generate_opts){ .max_new_tokens = 1, .temperature = 1, .top_p = NAN }));
    ASSERT_ERROR_CONTAINS("top_p nan");
    assert_null(nb_generate(m, ids, (nb_generate_opts){ .max_new_tokens = 1, .stop = &stop, .nstop = -1 }));
    ASSERT_ERROR_CONTAINS("nstop -1");
    nb_scope_end(s);
    nb_module_free(m);
}

/* The distribution nb_generate samples, computed here on its own from the model's logits l of
   the prompt's last position: softmax(l / temperature), cut to the top_k most likely tokens (ties
   to the lower id), then to the smallest prefix of those whose share of their mass reaches top_p,
   renormalised. */
static void expected_distribution(const float *l, int V, double temperature, int top_k, double top_p, double *p) {
    int order[512];
    double w[512], mx = -INFINITY, kept = 0;
    for (int j = 0; j < V; j++) mx = l[j] > mx ? l[j] : mx;
    for (int j = 0; j < V; j++) {
        w[j] = exp(((double)l[j] - mx) / temperature);
        order[j] = j;
    }
    for (int i = 1; i < V; i++) /* by weight, descending; insertion keeps equal weights in id order */
        for (int k = i; k > 0 && w[order[k]] > w[order[k - 1]]; k--) {
            int t = order[k];
            order[k] = order[k - 1];
            order[k - 1] = t;
        }
    int keep = top_k > 0 && top_k < V ? top_k : V;
    for (int i = 0; i < keep; i++) kept += w[order[i]];
    if (top_p > 0 && top_p < 1) {
        double cum = 0;
        for (int i = 0; i < keep; i++) {
            cum += w[order[i]];
            if (cum >= top_p * kept) {
                keep = i + 1;
                kept = cum;
                break;
            }
        }
    }
    for (int j = 0; j < V; j++) p[j] = 0;
    for (int i = 0; i < keep; i++) p[order[i]] = w[order[i]] / kept;
}

/* Sampling draws from that distribution: 20000 draws (rows of one prompt, one new token each)
   per setting, held to a total-variation distance of 2.5 times its expected noise
   (sum_j sqrt(p_j (1 - p_j) / N) / 2 bounds the mean). Putting the cut-off tail's mass on the last
   kept token, say, is a distance of the tail's share (0.3 to 0.9 here). */
static void test_gpt2_sampling_distribution(void **state) {
    (void)state;
    nb_module *m = load_sub("gpt2");
    nb_scope *s = nb_scope_begin();
    nb_tensor *one = nb_slice(load_ref("gpt2_ids.npy"), 0, 0, 1, 1);
    const int64_t T = nb_dim(one, 1), R = 4000;
    nb_tensor *logits = nb_forward(m, one);
    assert_non_null(logits);
    const int V = (int)nb_dim(logits, 2);
    assert_true(V <= 512);
    float l[512];
    assert_int_equal(nb_copy_to(nb_contiguous(nb_cast(nb_slice(logits, 1, T - 1, T, 1), NB_F32)), l, sizeof(float) * (size_t)V), 0);
    nb_tensor *rows = nb_contiguous(nb_expand(one, NB_SHAPE(R, T)));
    static const struct { double temperature; int top_k; double top_p; } settings[] = {
        { 0.05, 0, 0 },   /* temperature alone: a few tokens hold most of the mass */
        { 0.1, 8, 0 },    /* top-k */
        { 0.1, 0, 0.6 },  /* top-p */
        { 0.2, 30, 0.5 }, /* both */
    };
    for (size_t c = 0; c < sizeof settings / sizeof settings[0]; c++) {
        double p[512], f[512] = { 0 };
        expected_distribution(l, V, settings[c].temperature, settings[c].top_k, settings[c].top_p, p);
        int64_t n = 0, tok[4000];
        for (int rep = 0; rep < 5; rep++) {
            nb_scope *rs = nb_scope_begin();
            nb_tensor *g = nb_generate(m, rows, (nb_generate_opts){ .max_new_tokens = 1, .temperature = settings[c].temperature,
                                                                    .top_k = settings[c].top_k, .top_p = settings[c].top_p,
                                                                    .seed = 100 * c + (uint64_t)rep });
            if (!g) fail_msg("nb_generate: %s", nb_error());
            assert_int_equal(nb_copy_to(nb_contiguous(nb_slice(g, 1, T, T + 1, 1)), tok, sizeof tok), 0);
            for (int64_t i = 0; i < R; i++) {
                assert_true(tok[i] >= 0 && tok[i] < V);
                f[tok[i]] += 1;
            }
            n += R;
            nb_scope_end(rs);
        }
        double tv = 0, noise = 0, tail = 0;
        for (int j = 0; j < V; j++) {
            f[j] /= (double)n;
            tv += fabs(f[j] - p[j]) / 2;
            noise += sqrt(p[j] * (1 - p[j]) / (double)n) / 2;
            if (p[j] == 0 && (settings[c].top_k || settings[c].top_p)) tail += 1;
        }
        printf("sampling T %g, top_k %d, top_p %g: total variation %.4f from the exact distribution over %lld draws "
               "(bound %.4f; %d of %d tokens cut off)\n", settings[c].temperature, settings[c].top_k, settings[c].top_p, tv,
               (long long)n, 2.5 * noise, (int)tail, V);
        if (tv > 2.5 * noise) fail_msg("the sampled distribution is %.4f from the exact one (bound %.4f)", tv, 2.5 * noise);
        /* no draw outside the kept tokens */
        for (int j = 0; j < V; j++)
            if (p[j] == 0 && f[j] > 0) fail_msg("token %d was drawn %.0f times, but the cut leaves it out", j, f[j] * (double)n);
    }
    nb_scope_end(s);
    nb_module_free(m);
}

/* ---- broken checkpoints, made from copies of the tiny one ---- */

static void copy_dir(const char *from, const char *to) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    assert_int_equal(system(cmd), 0);
}

/* Replaces text a with b in dir's config.json. */
static void edit_config(const char *dir, const char *a, const char *b) {
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", dir);
    char *c = read_whole_file(p);
    assert_non_null(c);
    char *at = strstr(c, a);
    assert_non_null(at);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fprintf(f, "%.*s%s%s", (int)(at - c), c, b, at + strlen(a));
    fclose(f);
    free(c);
}

static void expect_load_error(const char *dir, const char *text) {
    nb_module *m = nb_hf_load(dir, (nb_hf_opts){ 0 });
    if (m) fail_msg("nb_hf_load %s succeeded; expected an error containing \"%s\"", dir, text);
    ASSERT_ERROR_CONTAINS(text);
}

static void test_broken_checkpoints(void **state) {
    (void)state;
    char src[512], d[600], p[700];
    snprintf(src, sizeof src, "%s/tiny_sharded", ref);
    snprintf(d, sizeof d, "%s/missing_shard", tmp);
    copy_dir(src, d);
    snprintf(p, sizeof p, "%s/model-00003-of-00005.safetensors", d);
    assert_int_equal(unlink(p), 0);
    expect_load_error(d, "lists shard model-00003-of-00005.safetensors, which is not in");

    snprintf(src, sizeof src, "%s/tiny", ref);
    snprintf(d, sizeof d, "%s/truncated", tmp);
    copy_dir(src, d);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    assert_int_equal(truncate(p, 5000), 0);
    expect_load_error(d, "truncated/model.safetensors");

    snprintf(d, sizeof d, "%s/model_type", tmp);
    copy_dir(src, d);
    edit_config(d, "\"bert\"", "\"gpt_neo\"");
    expect_load_error(d, "\"model_type\" \"gpt_neo\" is not supported");

    snprintf(d, sizeof d, "%s/activation", tmp);
    copy_dir(src, d);
    edit_config(d, "\"gelu\"", "\"swish\"");
    expect_load_error(d, "\"hidden_act\" \"swish\" is not supported");

    snprintf(d, sizeof d, "%s/shape", tmp);
    copy_dir(src, d);
    edit_config(d, "\"intermediate_size\": 37", "\"intermediate_size\": 38");
    expect_load_error(d, "\"encoder.layer.0.intermediate.dense.weight\" in");

    snprintf(d, sizeof d, "%s/no_weights", tmp);
    copy_dir(src, d);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    assert_int_equal(unlink(p), 0);
    expect_load_error(d, "has neither model.safetensors nor model.safetensors.index.json");

    /* a key no layer reads: the tiny checkpoint plus one tensor */
    snprintf(d, sizeof d, "%s/extra_key", tmp);
    copy_dir(src, d);
    snprintf(p, sizeof p, "%s/tiny/model.safetensors", ref);
    nb_safetensors *f = nb_safetensors_open(p);
    assert_non_null(f);
    int n = nb_safetensors_count(f);
    nb_named_tensor *ts = calloc((size_t)n + 1, sizeof *ts);
    nb_scope *s = nb_scope_begin();
    for (int i = 0; i < n; i++) ts[i] = (nb_named_tensor){ nb_safetensors_name(f, i), nb_safetensors_get(f, nb_safetensors_name(f, i)) };
    ts[n] = (nb_named_tensor){ "classifier.weight", nb_zeros(NB_SHAPE(2, 32), NB_F32) };
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    assert_int_equal(nb_save_safetensors(p, ts, n + 1, NULL), 0);
    nb_scope_end(s);
    free(ts);
    nb_safetensors_close(f);
    expect_load_error(d, "1 key the architecture does not use: \"classifier.weight\"");

    expect_load_error("/nonexistent-checkpoint", "/nonexistent-checkpoint/config.json");

    /* Llama's config fields nabla does not implement */
    snprintf(src, sizeof src, "%s/llama", ref);
    static const char *const edits[][3] = {
        { "\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", "\"hidden_act\" \"gelu\" is not supported" },
        { "\"rope_scaling\": null", "\"rope_scaling\": null, \"sliding_window\": 4", "is not a Llama field" },
        { "\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2.0}",
          "\"rope_scaling\" of type \"dynamic\" is not supported" },
        { "\"rope_scaling\": null", "\"rope_scaling\": null, \"mlp_bias\": true", "\"mlp_bias\": true is not supported" },
        { "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", "do not fit" },
        { "\"rope_scaling\": null", "\"rope_scaling\": null, \"head_dim\": 16", "\"head_dim\" other than" },
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        snprintf(d, sizeof d, "%s/llama_edit%zu", tmp, i);
        copy_dir(src, d);
        edit_config(d, edits[i][0], edits[i][1]);
        expect_load_error(d, edits[i][2]);
    }
    /* every float field of every kind is finite and in its range, named when it is not (GPT-2
       loaded with layer_norm_epsilon -1 and generated from NaN logits) */
    static const char *const floats[][4] = {
        { "tiny", "\"layer_norm_eps\": 1e-12", "\"layer_norm_eps\": -1", "\"layer_norm_eps\" is -1; it must be a finite number above 0" },
        { "gpt2", "\"layer_norm_epsilon\": 1e-05", "\"layer_norm_epsilon\": -1", "\"layer_norm_epsilon\" is -1; it must be a finite number above 0" },
        { "gpt2", "\"layer_norm_epsilon\": 1e-05", "\"layer_norm_epsilon\": 0", "\"layer_norm_epsilon\" is 0;" },
        { "gpt2", "\"attn_pdrop\": 0.1", "\"attn_pdrop\": 1.5", "\"attn_pdrop\" is 1.5; it must be in [0, 1)" },
        { "gpt2", "\"resid_pdrop\": 0.1", "\"resid_pdrop\": -0.5", "\"resid_pdrop\" is -0.5;" },
        { "llama", "\"rms_norm_eps\": 1e-06", "\"rms_norm_eps\": -1", "\"rms_norm_eps\" is -1; it must be a finite number above 0" },
        { "llama", "\"rope_theta\": 10000.0", "\"rope_theta\": 0.5", "\"rope_theta\" is 0.5; it must be a finite number above 1" },
        { "mistral", "\"attention_dropout\": 0.0", "\"attention_dropout\": 1", "\"attention_dropout\" is 1; it must be in [0, 1)" },
        { "mistral", "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": -2e-05", "\"rms_norm_eps\" is -2e-05;" },
    };
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        snprintf(src, sizeof src, "%s/%s", ref, floats[i][0]);
        snprintf(d, sizeof d, "%s/float_edit%zu", tmp, i);
        copy_dir(src, d);
        edit_config(d, floats[i][1], floats[i][2]);
        expect_load_error(d, floats[i][3]);
    }
    snprintf(src, sizeof src, "%s/llama", ref);
    /* a list of end tokens (Llama 3's): all of them, less those outside the vocabulary */
    snprintf(d, sizeof d, "%s/llama_eos", tmp);
    copy_dir(src, d);
    edit_config(d, "\"eos_token_id\": 0", "\"eos_token_id\": [7, 0, 99999]");
    nb_module *m = nb_hf_load(d, (nb_hf_opts){ 0 });
    assert_non_null(m);
    int64_t eos[8];
    assert_int_equal(nb_hf_eos_ids(m, eos, 8), 2);
    assert_true(eos[0] == 7 && eos[1] == 0 && nb_hf_eos_id(m) == 7);
    nb_module_free(m);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR (tests/hf_ref.py writes it)\n", argv[0]);
        return 2;
    }
    ref = argv[1];
    snprintf(tmp, sizeof tmp, "/tmp/nabla-hf-test-%d", (int)getpid());
    if (mkdir(tmp, 0700) != 0) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_tiny_bert, setup),
        cmocka_unit_test_setup(test_minilm_embeddings, setup),
        cmocka_unit_test_setup(test_gpt2, setup),
        cmocka_unit_test_setup(test_gpt2_ragged, setup),
        cmocka_unit_test_setup(test_gpt2_sampling, setup),
        cmocka_unit_test_setup(test_gpt2_sampling_distribution, setup),
        cmocka_unit_test_setup(test_llama, setup),
        cmocka_unit_test_setup(test_mistral, setup),
        cmocka_unit_test_setup(test_broken_checkpoints, setup),
    };
    int rc = RUN_TESTS(tests);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0) return 1;
    return rc;
}
