/* nabla hf: Hugging Face pretrained models. Tokenizers (below) give the ids of Hugging Face's
   `tokenizers` library; checkpoints and generation have sections of their own. */
#ifndef NABLA_HF_H
#define NABLA_HF_H

#include "core.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- tokenizers ----
   Byte-level BPE (GPT-2's vocab.json + merges.txt; tokenizer.json with a BPE model and a
   ByteLevel pre-tokenizer), Llama 2's and Mistral's (BPE with byte fallback, Metaspace) and
   Llama 3's (its Split pattern and ByteLevel) tokenizer.json, and WordPiece (BERT's vocab.txt;
   tokenizer.json with a WordPiece model, BertNormalizer and BertPreTokenizer), encode and decode, with added and special
   tokens, the post-processor's special tokens, and tokenizer.json's truncation and padding.
   Text is UTF-8; invalid UTF-8 is not an error: each maximal invalid sequence reads as U+FFFD
   (as Python's bytes.decode('utf-8', 'replace')), so its ids are those `tokenizers` gives the
   replaced text. A loaded tokenizer is read-only: one may be used from several threads at once.
   docs/pretrained.md lists what is supported and what is not yet. */
typedef struct nb_tokenizer nb_tokenizer;

/* Loads a tokenizer from a tokenizer.json file; a vocab.txt file (WordPiece, lower-casing as
   bert-base-uncased unless a tokenizer_config.json beside it says "do_lower_case": false); a
   vocab.json file with merges.txt beside it (byte-level BPE, as tokenizers' ByteLevelBPETokenizer);
   or a folder holding one of those (tokenizer.json first). NULL with an error naming the file and
   field on a missing file, malformed JSON or merges, or a model, normalizer, pre-tokenizer,
   post-processor or decoder it does not support. Free with nb_tokenizer_free. */
NB_API nb_tokenizer *nb_tokenizer_load(const char *path);
/* Loads a tokenizer from the len bytes of tokenizer.json text at json (no NUL needed). */
NB_API nb_tokenizer *nb_tokenizer_from_json(const char *json, size_t len);
/* Frees the tokenizer; NULL is ignored. */
NB_API void nb_tokenizer_free(nb_tokenizer *t);

/* Options of nb_tokenize_ex; all-zero is what `tokenizers`' encode(text) does. */
typedef struct nb_tokenize_opts {
    bool no_special_tokens; /* leave out what the post-processor adds (BERT's [CLS] and [SEP]):
                               encode(text, add_special_tokens=False) */
    bool no_truncation;     /* ignore tokenizer.json's "truncation" (max_length) */
    bool no_padding;        /* ignore tokenizer.json's "padding" (MiniLM's pads to 128) */
} nb_tokenize_opts;
/* Writes the ids of the NUL-terminated UTF-8 text into ids[0..cap) and returns how many there
   are, which may exceed cap (then only cap are written: call again with a larger buffer); < 0
   with an error. Special tokens, truncation and padding as tokenizer.json says. */
NB_API int64_t nb_tokenize(nb_tokenizer *t, const char *text, int64_t *ids, int64_t cap);
/* nb_tokenize on the len bytes at text (NUL bytes included), with options. */
NB_API int64_t nb_tokenize_ex(nb_tokenizer *t, const char *text, size_t len, int64_t *ids, int64_t cap,
                              nb_tokenize_opts opts);

/* Options of nb_detokenize_ex; all-zero is what `tokenizers`' decode(ids) does. */
typedef struct nb_detokenize_opts {
    bool keep_special_tokens; /* decode special tokens too: decode(ids, skip_special_tokens=False) */
    size_t *len;              /* when not NULL, receives the text's length in bytes (a decoded
                                 text may hold NUL bytes: the ids of a "\0") */
} nb_detokenize_opts;
/* The text of n ids as a malloc'ed NUL-terminated UTF-8 string (free it), special tokens left
   out; bytes that do not form UTF-8 (a piece of a character) read as U+FFFD. NULL with an error
   when an id is not in the vocabulary (`tokenizers` drops such ids silently). */
NB_API char *nb_detokenize(nb_tokenizer *t, const int64_t *ids, int64_t n);
/* nb_detokenize with options. */
NB_API char *nb_detokenize_ex(nb_tokenizer *t, const int64_t *ids, int64_t n, nb_detokenize_opts opts);

/* One more than the largest id (the rows an embedding table needs), added tokens included. */
NB_API int64_t nb_tokenizer_vocab_size(const nb_tokenizer *t);
/* The id of a token string (an added token, else the model's vocabulary), or -1 when there is
   none (no error is recorded: absence is an answer). */
NB_API int64_t nb_token_to_id(const nb_tokenizer *t, const char *token);
/* The token string of an id (borrowed, valid until nb_tokenizer_free; byte-level BPE tokens are
   in GPT-2's byte alphabet, "Ġ" for a space), or NULL with an error when no token has that id. */
NB_API const char *nb_id_to_token(const nb_tokenizer *t, int64_t id);

/* ---- checkpoints ----
   A checkpoint folder as save_pretrained writes it: config.json and model.safetensors, or
   model-0000K-of-0000N.safetensors shards with model.safetensors.index.json. The files are
   mapped copy-on-write and a parameter whose dtype is the model's is a view of its file: no
   second copy (training writes copy only the pages it touches; the file never changes); bf16
   and f16 weights are converted. Built now: BERT-family encoders (model_type "bert": BERT,
   MiniLM), GPT-2 (model_type "gpt2") and Llama-family decoders (model_type "llama", and
   "mistral" with its sliding window).
   docs/pretrained.md says what is not built yet. */

/* Options of nb_hf_load; zero fields take the defaults. */
typedef struct nb_hf_opts {
    nb_dtype dtype; /* the parameters' dtype: NB_F32 (0) or NB_F64 */
} nb_hf_opts;

/* The folder a model name stands for, into buf (size bytes): name itself when it is a file or
   folder (or a path), else, for a Hub id such as "gpt2" or "sentence-transformers/all-MiniLM-L6-v2",
   its snapshot in the Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else
   $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub): models--ORG--NAME/snapshots/REV,
   REV the revision refs/main names, else the newest snapshot. nb_hf_load, nb_tokenizer_load,
   nb_hf_save's src_dir and nb_hf_embed's model_dir take such names too. nabla never downloads:
   0, or -1 with an error saying where it looked. */
NB_API int nb_hf_resolve(const char *name, char *buf, size_t size);
/* Builds the architecture config.json names, with Hugging Face's parameter names, and binds the
   checkpoint's weights, in eval mode. nb_forward(m, ids [B, T] i64) gives an encoder's last
   hidden states [B, T, hidden], a causal LM's logits [B, T, vocab]. NULL with an error naming the file and the field or key: an
   unsupported model_type or activation, a missing or unexpected key, a shape that differs from
   the config's, a shard the index lists but the folder lacks, a truncated file. */
NB_API nb_module *nb_hf_load(const char *dir, nb_hf_opts opts);
/* An encoder's last hidden states [B, T, hidden] for ids [B, T], with attention_mask [B, T]
   (1 for a token, 0 for padding; NULL: all tokens) and token_type_ids [B, T] (NULL: zeros). */
NB_API nb_tensor *nb_hf_encode(nb_module *m, nb_tensor *ids, nb_tensor *attention_mask, nb_tensor *token_type_ids);
/* Mean of hidden [B, T, H] over the tokens attention_mask keeps (NULL: all), L2-normalised when
   normalize: sentence-transformers' Pooling(mean) and Normalize. [B, H]. */
NB_API nb_tensor *nb_hf_mean_pool(nb_tensor *hidden, nb_tensor *attention_mask, bool normalize);

/* Options of nb_hf_embed; zero fields take the defaults. */
typedef struct nb_hf_embed_opts {
    const char *model_dir; /* where sentence_bert_config.json's max_seq_length is read, or NULL */
    int64_t max_tokens;    /* longest input, special tokens included, 2 to the model's positions (0: max_seq_length,
                              else the model's positions); longer texts are cut, keeping the closing token */
    int64_t pad_id;        /* the padding id (BERT's [PAD] is 0) */
    int64_t batch_size;    /* texts encoded together (0: 32, sentence-transformers' default) */
} nb_hf_embed_opts;
/* Sentence embeddings [n, hidden] of n texts, row i for texts[i]: tokenized (special tokens
   added), sorted by length in characters and encoded batch_size at a time, each batch padded to
   its longest text (as sentence-transformers' encode(texts, batch_size) orders them, so padding
   is least; texts of equal length may be grouped otherwise, which changes only rounding),
   mean-pooled over the real tokens and L2-normalised, as encode computes them for
   all-MiniLM-L6-v2. Inference: runs with recording off (encode's no_grad), so nothing
   differentiates through it; call nb_hf_encode and nb_hf_mean_pool to train. NULL with the error. */
NB_API nb_tensor *nb_hf_embed(nb_module *m, nb_tokenizer *tok, const char *const *texts, int n, nb_hf_embed_opts opts);

/* ---- generation ---- */

/* Options of nb_generate; all-zero is greedy decoding of no tokens. */
typedef struct nb_generate_opts {
    int64_t max_new_tokens;
    double temperature;   /* 0: greedy (the argmax; ties to the lower id); else the softmax of
                             logits / temperature is sampled */
    int64_t top_k;        /* sampling: only the k most likely tokens (0: all) */
    double top_p;         /* sampling: only the most likely tokens whose probability reaches top_p
                             (0 or 1: all) */
    uint64_t seed;        /* the sampler's generator (splitmix64): one seed, one output */
    const int64_t *stop;  /* tokens that end a row (GPT-2's <|endoftext|> is 50256), nstop of them */
    int nstop;
    void (*on_token)(int64_t row, int64_t id, void *ctx); /* called with each new token, as made */
    void *ctx;
    const int64_t *prompt_lengths; /* B lengths, or NULL (every row's prompt is all T tokens): row
                                      b's prompt is its last prompt_lengths[b] tokens, the ones
                                      before are left padding, masked out (transformers' layout
                                      for a batch of prompts of different lengths) */
} nb_generate_opts;
/* Whether m is a causal LM that nb_hf_load made (nb_forward gives logits [B, T, vocab]; nb_generate
   continues it). */
NB_API bool nb_hf_is_causal_lm(const nb_module *m);
/* The end-of-text token of a causal LM (config.json's eos_token_id, the first when it lists
   several), or -1 when it has none. */
NB_API int64_t nb_hf_eos_id(const nb_module *lm);
/* All of config.json's eos_token_id (Llama 3 lists end of text, end of turn...): writes up to cap
   into ids and returns how many there are (0: none, or not a causal LM); generation should stop
   at any of them, as transformers does. */
NB_API int nb_hf_eos_ids(const nb_module *lm, int64_t *ids, int cap);
/* Continues each row of ids [B, T] i64 (left-padded when prompt_lengths is given) by up to max_new_tokens tokens
   with a key/value cache: [B, T + n] i64, n the steps run (a row that met a stop token repeats
   the first stop token after it; all rows stopped ends early). NULL with the error. */
NB_API nb_tensor *nb_generate(nb_module *lm, nb_tensor *ids, nb_generate_opts opts);

/* ---- fine-tuning ----
   `nabla train --model DIR --data FILE.txt` is built from these and nb_model_fit_loader; a
   causal LM that nb_hf_load made applies its config's dropouts in train mode (nb_module_train),
   as transformers does, and none in eval mode. */

/* The causal LM loss of logits [B, T, vocab] computed from ids [B, T] i64 (T >= 2): the mean
   cross entropy of logits[:, :-1] against ids[:, 1:], each position predicting the next token,
   as transformers' GPT2LMHeadModel(input_ids=ids, labels=ids).loss. NULL with the error. */
NB_API nb_tensor *nb_hf_causal_lm_loss(nb_tensor *logits, nb_tensor *ids);
/* The ids of the len bytes of UTF-8 text, tokenized as one text (no special tokens added, no
   truncation or padding), cut into consecutive blocks of `block` tokens: [N, block] i64, the
   remainder dropped, as run_clm.py's group_texts. NULL with an error naming the token count when
   the text has fewer than block tokens. */
NB_API nb_tensor *nb_hf_text_blocks(nb_tokenizer *tok, const char *text, size_t len, int64_t block);
/* Writes m, which nb_hf_load made from src_dir (and training has changed since), as a checkpoint
   folder out_dir (created if absent; its parent must exist): each weights file of src_dir
   (model.safetensors, or its shards) again under its name, with the same keys in the same order,
   dtypes, shapes and metadata, holding m's values; a key m does not hold is written as the
   tensor of m whose bytes it repeated in src_dir (a tied lm_head.weight), else as it was (a
   constant buffer). config.json, generation_config.json, the shard index and the tokenizer files
   are copied. src_dir's files are only read. 0, or <0 with an error (out_dir is src_dir, a tensor
   of m that src_dir lacks, a file that cannot be written). */
NB_API int nb_hf_save(nb_module *m, const char *src_dir, const char *out_dir);

#ifdef __cplusplus
}
#endif

#endif
