#!/usr/bin/env bash
# The main job: set up a fresh machine, build anvil (release), prepare the
# Brown corpus (BPE, 8192 tokens; skipped when data/brown already holds that),
# pre-train configs/tiny.toml (train.time_budget_minutes fits its schedule into
# 9 minutes on whatever machine this is), then print the final validation loss
# next to the unigram baseline, bits per byte, and a generated sample.
# A second run resumes runs/tiny (a finished run just re-evaluates);
# DEMO_FRESH=1 starts it over.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
budget_min=$(sed -n 's/^ *time_budget_minutes *= *\([0-9.eE+-]*\).*/\1/p' configs/tiny.toml)
budget_min=${budget_min:-10}  # no budget in the config: its hard stop caps training near 10 min
echo "== anvil main job: set up (installs Debian packages on a new machine: 2-5 min), build"
echo "   (the anvil binary only: minutes from scratch on 2 cores, seconds when up to date), prepare Brown (~10 s),"
echo "   train configs/tiny.toml (time budget ${budget_min} min: its step count is fitted to this"
echo "   machine), generate (seconds). About 15 min on a new 2-core machine, ~10 once built."

bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target anvil -j "$(nproc)"  # tests and benchmarks: scripts/run_tests.sh

anvil=build/release/bin/anvil
"$anvil" --version
built=$(date +%s)
# Training's budget plus about a minute for data preparation and generation.
rest_s=$(awk -v b="$budget_min" 'BEGIN { printf "%d", b * 60 + 60 }')
echo "== set up and built in $((built - start)) s; the rest takes at most ~$(( (rest_s + 59) / 60 )) min:" \
     "done by about $(date -d "@$((built + rest_s))" +%H:%M)"

data=data/brown
if [ -f "$data/meta.json" ] && grep -q '"corpus": "brown"' "$data/meta.json" \
    && grep -q '"vocab_size_requested": 8192' "$data/meta.json" \
    && [ -f "$data/train.bin" ] && [ -f "$data/val.bin" ] && [ -f "$data/tokenizer.json" ]; then
  echo "== $data already prepared (brown, vocab 8192): skipping anvil prepare"
else
  echo "== anvil prepare"
  "$anvil" prepare --corpus brown --vocab 8192 --out "$data"
fi

run=runs/tiny
if [ "${DEMO_FRESH:-0}" = 1 ]; then rm -rf "$run"; fi
echo "== anvil train (configs/tiny.toml -> $run)"
train_start=$(date +%s)
if [ -f "$run/latest" ]; then
  "$anvil" train --resume "$run"
else
  "$anvil" train --config configs/tiny.toml --out "$run"
fi
train_end=$(date +%s)

echo "== result"
/usr/bin/python3 - "$run/metrics.jsonl" "$data/meta.json" <<'PY'
import json, math, sys
val = [json.loads(l) for l in open(sys.argv[1]) if '"val_loss"' in l]
meta = json.load(open(sys.argv[2]))
last = val[-1]
loss = last["val_loss"]
base = meta["val_unigram_entropy_nats"]
bpt = meta["val_bytes_per_token"]
print(f"final validation loss  {loss:.4f} nats/token at step {last['step']} "
      f"({last['val_tokens']} validation tokens)")
print(f"unigram baseline       {base:.4f} nats/token  (the loss of predicting token frequencies)")
print(f"improvement            {base - loss:.4f} nats/token below the baseline "
      f"(perplexity {math.exp(loss):.1f} vs {math.exp(base):.1f})")
print(f"bits per byte          {loss / math.log(2) / bpt:.4f}  "
      f"(baseline {base / math.log(2) / bpt:.4f}; {bpt:.3f} bytes/token)")
if not loss < base - 1.0:
    sys.exit("validation loss is not well below the unigram baseline")
PY

echo "== anvil generate"
"$anvil" generate --ckpt "$run" --prompt "The" --max-new 100 --temperature 0.8 --top-k 50 \
  --top-p 0.95 --seed 1

end=$(date +%s)
echo "== wall time: training $((train_end - train_start)) s, whole job $((end - start)) s"
