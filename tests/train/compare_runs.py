#!/usr/bin/env python3
"""Checks that two anvil runs trained the same model, bit for bit.

Usage: compare_runs.py RUN_A RUN_B [--from-step K]

Compares every metrics line of steps > K (loss, grad_norm and val_loss, as
written: round-trip doubles), then the latest checkpoints: the weights, tensor
by tensor in anvil's layout (checkpoint_index.json), from either form a
checkpoint holds them in (Hugging Face model.safetensors, mapped here
independently of anvil's loader, or flat weights-* shards), and AdamW's m and
v assembled from however many optimizer shards each run wrote (metadata
shard_begin/shard_end). Exits 1 with what differs.
"""
import json
import pathlib
import struct
import sys

import numpy as np


def read_safetensors(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {k: body[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items()}
    return meta, tensors


def flat_shards(ckpt, prefix, names):
    """The flat buffers `names` assembled from the prefix*.safetensors shards."""
    files = sorted(ckpt.glob(f"{prefix}*.safetensors"))
    if not files:
        sys.exit(f"{ckpt}: no {prefix} files")
    parts, meta = [], {}
    for f in files:
        meta, t = read_safetensors(f)
        parts.append((int(meta.get("shard_begin", 0)), [t[n] for n in names]))
    parts.sort(key=lambda p: p[0])
    size = int(meta["size"])
    whole = [b"".join(p[1][i] for p in parts) for i in range(len(names))]
    if len(whole[0]) != 4 * size:
        sys.exit(f"{ckpt}: {prefix} shards cover {len(whole[0]) // 4} of {size} elements")
    return meta, whole


def optimizer_state(ckpt):
    meta, (m, v) = flat_shards(ckpt, "optimizer", ["m", "v"])
    return meta["step"], m, v


def from_hf(hf, name):
    """anvil's tensor `name` ([in, out] storage, fused q|k|v and gate|up) from
    Hugging Face tensors ([out, in])."""
    f32 = lambda key: np.frombuffer(hf[key][1], dtype="<f4").reshape(hf[key][0])
    if name == "embed":
        return f32("model.embed_tokens.weight")
    if name == "final_norm":
        return f32("model.norm.weight")
    if name == "lm_head":
        return f32("lm_head.weight")
    _, layer, kind = name.split(".")
    p = f"model.layers.{layer}."
    if kind == "attn_norm":
        return f32(p + "input_layernorm.weight")
    if kind == "mlp_norm":
        return f32(p + "post_attention_layernorm.weight")
    if kind == "wqkv":
        return np.concatenate([f32(p + f"self_attn.{x}_proj.weight").T for x in "qkv"], axis=1)
    if kind == "wo":
        return f32(p + "self_attn.o_proj.weight").T
    if kind == "w_gate_up":
        return np.concatenate([f32(p + f"mlp.{x}_proj.weight").T for x in ("gate", "up")], axis=1)
    if kind == "w_down":
        return f32(p + "mlp.down_proj.weight").T
    sys.exit(f"unknown tensor {name}")


def weights(ckpt):
    """Every tensor of the checkpoint's layout: name -> little-endian f32 bytes."""
    index = json.loads((ckpt / "checkpoint_index.json").read_text())
    out = {}
    if (ckpt / "model.safetensors").exists():
        data = (ckpt / "model.safetensors").read_bytes()
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
        header.pop("__metadata__", None)
        hf = {k: (v["shape"], data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
              for k, v in header.items()}
        for t in index["tensors"]:
            a = from_hf(hf, t["name"])
            assert list(a.shape) == t["shape"], (t, a.shape)
            out[t["name"]] = np.ascontiguousarray(a, dtype="<f4").tobytes()
    else:
        _, (flat,) = flat_shards(ckpt, "weights", ["weights"])
        for t in index["tensors"]:
            out[t["name"]] = flat[4 * t["offset"]:4 * (t["offset"] + t["numel"])]
    return out


def latest(run):
    return run / (run / "latest").read_text().strip()


def metrics(run, from_step):
    lines = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        j = json.loads(line)
        if j["step"] <= from_step:
            continue
        kind = "val" if "val_loss" in j else "train"
        keys = ("val_loss",) if kind == "val" else ("loss", "grad_norm")
        lines[(kind, j["step"])] = tuple(j[k] for k in keys)
    return lines


def main():
    args = sys.argv[1:]
    from_step = 0
    if "--from-step" in args:
        i = args.index("--from-step")
        from_step = int(args[i + 1])
        del args[i:i + 2]
    a, b = (pathlib.Path(x) for x in args)
    errors = []
    ma, mb = metrics(a, from_step), metrics(b, from_step)
    if ma.keys() != mb.keys():
        errors.append(f"metrics cover other steps: {sorted(ma)} vs {sorted(mb)}")
    for k in sorted(ma.keys() & mb.keys()):
        if ma[k] != mb[k]:
            errors.append(f"{k[0]} step {k[1]}: {ma[k]} vs {mb[k]}")
    ca, cb = latest(a), latest(b)
    wa, wb = weights(ca), weights(cb)
    for name in sorted(wa.keys() | wb.keys()):
        if wa.get(name) != wb.get(name):
            errors.append(f"weights differ: {name}")
    sa, m_a, v_a = optimizer_state(ca)
    sb, m_b, v_b = optimizer_state(cb)
    if sa != sb:
        errors.append(f"optimizer step {sa} vs {sb}")
    if m_a != m_b:
        errors.append("AdamW m differs")
    if v_a != v_b:
        errors.append("AdamW v differs")
    if errors:
        print(f"{a} and {b} differ:")
        for e in errors[:20]:
            print("  " + e)
        sys.exit(1)
    print(f"same: {a.name} and {b.name} ({len(ma)} metrics lines, {len(wa)} tensors, m and v)")


if __name__ == "__main__":
    main()
