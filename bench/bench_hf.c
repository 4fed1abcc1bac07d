/* nabla on Hugging Face checkpoints (bench/run_hf.sh sets it beside transformers): one
   measurement a process, so peak memory is the measurement's own.
     load DIR             seconds of nb_hf_load (median of 5)
     generate DIR N T     greedy tokens/s at batch 1: a prompt of T tokens, N new ones (median of
                          3 after a warm-up), the peak resident set of the process, and the bytes
                          of weights a decoding step reads
     embed DIR FILE       sentence embeddings/s at batch 32 over the lines of FILE (median of 3)
   Usage: bench_hf load|generate|embed ... */
#include "bench_util.h"

#define PROG "bench_hf"

static int cmd_load(const char *dir) {
    double t[5];
    for (int i = 0; i < 5; i++) {
        double t0 = now_s();
        nb_module *m = nb_hf_load(dir, (nb_hf_opts){ 0 });
        t[i] = now_s() - t0;
        bench_check(PROG, "load");
        nb_module_free(m);
    }
    printf("load_s %.6f\n", median(t, 5));
    return 0;
}

static int cmd_generate(const char *dir, int64_t n, int64_t t0) {
    nb_module *m = nb_hf_load(dir, (nb_hf_opts){ 0 });
    bench_check(PROG, "load");
    nb_scope *s = nb_scope_begin();
    nb_manual_seed(3);
    nb_tensor *ids = nb_cast(nb_floor(nb_mul_scalar(nb_rand(NB_SHAPE(1, t0), NB_F32), 1000)), NB_I64);
    double t[4];
    for (int r = 0; r < 4; r++) {
        double a = now_s();
        nb_tensor *y = nb_generate(m, ids, (nb_generate_opts){ .max_new_tokens = n });
        t[r] = now_s() - a;
        bench_check(PROG, "generate");
        nb_release(nb_keep(y));
    }
    printf("generate_tok_s %.3f\n", (double)n / median(t + 1, 3));
    /* the weights a decoding step reads: all but the tables it only gathers a row of (learned
       positions, and a Llama's input embedding when its head is a separate matrix) */
    nb_named_tensor ps[1024];
    int np = nb_module_named_parameters(m, ps, 1024);
    bool head = nb_module_get(m, "lm_head.weight") != NULL;
    double bytes = 0;
    for (int i = 0; i < np && np <= 1024; i++) {
        const char *nm = ps[i].name;
        if (strstr(nm, "wpe.weight") || (head && strstr(nm, "embed_tokens.weight"))) continue;
        bytes += (double)nb_numel(ps[i].tensor) * nb_dtype_size(nb_dtype_of(ps[i].tensor));
    }
    printf("read_bytes_per_token %.0f\n", bytes);
    printf("peak_rss_mib %.1f\n", vm_hwm_kib() / 1024.0);
    printf("params %lld\n", (long long)nb_module_num_params(m));
    nb_scope_end(s);
    nb_module_free(m);
    return 0;
}

static int cmd_embed(const char *dir, const char *file) {
    char *text = NULL;
    FILE *f = fopen(file, "rb");
    if (!f) { fprintf(stderr, PROG ": cannot open %s\n", file); return 1; }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    text = malloc((size_t)len + 1);
    if (!text || fread(text, 1, (size_t)len, f) != (size_t)len) { fprintf(stderr, PROG ": cannot read %s\n", file); return 1; }
    fclose(f);
    text[len] = 0;
    const char *lines[4096];
    int n = 0;
    for (char *p = text, *nl; *p && n < 4096; p = nl + 1) {
        if (!(nl = strchr(p, '\n'))) break;
        *nl = 0;
        lines[n++] = p;
    }
    nb_module *m = nb_hf_load(dir, (nb_hf_opts){ 0 });
    bench_check(PROG, "load");
    nb_tokenizer *tok = nb_tokenizer_load(dir);
    bench_check(PROG, "tokenizer");
    double t[4];
    for (int r = 0; r < 4; r++) {
        double a = now_s();
        nb_scope *s = nb_scope_begin(); /* as encode(lines, batch_size=32): sorted by length, batches of 32 */
        nb_hf_embed(m, tok, lines, n, (nb_hf_embed_opts){ .model_dir = dir, .batch_size = 32 });
        bench_check(PROG, "embed");
        nb_scope_end(s);
        t[r] = now_s() - a;
    }
    printf("embed_per_s %.2f\n", n / median(t + 1, 3));
    printf("texts %d\n", n);
    nb_tokenizer_free(tok);
    nb_module_free(m);
    free(text);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "load")) return cmd_load(argv[2]);
    if (argc == 5 && !strcmp(argv[1], "generate")) return cmd_generate(argv[2], atoll(argv[3]), atoll(argv[4]));
    if (argc == 4 && !strcmp(argv[1], "embed")) return cmd_embed(argv[2], argv[3]);
    if (argc == 2 && !strcmp(argv[1], "--threads")) return printf("%d\n", nb_get_num_threads()) < 0;
    fprintf(stderr, "usage: %s load DIR | generate DIR NEW PROMPT | embed DIR FILE | --threads\n", argv[0]);
    return 2;
}
