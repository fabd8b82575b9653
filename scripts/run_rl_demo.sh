#!/usr/bin/env bash
# The second main job, RL post-training: set up and build (as run_demo.sh),
# then `anvil sft` on 3-digit addition (configs/sft-addition.toml: a fresh
# ~0.8M-parameter model, one token per character, stopped once it answers a
# fifth of the held-out problems) and `anvil rl` with GRPO from that policy
# (configs/rl-addition.toml). Prints held-out accuracy before and after RL.
# Each run starts over (runs/sft-addition, runs/rl-addition).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
echo "== anvil RL job: set up (installs Debian packages on a new machine: 2-5 min), build"
echo "   (the anvil binary only: minutes from scratch on 2 cores), SFT (under 1 min), GRPO (4.5 min here; at most 12)."

bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target anvil -j "$(nproc)"  # tests and benchmarks: scripts/run_tests.sh
anvil=build/release/bin/anvil
"$anvil" --version

rm -rf runs/sft-addition runs/rl-addition
jobs_start=$(date +%s)
echo "== anvil sft (configs/sft-addition.toml -> runs/sft-addition)"
"$anvil" sft --config configs/sft-addition.toml --out runs/sft-addition
sft_end=$(date +%s)
echo "== anvil rl (configs/rl-addition.toml -> runs/rl-addition)"
"$anvil" rl --config configs/rl-addition.toml --out runs/rl-addition
end=$(date +%s)

echo "== result"
/usr/bin/python3 - runs/rl-addition/metrics.jsonl <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
evals = [l for l in lines if "heldout_accuracy" in l]
steps = [l for l in lines if "max_logprob_diff" in l]
first, last = evals[0], evals[-1]
gain = 100 * (last["heldout_accuracy"] - first["heldout_accuracy"])
print(f"held-out accuracy  {100 * first['heldout_accuracy']:.1f}% after SFT, "
      f"{100 * last['heldout_accuracy']:.1f}% after {last['step']} GRPO steps ({gain:+.1f} points; "
      f"{last['heldout_problems']} problems)")
print(f"rollout vs trainer log-probs: largest difference over {len(steps)} steps "
      f"{max(s['max_logprob_diff'] for s in steps):g} (0: exactly on-policy)")
PY
echo "== sample answers"
for p in "123+456=" "999+1=" "580+266="; do
  printf '%s' "$p"
  "$anvil" generate --ckpt runs/rl-addition --prompt "$p" --greedy --max-new 6 2>/dev/null \
    | head -1 | cut -c$((${#p} + 1))-
done
echo "== wall time: sft $((sft_end - jobs_start)) s, rl $((end - sft_end)) s, whole job $((end - start)) s"
