#!/usr/bin/env python3
"""Checks that two anvil runs trained the same model, bit for bit.

Usage: compare_runs.py RUN_A RUN_B [--from-step K]

Compares every metrics line of steps > K (loss, grad_norm and val_loss, as
written: round-trip doubles), then the latest checkpoints: the weights
(model.safetensors tensor bytes) and AdamW's m and v assembled from however
many optimizer shards each run wrote (metadata shard_begin/shard_end).
Exits 1 with what differs.
"""
import json
import pathlib
import struct
import sys


def read_safetensors(path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {k: body[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items()}
    return meta, tensors


def optimizer_state(ckpt):
    files = sorted(ckpt.glob("optimizer*.safetensors"))
    if not files:
        sys.exit(f"{ckpt}: no optimizer state")
    parts, step, size = [], None, None
    for f in files:
        meta, t = read_safetensors(f)
        step, size = meta["step"], int(meta["size"])
        parts.append((int(meta.get("shard_begin", 0)), t["m"], t["v"]))
    parts.sort()
    m = b"".join(p[1] for p in parts)
    v = b"".join(p[2] for p in parts)
    if len(m) != 4 * size:
        sys.exit(f"{ckpt}: optimizer shards cover {len(m) // 4} of {size} elements")
    return step, m, v


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
    _, wa = read_safetensors(ca / "model.safetensors")
    _, wb = read_safetensors(cb / "model.safetensors")
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
