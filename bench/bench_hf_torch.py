#!/usr/bin/env python3
"""transformers on the same measurements as bench_hf (bench/run_hf.sh runs both), one a process:
  load DIR            seconds of from_pretrained (median of 5)
  generate DIR N T    greedy tokens/s at batch 1 (median of 3 after a warm-up), peak RSS
  embed DIR FILE      sentence-transformers' encode at batch 32, sentences/s (median of 3)
  write-gpt2 DIR      a GPT-2-small-sized GPT2LMHeadModel at random initialisation, saved
  write-llama DIR     a LlamaForCausalLM of about GPT-2 small's size (768 wide, 12 layers, 12
                      heads and 4 kv heads, MLP 2048, vocabulary 32000) at random initialisation
--threads N sets torch.set_num_threads (the same count as nabla's)."""
import argparse
import resource
import statistics
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cmd")
    p.add_argument("args", nargs="*")
    p.add_argument("--threads", type=int, default=0)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.set_grad_enabled(False)
    if a.cmd == "write-gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        torch.manual_seed(0)
        GPT2LMHeadModel(GPT2Config()).save_pretrained(a.args[0], safe_serialization=True)
    elif a.cmd == "write-llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        torch.manual_seed(0)
        LlamaForCausalLM(LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                                     num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=1024)
                         ).save_pretrained(a.args[0], safe_serialization=True)
    elif a.cmd == "load":
        from transformers import AutoModel
        t = []
        for _ in range(5):
            t0 = time.perf_counter()
            AutoModel.from_pretrained(a.args[0])
            t.append(time.perf_counter() - t0)
        print(f"load_s {statistics.median(t):.6f}")
    elif a.cmd == "generate":
        from transformers import AutoModelForCausalLM
        m = AutoModelForCausalLM.from_pretrained(a.args[0]).eval()
        n, t0 = int(a.args[1]), int(a.args[2])
        torch.manual_seed(3)
        ids = torch.randint(0, 1000, (1, t0))
        t = []
        for _ in range(4):
            s = time.perf_counter()
            m.generate(ids, do_sample=False, max_new_tokens=n, min_new_tokens=n, pad_token_id=0)
            t.append(time.perf_counter() - s)
        print(f"generate_tok_s {n / statistics.median(t[1:]):.3f}")
        print(f"peak_rss_mib {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")
    elif a.cmd == "embed":
        from sentence_transformers import SentenceTransformer
        m = SentenceTransformer(a.args[0], device="cpu")
        lines = open(a.args[1], encoding="utf-8").read().split("\n")[:-1]
        t = []
        for _ in range(4):
            s = time.perf_counter()
            m.encode(lines, batch_size=32)
            t.append(time.perf_counter() - s)
        print(f"embed_per_s {len(lines) / statistics.median(t[1:]):.2f}")
    else:
        raise SystemExit(f"unknown command {a.cmd}")


if __name__ == "__main__":
    main()
