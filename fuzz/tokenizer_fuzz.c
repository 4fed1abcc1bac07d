/* libFuzzer target: the tokenizers. The first byte picks what the rest is: even, a tokenizer.json
   for nb_tokenizer_from_json (then a few texts go through whatever loads); odd, text for a small
   WordPiece (BERT normalizer) and a small byte-level BPE with added tokens, encoded and the ids
   decoded again. Nothing may crash, leak or read out of bounds, whatever the bytes. */
#include <nabla.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char wordpiece[] =
    "{\"added_tokens\":[{\"id\":1,\"content\":\"[UNK]\",\"special\":true,\"normalized\":false},"
    "{\"id\":2,\"content\":\"[CLS]\",\"special\":true,\"normalized\":false,\"lstrip\":true,\"rstrip\":true},"
    "{\"id\":3,\"content\":\"[SEP]\",\"special\":true,\"normalized\":false},{\"id\":16,\"content\":\"hello world\",\"normalized\":true,\"single_word\":true}],"
    "\"normalizer\":{\"type\":\"BertNormalizer\",\"lowercase\":true},\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
    "\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"[SEP]\",3],\"cls\":[\"[CLS]\",2]},"
    "\"truncation\":{\"max_length\":64,\"strategy\":\"LongestFirst\"},\"padding\":{\"strategy\":\"BatchLongest\",\"pad_to_multiple_of\":8,\"pad_id\":0},"
    "\"decoder\":{\"type\":\"WordPiece\"},\"model\":{\"type\":\"WordPiece\",\"max_input_chars_per_word\":12,"
    "\"vocab\":{\"[PAD]\":0,\"[UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"hello\":4,\"##lo\":5,\"a\":6,\"##a\":7,\"e\":8,\"##e\":9,"
    "\"!\":10,\"日\":11,\"##\\u00e9\":12,\"x\":13,\"##x\":14,\"hel\":15}}}";

static const char bpe[] =
    "{\"added_tokens\":[{\"id\":12,\"content\":\"<|endoftext|>\",\"special\":true,\"normalized\":false}],"
    "\"normalizer\":{\"type\":\"Lowercase\"},\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true},"
    "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"unk_token\":\"u\",\"fuse_unk\":true,\"byte_fallback\":true,"
    "\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"\\u0120\":3,\"\\u0120a\":4,\"u\":5,\"<0x41>\":6,\"<0xC3>\":7,\"abab\":8,\"c\":9,\"\\u0120ab\":10,\"bc\":11},"
    "\"merges\":[\"a b\",\"\\u0120 a\",\"ab ab\",[\"\\u0120a\",\"b\"],\"b c\"]}}";

static void run(nb_tokenizer *t, const char *text, size_t n) {
    int64_t ids[64];
    int64_t k = nb_tokenize_ex(t, text, n, ids, 64, (nb_tokenize_opts){ 0 });
    if (k > 64) {
        int64_t *big = malloc((size_t)k * sizeof *big);
        if (big && nb_tokenize_ex(t, text, n, big, k, (nb_tokenize_opts){ .no_padding = true }) >= 0) {
            char *s = nb_detokenize(t, big, k < 4096 ? k : 4096);
            free(s);
        }
        free(big);
    } else if (k >= 0) {
        size_t len;
        char *s = nb_detokenize_ex(t, ids, k, (nb_detokenize_opts){ .keep_special_tokens = true, .len = &len });
        free(s);
    }
    nb_error_clear();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static nb_tokenizer *wp, *bp;
    if (!wp) wp = nb_tokenizer_from_json(wordpiece, sizeof wordpiece - 1);
    if (!bp) bp = nb_tokenizer_from_json(bpe, sizeof bpe - 1);
    if (!wp || !bp) abort(); /* the fixed tokenizers must load */
    if (!size) return 0;
    /* a private copy, so reads past the input's end are caught by ASan */
    char *buf = malloc(size - 1 ? size - 1 : 1);
    memcpy(buf, data + 1, size - 1);
    if (data[0] & 1) {
        run(wp, buf, size - 1);
        run(bp, buf, size - 1);
    } else {
        nb_tokenizer *t = nb_tokenizer_from_json(buf, size - 1);
        if (t) {
            static const char *const texts[] = { "Hello, world! ab abc", "  caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac <|endoftext|>", "\xff\xfe x", "" };
            for (int i = 0; i < 4; i++) run(t, texts[i], strlen(texts[i]));
            (void)nb_tokenizer_vocab_size(t);
            (void)nb_id_to_token(t, 0);
            (void)nb_token_to_id(t, "a");
            nb_tokenizer_free(t);
        }
    }
    nb_error_clear();
    free(buf);
    return 0;
}
