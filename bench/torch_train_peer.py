#!/usr/bin/python3
"""The PyTorch peer of `anvil bench train`: an independent Llama of the same
config (RMSNorm, rotate-half RoPE, GQA, SwiGLU, untied or tied head) trained
with torch.optim.AdamW and clip_grad_norm_ on random tokens, as a tuning user
would run it: batched causal attention, bf16 through
torch.autocast("cpu", dtype=torch.bfloat16), torch.set_num_threads(N). The
caller sets the process environment (tcmalloc LD_PRELOAD, OMP_WAIT_POLICY).

Prints one JSON object: tokens_per_s after the warmup steps, and the losses.
"""
import argparse
import json
import math
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print(json.dumps({"error": f"PyTorch not importable: {e}"}))
    sys.exit(77)


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        d, hd = c["dim"], c["dim"] // c["n_heads"]
        self.attn_norm = RMSNorm(d, c["norm_eps"])
        self.wq = torch.nn.Linear(d, c["n_heads"] * hd, bias=False)
        self.wk = torch.nn.Linear(d, c["n_kv_heads"] * hd, bias=False)
        self.wv = torch.nn.Linear(d, c["n_kv_heads"] * hd, bias=False)
        self.wo = torch.nn.Linear(c["n_heads"] * hd, d, bias=False)
        self.mlp_norm = RMSNorm(d, c["norm_eps"])
        self.w_gate = torch.nn.Linear(d, c["ffn_dim"], bias=False)
        self.w_up = torch.nn.Linear(d, c["ffn_dim"], bias=False)
        self.w_down = torch.nn.Linear(c["ffn_dim"], d, bias=False)

    def forward(self, x, cos, sin, mask):
        c = self.c
        b, t, d = x.shape
        nh, nkv = c["n_heads"], c["n_kv_heads"]
        hd = d // nh
        h = self.attn_norm(x)
        q = self.wq(h).view(b, t, nh, hd).transpose(1, 2)
        k = self.wk(h).view(b, t, nkv, hd).transpose(1, 2)
        v = self.wv(h).view(b, t, nkv, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if nkv != nh:
            k = k.repeat_interleave(nh // nkv, dim=1)
            v = v.repeat_interleave(nh // nkv, dim=1)
        s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd)) + mask
        a = torch.softmax(s.float(), dim=-1).to(v.dtype) @ v
        x = x + self.wo(a.transpose(1, 2).reshape(b, t, nh * hd))
        h = self.mlp_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Llama(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = torch.nn.Embedding(c["vocab_size"], c["dim"])
        self.blocks = torch.nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
        self.norm = RMSNorm(c["dim"], c["norm_eps"])
        self.head = torch.nn.Linear(c["dim"], c["vocab_size"], bias=False)
        if c["tie_embeddings"]:
            self.head.weight = self.embed.weight
        for p in self.parameters():
            if p.dim() >= 2:
                torch.nn.init.normal_(p, std=c["init_std"])

    def forward(self, tokens, cos, sin, mask):
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x, cos, sin, mask)
        return self.head(self.norm(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", required=True, help="JSON of anvil's [model] keys")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-3)
    a = ap.parse_args()
    c = json.loads(a.model)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Llama(c)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    hd = c["dim"] // c["n_heads"]
    inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.arange(a.seq, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((ang, ang), dim=-1)
    cos, sin = emb.cos().float(), emb.sin().float()
    mask = torch.full((a.seq, a.seq), float("-inf")).triu(1)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, c["vocab_size"], (a.batch, a.seq + 1), generator=g)
               for _ in range(4)]
    autocast = a.precision == "bf16"
    losses = []

    def step(i):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for m in range(a.accum):
            toks = batches[(i * a.accum + m) % len(batches)]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                logits = model(toks[:, :-1], cos, sin, mask)
            loss = F.cross_entropy(logits.float().reshape(-1, c["vocab_size"]),
                                   toks[:, 1:].reshape(-1)) / a.accum
            loss.backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(total)

    for i in range(a.warmup):
        step(i)
    t0 = time.perf_counter()
    for i in range(a.steps):
        step(a.warmup + i)
    seconds = time.perf_counter() - t0
    tokens = a.steps * a.batch * a.seq * a.accum
    print(json.dumps({"peer": f"pytorch {torch.__version__}", "tokens_per_s": tokens / seconds,
                      "seconds": seconds, "steps": a.steps, "threads": torch.get_num_threads(),
                      "precision": a.precision, "first_loss": losses[0], "last_loss": losses[-1]}))


if __name__ == "__main__":
    main()
