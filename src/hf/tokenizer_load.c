/* Loading tokenizers: tokenizer.json (parsed with jansson, as the safetensors headers are), GPT-2's
   vocab.json + merges.txt, BERT's vocab.txt (with tokenizer_config.json's casing), and the
   checks that make a bad file an error naming the file and the field. */
#include "hf_impl.h"
#include "hub.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef nb__tokctx ctx;
#define FAIL(c, ...) (nb__tok_fail((c), __VA_ARGS__), -1)

void nb__tok_fail(const nb__tokctx *c, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    nb__error("nb_tokenizer_load: %s: %s", c->file, msg);
}

/* The whole file at path (NUL-terminated, size in *n), or NULL with an error. Files past 1 GiB
   are refused: no tokenizer file comes near it. */
static char *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        nb__error("nb_tokenizer_load: cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 30)) {
        nb__error("nb_tokenizer_load: %s is not a regular file under 1 GiB", path);
        fclose(f);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf || fread(buf, 1, size, f) != size) {
        nb__error("nb_tokenizer_load: cannot read %s", path);
        free(buf);
        fclose(f);
        return NULL;
    }
    fclose(f);
    buf[size] = 0;
    *n = size;
    return buf;
}

static bool is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static char *join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* ---------- the vocabulary ---------- */
static int add_token(nb_tokenizer *t, const ctx *c, const char *tok, size_t len, int64_t id, bool model) {
    /* 2^24 ids is 64 times the largest vocabularies in use, and bounds the id table */
    if (id < 0 || id >= (1 << 24)) return FAIL(c, "token id %lld of '%.40s' is not in [0, 2^24)", (long long)id, tok);
    if (model && nb__strmap_set(&t->vocab, tok, len, id) < 0) return FAIL(c, "out of memory");
    if (id >= t->id_cap) {
        int64_t cap = t->id_cap ? t->id_cap : 1024;
        while (cap <= id) cap *= 2;
        char **v = realloc(t->id_tok, (size_t)cap * sizeof *v);
        if (!v) return FAIL(c, "out of memory");
        memset(v + t->id_cap, 0, (size_t)(cap - t->id_cap) * sizeof *v);
        t->id_tok = v;
        t->id_cap = cap;
    }
    if (id >= t->n_ids) t->n_ids = id + 1;
    char *copy = malloc(len + 1);
    if (!copy) return FAIL(c, "out of memory");
    memcpy(copy, tok, len);
    copy[len] = 0;
    free(t->id_tok[id]);
    t->id_tok[id] = copy;
    return 0;
}

/* The unknown token named by j (dflt when j is absent or null; none when both are). */
static int set_unk(nb_tokenizer *t, const ctx *c, const char *field, json_t *j, const char *dflt) {
    t->unk_id = -1;
    if (j && !json_is_null(j) && !json_is_string(j)) return FAIL(c, "%s is not a string", field);
    const char *name = j && json_is_string(j) ? json_string_value(j) : dflt;
    if (!name) return 0;
    t->unk_id = nb__strmap_get(&t->vocab, name, strlen(name));
    if (t->unk_id < 0) return FAIL(c, "%s '%.60s' is not in the vocabulary", field, name);
    return 0;
}

/* A copy of the string j, or of dflt when j is absent or null. */
int nb__tok_str(char **dst, const ctx *c, const char *field, json_t *j, const char *dflt) {
    free(*dst);
    *dst = NULL;
    if (j && !json_is_null(j) && !json_is_string(j)) return FAIL(c, "%s is not a string", field);
    *dst = strdup(j && json_is_string(j) ? json_string_value(j) : dflt);
    return *dst ? 0 : FAIL(c, "out of memory");
}

int nb__tok_bool(const ctx *c, json_t *o, const char *field, const char *where, bool dflt, bool *out) {
    json_t *j = json_object_get(o, field);
    if (!j || json_is_null(j)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_boolean(j)) return FAIL(c, "%s.%s is not true or false", where, field);
    *out = json_is_true(j);
    return 0;
}

/* A merge "a b" (or ["a", "b"]) of rank r: both parts and their join must be tokens. */
static int add_merge(nb_tokenizer *t, const ctx *c, const char *a, size_t al, const char *b, size_t bl, int64_t r,
                     const char *where) {
    int64_t ia = nb__strmap_get(&t->vocab, a, al), ib = nb__strmap_get(&t->vocab, b, bl);
    if (ia < 0 || ib < 0)
        return FAIL(c, "%s: merge %lld: '%.40s' is not in the vocabulary", where, (long long)r + 1, ia < 0 ? a : b);
    size_t pl = strlen(t->prefix);
    if (bl < pl) return FAIL(c, "%s: merge %lld: '%.40s' is shorter than the prefix", where, (long long)r + 1, b);
    char *j = malloc(al + bl + 1);
    if (!j) return FAIL(c, "out of memory");
    memcpy(j, a, al);
    memcpy(j + al, b + pl, bl - pl);
    int64_t m = nb__strmap_get(&t->vocab, j, al + bl - pl);
    free(j);
    if (m < 0) return FAIL(c, "%s: merge %lld: '%.40s%.40s' is not in the vocabulary", where, (long long)r + 1, a, b + pl);
    if (r > UINT32_MAX) return FAIL(c, "%s: too many merges", where);
    if (nb__u64map_set(&t->merges, (uint64_t)ia << 32 | (uint64_t)ib, (uint64_t)r << 32 | (uint64_t)m) < 0)
        return FAIL(c, "out of memory");
    return 0;
}

/* merges.txt: one "a b" a line after an optional "#version" line. */
static int parse_merges_txt(nb_tokenizer *t, const ctx *c, const char *s, size_t n) {
    int64_t rank = 0, line = 0;
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && s[e] != '\n') e++;
        size_t end = e;
        if (end > i && s[end - 1] == '\r') end--;
        line++;
        size_t len = end - i;
        if (!(len >= 8 && memcmp(s + i, "#version", 8) == 0)) {
            const char *sp = memchr(s + i, ' ', len);
            if (!sp || memchr(sp + 1, ' ', (size_t)(s + end - sp - 1)))
                return FAIL(c, "line %lld: a merge is two tokens and one space: '%.*s'", (long long)line,
                            (int)(len > 60 ? 60 : len), s + i);
            char *a = strndup(s + i, (size_t)(sp - (s + i))), *b = strndup(sp + 1, (size_t)(s + end - sp - 1));
            int rc = a && b ? add_merge(t, c, a, strlen(a), b, strlen(b), rank, "merges") : FAIL(c, "out of memory");
            free(a), free(b);
            if (rc < 0) return -1;
            rank++;
        }
        i = e + 1;
    }
    return 0;
}

static int parse_vocab_object(nb_tokenizer *t, const ctx *c, json_t *v, const char *where) {
    if (!json_is_object(v)) return FAIL(c, "%s is not an object of token ids", where);
    const char *k;
    json_t *id;
    json_object_foreach(v, k, id) {
        if (!json_is_integer(id)) return FAIL(c, "%s: the id of '%.40s' is not an integer", where, k);
        if (add_token(t, c, k, strlen(k), json_integer_value(id), true) < 0) return -1;
    }
    return 0;
}

static json_t *parse_json(const ctx *c, const char *s, size_t n) {
    json_error_t err;
    json_t *j = json_loadb(s, n, JSON_REJECT_DUPLICATES, &err);
    if (!j) nb__tok_fail(c, "bad JSON: %s (line %d, column %d)", err.text, err.line, err.column);
    return j;
}


static int parse_added(nb_tokenizer *t, const ctx *c, json_t *list) {
    if (!list || json_is_null(list)) return 0;
    if (!json_is_array(list)) return FAIL(c, "added_tokens is not an array");
    size_t n = json_array_size(list);
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (!t->added) return FAIL(c, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *a = json_array_get(list, i), *content = json_object_get(a, "content"), *id = json_object_get(a, "id");
        if (!json_is_string(content) || !json_is_integer(id))
            return FAIL(c, "added_tokens[%zu] needs a \"content\" string and an integer \"id\"", i);
        nb__added *ad = &t->added[t->n_added];
        const char *s = json_string_value(content);
        if (!*s) continue; /* tokenizers ignores empty tokens */
        ad->content = strdup(s);
        ad->len = strlen(s);
        ad->id = json_integer_value(id);
        if (!ad->content) return FAIL(c, "out of memory");
        t->n_added++;
        if (nb__tok_bool(c, a, "special", "added_tokens[]", false, &ad->special) < 0 ||
            nb__tok_bool(c, a, "normalized", "added_tokens[]", !ad->special, &ad->normalized) < 0 ||
            nb__tok_bool(c, a, "lstrip", "added_tokens[]", false, &ad->lstrip) < 0 ||
            nb__tok_bool(c, a, "rstrip", "added_tokens[]", false, &ad->rstrip) < 0 ||
            nb__tok_bool(c, a, "single_word", "added_tokens[]", false, &ad->single_word) < 0)
            return -1;
        if (add_token(t, c, s, ad->len, ad->id, false) < 0) return -1;
    }
    return 0;
}

/* Each normalized added token matches its normalized form. */
static int normalize_added(nb_tokenizer *t, const ctx *c) {
    for (int i = 0; i < t->n_added; i++) {
        nb__added *a = &t->added[i];
        if (!a->normalized) {
            t->any_raw_added = true;
            continue;
        }
        t->any_normalized_added = true;
        nb__buf b = { 0 };
        if (nb__tok_normalize(t, a->content, a->len, &b) < 0 || !b.s) {
            free(b.s);
            return FAIL(c, "out of memory");
        }
        a->norm = b.s;
        a->norm_len = b.n;
    }
    return 0;
}

static int parse_truncation_padding(nb_tokenizer *t, const ctx *c, json_t *root) {
    json_t *tr = json_object_get(root, "truncation"), *pd = json_object_get(root, "padding");
    if (tr && !json_is_null(tr)) {
        json_t *ml = json_object_get(tr, "max_length");
        const char *strategy = json_string_value(json_object_get(tr, "strategy"));
        const char *dir = json_string_value(json_object_get(tr, "direction"));
        if (!json_is_integer(ml) || json_integer_value(ml) < 0)
            return FAIL(c, "truncation.max_length is not a non-negative integer");
        if (strategy && strcmp(strategy, "LongestFirst") != 0 && strcmp(strategy, "OnlyFirst") != 0)
            return FAIL(c, "truncation.strategy '%.40s' is not supported for one sequence", strategy);
        t->trunc_max = json_integer_value(ml);
        t->trunc_left = dir && strcmp(dir, "Left") == 0;
        t->trunc_on = true;
    }
    if (pd && !json_is_null(pd)) {
        json_t *s = json_object_get(pd, "strategy"), *fixed = json_object_get(s, "Fixed"),
               *mult = json_object_get(pd, "pad_to_multiple_of"), *id = json_object_get(pd, "pad_id");
        const char *dir = json_string_value(json_object_get(pd, "direction"));
        if (json_is_string(s) && strcmp(json_string_value(s), "BatchLongest") == 0) t->pad_mode = 2;
        else if (json_is_integer(fixed) && json_integer_value(fixed) >= 0) {
            t->pad_mode = 1;
            t->pad_len = json_integer_value(fixed);
            if (t->pad_len > INT32_MAX) return FAIL(c, "padding.strategy.Fixed %lld is past 2^31", (long long)t->pad_len);
        } else return FAIL(c, "padding.strategy is neither \"BatchLongest\" nor {\"Fixed\": n}");
        if (mult && !json_is_null(mult)) {
            if (!json_is_integer(mult) || json_integer_value(mult) <= 0)
                return FAIL(c, "padding.pad_to_multiple_of is not a positive integer");
            t->pad_multiple = json_integer_value(mult);
            if (t->pad_multiple > INT32_MAX) return FAIL(c, "padding.pad_to_multiple_of is past 2^31");
        }
        if (!json_is_integer(id) || json_integer_value(id) < 0) return FAIL(c, "padding.pad_id is not a non-negative integer");
        t->pad_id = json_integer_value(id);
        t->pad_left = dir && strcmp(dir, "Left") == 0;
    }
    return 0;
}

static int parse_tokenizer_json(nb_tokenizer *t, const ctx *c, json_t *root) {
    if (!json_is_object(root)) return FAIL(c, "not a JSON object");
    json_t *model = json_object_get(root, "model");
    const char *type = json_string_value(json_object_get(model, "type"));
    if (!json_is_object(model)) return FAIL(c, "no \"model\" object");
    json_t *vocab = json_object_get(model, "vocab");
    if (!type) /* tokenizers reads a model without "type" by its fields */
        type = json_object_get(model, "merges") ? "BPE" : json_object_get(model, "continuing_subword_prefix") ? "WordPiece" : "";
    if (strcmp(type, "WordPiece") == 0) {
        t->model = NB_TOK_WORDPIECE;
        if (parse_vocab_object(t, c, vocab, "model.vocab") < 0) return -1;
        json_t *pre = json_object_get(model, "continuing_subword_prefix"), *mx = json_object_get(model, "max_input_chars_per_word");
        if (nb__tok_str(&t->prefix, c, "model.continuing_subword_prefix", pre, "##") < 0 || nb__tok_str(&t->suffix, c, "", NULL, "") < 0)
            return -1;
        t->max_chars = 100;
        if (mx && !json_is_null(mx)) {
            if (!json_is_integer(mx) || json_integer_value(mx) < 0)
                return FAIL(c, "model.max_input_chars_per_word is not a non-negative integer");
            t->max_chars = json_integer_value(mx);
        }
        if (set_unk(t, c, "model.unk_token", json_object_get(model, "unk_token"), "[UNK]") < 0) return -1;
        if (t->unk_id < 0) return FAIL(c, "model.unk_token: WordPiece needs an unknown token");
    } else if (strcmp(type, "BPE") == 0) {
        t->model = NB_TOK_BPE;
        if (parse_vocab_object(t, c, vocab, "model.vocab") < 0) return -1;
        json_t *dropout = json_object_get(model, "dropout");
        if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0))
            return FAIL(c, "model.dropout: BPE dropout (random merges) is not supported");
        if (nb__tok_str(&t->prefix, c, "model.continuing_subword_prefix", json_object_get(model, "continuing_subword_prefix"), "") < 0 ||
            nb__tok_str(&t->suffix, c, "model.end_of_word_suffix", json_object_get(model, "end_of_word_suffix"), "") < 0 ||
            set_unk(t, c, "model.unk_token", json_object_get(model, "unk_token"), NULL) < 0 ||
            nb__tok_bool(c, model, "fuse_unk", "model", false, &t->fuse_unk) < 0 ||
            nb__tok_bool(c, model, "byte_fallback", "model", false, &t->byte_fallback) < 0 ||
            nb__tok_bool(c, model, "ignore_merges", "model", false, &t->ignore_merges) < 0)
            return -1;
        json_t *merges = json_object_get(model, "merges");
        if (!json_is_array(merges)) return FAIL(c, "model.merges is not an array");
        for (size_t i = 0; i < json_array_size(merges); i++) {
            json_t *m = json_array_get(merges, i);
            if (json_is_string(m)) { /* the older form: "a b" */
                const char *s = json_string_value(m), *sp = strchr(s, ' ');
                if (!sp || strchr(sp + 1, ' ')) return FAIL(c, "model.merges[%zu] '%.60s' is not two tokens and one space", i, s);
                if (add_merge(t, c, s, (size_t)(sp - s), sp + 1, strlen(sp + 1), (int64_t)i, "model.merges") < 0) return -1;
            } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                       json_is_string(json_array_get(m, 1))) {
                json_t *a = json_array_get(m, 0), *b = json_array_get(m, 1);
                if (add_merge(t, c, json_string_value(a), json_string_length(a), json_string_value(b), json_string_length(b),
                              (int64_t)i, "model.merges") < 0)
                    return -1;
            } else return FAIL(c, "model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", i);
        }
    } else return FAIL(c, "model.type '%.40s' is not supported (BPE, WordPiece)", type);
    if (parse_added(t, c, json_object_get(root, "added_tokens")) < 0 ||
        nb__tok_parse_steps(t, c, root) < 0 || parse_truncation_padding(t, c, root) < 0 ||
        normalize_added(t, c) < 0)
        return -1;
    if (t->pad_mode && (t->pad_id >= t->n_ids || !t->id_tok[t->pad_id]))
        return FAIL(c, "padding.pad_id %lld is not in the vocabulary", (long long)t->pad_id);
    return 0;
}

static nb_tokenizer *new_tokenizer(void) {
    nb_tokenizer *t = calloc(1, sizeof *t);
    if (!t) nb__error("nb_tokenizer_load: out of memory");
    if (t) t->unk_id = -1;
    return t;
}

nb_tokenizer *nb_tokenizer_from_json(const char *json, size_t len) {
    ctx c = { "tokenizer.json (in memory)" };
    if (!json && len) {
        nb__error("nb_tokenizer_from_json: json is NULL");
        return NULL;
    }
    nb_tokenizer *t = new_tokenizer();
    if (!t) return NULL;
    json_t *root = parse_json(&c, json ? json : "", len);
    int rc = root ? parse_tokenizer_json(t, &c, root) : -1;
    json_decref(root);
    if (rc < 0) {
        nb_tokenizer_free(t);
        return NULL;
    }
    return t;
}

/* ---------- vocab.json + merges.txt, vocab.txt ---------- */
static int load_bpe_files(nb_tokenizer *t, const char *vocab_path, const char *merges_path) {
    ctx c = { vocab_path };
    size_t n;
    char *s = read_file(vocab_path, &n);
    if (!s) return -1;
    json_t *root = parse_json(&c, s, n);
    free(s);
    int rc = root ? parse_vocab_object(t, &c, root, "the vocabulary") : -1;
    json_decref(root);
    if (rc < 0) return -1;
    t->model = NB_TOK_BPE;
    if (!(t->prefix = strdup("")) || !(t->suffix = strdup(""))) return FAIL(&c, "out of memory");
    c.file = merges_path;
    if (!(s = read_file(merges_path, &n))) return -1;
    rc = parse_merges_txt(t, &c, s, n);
    free(s);
    if (rc < 0) return -1;
    /* as tokenizers' ByteLevelBPETokenizer: no prefix space, the GPT-2 pattern, byte decoding */
    t->pre[t->n_pre++] = (nb__pre_step){ .kind = NB_PRE_BYTELEVEL, .use_regex = true };
    t->dec[t->n_dec++] = (nb__dec_step){ .kind = NB_DEC_BYTELEVEL };
    return 0;
}

static int load_vocab_txt(nb_tokenizer *t, const char *path) {
    ctx c = { path };
    size_t n;
    char *s = read_file(path, &n);
    if (!s) return -1;
    int64_t line = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; line++) {
        size_t e = i;
        while (e < n && s[e] != '\n') e++;
        for (size_t q = i; q < e;) {
            size_t q0 = q;
            if (nb__utf8_next((const unsigned char *)s, e, &q) == 0xFFFD &&
                !(q - q0 == 3 && memcmp(s + q0, "\xEF\xBF\xBD", 3) == 0)) {
                free(s);
                return FAIL(&c, "line %lld is not UTF-8", (long long)line + 1);
            }
        }
        /* the line without its trailing white space (tokenizers trims it) */
        size_t end = e;
        while (end > i) {
            size_t k = end - 1;
            while (k > i && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
            size_t q = k;
            if (!nb__uc_space(nb__utf8_next((const unsigned char *)s, end, &q)) || q != end) break;
            end = k;
        }
        rc = add_token(t, &c, s + i, end - i, line, true);
        i = e + 1;
    }
    free(s);
    if (rc < 0) return -1;
    t->model = NB_TOK_WORDPIECE;
    t->max_chars = 100;
    nb__dec_step *dec = &t->dec[t->n_dec++];
    *dec = (nb__dec_step){ .kind = NB_DEC_WORDPIECE, .cleanup = true };
    if (!(t->prefix = strdup("##")) || !(t->suffix = strdup("")) || !(dec->pattern = strdup("##")))
        return FAIL(&c, "out of memory");
    if ((t->unk_id = nb__strmap_get(&t->vocab, "[UNK]", 5)) < 0) return FAIL(&c, "no [UNK] token");
    /* tokenizer_config.json beside it: do_lower_case, strip_accents, tokenize_chinese_chars */
    bool lower = true, chinese = true, strip;
    json_t *strip_j = NULL, *cfg = NULL;
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
    char *cfg_path = dir ? join(dir, "tokenizer_config.json") : NULL;
    free(dir);
    if (!cfg_path) return FAIL(&c, "out of memory");
    if (is_file(cfg_path)) {
        ctx cc = { cfg_path };
        char *cs = read_file(cfg_path, &n);
        cfg = cs ? parse_json(&cc, cs, n) : NULL;
        free(cs);
        if (!cfg || !json_is_object(cfg) || nb__tok_bool(&cc, cfg, "do_lower_case", "config", true, &lower) < 0 ||
            nb__tok_bool(&cc, cfg, "tokenize_chinese_chars", "config", true, &chinese) < 0) {
            if (cfg && !json_is_object(cfg)) nb__tok_fail(&cc, "not a JSON object");
            json_decref(cfg);
            free(cfg_path);
            return -1;
        }
        strip_j = json_object_get(cfg, "strip_accents");
    }
    int r = 0;
    if (strip_j && !json_is_null(strip_j) && !json_is_boolean(strip_j)) {
        ctx cc = { cfg_path };
        r = FAIL(&cc, "strip_accents is not true, false or null");
    }
    strip = strip_j && json_is_boolean(strip_j) ? json_is_true(strip_j) : lower;
    json_decref(cfg);
    free(cfg_path);
    if (r < 0) return -1;
    /* as tokenizers' BertWordPieceTokenizer */
    t->norm[t->n_norm++] = (nb__norm_step){ NB_NORM_BERT, true, chinese, strip, lower, NULL, NULL };
    t->pre[t->n_pre++] = (nb__pre_step){ .kind = NB_PRE_BERT };
    static const char *const specials[] = { "[UNK]", "[SEP]", "[CLS]", "[PAD]", "[MASK]" };
    t->added = calloc(5, sizeof *t->added);
    if (!t->added) return FAIL(&c, "out of memory");
    for (int i = 0; i < 5; i++) {
        int64_t id = nb__strmap_get(&t->vocab, specials[i], strlen(specials[i]));
        if (id < 0) continue;
        nb__added *a = &t->added[t->n_added++];
        if (!(a->content = strdup(specials[i]))) return FAIL(&c, "out of memory");
        a->len = strlen(a->content), a->id = id, a->special = true;
        t->any_raw_added = true;
    }
    int64_t sep = nb__strmap_get(&t->vocab, "[SEP]", 5), cls = nb__strmap_get(&t->vocab, "[CLS]", 5);
    if (sep < 0 || cls < 0) return FAIL(&c, "no [SEP] or [CLS] token");
    if (nb__tok_push_ids(&t->post_pre, &t->n_post_pre, &cls, 1) < 0 || nb__tok_push_ids(&t->post_post, &t->n_post_post, &sep, 1) < 0)
        return FAIL(&c, "out of memory");
    return 0;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0 && (a == b || s[a - b - 1] == '/');
}

nb_tokenizer *nb_tokenizer_load(const char *path) {
    if (!path) {
        nb__error("nb_tokenizer_load: path is NULL");
        return NULL;
    }
    char resolved[NB__HF_DIR_MAX];
    if (nb__hf_resolve("nb_tokenizer_load", path, resolved, sizeof resolved) < 0) return NULL;
    path = resolved;
    struct stat st;
    if (stat(path, &st) != 0) {
        nb__error("nb_tokenizer_load: cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    nb_tokenizer *t = new_tokenizer();
    if (!t) return NULL;
    int rc = -1;
    char *a = NULL, *b = NULL;
    if (S_ISDIR(st.st_mode)) {
        a = join(path, "tokenizer.json");
        if (a && is_file(a)) {
            free(a);
            a = NULL;
            nb_tokenizer_free(t);
            char *p = join(path, "tokenizer.json");
            nb_tokenizer *r = p ? nb_tokenizer_load(p) : NULL;
            free(p);
            return r;
        }
        free(a);
        a = join(path, "vocab.json");
        b = join(path, "merges.txt");
        if (a && b && is_file(a) && is_file(b)) rc = load_bpe_files(t, a, b);
        else {
            free(a);
            a = join(path, "vocab.txt");
            if (a && is_file(a)) rc = load_vocab_txt(t, a);
            else nb__error("nb_tokenizer_load: %s holds no tokenizer.json, vocab.json + merges.txt or vocab.txt", path);
        }
    } else if (ends_with(path, "vocab.json")) {
        const char *slash = strrchr(path, '/');
        char *dir = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
        b = dir ? join(dir, "merges.txt") : NULL;
        free(dir);
        if (b && is_file(b)) rc = load_bpe_files(t, path, b);
        else nb__error("nb_tokenizer_load: %s: no merges.txt beside it", path);
    } else if (strlen(path) > 4 && strcmp(path + strlen(path) - 4, ".txt") == 0) {
        rc = load_vocab_txt(t, path);
    } else {
        ctx c = { path };
        size_t n;
        char *s = read_file(path, &n);
        json_t *root = s ? parse_json(&c, s, n) : NULL;
        free(s);
        rc = root ? parse_tokenizer_json(t, &c, root) : -1;
        json_decref(root);
    }
    free(a);
    free(b);
    if (rc < 0) {
        nb_tokenizer_free(t);
        return NULL;
    }
    return t;
}

void nb_tokenizer_free(nb_tokenizer *t) {
    if (!t) return;
    nb__strmap_free(&t->vocab);
    for (int64_t i = 0; i < t->n_ids; i++) free(t->id_tok[i]);
    free(t->id_tok);
    free(t->prefix);
    free(t->suffix);
    for (int i = 0; i < t->n_norm; i++) free(t->norm[i].pattern), free(t->norm[i].content);
    for (int i = 0; i < t->n_pre; i++) free(t->pre[i].literal);
    for (int i = 0; i < t->n_dec; i++) free(t->dec[i].pattern), free(t->dec[i].content);
    nb__u64map_free(&t->merges);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].content), free(t->added[i].norm);
    free(t->added);
    free(t->post_pre);
    free(t->post_post);
    free(t);
}
