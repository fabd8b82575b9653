#!/usr/bin/env bash
# Asynchronous rollouts on a rank of their own (mpirun -np 2: rank 0 trains,
# rank 1 draws) give the run of one process drawing them on a thread, bit
# for bit: every metric but the timings, the final weights and the rollout
# snapshot; for GRPO in f32, bf16, fp8-block and fp8-delayed and for PPO
# with a stop string. A run
# resumed under mpirun from its step-2 checkpoint ends where the
# uninterrupted one does. Several trainer ranks (RL, and SFT) train as one
# process with as many micro-batches (below). A rank on other kernels than trainer rank
# 0's is refused, and a rank that keeps the other waiting past
# comm.timeout_s is named by the watchdog. A stop asked of one trainer rank
# while reward commands run drops the step on all (below). Errors every rank
# has are said once.
# Usage: mpi_rollouts_test.sh REPO ANVIL
set -uo pipefail
repo=$1 anvil=$2
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT; echo "work: $work"
fail() { echo "FAIL: $*"; exit 1; }
mpi() { local np=$1; shift; "$repo/scripts/mpirun_test.sh" "$np" "$anvil" "$@"; }

micro=(--set model.dim=32 --set model.n_layers=1 --set model.n_heads=2 --set model.n_kv_heads=1
       --set model.ffn_dim=64 --set task.digits=1)
"$anvil" sft --config "$repo/configs/sft-addition.toml" --out "$work/sft" "${micro[@]}" \
  --set sft.steps=40 --set sft.eval_every=0 --set sft.eval_problems=10 \
  --set sft.stop_at_accuracy=0 > "$work/sft.log" 2>&1 || { cat "$work/sft.log"; fail "sft"; }
# SFT on two ranks trains as one process with two micro-batches, bit for bit,
# and its held-out evaluations (each rank decodes half the problems) give the
# one process's figures.
"$anvil" sft --config "$repo/configs/sft-addition.toml" --out "$work/sft-acc" "${micro[@]}" \
  --set sft.steps=12 --set sft.eval_every=6 --set sft.eval_problems=10 \
  --set sft.stop_at_accuracy=0 --set sft.grad_accum=2 > "$work/sft-acc.log" 2>&1 \
  || { cat "$work/sft-acc.log"; fail "sft with two micro-batches"; }
mpi 2 sft --config "$repo/configs/sft-addition.toml" --out "$work/sft-two" "${micro[@]}" \
  --set sft.steps=12 --set sft.eval_every=6 --set sft.eval_problems=10 \
  --set sft.stop_at_accuracy=0 > "$work/sft-two.log" 2>&1 \
  || { cat "$work/sft-two.log"; fail "sft on two ranks"; }
grep -q "a step's gradient folds 2 slots" "$work/sft-two.log" || { cat "$work/sft-two.log"; fail "sft banner"; }
cmp -s "$work/sft-acc/step_12/model.safetensors" "$work/sft-two/step_12/model.safetensors" \
  || fail "sft: two ranks and two micro-batches differ"
[ "$(grep -c . "$work/sft-two/metrics.jsonl")" = "$(grep -c . "$work/sft-acc/metrics.jsonl")" ] \
  || fail "sft: metrics lines"
# ZeRO-1: each rank holds half of AdamW's state and writes it into the
# checkpoints; the same bits. One process resumes from its step 6, reading
# both halves, and ends where the uninterrupted run does.
mpi 2 sft --config "$repo/configs/sft-addition.toml" --out "$work/sft-zero" "${micro[@]}" \
  --set sft.steps=12 --set sft.eval_every=6 --set sft.eval_problems=10 \
  --set sft.stop_at_accuracy=0 --set sft.zero=1 --set sft.checkpoint_every=6 \
  --set sft.keep_checkpoints=0 > "$work/sft-zero.log" 2>&1 \
  || { cat "$work/sft-zero.log"; fail "sft with ZeRO-1"; }
grep -q "sft.zero = 1: each of the 2 trainer ranks holds its shard" "$work/sft-zero.log" \
  || { cat "$work/sft-zero.log"; fail "sft ZeRO-1 banner"; }
for s in 6 12; do
  for f in optimizer-00000-of-00002 optimizer-00001-of-00002; do
    [ -s "$work/sft-zero/step_$s/$f.safetensors" ] || fail "sft ZeRO-1: step_$s/$f.safetensors"
  done
  [ ! -e "$work/sft-zero/step_$s/optimizer.safetensors" ] || fail "sft ZeRO-1: a whole optimizer file"
done
cmp -s "$work/sft-acc/step_12/model.safetensors" "$work/sft-zero/step_12/model.safetensors" \
  || fail "sft: ZeRO-1 and ZeRO-0 differ"
# ZeRO-2: each rank also holds half of the gradient, reduced unit by unit
# as the backward ends them: the same bits.
mpi 2 sft --config "$repo/configs/sft-addition.toml" --out "$work/sft-zero2" "${micro[@]}" \
  --set sft.steps=12 --set sft.eval_every=6 --set sft.eval_problems=10 \
  --set sft.stop_at_accuracy=0 --set sft.zero=2 > "$work/sft-zero2.log" 2>&1 \
  || { cat "$work/sft-zero2.log"; fail "sft with ZeRO-2"; }
grep -q "sft.zero = 2: each of the 2 trainer ranks holds its shard of AdamW's state .* and of the gradient" \
  "$work/sft-zero2.log" || { cat "$work/sft-zero2.log"; fail "sft ZeRO-2 banner"; }
cmp -s "$work/sft-acc/step_12/model.safetensors" "$work/sft-zero2/step_12/model.safetensors" \
  || fail "sft: ZeRO-2 and ZeRO-0 differ"
# ZeRO-2 keeps no whole gradient, which tied embeddings need: refused.
if mpi 2 sft --config "$repo/configs/sft-addition.toml" --out "$work/sft-tied" "${micro[@]}" \
    --set model.tie_embeddings=true --set sft.zero=2 > "$work/sft-tied.log" 2>&1; then
  fail "sft.zero = 2 with tied embeddings was accepted"
fi
grep -q "ZeRO-2: model.tie_embeddings = true needs the whole weights" "$work/sft-tied.log" \
  || { cat "$work/sft-tied.log"; fail "tied embeddings under ZeRO-2 not explained"; }
cp -r "$work/sft-zero" "$work/sft-zero-resumed"
rm -rf "$work/sft-zero-resumed/step_12"
echo step_6 > "$work/sft-zero-resumed/latest"
"$anvil" sft --resume "$work/sft-zero-resumed" --set sft.grad_accum=2 \
  > "$work/sft-zero-resumed.log" 2>&1 \
  || { cat "$work/sft-zero-resumed.log"; fail "sft: resuming ZeRO-1 shards on one process"; }
cmp -s "$work/sft-acc/step_12/model.safetensors" "$work/sft-zero-resumed/step_12/model.safetensors" \
  || fail "sft: resumed from ZeRO-1 shards, other weights"
cmp -s "$work/sft-acc/step_12/optimizer.safetensors" \
  "$work/sft-zero-resumed/step_12/optimizer.safetensors" \
  || fail "sft: resumed from ZeRO-1 shards, other AdamW state"

rl=(--config "$repo/configs/rl-addition.toml" --set task.digits=1 --set rl.init="$work/sft"
    --set rl.steps=4 --set rl.prompts_per_step=4 --set rl.eval_every=2 --set rl.eval_problems=10
    --set rl.log_every=1 --set rl.max_staleness=1 --set rl.threads=1 --set rl.checkpoint_every=2
    --set rl.keep_checkpoints=0)

# same RUN_A RUN_B: metrics without timings, final weights and snapshot.
same() {
  /usr/bin/python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'EOF' || fail "metrics differ: $1 $2"
import json, sys
def load(path):
    timing = ("seconds", "per_s", "wait", "mem_high_water")  # and the process peak
    return [{k: v for k, v in json.loads(line).items() if not any(t in k for t in timing)}
            for line in open(path)]
a, b = load(sys.argv[1]), load(sys.argv[2])
if a != b:
    for x, y in zip(a, b):
        if x != y:
            sys.exit(f"{x}\n{y}")
    sys.exit(f"{len(a)} vs {len(b)} lines")
EOF
  for f in model.safetensors rollout_snapshot.safetensors critic.safetensors value_head.safetensors; do
    [ -e "$1/step_4/$f" ] || [ -e "$2/step_4/$f" ] || continue
    cmp -s "$1/step_4/$f" "$2/step_4/$f" || fail "$f differs: $1 $2"
  done
}

pair() {  # pair NAME [sets...]: one process vs two ranks
  local name=$1
  shift
  "$anvil" rl "${rl[@]}" --out "$work/$name-1" "$@" > "$work/$name-1.log" 2>&1 \
    || { cat "$work/$name-1.log"; fail "$name on one process"; }
  mpi 2 rl "${rl[@]}" --out "$work/$name-2" "$@" > "$work/$name-2.log" 2>&1 \
    || { cat "$work/$name-2.log"; fail "$name on two ranks"; }
  grep -q "rollouts drawn on rank 1" "$work/$name-2.log" || { cat "$work/$name-2.log"; fail "$name banner"; }
  [ "$(grep -c '1 step stale' "$work/$name-2.log")" = 3 ] || { cat "$work/$name-2.log"; fail "$name staleness"; }
  same "$work/$name-1" "$work/$name-2"
}
pair grpo
pair bf16 --set rl.precision='"bf16"' --set comm.timeout_s=120
pair ppo --set rl.algorithm='"ppo"' --set rl.stop='"\n"'
# FP8: the rollout rank runs the policy's recipe (and fp8-delayed's scales,
# sent with each snapshot).
pair fp8 --set rl.precision='"fp8-block"'
pair delayed --set rl.precision='"fp8-delayed"'
grep -q "explained variance" "$work/ppo-2.log" || fail "ppo value lines"

# at_step_2 RUN COPY: COPY is RUN as it stood at its step-2 checkpoint.
at_step_2() {
  cp -r "$1" "$2"
  rm -rf "$2/step_4"
  echo step_2 > "$2/latest"
  /usr/bin/python3 -c "
import json, sys
p = sys.argv[1]
keep = [l for l in open(p) if json.loads(l).get('step', 0) <= 2]
open(p, 'w').writelines(keep)" "$2/metrics.jsonl"
}

# Resumed under mpirun from step 2: the uninterrupted run's end.
at_step_2 "$work/grpo-2" "$work/resumed"
mpi 2 rl --resume "$work/resumed" > "$work/resumed.log" 2>&1 \
  || { cat "$work/resumed.log"; fail "resume on two ranks"; }
same "$work/grpo-1" "$work/resumed"

# Data parallel trainers: N ranks with rl.grad_accum = A train as one process
# with N x A (the same slots, folded in the same order), colocated (every
# rank draws its share of the prompts) and beside a rollout rank (the last),
# with two updates a step (each recomputes its log-probabilities on shares)
# and for PPO with either critic.
dp=(--set rl.minibatches=2 --set rl.epochs=2)
dp_pair() {  # dp_pair NAME NP SLOTS [sets...]: one process with SLOTS micro-batches vs NP ranks
  local name=$1 np=$2 slots=$3
  shift 3
  "$anvil" rl "${rl[@]}" "${dp[@]}" --out "$work/$name-1" "$@" --set rl.grad_accum="$slots" \
    > "$work/$name-1.log" 2>&1 || { cat "$work/$name-1.log"; fail "$name on one process"; }
  mpi "$np" rl "${rl[@]}" "${dp[@]}" --out "$work/$name-n" "$@" > "$work/$name-n.log" 2>&1 \
    || { cat "$work/$name-n.log"; fail "$name on $np ranks"; }
  grep -q "an update's gradient folds $slots slots" "$work/$name-n.log" \
    || { cat "$work/$name-n.log"; fail "$name banner"; }
  same "$work/$name-1" "$work/$name-n"
}
dp_pair dp-colocated 2 2 --set rl.max_staleness=0
dp_pair dp-rollout-rank 3 4 --set rl.grad_accum=2
dp_pair dp-ppo 2 2 --set rl.max_staleness=0 --set rl.algorithm='"ppo"'
dp_pair dp-critic 2 2 --set rl.max_staleness=0 --set rl.algorithm='"ppo"' --set rl.critic='"separate"'
# ZeRO-1 (AdamW's state sharded, the policy's and a separate critic's): the
# same bits, beside a rollout rank too.
dp_pair dp-zero 2 2 --set rl.max_staleness=0 --set rl.zero=1 --set rl.algorithm='"ppo"' \
  --set rl.critic='"separate"'
dp_pair dp-zero-rollout-rank 3 4 --set rl.grad_accum=2 --set rl.zero=1
# ZeRO-2 (the policy's gradient sharded too, by units; a separate critic
# stays at ZeRO-1): the same bits as ZeRO-0's runs.
dp_pair dp-zero2 2 2 --set rl.max_staleness=0 --set rl.zero=2 --set rl.algorithm='"ppo"' \
  --set rl.critic='"separate"'
same "$work/dp-critic-1" "$work/dp-zero2-n"
dp_pair dp-zero2-rollout-rank 3 4 --set rl.grad_accum=2 --set rl.zero=2
same "$work/dp-rollout-rank-1" "$work/dp-zero2-rollout-rank-n"
dp_pair dp-zero2-ppo 2 2 --set rl.max_staleness=0 --set rl.zero=2 --set rl.algorithm='"ppo"'
same "$work/dp-ppo-1" "$work/dp-zero2-ppo-n"
# fp8-delayed: the amaxes of every update are max-reduced over the ranks, so
# their scales stay the one process's (a separate critic's too).
dp_pair dp-delayed 2 2 --set rl.max_staleness=0 --set rl.precision='"fp8-delayed"' --set rl.zero=1
dp_pair dp-delayed-critic 2 2 --set rl.max_staleness=0 --set rl.precision='"fp8-delayed"' \
  --set rl.algorithm='"ppo"' --set rl.critic='"separate"'
for f in optimizer critic_optimizer; do
  for r in 00000 00001; do
    [ -s "$work/dp-zero-n/step_4/$f-$r-of-00002.safetensors" ] || fail "rl ZeRO-1: $f shard $r"
  done
done
grep -q "rl.zero = 1: each of the 2 trainer ranks" "$work/dp-zero-rollout-rank-n.log" \
  || { cat "$work/dp-zero-rollout-rank-n.log"; fail "rl ZeRO-1 banner"; }
grep -q "rollouts drawn on rank 2" "$work/dp-rollout-rank-n.log" || fail "three ranks: rollout rank"
# The slots change the order of the sums, not the gradient: one slot gives
# other bits than two, but the first update's gradient norm and losses
# within float rounding (a slot weighting its tokens by its own count, or
# dropping one, would be far off).
one_slot() {  # one_slot NAME [sets...]: NAME-1's run with one slot
  local name=$1
  shift
  "$anvil" rl "${rl[@]}" "${dp[@]}" --out "$work/$name-one" "$@" \
    > "$work/$name-one.log" 2>&1 || { cat "$work/$name-one.log"; fail "$name with one slot"; }
  if cmp -s "$work/$name-one/step_4/model.safetensors" "$work/$name-1/step_4/model.safetensors"
  then
    fail "$name: one slot and two trained to the same weights"
  fi
  /usr/bin/python3 - "$work/$name-one/metrics.jsonl" "$work/$name-1/metrics.jsonl" <<'EOF' \
    || fail "$name: two slots' gradient is not one slot's"
import json, sys
a, b = ([json.loads(l) for l in open(p) if '"lr"' in l][0] for p in sys.argv[1:])
for key in ("grad_norm", "loss", "value_loss"):
    if key in a and abs(a[key] - b[key]) > 1e-5 * max(abs(a[key]), 1e-3):
        sys.exit(f"step 1 {key}: one slot {a[key]}, two {b[key]}")
EOF
}
one_slot dp-colocated --set rl.max_staleness=0
one_slot dp-ppo --set rl.max_staleness=0 --set rl.algorithm='"ppo"'
# A resume on another count of slots runs, and says its bits part.
at_step_2 "$work/dp-colocated-n" "$work/dp-resumed"
"$anvil" rl --resume "$work/dp-resumed" > "$work/dp-resumed.log" 2>&1 \
  || { cat "$work/dp-resumed.log"; fail "resume on one process"; }
grep -q "folded over 2 slots, now 1" "$work/dp-resumed.log" \
  || { cat "$work/dp-resumed.log"; fail "slots note"; }
# A ZeRO-1 run resumed on its two ranks from its sharded step-2 checkpoint
# ends where it did uninterrupted.
at_step_2 "$work/dp-zero-n" "$work/dp-zero-resumed"
mpi 2 rl --resume "$work/dp-zero-resumed" > "$work/dp-zero-resumed.log" 2>&1 \
  || { cat "$work/dp-zero-resumed.log"; fail "ZeRO-1 resume on two ranks"; }
same "$work/dp-zero-n" "$work/dp-zero-resumed"

# A stop asked of one trainer rank alone while reward commands run (rank 1's
# own SIGINT, sent by its second step's first command; rank 0 gets none):
# both ranks drop the step and end with a checkpoint of step 1 (written by
# the stop: rl.checkpoint_every is 2), without a held-out pass; resumed, the run ends where it does uninterrupted. The
# reward varies with the sample (the first digit of its input's checksum).
cat > "$work/reward.sh" <<EOF
input=\$(cat)
if [ -f "$work/arm" ] && [ "\${OMPI_COMM_WORLD_RANK:-}" = 1 ]; then
  echo >> "$work/calls"
  if [ "\$(wc -l < "$work/calls")" -gt 16 ]; then  # (16 samples a step on each rank)
    # Once: a second signal would end anvil. (The command's shell exec'd
    # this one, so the parent is anvil.)
    mkdir "$work/signalled" 2> /dev/null && kill -INT \$PPID
    exec sleep 30
  fi
fi
printf '%s\n' "\$input" | cksum | cut -c1
EOF
cmd=(--set rl.max_staleness=0 --set rl.reward_command="\"exec sh $work/reward.sh\""
     --set rl.reward_timeout_s=60)
mpi 2 rl "${rl[@]}" "${cmd[@]}" --out "$work/cmd-2" > "$work/cmd-2.log" 2>&1 \
  || { cat "$work/cmd-2.log"; fail "a reward command on two ranks"; }
touch "$work/arm"
mpi 2 rl "${rl[@]}" "${cmd[@]}" --out "$work/cmd-stop" > "$work/cmd-stop.log" 2>&1 \
  || { cat "$work/cmd-stop.log"; fail "a stop on one rank during rewards"; }
rm "$work/arm"
[ -d "$work/signalled" ] || fail "rank 1's commands never asked it to stop"
grep -q "stop requested during its rewards of step 2: the step is dropped" "$work/cmd-stop.log" \
  || { cat "$work/cmd-stop.log"; fail "one rank's stop: the dropped step not said"; }
[ "$(cat "$work/cmd-stop/latest")" = step_1 ] || fail "one rank's stop: no step-1 checkpoint"
if grep -q '"step":1,"heldout' "$work/cmd-stop/metrics.jsonl"; then
  fail "one rank's stop: a held-out pass after the stop"
fi
grep -q "held-out accuracy [0-9.]*% at step 0;" "$work/cmd-stop.log" \
  || { cat "$work/cmd-stop.log"; fail "one rank's stop: the summary names no earlier evaluation"; }
mpi 2 rl --resume "$work/cmd-stop" > "$work/cmd-stop-resumed.log" 2>&1 \
  || { cat "$work/cmd-stop-resumed.log"; fail "resume after one rank's stop"; }
same "$work/cmd-2" "$work/cmd-stop"

# Errors every rank has (a key nothing reads, a missing starting policy, a
# config that does not parse) are said once, and the job ends without
# MPI_Abort where no rank is left waiting.
said_once() {  # said_once LOG TEXT
  [ "$(grep -c -- "$2" "$1")" = 1 ] || { cat "$1"; fail "not said exactly once: $2"; }
  if grep -q "MPI_ABORT\|\[rank " "$1"; then cat "$1"; fail "a refusal aborted the job: $2"; fi
}
refused() {  # refused NAME TEXT ARGS...: `mpi 2 ARGS` fails, saying TEXT once
  local name=$1 text=$2
  shift 2
  if mpi 2 "$@" > "$work/$name.log" 2>&1; then fail "$name: not refused"; fi
  said_once "$work/$name.log" "$text"
}
refused sft-key "unknown key 'sft.stepz'" sft --config "$repo/configs/sft-addition.toml" \
  --out "$work/sft-key" "${micro[@]}" --set sft.stepz=1
refused rl-key "unknown key 'rl.stepz'" rl "${rl[@]}" --set rl.max_staleness=0 \
  --out "$work/rl-key" --set rl.stepz=1
refused rl-init "no-such-policy" rl "${rl[@]}" --set rl.max_staleness=0 --out "$work/rl-init" \
  --set rl.init='"'"$work/no-such-policy"'"'
refused rl-set "rl.steps" rl "${rl[@]}" --out "$work/rl-set" --set rl.steps
# A rollout rank on other kernels than the trainer's (here the scalar tier)
# would give other log-probabilities, a trainer rank on others other
# gradients: refused at setup.
if [ "${ANVIL_ISA:-}" != scalar ]; then
  lower='[ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ] && export ANVIL_ISA=scalar; exec "$0" "$@"'
  if "$repo/scripts/mpirun_test.sh" 2 bash -c "$lower" "$anvil" rl "${rl[@]}" --out "$work/tiers" \
       > "$work/tiers.log" 2>&1
  then
    fail "a rollout rank on other kernels ran"
  fi
  grep -q "runs the scalar kernels, the trainer" "$work/tiers.log" \
    || { cat "$work/tiers.log"; fail "kernels message"; }
  if "$repo/scripts/mpirun_test.sh" 2 bash -c "$lower" "$anvil" rl "${rl[@]}" \
       --out "$work/trainer-tiers" --set rl.max_staleness=0 > "$work/trainer-tiers.log" 2>&1
  then
    fail "a trainer rank on other kernels ran"
  fi
  grep -q "trainer rank 1 runs the scalar kernels" "$work/trainer-tiers.log" \
    || { cat "$work/trainer-tiers.log"; fail "trainer kernels message"; }
fi
# A rank that does not answer within comm.timeout_s is named by the
# watchdog, which ends the job (1 ms: rank 1 waits longer than that for the
# trainer's first draw while the trainer evaluates).
if mpi 2 rl "${rl[@]}" --out "$work/silent" --set comm.timeout_s=0.001 > "$work/silent.log" 2>&1; then
  fail "the watchdog let a 1 ms limit pass"
fi
grep -q "comm.timeout_s = 0.001 s.*no answer from rank" "$work/silent.log" \
  || { cat "$work/silent.log"; fail "watchdog message"; }
echo "mpi rollouts: ok"
