/* The nabla command's pretrained-model subcommands: `nabla generate DIR --prompt TEXT` (a causal
   LM continues the prompt, streaming the text as it comes) and `nabla embed DIR --text TEXT |
   --file FILE [-o OUT.npy]` (sentence embeddings, one normalised row a text). */
#include "cli_hf.h"
#include "cli_paths.h"
#include <nabla.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char GENERATE_USAGE[] =
    "usage: nabla generate DIR --prompt TEXT [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
    "  DIR              a Hugging Face checkpoint folder (config.json, model.safetensors, tokenizer files),\n"
    "                   or a model name (gpt2, ORG/NAME) in the Hugging Face cache (~/.cache/huggingface/hub)\n"
    "  --max-new-tokens N   tokens to add (default 50)\n"
    "  --temperature T  0 is greedy (the default); else sampling from softmax(logits / T)\n"
    "  --top-k K        sample among the K most likely tokens only\n"
    "  --top-p P        sample among the most likely tokens whose probability reaches P\n"
    "  --seed S         the sampler's seed (default 0): one seed, one text\n"
    "The text streams to stdout as it is made; it stops at the model's end-of-text token.\n";

static const char EMBED_USAGE[] =
    "usage: nabla embed DIR (--text TEXT | --file FILE) [-o OUT.npy] [--batch N]\n"
    "  DIR         a sentence-transformers checkpoint folder (all-MiniLM-L6-v2's layout), or its name\n"
    "              (sentence-transformers/all-MiniLM-L6-v2) in the Hugging Face cache\n"
    "  --text T    one text; --file F: one text a line\n"
    "  -o OUT.npy  the embeddings [texts, hidden] as NPY (without -o they are printed, a row a line)\n"
    "  --batch N   texts encoded together, sorted by length first (default 32)\n";

/* A number from s into *v, or false. */
static bool parse_num(const char *s, double lo, double hi, double *v) {
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (!*s || *end || errno || !(x >= lo && x <= hi)) return false;
    *v = x;
    return true;
}

typedef struct {
    nb_tokenizer *tok;
    int64_t *ids;
    int64_t n, cap;
    size_t printed; /* bytes of the decoded continuation already written */
    bool failed;
} stream;

/* Prints what the new token adds to the decoded text; a character still incomplete (its last
   byte not yet made, decoded as U+FFFD) waits for the next token. */
static void on_token(int64_t row, int64_t id, void *ctx) {
    (void)row;
    stream *s = ctx;
    if (s->failed) return;
    if (s->n == s->cap) {
        int64_t c = s->cap ? 2 * s->cap : 64;
        int64_t *p = realloc(s->ids, sizeof *p * (size_t)c);
        if (!p) { s->failed = true; return; }
        s->ids = p;
        s->cap = c;
    }
    s->ids[s->n++] = id;
    char *text = nb_detokenize(s->tok, s->ids, s->n);
    if (!text) { s->failed = true; return; }
    size_t len = strlen(text);
    if (!(len >= 3 && !memcmp(text + len - 3, "\xEF\xBF\xBD", 3)) && len > s->printed) {
        fwrite(text + s->printed, 1, len - s->printed, stdout);
        fflush(stdout);
        s->printed = len;
    }
    free(text);
}

/* At the end: what is still held back (a character left incomplete reads as U+FFFD, as the
   whole continuation decodes). */
static void flush_stream(stream *s) {
    if (s->failed || s->n == 0) return;
    char *text = nb_detokenize(s->tok, s->ids, s->n);
    if (!text) { s->failed = true; return; }
    size_t len = strlen(text);
    if (len > s->printed) fwrite(text + s->printed, 1, len - s->printed, stdout);
    s->printed = len;
    free(text);
}

int cli_generate_main(int argc, char **argv) {
    const char *dir = NULL, *prompt = NULL;
    nb_generate_opts o = { .max_new_tokens = 50 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool val = i + 1 < argc;
        double v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(GENERATE_USAGE, stdout);
            return 0;
        } else if (!strcmp(a, "--prompt") && val) prompt = argv[++i];
        else if (!strcmp(a, "--max-new-tokens") && val) {
            if (!parse_num(argv[++i], 0, 1e6, &v) || v != (int64_t)v) goto bad;
            o.max_new_tokens = (int64_t)v;
        } else if (!strcmp(a, "--temperature") && val) {
            if (!parse_num(argv[++i], 0, 100, &o.temperature)) goto bad;
        } else if (!strcmp(a, "--top-k") && val) {
            if (!parse_num(argv[++i], 0, 1e9, &v) || v != (int64_t)v) goto bad;
            o.top_k = (int64_t)v;
        } else if (!strcmp(a, "--top-p") && val) {
            if (!parse_num(argv[++i], 0, 1, &o.top_p)) goto bad;
        } else if (!strcmp(a, "--seed") && val) {
            if (!parse_num(argv[++i], 0, 1.8e19, &v) || v != (double)(uint64_t)v) goto bad;
            o.seed = (uint64_t)v;
        } else if (a[0] == '-' || dir) {
            fprintf(stderr, "nabla generate: unknown, incomplete or extra argument \"%s\"\n%s", a, GENERATE_USAGE);
            return 2;
        } else dir = a;
        continue;
    bad:
        fprintf(stderr, "nabla generate: %s got \"%s\", which is not a valid value\n%s", a, argv[i], GENERATE_USAGE);
        return 2;
    }
    if (!dir || !prompt) {
        fprintf(stderr, "nabla generate: %s\n%s", !dir ? "no DIR given" : "no --prompt given", GENERATE_USAGE);
        return 2;
    }
    nb_module *m = nb_hf_load(dir, (nb_hf_opts){ 0 });
    nb_tokenizer *tok = m ? nb_tokenizer_load(dir) : NULL;
    if (!tok) {
        fprintf(stderr, "nabla generate: %s\n", nb_error());
        nb_module_free(m);
        return 1;
    }
    int rc = 1;
    int64_t n = nb_tokenize(tok, prompt, NULL, 0);
    int64_t *ids = n > 0 ? malloc(sizeof *ids * (size_t)n) : NULL;
    if (n == 0) fprintf(stderr, "nabla generate: the prompt has no tokens\n");
    else if (n < 0 || !ids || nb_tokenize(tok, prompt, ids, n) != n) fprintf(stderr, "nabla generate: %s\n", nb_error());
    else {
        int64_t eos[8];
        int neos = nb_hf_eos_ids(m, eos, 8);
        stream s = { .tok = tok };
        o.on_token = on_token;
        o.ctx = &s;
        if (neos > 0) { o.stop = eos; o.nstop = neos < 8 ? neos : 8; } /* any of them ends the text */
        nb_scope *sc = nb_scope_begin();
        fputs(prompt, stdout);
        fflush(stdout);
        nb_tensor *x = nb_from_data(ids, NB_SHAPE(1, n), NB_I64);
        nb_tensor *y = x ? nb_generate(m, x, o) : NULL;
        if (y) flush_stream(&s);
        putchar('\n');
        if (!y || s.failed) fprintf(stderr, "nabla generate: %s\n", nb_error() ? nb_error() : "out of memory");
        else rc = 0;
        nb_scope_end(sc);
        free(s.ids);
    }
    free(ids);
    nb_tokenizer_free(tok);
    nb_module_free(m);
    return rc;
}

/* The lines of a file (malloc'ed text, split in place). */
static char **read_lines(const char *path, int *n, char **buf) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "nabla embed: cannot open %s: %s\n", path, strerror(errno)); return NULL; }
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    size_t k;
    while (b && (k = fread(b + len, 1, cap - len - 1, f)) > 0) {
        len += k;
        if (len + 1 == cap) {
            char *q = realloc(b, cap *= 2);
            if (!q) { free(b); b = NULL; }
            else b = q;
        }
    }
    fclose(f);
    if (!b) { fprintf(stderr, "nabla embed: out of memory reading %s\n", path); return NULL; }
    b[len] = 0;
    int cnt = 0;
    for (size_t i = 0; i < len; i++) cnt += b[i] == '\n';
    char **lines = malloc(sizeof *lines * (size_t)(cnt + 2));
    if (!lines) { free(b); return NULL; }
    int m = 0;
    for (char *p = b; *p;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        if (nl && nl > p && nl[-1] == '\r') nl[-1] = 0;
        lines[m++] = p;
        if (!nl) break;
        p = nl + 1;
    }
    *n = m;
    *buf = b;
    return lines;
}

int cli_embed_main(int argc, char **argv) {
    const char *dir = NULL, *text = NULL, *file = NULL, *out = NULL;
    double batch = 32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool val = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(EMBED_USAGE, stdout);
            return 0;
        } else if (!strcmp(a, "--text") && val) text = argv[++i];
        else if (!strcmp(a, "--file") && val) file = argv[++i];
        else if (!strcmp(a, "-o") && val) out = argv[++i];
        else if (!strcmp(a, "--batch") && val) {
            if (!parse_num(argv[++i], 1, 4096, &batch) || batch != (int)batch) {
                fprintf(stderr, "nabla embed: --batch needs a whole number from 1 to 4096, got \"%s\"\n", argv[i]);
                return 2;
            }
        } else if (a[0] == '-' || dir) {
            fprintf(stderr, "nabla embed: unknown, incomplete or extra argument \"%s\"\n%s", a, EMBED_USAGE);
            return 2;
        } else dir = a;
    }
    if (!dir || (!text) == (!file)) {
        fprintf(stderr, "nabla embed: %s\n%s", !dir ? "no DIR given" : "give one of --text and --file", EMBED_USAGE);
        return 2;
    }
    /* the model folder is read whole (config, weights, tokenizer, pooling): no output goes into it */
    const cli_input in[] = { { "DIR", dir, NULL }, { "--file", file, NULL } };
    if (cli_output_replaces_input("embed", "-o", out, in, 2)) return 2;
    char *buf = NULL;
    const char *one[1] = { text };
    int n = 1;
    char **lines = file ? read_lines(file, &n, &buf) : (char **)one;
    if (!lines) return 1;
    if (n == 0) {
        fprintf(stderr, "nabla embed: %s has no lines\n", file);
        free(buf);
        free(lines);
        return 1;
    }
    nb_module *m = nb_hf_load(dir, (nb_hf_opts){ 0 });
    nb_tokenizer *tok = m ? nb_tokenizer_load(dir) : NULL;
    int rc = tok ? 0 : 1;
    if (!tok) fprintf(stderr, "nabla embed: %s\n", nb_error());
    nb_scope *sc = nb_scope_begin();
    nb_tensor *all = rc == 0 ? nb_hf_embed(m, tok, (const char *const *)lines, n,
                                           (nb_hf_embed_opts){ .model_dir = dir, .batch_size = (int64_t)batch })
                             : NULL;
    if (rc == 0 && !all) {
        fprintf(stderr, "nabla embed: %s\n", nb_error());
        rc = 1;
    }
    if (rc == 0 && out) {
        if (nb_save_npy(all, out) < 0) {
            fprintf(stderr, "nabla embed: %s\n", nb_error());
            rc = 1;
        } else fprintf(stderr, "wrote %s: %d x %lld embeddings\n", out, n, (long long)nb_dim(all, 1));
    } else if (rc == 0) {
        int64_t h = nb_dim(all, 1);
        float *p = nb_data_ptr(nb_contiguous(all));
        for (int i = 0; p && i < n; i++)
            for (int64_t j = 0; j < h; j++) printf("%.7g%c", p[i * h + j], j + 1 < h ? ' ' : '\n');
    }
    nb_scope_end(sc);
    nb_tokenizer_free(tok);
    nb_module_free(m);
    if (file) free(lines);
    free(buf);
    return rc;
}
