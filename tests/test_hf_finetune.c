/* Fine-tuning Hugging Face causal LMs (src/hf/finetune.c, GPT-2's dropouts in src/hf/gpt2.c)
   against tests/hf_ref.py's references in DIR: GPT-2 in train mode applies its dropouts (two
   forwards differ) while eval mode stays transformers' logits, bit for bit the same before and
   after; the causal LM loss is transformers'; a text cuts into blocks as run_clm.py's
   group_texts; nb_hf_save writes a trained model with the keys, order, dtypes and shards of its
   input folder (a tied lm_head.weight as the trained embedding, a constant buffer as it was),
   loads back to the same logits, never changes the input files the parameters are
   copy-on-write views of, and refuses to write into the input folder.
   Usage: test_hf_finetune DIR
          test_hf_finetune --logits MODEL_DIR IDS.npy WANT.npy   (tests/hf_finetune_test.sh: the
          logits nabla computes for a saved folder within 1e-5 of WANT, transformers' for it) */
#include "test_util.h"
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *ref;
static char tmp[128];

static nb_tensor *load_ref(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", ref, name);
    nb_tensor *t = nb_load_npy(p);
    if (!t) fail_msg("cannot read %s: %s", p, nb_error());
    return t;
}

static nb_module *load_dir(const char *dir) {
    nb_module *m = nb_hf_load(dir, (nb_hf_opts){ 0 });
    if (!m) fail_msg("nb_hf_load %s: %s", dir, nb_error());
    return m;
}

static nb_module *load_sub(const char *sub) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", ref, sub);
    return load_dir(dir);
}

/* max |a - b| */
static double max_diff(nb_tensor *a, nb_tensor *b) {
    nb_scope *s = nb_scope_begin();
    double d = nb_item(nb_max(nb_reshape(nb_abs(nb_sub(a, b)), NB_SHAPE(-1)), 0, false));
    nb_scope_end(s);
    return d;
}

/* max |a - b| / max |b| */
static double rel_err(nb_tensor *a, nb_tensor *b) {
    nb_scope *s = nb_scope_begin();
    double m = nb_item(nb_max(nb_reshape(nb_abs(b), NB_SHAPE(-1)), 0, false));
    nb_scope_end(s);
    return max_diff(a, b) / (m > 0 ? m : 1);
}

/* FNV-1a of a file's bytes (0 when it cannot be read). */
static uint64_t checksum(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    uint64_t h = 1469598103934665603ull;
    int c;
    while ((c = fgetc(f)) != EOF) h = (h ^ (uint64_t)c) * 1099511628211ull;
    fclose(f);
    return h;
}

/* Train mode applies GPT-2's dropouts (config 0.1 each): two forwards differ from each other
   and from eval; eval gives transformers' logits, bit for bit the same after a round of train
   mode; with every dropout 0 (gpt2_ft) train mode is the eval forward exactly. */
static void test_dropout(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_module *m = load_sub("gpt2");
    nb_tensor *ids = load_ref("gpt2_ids.npy");
    nb_tensor *eval1 = nb_forward(m, ids);
    assert_non_null(eval1);
    double e = rel_err(eval1, load_ref("gpt2_logits.npy"));
    printf("GPT-2 eval mode: logits relative error %.2e against transformers (floor 1e-4)\n", e);
    assert_true(e <= 1e-4);
    nb_module_train(m, true);
    nb_manual_seed(7);
    nb_tensor *t1 = nb_forward(m, ids), *t2 = nb_forward(m, ids);
    assert_non_null(t1);
    assert_non_null(t2);
    double d12 = max_diff(t1, t2), d1e = max_diff(t1, eval1);
    printf("GPT-2 train mode: two forwards differ by up to %.3g, and from eval by up to %.3g\n", d12, d1e);
    assert_true(d12 > 1e-3);
    assert_true(d1e > 1e-3);
    nb_module_train(m, false);
    assert_true(max_diff(nb_forward(m, ids), eval1) == 0.0);
    nb_module_free(m);

    m = load_sub("gpt2_ft");
    nb_tensor *ev = nb_forward(m, ids);
    nb_module_train(m, true);
    assert_true(max_diff(nb_forward(m, ids), ev) == 0.0);
    nb_module_free(m);
    nb_scope_end(s);
}

/* The causal LM loss: transformers' GPT2LMHeadModel(ids, labels=ids).loss; wrong shapes are errors. */
static void test_lm_loss(void **state) {
    (void)state;
    nb_scope *s = nb_scope_begin();
    nb_module *m = load_sub("gpt2");
    nb_tensor *ids = load_ref("gpt2_ids.npy");
    nb_tensor *loss = nb_hf_causal_lm_loss(nb_forward(m, ids), ids);
    assert_non_null(loss);
    double want = nb_item(load_ref("gpt2_lm_loss.npy")), got = nb_item(loss);
    printf("causal LM loss %.7f, transformers' %.7f\n", got, want);
    assert_true(fabs(got - want) <= 1e-5 * fabs(want));
    nb_tensor *one = nb_slice(ids, 1, 0, 1, 1);
    assert_null(nb_hf_causal_lm_loss(nb_forward(m, one), one));
    ASSERT_ERROR_CONTAINS("T >= 2");
    assert_null(nb_hf_causal_lm_loss(nb_forward(m, ids), nb_slice(ids, 0, 0, 1, 1)));
    ASSERT_ERROR_CONTAINS("nb_hf_causal_lm_loss: needs logits [B, T, vocab]");
    nb_module_free(m);
    nb_scope_end(s);
}

/* A text to blocks: the ids of the whole text, consecutive, the remainder dropped. */
static void test_text_blocks(void **state) {
    (void)state;
    char dir[512], path[512];
    snprintf(dir, sizeof dir, "%s/gpt2", ref);
    snprintf(path, sizeof path, "%s/ft_text.txt", ref);
    nb_tokenizer *tok = nb_tokenizer_load(dir);
    char *text = read_whole_file(path);
    assert_non_null(tok);
    assert_non_null(text);
    nb_scope *s = nb_scope_begin();
    size_t len = strlen(text);
    int64_t n = nb_tokenize_ex(tok, text, len, NULL, 0, (nb_tokenize_opts){ .no_special_tokens = true });
    int64_t *ids = malloc(sizeof *ids * (size_t)n);
    assert_int_equal(nb_tokenize_ex(tok, text, len, ids, n, (nb_tokenize_opts){ .no_special_tokens = true }), n);
    nb_tensor *b = nb_hf_text_blocks(tok, text, len, 16);
    assert_non_null(b);
    assert_int_equal(nb_dim(b, 0), n / 16);
    assert_int_equal(nb_dim(b, 1), 16);
    const int64_t *p = nb_data_ptr(b);
    for (int64_t i = 0; i < n / 16 * 16; i++) assert_int_equal(p[i], ids[i]);
    assert_null(nb_hf_text_blocks(tok, "The licence", 11, 16));
    ASSERT_ERROR_CONTAINS("fewer than one block of 16");
    free(ids);
    free(text);
    nb_tokenizer_free(tok);
    nb_scope_end(s);
}

/* Two AdamW steps of the causal LM loss on the reference prompts (the parameters' pages are
   written: copy-on-write views of the checkpoint). */
static void train_a_little(nb_module *m) {
    nb_scope *s = nb_scope_begin();
    nb_tensor *ids = load_ref("gpt2_ids.npy");
    nb_optimizer *opt = nb_optim_adamw(m, (nb_adamw_opts){ .lr = 1e-2 });
    assert_non_null(opt);
    nb_module_train(m, true);
    for (int i = 0; i < 2; i++) {
        nb_optim_zero_grad(opt);
        assert_int_equal(nb_backward(nb_hf_causal_lm_loss(nb_forward(m, ids), ids)), 0);
        assert_int_equal(nb_optim_step(opt), 0);
    }
    nb_module_train(m, false);
    nb_optim_free(opt);
    nb_scope_end(s);
}

/* Each file's keys, in order, with dtypes and shapes, are the same in a and b. */
static void same_layout(const char *a, const char *b) {
    nb_safetensors *fa = nb_safetensors_open(a), *fb = nb_safetensors_open(b);
    if (!fa || !fb) fail_msg("cannot open %s or %s: %s", a, b, nb_error());
    assert_int_equal(nb_safetensors_count(fa), nb_safetensors_count(fb));
    for (int i = 0; i < nb_safetensors_count(fa); i++) {
        assert_string_equal(nb_safetensors_name(fa, i), nb_safetensors_name(fb, i));
        assert_string_equal(nb_safetensors_dtype_name(fa, i), nb_safetensors_dtype_name(fb, i));
        assert_int_equal(nb_safetensors_nbytes(fa, i), nb_safetensors_nbytes(fb, i));
    }
    const nb_metadata *ma = nb_safetensors_metadata(fa), *mb = nb_safetensors_metadata(fb);
    assert_int_equal(nb_metadata_count(ma), nb_metadata_count(mb));
    nb_safetensors_close(fa);
    nb_safetensors_close(fb);
}

/* nb_hf_save on sub: trained, saved, the layout kept, the input untouched, loaded back alike. */
static void check_save(const char *sub, const char *const *files, int nfiles) {
    char src[512], out[512], a[700], b[700];
    snprintf(src, sizeof src, "%s/%s", ref, sub);
    snprintf(out, sizeof out, "%s/%s", tmp, sub);
    uint64_t before[16];
    for (int i = 0; i < nfiles; i++) {
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        before[i] = checksum(a);
        assert_true(before[i] != 0);
    }
    nb_scope *s = nb_scope_begin();
    nb_module *m = load_dir(src);
    nb_tensor *ids = load_ref("gpt2_ids.npy");
    nb_tensor *untrained = nb_forward(m, ids);
    train_a_little(m);
    nb_tensor *trained = nb_forward(m, ids);
    assert_true(max_diff(trained, untrained) > 1e-3);
    if (nb_hf_save(m, src, out) < 0) fail_msg("nb_hf_save %s: %s", sub, nb_error());
    for (int i = 0; i < nfiles; i++) {
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        snprintf(b, sizeof b, "%s/%s", out, files[i]);
        assert_true(checksum(a) == before[i]); /* the training wrote into private copies of the pages only */
        if (strstr(files[i], ".safetensors") && !strstr(files[i], ".json")) same_layout(a, b);
        else assert_true(checksum(b) == before[i]);
    }
    nb_module *back = load_dir(out);
    double d = max_diff(nb_forward(back, ids), trained);
    printf("nb_hf_save (%s): %d files, reloaded logits differ by %.3g\n", sub, nfiles, d);
    assert_true(d == 0.0);
    /* never into the folder it came from, by any spelling of its path */
    char again[600];
    snprintf(again, sizeof again, "%s/.", src);
    assert_int_equal(nb_hf_save(m, src, again), -1);
    ASSERT_ERROR_CONTAINS("is the folder the model was loaded from");
    for (int i = 0; i < nfiles; i++) {
        snprintf(a, sizeof a, "%s/%s", src, files[i]);
        assert_true(checksum(a) == before[i]);
    }
    nb_module_free(back);
    nb_module_free(m);
    nb_scope_end(s);
}

static void test_save(void **state) {
    (void)state;
    static const char *const whole[] = { "model.safetensors", "config.json", "tokenizer.json" };
    check_save("gpt2", whole, 3);
    char index[512];
    snprintf(index, sizeof index, "%s/gpt2_sharded/model.safetensors.index.json", ref);
    char *text = read_whole_file(index);
    assert_non_null(text);
    /* the shards the index names, each once */
    const char *shards[16] = { "model.safetensors.index.json", "config.json" };
    char names[14][64];
    int n = 2;
    for (const char *p = text; (p = strstr(p, "\"model-")) && n < 16; p++) {
        char name[64];
        if (sscanf(p + 1, "%63[^\"]", name) != 1) break;
        bool seen = false;
        for (int i = 2; i < n; i++) seen = seen || !strcmp(shards[i], name);
        if (!seen) {
            snprintf(names[n - 2], sizeof names[0], "%s", name);
            shards[n] = names[n - 2];
            n++;
        }
    }
    free(text);
    assert_true(n >= 4);
    check_save("gpt2_sharded", shards, n);
}

/* A checkpoint that also stores lm_head.weight (tied: the token embedding's bytes) and a constant
   buffer (older GPT-2 files' attn.bias), in f32 or bf16: the saved lm_head.weight is the trained
   embedding, the buffer is as it was, every tensor in the dtype it came in. */
static void check_tied(const char *name, nb_dtype dt) {
    char src[512], dir[512], path[700], cfg[700];
    snprintf(src, sizeof src, "%s/gpt2/model.safetensors", ref);
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    assert_int_equal(mkdir(dir, 0700), 0);
    nb_scope *s = nb_scope_begin();
    nb_safetensors *f = nb_safetensors_open(src);
    assert_non_null(f);
    int n = nb_safetensors_count(f);
    nb_named_tensor *ts = calloc((size_t)n + 2, sizeof *ts);
    for (int i = 0; i < n; i++)
        ts[i] = (nb_named_tensor){ nb_safetensors_name(f, i), nb_cast(nb_safetensors_get(f, nb_safetensors_name(f, i)), dt) };
    ts[n] = (nb_named_tensor){ "lm_head.weight", nb_cast(nb_safetensors_get(f, "transformer.wte.weight"), dt) };
    nb_tensor *mask = nb_tril(nb_ones(NB_SHAPE(1, 1, 80, 80), dt), 0);
    ts[n + 1] = (nb_named_tensor){ "transformer.h.0.attn.bias", mask };
    nb_metadata *md = nb_metadata_new();
    nb_metadata_set(md, "format", "pt");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(nb_save_safetensors(path, ts, n + 2, md), 0);
    nb_metadata_free(md);
    free(ts);
    nb_safetensors_close(f);
    snprintf(cfg, sizeof cfg, "cp %s/gpt2/config.json %s/gpt2/tokenizer.json %s/", ref, ref, dir);
    assert_int_equal(system(cfg), 0);

    nb_module *m = load_dir(dir);
    train_a_little(m);
    char out[600];
    snprintf(out, sizeof out, "%s/%s_out", tmp, name);
    if (nb_hf_save(m, dir, out) < 0) fail_msg("nb_hf_save: %s", nb_error());
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    nb_safetensors *o = nb_safetensors_open(path);
    assert_non_null(o);
    assert_int_equal(nb_safetensors_count(o), n + 2);
    nb_tensor *wte = nb_safetensors_get(o, "transformer.wte.weight"), *head = nb_safetensors_get(o, "lm_head.weight");
    nb_named_tensor p[64];
    int np = nb_module_named_parameters(m, p, 64);
    nb_tensor *trained = NULL;
    for (int i = 0; i < np; i++)
        if (!strcmp(p[i].name, "transformer.wte.weight")) trained = p[i].tensor;
    assert_non_null(trained);
    for (int i = 0; i < nb_safetensors_count(o); i++)
        assert_string_equal(nb_safetensors_dtype_name(o, i), nb_safetensors_dtype_str(dt));
    nb_tensor *want = nb_cast(trained, dt);
    assert_true(max_diff(nb_cast(head, NB_F32), nb_cast(want, NB_F32)) == 0.0);
    assert_true(max_diff(nb_cast(wte, NB_F32), nb_cast(want, NB_F32)) == 0.0);
    assert_true(max_diff(nb_cast(nb_safetensors_get(o, "transformer.h.0.attn.bias"), NB_F32), nb_cast(mask, NB_F32)) == 0.0);
    nb_safetensors_close(o);
    nb_module_free(m);
    nb_scope_end(s);
}

static void test_save_tied_and_buffers(void **state) {
    (void)state;
    check_tied("tied", NB_F32);
    check_tied("tied_bf16", NB_BF16);
}

/* --logits MODEL_DIR IDS WANT: nabla's logits for a folder against transformers' (1e-5). */
static int logits_main(const char *dir, const char *ids_path, const char *want_path) {
    nb_module *m = nb_hf_load(dir, (nb_hf_opts){ 0 });
    nb_scope *s = nb_scope_begin();
    nb_tensor *ids = nb_load_npy(ids_path), *want = nb_load_npy(want_path);
    nb_tensor *got = m && ids ? nb_forward(m, ids) : NULL;
    int rc = 1;
    if (!got || !want) fprintf(stderr, "test_hf_finetune --logits: %s\n", nb_error());
    else {
        double d = max_diff(got, want);
        printf("nabla's logits for %s: largest difference from transformers' %.2e (floor 1e-5)\n", dir, d);
        rc = d <= 1e-5 ? 0 : 1;
    }
    nb_scope_end(s);
    nb_module_free(m);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--logits")) return logits_main(argv[2], argv[3], argv[4]);
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR (tests/hf_ref.py writes it) | --logits MODEL_DIR IDS.npy WANT.npy\n", argv[0]);
        return 2;
    }
    ref = argv[1];
    snprintf(tmp, sizeof tmp, "/tmp/nabla-hf-ft-test-%d", (int)getpid());
    if (mkdir(tmp, 0700) != 0) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_dropout, clear_error_setup),
        cmocka_unit_test_setup(test_lm_loss, clear_error_setup),
        cmocka_unit_test_setup(test_text_blocks, clear_error_setup),
        cmocka_unit_test_setup(test_save, clear_error_setup),
        cmocka_unit_test_setup(test_save_tied_and_buffers, clear_error_setup),
    };
    int rc = RUN_TESTS(tests);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0) return 1;
    return rc;
}
