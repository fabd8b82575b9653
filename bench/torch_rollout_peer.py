#!/usr/bin/python3
"""The PyTorch peer of `anvil bench rollout`: batched KV-cache generation with
the Llama of torch_train_peer.py (same config, random weights: throughput
does not depend on their values), as a user would write it with
torch.inference_mode(): one batched prefill of the prompts, then one token a
step for the whole batch, each layer's keys and values written into
preallocated caches, the next token drawn with torch.multinomial from the
softmax at temperature 1 over the whole vocabulary. `rounds` batches one
after the other, every sample max_new tokens long (no eos), like anvil's
benchmark. With --precision bf16, inside torch.autocast("cpu",
dtype=torch.bfloat16), as torch_train_peer.py runs bf16. The caller sets the
process environment.

Prints one JSON object: new tokens per second over the timed rounds.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import torch
    from torch_train_peer import Llama, rotate_half
except ImportError as e:  # pragma: no cover
    print(json.dumps({"error": f"PyTorch not importable: {e}"}))
    sys.exit(77)


def attend(blk, x, cos, sin, k_cache, v_cache, start):
    """One block over positions [start, start + t) of x [b, t, d], the keys
    and values of earlier positions read from (and these written into) the
    caches [b, n_kv_heads, max_len, head_dim]."""
    c = blk.c
    b, t, d = x.shape
    nh, nkv = c["n_heads"], c["n_kv_heads"]
    hd = d // nh
    h = blk.attn_norm(x)
    q = blk.wq(h).view(b, t, nh, hd).transpose(1, 2)
    k = blk.wk(h).view(b, t, nkv, hd).transpose(1, 2)
    v = blk.wv(h).view(b, t, nkv, hd).transpose(1, 2)
    cs, sn = cos[start:start + t], sin[start:start + t]
    q = q * cs + rotate_half(q) * sn
    k = k * cs + rotate_half(k) * sn
    k_cache[:, :, start:start + t] = k
    v_cache[:, :, start:start + t] = v
    keys, values = k_cache[:, :, :start + t], v_cache[:, :, :start + t]
    if nkv != nh:
        keys = keys.repeat_interleave(nh // nkv, dim=1)
        values = values.repeat_interleave(nh // nkv, dim=1)
    s = (q @ keys.transpose(-1, -2)) * (1.0 / math.sqrt(hd))
    if t > 1:  # prefill: causal within the new positions
        s = s + torch.full((t, start + t), float("-inf")).triu(start + 1)
    a = torch.softmax(s, dim=-1) @ values
    x = x + blk.wo(a.transpose(1, 2).reshape(b, t, nh * hd))
    h = blk.mlp_norm(x)
    return x + blk.w_down(torch.nn.functional.silu(blk.w_gate(h)) * blk.w_up(h))


def generate(model, prompts, max_new, cos, sin, generator):
    c = model.c
    b, p = prompts.shape
    hd = c["dim"] // c["n_heads"]
    caches = [(torch.empty(b, c["n_kv_heads"], p + max_new, hd),
               torch.empty(b, c["n_kv_heads"], p + max_new, hd)) for _ in model.blocks]
    tokens, start = prompts, 0
    for _ in range(max_new):
        x = model.embed(tokens)
        for blk, (kc, vc) in zip(model.blocks, caches):
            x = attend(blk, x, cos, sin, kc, vc, start)
        logits = model.head(model.norm(x[:, -1]))
        start += tokens.shape[1]
        probs = torch.softmax(logits.float(), dim=-1)
        tokens = torch.multinomial(probs, 1, generator=generator)
    return b * max_new


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", required=True, help="JSON of anvil's [model] keys")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--prompt-len", type=int, required=True)
    ap.add_argument("--max-new", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    a = ap.parse_args()
    c = json.loads(a.model)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Llama(c).eval()
    hd = c["dim"] // c["n_heads"]
    length = a.prompt_len + a.max_new
    inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.arange(length, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos().float(), emb.sin().float()
    g = torch.Generator().manual_seed(1)
    autocast = a.precision == "bf16"
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        warm = torch.randint(0, c["vocab_size"], (a.batch, a.prompt_len), generator=g)
        generate(model, warm, min(4, a.max_new), cos, sin, g)
        new_tokens = 0
        t0 = time.perf_counter()
        for _ in range(a.rounds):
            prompts = torch.randint(0, c["vocab_size"], (a.batch, a.prompt_len), generator=g)
            new_tokens += generate(model, prompts, a.max_new, cos, sin, g)
        seconds = time.perf_counter() - t0
    print(json.dumps({"peer": f"pytorch {torch.__version__}", "new_tokens": new_tokens,
                      "seconds": seconds, "tokens_per_s": new_tokens / seconds}))


if __name__ == "__main__":
    main()
