/* Tests of the tokenizers (src/hf/tokenizer*.c). Without arguments: small tokenizers written
   here (WordPiece, byte-level BPE, added tokens, truncation and padding), the bad inputs (missing
   files, malformed JSON and merges, unsupported types, ids out of range, invalid UTF-8) and the
   buffer contract. With REF_DIR, the folder tests/tokenizer_ref.py wrote: every text of its
   corpus against Hugging Face's `tokenizers` (ids and decoded text), case by case.
   Usage: test_tokenizer [REF_DIR] */
#include "test_util.h"

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *ref_dir;
static char tmpdir[256];

static const char *tpath(const char *name) {
    static char buf[4][512];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, 512, "%s/%s", tmpdir, name);
    return b;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    fclose(f);
}

/* The ids of text (all of them), compared with want[0..n). */
static void expect_ids(nb_tokenizer *t, const char *text, nb_tokenize_opts o, const int64_t *want, int64_t n) {
    int64_t ids[256];
    int64_t got = nb_tokenize_ex(t, text, strlen(text), ids, 256, o);
    if (got != n) fail_msg("'%s': %lld ids, want %lld (%s)", text, (long long)got, (long long)n, nb_error() ? nb_error() : "");
    for (int64_t i = 0; i < n; i++)
        if (ids[i] != want[i]) fail_msg("'%s': id %lld is %lld, want %lld", text, (long long)i, (long long)ids[i], (long long)want[i]);
}

#define IDS(...) ((const int64_t[]){ __VA_ARGS__ }), (int64_t)(sizeof((const int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t))

static const char wordpiece_json[] =
    "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,"
    "\"added_tokens\":[{\"id\":0,\"content\":\"[PAD]\",\"special\":true,\"normalized\":false,\"lstrip\":false,\"rstrip\":false,\"single_word\":false},"
    "{\"id\":1,\"content\":\"[UNK]\",\"special\":true,\"normalized\":false},{\"id\":2,\"content\":\"[CLS]\",\"special\":true,\"normalized\":false},"
    "{\"id\":3,\"content\":\"[SEP]\",\"special\":true,\"normalized\":false}],"
    "\"normalizer\":{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,\"strip_accents\":null,\"lowercase\":true},"
    "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
    "\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"[SEP]\",3],\"cls\":[\"[CLS]\",2]},"
    "\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true},"
    "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":10,"
    "\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"hello\":4,\"world\":5,\"!\":6,\"un\":7,\"##aff\":8,\"##able\":9,"
    "\"cafe\":10,\"日\":11,\"本\":12,\"a\":13,\"##a\":14}}}";

static void test_wordpiece_small(void **state) {
    (void)state;
    nb_tokenizer *t = nb_tokenizer_from_json(wordpiece_json, sizeof wordpiece_json - 1);
    assert_non_null(t);
    nb_tokenize_opts o = { 0 }, raw = { .no_special_tokens = true };
    expect_ids(t, "Hello, World!", o, IDS(2, 4, 1, 5, 6, 3));
    expect_ids(t, "unaffable", raw, IDS(7, 8, 9));
    expect_ids(t, "CAFÉ 日本", raw, IDS(10, 11, 12)); /* accents stripped, CJK split */
    expect_ids(t, "unaffablex", raw, IDS(1));      /* no cover: one [UNK] */
    expect_ids(t, "aaaaaaaaaaa", raw, IDS(1));     /* past max_input_chars_per_word */
    expect_ids(t, "aaaaaaaaaa", raw, IDS(13, 14, 14, 14, 14, 14, 14, 14, 14, 14));
    expect_ids(t, "hello[SEP]world", raw, IDS(4, 3, 5)); /* a special token in the text */
    assert_int_equal(nb_tokenizer_vocab_size(t), 15);
    assert_int_equal(nb_token_to_id(t, "##aff"), 8);
    assert_int_equal(nb_token_to_id(t, "nope"), -1);
    assert_null(nb_error());
    assert_string_equal(nb_id_to_token(t, 9), "##able");
    char *s = nb_detokenize(t, (const int64_t[]){ 2, 4, 7, 8, 9, 6, 3 }, 7);
    assert_string_equal(s, "hello unaffable!");
    free(s);
    s = nb_detokenize_ex(t, (const int64_t[]){ 2, 4, 3 }, 3, (nb_detokenize_opts){ .keep_special_tokens = true });
    assert_string_equal(s, "[CLS] hello [SEP]");
    free(s);
    nb_tokenizer_free(t);
}

/* Texts with no ids: controls only, empty. */
static void test_empty_results(void **state) {
    (void)state;
    nb_tokenizer *t = nb_tokenizer_from_json(wordpiece_json, sizeof wordpiece_json - 1);
    assert_non_null(t);
    int64_t ids[4];
    nb_tokenize_opts raw = { .no_special_tokens = true };
    assert_int_equal(nb_tokenize_ex(t, "\x01\x7f\xe2\x80\x8b", 5, ids, 4, raw), 0);
    assert_int_equal(nb_tokenize_ex(t, "", 0, ids, 4, raw), 0);
    assert_int_equal(nb_tokenize(t, "", ids, 4), 2); /* [CLS] [SEP] */
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 3);
    nb_tokenizer_free(t);
}

/* A byte-level BPE small enough to follow by hand: "hello" merges h+e, l+l, he+ll, hell+o. */
static const char bpe_json_head[] =
    "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":%d,\"content\":\"<|endoftext|>\",\"special\":true,\"normalized\":false}],"
    "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":%s,\"trim_offsets\":true,\"use_regex\":true},"
    "\"post_processor\":{\"type\":\"ByteLevel\"},\"decoder\":{\"type\":\"ByteLevel\"},"
    "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"fuse_unk\":false,\"byte_fallback\":false,\"vocab\":{";

/* The 256 byte characters as ids 0..255, then the merged tokens; written into buf. */
static size_t make_bpe_json(char *buf, size_t cap, bool prefix_space, const char *merges) {
    size_t n = (size_t)snprintf(buf, cap, bpe_json_head, 262, prefix_space ? "true" : "false");
    for (int b = 0; b < 256; b++) {
        unsigned cp = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE ? (unsigned)b : 0;
        if (!cp) {
            unsigned k = 0;
            for (int x = 0; x < b; x++) k += !((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE);
            cp = 256 + k;
        }
        char u[8];
        if (cp < 0x80) {
            if (cp == '"' || cp == '\\') snprintf(u, sizeof u, "\\%c", cp);
            else snprintf(u, sizeof u, "%c", cp);
        } else snprintf(u, sizeof u, "%c%c", 0xC0 | cp >> 6, 0x80 | (cp & 0x3F));
        n += (size_t)snprintf(buf + n, cap - n, "\"%s\":%d,", u, b);
    }
    n += (size_t)snprintf(buf + n, cap - n, "\"he\":256,\"ll\":257,\"hell\":258,\"hello\":259,\"\xc4\xa0h\":260,\"\xc4\xa0hello\":261},"
                                          "\"merges\":%s}}", merges);
    return n;
}

static void test_bpe_small(void **state) {
    (void)state;
    static char buf[16384];
    size_t n = make_bpe_json(buf, sizeof buf, false, "[[\"h\",\"e\"],[\"l\",\"l\"],[\"he\",\"ll\"],[\"hell\",\"o\"],[\"\xc4\xa0\",\"h\"]]");
    nb_tokenizer *t = nb_tokenizer_from_json(buf, n);
    if (!t) fail_msg("%s", nb_error());
    nb_tokenize_opts o = { 0 };
    expect_ids(t, "hello", o, IDS(259));
    expect_ids(t, "hello hello", o, IDS(259, 32, 259)); /* he (rank 0) before Ġh (rank 4) */
    expect_ids(t, "hello<|endoftext|>", o, IDS(259, 262));
    expect_ids(t, "it's", o, IDS('i', 't', '\'', 's'));
    /* the older merges form "a b" gives the same */
    nb_tokenizer_free(t);
    n = make_bpe_json(buf, sizeof buf, true, "[\"h e\",\"l l\",\"he ll\",\"hell o\"]");
    t = nb_tokenizer_from_json(buf, n);
    if (!t) fail_msg("%s", nb_error());
    expect_ids(t, "hello", o, IDS(32, 259)); /* the prefix space: Ġ, byte 32, is id 32 */
    int64_t ids[8] = { 259, 32, 259, 0xC3, 0xA9 };
    char *s = nb_detokenize(t, ids, 5);
    assert_string_equal(s, "hello hello\xc3\xa9");
    free(s);
    s = nb_detokenize(t, (const int64_t[]){ 0xE2, 0x82 }, 2); /* a cut character reads as U+FFFD */
    assert_string_equal(s, "\xef\xbf\xbd");
    free(s);
    assert_string_equal(nb_id_to_token(t, 32), "\xc4\xa0");
    nb_tokenizer_free(t);
}

static void test_truncation_padding(void **state) {
    (void)state;
    char json[sizeof wordpiece_json + 256];
    const char *tp = "\"truncation\":{\"max_length\":4,\"strategy\":\"LongestFirst\",\"stride\":0,\"direction\":\"Right\"},"
                     "\"padding\":{\"strategy\":{\"Fixed\":6},\"direction\":\"Right\",\"pad_to_multiple_of\":null,\"pad_id\":0,\"pad_type_id\":0,\"pad_token\":\"[PAD]\"},";
    const char *at = strstr(wordpiece_json, "\"truncation\":null,\"padding\":null,");
    size_t head = (size_t)(at - wordpiece_json);
    snprintf(json, sizeof json, "%.*s%s%s", (int)head, wordpiece_json, tp, at + strlen("\"truncation\":null,\"padding\":null,"));
    nb_tokenizer *t = nb_tokenizer_from_json(json, strlen(json));
    if (!t) fail_msg("%s", nb_error());
    expect_ids(t, "hello world hello world", (nb_tokenize_opts){ 0 }, IDS(2, 4, 5, 3, 0, 0));
    expect_ids(t, "hello world hello world", (nb_tokenize_opts){ .no_padding = true }, IDS(2, 4, 5, 3));
    expect_ids(t, "hello world hello", (nb_tokenize_opts){ .no_padding = true, .no_truncation = true }, IDS(2, 4, 5, 4, 3));
    expect_ids(t, "hello", (nb_tokenize_opts){ .no_special_tokens = true }, IDS(4, 0, 0, 0, 0, 0));
    nb_tokenizer_free(t);
}

/* The count comes back whatever cap is; only cap ids are written. */
static void test_buffer_contract(void **state) {
    (void)state;
    nb_tokenizer *t = nb_tokenizer_from_json(wordpiece_json, sizeof wordpiece_json - 1);
    assert_non_null(t);
    int64_t ids[3] = { -7, -7, -7 };
    assert_int_equal(nb_tokenize(t, "hello world hello world", NULL, 0), 6);
    assert_int_equal(nb_tokenize(t, "hello world hello world", ids, 2), 6);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 4);
    assert_int_equal(ids[2], -7);
    assert_true(nb_tokenize(t, "x", ids, -1) < 0);
    ASSERT_ERROR_CONTAINS("cap is negative");
    assert_true(nb_tokenize(t, "x", NULL, 3) < 0);
    ASSERT_ERROR_CONTAINS("ids is NULL");
    assert_true(nb_tokenize(NULL, "x", ids, 3) < 0);
    ASSERT_ERROR_CONTAINS("tokenizer is NULL");
    nb_tokenizer_free(t);
}

/* src with its first from replaced by to (malloc'ed). */
static char *replaced(const char *src, const char *from, const char *to) {
    const char *at = strstr(src, from);
    assert_non_null(at);
    size_t n = strlen(src) + strlen(to) + 1;
    char *s = malloc(n);
    snprintf(s, n, "%.*s%s%s", (int)(at - src), src, to, at + strlen(from));
    return s;
}

static void test_bad_files(void **state) {
    (void)state;
    assert_null(nb_tokenizer_load(tpath("missing.json")));
    ASSERT_ERROR_CONTAINS("missing.json");
    mkdir(tpath("empty"), 0755);
    assert_null(nb_tokenizer_load(tpath("empty")));
    ASSERT_ERROR_CONTAINS("holds no tokenizer.json");

    write_text(tpath("bad.json"), "{\"model\": {\"type\": \"BPE\", ");
    assert_null(nb_tokenizer_load(tpath("bad.json")));
    ASSERT_ERROR_CONTAINS("bad.json: bad JSON");

    write_text(tpath("unigram.json"), "{\"model\": {\"type\": \"Unigram\", \"vocab\": []}}");
    assert_null(nb_tokenizer_load(tpath("unigram.json")));
    ASSERT_ERROR_CONTAINS("unigram.json: model.type 'Unigram' is not supported");

    char *json = replaced(wordpiece_json, "BertNormalizer", "Precompiled");
    write_text(tpath("norm.json"), json);
    free(json);
    assert_null(nb_tokenizer_load(tpath("norm.json")));
    ASSERT_ERROR_CONTAINS("norm.json: normalizer type 'Precompiled' is not supported");
    json = replaced(wordpiece_json, "BertPreTokenizer", "Punctuation");
    write_text(tpath("pre.json"), json);
    free(json);
    assert_null(nb_tokenizer_load(tpath("pre.json")));
    ASSERT_ERROR_CONTAINS("pre.json: pre_tokenizer type 'Punctuation' is not supported");
    json = replaced(wordpiece_json, "\"unk_token\":\"[UNK]\",\"cont", "\"unk_token\":\"[NOPE]\",\"cont");
    assert_null(nb_tokenizer_from_json(json, strlen(json)));
    free(json);
    ASSERT_ERROR_CONTAINS("model.unk_token '[NOPE]' is not in the vocabulary");

    /* merges.txt: a line of three tokens, a merge of tokens the vocabulary lacks */
    mkdir(tpath("gpt2"), 0755);
    write_text(tpath("gpt2/vocab.json"), "{\"a\": 0, \"b\": 1, \"ab\": 2}");
    write_text(tpath("gpt2/merges.txt"), "#version: 0.2\na b\na b c\n");
    assert_null(nb_tokenizer_load(tpath("gpt2")));
    ASSERT_ERROR_CONTAINS("merges.txt: line 3: a merge is two tokens and one space");
    write_text(tpath("gpt2/merges.txt"), "#version: 0.2\na b\nb a\n");
    assert_null(nb_tokenizer_load(tpath("gpt2")));
    ASSERT_ERROR_CONTAINS("merges: merge 2: 'ba' is not in the vocabulary");
    write_text(tpath("gpt2/merges.txt"), "#version: 0.2\na b\n");
    nb_tokenizer *t = nb_tokenizer_load(tpath("gpt2"));
    if (!t) fail_msg("%s", nb_error());
    assert_int_equal(nb_tokenize(t, "abba", NULL, 0), 3); /* ab, b, a */
    /* ids out of range */
    assert_null(nb_detokenize(t, (const int64_t[]){ 0, 3 }, 2));
    ASSERT_ERROR_CONTAINS("ids[1] = 3 is not in the vocabulary");
    assert_null(nb_detokenize(t, (const int64_t[]){ -1 }, 1));
    ASSERT_ERROR_CONTAINS("ids[0] = -1");
    assert_null(nb_id_to_token(t, 99));
    ASSERT_ERROR_CONTAINS("id 99 is not in the vocabulary");
    nb_tokenizer_free(t);
    write_text(tpath("gpt2/vocab.json"), "[1, 2]");
    assert_null(nb_tokenizer_load(tpath("gpt2/vocab.json")));
    ASSERT_ERROR_CONTAINS("vocab.json: the vocabulary is not an object");

    /* vocab.txt without [UNK]; with tokenizer_config.json saying do_lower_case false */
    mkdir(tpath("bert"), 0755);
    write_text(tpath("bert/vocab.txt"), "[PAD]\nhello\n");
    assert_null(nb_tokenizer_load(tpath("bert/vocab.txt")));
    ASSERT_ERROR_CONTAINS("vocab.txt: no [UNK] token");
    write_text(tpath("bert/vocab.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nHello \n");
    t = nb_tokenizer_load(tpath("bert"));
    if (!t) fail_msg("%s", nb_error());
    expect_ids(t, "Hello hello", (nb_tokenize_opts){ 0 }, IDS(2, 4, 4, 3));
    nb_tokenizer_free(t);
    write_text(tpath("bert/tokenizer_config.json"), "{\"do_lower_case\": false}");
    t = nb_tokenizer_load(tpath("bert/vocab.txt"));
    if (!t) fail_msg("%s", nb_error());
    expect_ids(t, "Hello hello", (nb_tokenize_opts){ 0 }, IDS(2, 5, 4, 3));
    nb_tokenizer_free(t);
    write_text(tpath("bert/tokenizer_config.json"), "{\"do_lower_case\": 3}");
    assert_null(nb_tokenizer_load(tpath("bert/vocab.txt")));
    ASSERT_ERROR_CONTAINS("tokenizer_config.json: config.do_lower_case is not true or false");
}

/* A Llama 2 tokenizer small enough to follow by hand: <unk> <s> </s>, the 256 byte tokens at
   3..258, then "▁" 259, h 260, e 261, l 262, o 263, ▁h 264, ll 265, ▁he 266, ▁hell 267,
   ▁hello 268. %s: the normalizer and pre-tokenizer, %s: the decoder. */
static const char llama2_head[] =
    "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true,\"normalized\":false},"
    "{\"id\":1,\"content\":\"<s>\",\"special\":true,\"normalized\":false},{\"id\":2,\"content\":\"</s>\",\"special\":true,\"normalized\":false}],"
    "%s,\"decoder\":%s,"
    "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
    "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}},"
    "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":true,\"vocab\":{"
    "\"<unk>\":0,\"<s>\":1,\"</s>\":2,";
static const char llama2_legacy[] =
    "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"
    "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}]},\"pre_tokenizer\":null";
static const char llama2_meta[] =
    "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\",\"prepend_scheme\":\"first\",\"split\":false}";
static const char llama2_decoder[] =
    "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xe2\x96\x81\"},\"content\":\" \"},"
    "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]}";

static nb_tokenizer *make_llama2(const char *steps, const char *decoder) {
    static char buf[32768];
    size_t n = (size_t)snprintf(buf, sizeof buf, llama2_head, steps, decoder);
    for (int b = 0; b < 256; b++) n += (size_t)snprintf(buf + n, sizeof buf - n, "\"<0x%02X>\":%d,", b, 3 + b);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "%s",
                          "\"\xe2\x96\x81\":259,\"h\":260,\"e\":261,\"l\":262,\"o\":263,\"\xe2\x96\x81h\":264,\"ll\":265,"
                          "\"\xe2\x96\x81he\":266,\"\xe2\x96\x81hell\":267,\"\xe2\x96\x81hello\":268},\"merges\":["
                          "[\"\xe2\x96\x81\",\"h\"],[\"l\",\"l\"],[\"\xe2\x96\x81h\",\"e\"],[\"\xe2\x96\x81he\",\"ll\"],"
                          "[\"\xe2\x96\x81hell\",\"o\"]]}}");
    nb_tokenizer *t = nb_tokenizer_from_json(buf, n);
    if (!t) fail_msg("%s", nb_error());
    return t;
}

static void test_llama2_small(void **state) {
    (void)state;
    nb_tokenizer *t = make_llama2(llama2_legacy, llama2_decoder);
    nb_tokenize_opts o = { 0 };
    expect_ids(t, "hello hello", o, IDS(1, 268, 268));
    expect_ids(t, "hi", o, IDS(1, 264, 3 + 'i'));              /* 'i' is not a token: its byte */
    expect_ids(t, "h\xc3\xa9", o, IDS(1, 264, 3 + 0xC3, 3 + 0xA9)); /* é: both its bytes */
    expect_ids(t, "<s>hello", o, IDS(1, 1, 268));               /* the normalizer's ▁ on each stretch */
    char *s = nb_detokenize(t, (const int64_t[]){ 1, 268, 268, 3 + 0xC3, 3 + 0xA9 }, 5);
    assert_string_equal(s, "hello hello\xc3\xa9"); /* <s> skipped, the leading space stripped */
    free(s);
    /* a run of byte tokens that is not UTF-8 reads as one U+FFFD a byte */
    s = nb_detokenize(t, (const int64_t[]){ 3 + 0xE6, 3 + 0x97, 268 }, 3);
    assert_string_equal(s, "\xef\xbf\xbd\xef\xbf\xbd hello");
    free(s);
    nb_tokenizer_free(t);
    /* Metaspace, prepend_scheme "first": after <s> the text does not begin the input */
    t = make_llama2(llama2_meta, "{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\",\"prepend_scheme\":\"first\",\"split\":false}");
    expect_ids(t, "hello", o, IDS(1, 268));
    expect_ids(t, "<s>hello", o, IDS(1, 1, 260, 261, 265, 263));
    s = nb_detokenize(t, (const int64_t[]){ 268, 268 }, 2);
    assert_string_equal(s, "hello hello"); /* the first token's ▁ is dropped */
    free(s);
    nb_tokenizer_free(t);
}

/* Split's behaviours on a literal, with a WordPiece model over a, -, a-, -a and --. */
static void test_split_behaviors(void **state) {
    (void)state;
    static const char *const behavior[] = { "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous", "Removed" };
    static const int64_t want[6][6] = { { 1, 1, 1 }, { 1, 2, 1, 2, 2, 1 }, { 3, 3, 2, 1 }, { 1, 4, 2, 4 }, { 1, 2, 1, 5, 1 }, { 2, 2, 2 } };
    static const int nwant[6] = { 3, 6, 4, 4, 5, 3 };
    for (int b = 0; b < 6; b++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"%s\",\"invert\":%s},"
                 "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"[UNK]\":0,\"a\":1,\"-\":2,\"a-\":3,\"-a\":4,\"--\":5}}}",
                 behavior[b], b == 5 ? "true" : "false");
        nb_tokenizer *t = nb_tokenizer_from_json(json, strlen(json));
        if (!t) fail_msg("%s", nb_error());
        expect_ids(t, "a-a--a", (nb_tokenize_opts){ 0 }, want[b], nwant[b]);
        nb_tokenizer_free(t);
    }
}

/* Steps nabla does not run are errors naming tokenizer.json's field. */
static void test_unsupported_steps(void **state) {
    (void)state;
    static const struct {
        const char *from, *to, *error;
    } cases[] = {
        { "{\"type\":\"BertPreTokenizer\"}",
          "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\w+\"},\"behavior\":\"Isolated\",\"invert\":false}]}",
          "pre_tokenizer.pretokenizers[0].pattern.Regex '\\w+' is not supported: nabla has no regex engine, and runs GPT-2's" },
        { "{\"type\":\"BertPreTokenizer\"}", "{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"Sideways\"}",
          "pre_tokenizer.behavior is not one of Removed" },
        { "{\"type\":\"BertPreTokenizer\"}", "{\"type\":\"Metaspace\",\"replacement\":\"ab\"}",
          "pre_tokenizer.replacement is not a string of one character" },
        { "{\"type\":\"BertPreTokenizer\"}", "{\"type\":\"Metaspace\",\"replacement\":\"_\",\"prepend_scheme\":\"sometimes\"}",
          "pre_tokenizer.prepend_scheme is not \"first\", \"always\" or \"never\"" },
        { "{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true}", "{\"type\":\"CTC\"}",
          "decoder type 'CTC' is not supported (ByteLevel, WordPiece, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence)" },
        { "{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true}",
          "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":-1}]}",
          "decoder.decoders[1].start is not a non-negative integer" },
        { "{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\":true,\"strip_accents\":null,\"lowercase\":true}",
          "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" +\"},\"content\":\" \"}",
          "normalizer.pattern: a Regex pattern is not supported here" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *json = replaced(wordpiece_json, cases[i].from, cases[i].to);
        write_text(tpath("steps.json"), json);
        free(json);
        assert_null(nb_tokenizer_load(tpath("steps.json")));
        char want[512];
        snprintf(want, sizeof want, "steps.json: %s", cases[i].error);
        ASSERT_ERROR_CONTAINS(want);
    }
}

/* Invalid UTF-8 reads as U+FFFD: the ids are those of the replaced text. */
static void test_invalid_utf8(void **state) {
    (void)state;
    static char buf[16384];
    size_t n = make_bpe_json(buf, sizeof buf, false, "[]");
    nb_tokenizer *t = nb_tokenizer_from_json(buf, n);
    if (!t) fail_msg("%s", nb_error());
    int64_t a[16], b[16];
    int64_t na = nb_tokenize_ex(t, "x\xe2\x82y\xff", 5, a, 16, (nb_tokenize_opts){ 0 });
    int64_t nb = nb_tokenize(t, "x\xef\xbf\xbdy\xef\xbf\xbd", b, 16);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, (size_t)na * sizeof *a);
    /* NUL bytes inside the text are text */
    assert_int_equal(nb_tokenize_ex(t, "a\0b", 3, a, 16, (nb_tokenize_opts){ 0 }), 3);
    nb_tokenizer_free(t);
}

/* ---------- the corpus against `tokenizers` ---------- */
typedef struct {
    const unsigned char *p, *end;
} reader;

static bool rd_u32(reader *r, uint32_t *v) {
    if (r->end - r->p < 4) return false;
    *v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
    r->p += 4;
    return true;
}

typedef struct {
    const char *ref, *tokenizer;
    nb_tokenize_opts opts;
} corpus_case;

static void run_case(const corpus_case *c) {
    char path[1024], tpath_[1024];
    snprintf(path, sizeof path, "%s/%s.ref", ref_dir, c->ref);
    snprintf(tpath_, sizeof tpath_, "%s/%s", ref_dir, c->tokenizer);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc((size_t)size);
    assert_int_equal(fread(data, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    nb_tokenizer *t = nb_tokenizer_load(tpath_);
    if (!t) fail_msg("%s: %s", tpath_, nb_error());
    reader r = { data, data + size };
    size_t texts = 0, id_bad = 0, dec_bad = 0, rt_ok = 0, rt_ref = 0, nids = 0;
    int64_t *ids = NULL;
    int64_t cap = 0;
    uint32_t flags, tlen = 0;
    while (rd_u32(&r, &flags)) {
        assert_true(rd_u32(&r, &tlen) && (size_t)(r.end - r.p) >= tlen);
        const char *text = (const char *)r.p;
        r.p += tlen;
        uint32_t n = 0;
        assert_true(rd_u32(&r, &n) && (size_t)(r.end - r.p) / 4 >= n);
        const unsigned char *want = r.p;
        r.p += 4 * (size_t)n;
        uint32_t dlen = 0;
        assert_true(rd_u32(&r, &dlen) && (size_t)(r.end - r.p) >= dlen);
        const char *dec = (const char *)r.p;
        r.p += dlen;
        texts++;
        nids += n;
        int64_t got = nb_tokenize_ex(t, text, tlen, ids, cap, c->opts);
        if (got > cap) {
            cap = got * 2;
            ids = realloc(ids, (size_t)cap * sizeof *ids);
            got = nb_tokenize_ex(t, text, tlen, ids, cap, c->opts);
        }
        assert_true(got >= 0);
        bool same = got == (int64_t)n;
        for (uint32_t i = 0; same && i < n; i++) {
            uint32_t w = (uint32_t)want[4 * i] | (uint32_t)want[4 * i + 1] << 8 | (uint32_t)want[4 * i + 2] << 16 |
                         (uint32_t)want[4 * i + 3] << 24;
            same = ids[i] == (int64_t)w;
        }
        if (!same) {
            if (id_bad++ < 5) {
                fprintf(stderr, "%s: ids differ for text %zu (%u bytes): \"%.*s\"\n  nabla:", c->ref, texts, tlen,
                        (int)(tlen > 200 ? 200 : tlen), text);
                for (int64_t i = 0; i < got && i < 40; i++) fprintf(stderr, " %lld", (long long)ids[i]);
                fprintf(stderr, "\n  tokenizers:");
                for (uint32_t i = 0; i < n && i < 40; i++)
                    fprintf(stderr, " %u", (unsigned)want[4 * i] | (unsigned)want[4 * i + 1] << 8 | (unsigned)want[4 * i + 2] << 16);
                fprintf(stderr, "\n");
            }
            continue;
        }
        size_t slen = 0;
        char *s = nb_detokenize_ex(t, ids, got, (nb_detokenize_opts){ .len = &slen });
        if (!s) fail_msg("%s: detokenize: %s", c->ref, nb_error());
        if (slen != dlen || memcmp(s, dec, dlen) != 0) {
            if (dec_bad++ < 5)
                fprintf(stderr, "%s: decode differs for text %zu: nabla \"%.200s\" tokenizers \"%.*s\"\n", c->ref, texts, s,
                        (int)(dlen > 200 ? 200 : dlen), dec);
        }
        if (flags & 1) {
            rt_ref++;
            rt_ok += slen == tlen && memcmp(s, text, tlen) == 0;
        }
        free(s);
    }
    printf("%-22s %zu texts, %zu ids: %zu with different ids, %zu with a different decode; "
           "decode(encode(text)) == text for %zu of the %zu the reference gives back (%s)\n",
           c->ref, texts, nids, id_bad, dec_bad, rt_ok, rt_ref, c->tokenizer);
    free(ids);
    free(data);
    nb_tokenizer_free(t);
    assert_true(texts > 1000);
    assert_int_equal(id_bad, 0);
    assert_int_equal(dec_bad, 0);
    assert_int_equal(rt_ok, rt_ref);
}

static void test_corpus(void **state) {
    (void)state;
    if (!ref_dir) skip();
    static const corpus_case cases[] = {
        { "bpe_json", "bpe/tokenizer.json", { 0 } },
        { "bpe_json_raw", "bpe/tokenizer.json", { .no_special_tokens = true } },
        { "bpe_files", "bpe_files", { 0 } },
        { "bpe_prefix_space", "bpe_prefix_space.json", { 0 } },
        { "minilm_json", "minilm/tokenizer.json", { 0 } },
        { "minilm_json_full", "minilm/tokenizer.json", { .no_truncation = true, .no_padding = true } },
        { "minilm_json_nospecial", "minilm/tokenizer.json", { .no_truncation = true, .no_padding = true, .no_special_tokens = true } },
        { "minilm_vocab", "minilm/vocab.txt", { 0 } },
        { "llama2_legacy", "llama2_legacy.json", { 0 } },
        { "llama2_metaspace", "llama2_metaspace.json", { 0 } },
        { "llama2_split", "llama2_split.json", { 0 } },
        { "llama3", "llama3.json", { 0 } },
        /* GPT-2's regex as a Split step: the reference ids are bpe_json's (tokenizer_ref.py) */
        { "bpe_json", "bpe_gpt2_split.json", { 0 } },
    };
    const char *only = getenv("NABLA_TOKENIZER_CASE");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!only || strcmp(only, cases[i].ref) == 0) run_case(&cases[i]);
}

int main(int argc, char **argv) {
    ref_dir = argc > 1 ? argv[1] : NULL;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/nabla_tokenizer_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_wordpiece_small, clear_error_setup),
        cmocka_unit_test_setup(test_empty_results, clear_error_setup),
        cmocka_unit_test_setup(test_bpe_small, clear_error_setup),
        cmocka_unit_test_setup(test_truncation_padding, clear_error_setup),
        cmocka_unit_test_setup(test_buffer_contract, clear_error_setup),
        cmocka_unit_test_setup(test_bad_files, clear_error_setup),
        cmocka_unit_test_setup(test_invalid_utf8, clear_error_setup),
        cmocka_unit_test_setup(test_llama2_small, clear_error_setup),
        cmocka_unit_test_setup(test_split_behaviors, clear_error_setup),
        cmocka_unit_test_setup(test_unsupported_steps, clear_error_setup),
        cmocka_unit_test_setup(test_corpus, clear_error_setup),
    };
    int rc = RUN_TESTS(tests);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) return 1;
    return rc;
}
