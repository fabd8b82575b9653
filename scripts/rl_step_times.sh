#!/bin/bash
# Step times of the RL modes on this machine: GRPO and PPO colocated, GRPO
# with asynchronous rollouts (trainer 1 thread + rollouts 1, and trainer's
# default pool + rollouts 1), and with them on a rank of their own (mpirun
# -np 2, trainer 1 thread + rollout rank 1; skipped without mpirun). 100
# steps each of configs/rl-addition.toml from an SFT checkpoint; prints
# medians of steps 6-100 from metrics.jsonl.
#
#   scripts/rl_step_times.sh [ANVIL] [SFT_RUN] [OUT_DIR]
# defaults: build/release/bin/anvil, runs/sft-addition, /tmp/anvil-rl-step-times
set -euo pipefail
anvil=${1:-build/release/bin/anvil}
sft=${2:-runs/sft-addition}
out=${3:-/tmp/anvil-rl-step-times}
python=/usr/bin/python3
[ -x "$anvil" ] || { echo "no anvil binary at $anvil (build first)"; exit 1; }
[ -e "$sft/latest" ] || { echo "no SFT run at $sft (run anvil sft --config configs/sft-addition.toml)"; exit 1; }
mkdir -p "$out"
launch=()  # a launcher in front of anvil (mpirun for the two-rank mode)
run() {  # name, extra --set arguments
  local name=$1; shift
  rm -rf "${out:?}/$name"
  "${launch[@]}" "$anvil" rl --config configs/rl-addition.toml --out "$out/$name" --set rl.init="\"$sft\"" \
    --set rl.steps=100 --set rl.eval_every=0 --set rl.log_every=100 --set rl.max_minutes=0 \
    "$@" > "$out/$name.log" 2>&1 || { cat "$out/$name.log"; exit 1; }
  "$python" - "$out/$name" "$name" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
steps = [l for l in lines if "reward" in l][5:]
evals = [l["heldout_accuracy"] for l in lines if "heldout_accuracy" in l]
med = lambda k: statistics.median(l[k] for l in steps)
print(f"{sys.argv[2]:>12}: step {med('step_seconds'):.3f} s, waiting for rollouts "
      f"{med('rollout_wait_seconds'):.3f} s, training {med('train_seconds'):.3f} s, drawing "
      f"{med('rollout_seconds'):.3f} s; held-out {evals[0]:.1%} -> {evals[-1]:.1%}")
PY
}
run grpo
run ppo --set rl.algorithm='"ppo"'
run async-1+1 --set rl.max_staleness=1 --set rl.threads=1
run async --set rl.max_staleness=1
if command -v mpirun > /dev/null; then
  # As root OpenMPI needs explicit permission; ranks are not pinned (anvil's threads are).
  launch=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --bind-to none)
  run mpi-1+1 --set rl.max_staleness=1 --set rl.threads=1
fi
