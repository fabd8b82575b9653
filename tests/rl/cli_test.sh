#!/usr/bin/env bash
# `anvil sft` then `anvil rl` end to end on a micro model and 1-digit
# addition (the shipped configs, shrunk with --set): both print held-out
# accuracy, every GRPO step reports a rollout-vs-trainer log-prob difference
# of exactly 0 (f32, fp8-block, mxfp8), the RL checkpoint generates on its own (its tokenizer travels
# with it), bad starts (or resumes that change the run) fail with a clear
# message, and Ctrl-C does not wait for a user's reward commands (nor
# leaves any running, nor does a SIGKILL).
# Usage: cli_test.sh ANVIL_BINARY SOURCE_DIR WORK_DIR
set -euo pipefail
anvil=$1
src=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
micro=(--set model.dim=32 --set model.n_layers=1 --set model.n_heads=2 --set model.n_kv_heads=1
       --set model.ffn_dim=64 --set task.digits=1)

"$anvil" sft --config "$src/configs/sft-addition.toml" --out "$work/sft" "${micro[@]}" \
  --set sft.steps=40 --set sft.eval_every=20 --set sft.eval_problems=20 \
  --set sft.stop_at_accuracy=0 --set sft.log_every=10 > "$work/sft.log" 2>&1 \
  || { cat "$work/sft.log"; fail "sft"; }
[ "$(grep -c 'held-out accuracy' "$work/sft.log")" -ge 2 ] || fail "sft printed no held-out accuracy"
grep -q "^done: 40 steps" "$work/sft.log" || fail "sft did not finish its 40 steps"

"$anvil" rl --config "$src/configs/rl-addition.toml" --out "$work/rl" --set task.digits=1 \
  --set rl.init="$work/sft" --set rl.steps=4 --set rl.prompts_per_step=4 --set rl.eval_every=0 \
  --set rl.eval_problems=10 --set rl.log_every=1 > "$work/rl.log" 2>&1 \
  || { cat "$work/rl.log"; fail "rl"; }
[ "$(grep -c '^rl step [0-9]*/4 ' "$work/rl.log")" = 4 ] || { cat "$work/rl.log"; fail "rl step lines"; }
[ "$(grep -c '|dlogp| 0 ' "$work/rl.log")" = 4 ] || { cat "$work/rl.log"; fail "rollout and trainer log-probs differ"; }
grep -q "from .* at the start" "$work/rl.log" || fail "rl printed no accuracy change"
# Resuming the finished run says so, and neither evaluates nor saves again.
evals=$(grep -c heldout_accuracy "$work/rl/metrics.jsonl")
saved=$(stat -c %i "$work/rl/step_4")  # a new save renames a new folder into place
"$anvil" rl --resume "$work/rl" > "$work/rl_done.log" 2>&1 || { cat "$work/rl_done.log"; fail "rl resume of a finished run"; }
grep -q "all done (raise rl.steps to go on past step 4)" "$work/rl_done.log" || { cat "$work/rl_done.log"; fail "finished run not said"; }
[ "$(grep -c heldout_accuracy "$work/rl/metrics.jsonl")" = "$evals" ] || fail "a finished run's resume evaluated again"
[ "$(stat -c %i "$work/rl/step_4")" = "$saved" ] || fail "a finished run's resume saved again"
grep -q "held-out accuracy [0-9.]*% (from" "$work/rl_done.log" || { cat "$work/rl_done.log"; fail "no final accuracy"; }
# A resume continues the run as it ran: another task or step count below
# its step is refused, naming the setting.
if "$anvil" rl --resume "$work/rl" --set rl.steps=6 --set task.digits=2 > "$work/rl_task.log" 2>&1; then
  fail "an rl resume on another task was accepted"
fi
grep -q "changes task.digits = 1 (now: 2)" "$work/rl_task.log" || { cat "$work/rl_task.log"; fail "task change not named"; }
if "$anvil" sft --resume "$work/sft" --set sft.steps=10 > "$work/sft_steps.log" 2>&1; then
  fail "an sft resume with sft.steps below its step was accepted"
fi
grep -q "past sft.steps = 10" "$work/sft_steps.log" || { cat "$work/sft_steps.log"; fail "steps below the run's not named"; }
# sft.init under the shipped config's [model]: each key that differs is named.
if "$anvil" sft --config "$src/configs/sft-addition.toml" --out "$work/sft_from" \
    --set sft.init="$work/sft" --set task.digits=1 > "$work/sft_from.log" 2>&1; then
  fail "sft.init under another [model] was accepted"
fi
grep -q "model.dim = 128 (the checkpoint: 32); model.n_layers = 4 (the checkpoint: 1)" \
  "$work/sft_from.log" || { cat "$work/sft_from.log"; fail "the differing [model] keys not named"; }
# ZeRO-3 shards the weights the rollouts read: refused, saying why.
if "$anvil" rl --config "$src/configs/rl-addition.toml" --out "$work/rl_zero3" --set task.digits=1 \
    --set rl.init="$work/sft" --set rl.zero=3 > "$work/rl_zero3.log" 2>&1; then
  fail "rl.zero = 3 was accepted"
fi
grep -q "rl.zero = 3: .*the rollouts read the weights whole" "$work/rl_zero3.log" \
  || { cat "$work/rl_zero3.log"; fail "rl.zero = 3 not explained"; }

# The KL reference loads from rl.init again on a resume: a folder whose run
# went on holds other weights, and the resume is refused; its step folder
# (the checkpoint the run started from) is accepted.
"$anvil" sft --resume "$work/sft" --set sft.steps=42 > "$work/sft_on.log" 2>&1 \
  || { cat "$work/sft_on.log"; fail "sft resume to step 42"; }
grep -q '"init_weights": "[0-9a-f]\{16\}"' "$work/rl/step_4/state.json" || fail "rl records no init_weights"
if "$anvil" rl --resume "$work/rl" --set rl.steps=5 > "$work/rl_init.log" 2>&1; then
  fail "an rl resume from an rl.init that went on was accepted"
fi
grep -q "holds other weights (id [0-9a-f]*) than the run started from" "$work/rl_init.log" \
  || { cat "$work/rl_init.log"; fail "changed rl.init weights not named"; }
"$anvil" rl --resume "$work/rl" --set rl.steps=5 --set rl.init="$work/sft/step_40" \
  > "$work/rl_init40.log" 2>&1 || { cat "$work/rl_init40.log"; fail "rl resume with rl.init at its step folder"; }

# A reward command of the user's replaces the task's reward: every sample
# scored by it (here 0.25 for a prompt "a+b=", which every one is, -1 else),
# and a failing one gives 0 with the reason printed and counted.
rl_short=(--config "$src/configs/rl-addition.toml" --set task.digits=1 --set rl.init="$work/sft"
          --set rl.steps=2 --set rl.prompts_per_step=4 --set rl.eval_every=0
          --set rl.eval_problems=10 --set rl.log_every=1)
"$anvil" rl "${rl_short[@]}" --out "$work/rl-cmd" \
  --set rl.reward_command='"grep -q \"prompt\\\":\\\"[0-9]+[0-9]=\\\"\" && echo 0.25 || echo -1"' \
  > "$work/rl-cmd.log" 2>&1 || { cat "$work/rl-cmd.log"; fail "rl with a reward command"; }
grep -q '^rewards from `grep' "$work/rl-cmd.log" || { cat "$work/rl-cmd.log"; fail "reward command not announced"; }
[ "$(grep -c '"reward":0.25,.*"reward_errors":0' "$work/rl-cmd/metrics.jsonl")" = 2 ] \
  || { cat "$work/rl-cmd/metrics.jsonl"; fail "the steps' rewards are not the command's"; }
"$anvil" rl --resume "$work/rl-cmd" --set rl.steps=3 --set rl.reward_command='"echo 1"' \
  > "$work/rl-cmd-resume.log" 2>&1 || { cat "$work/rl-cmd-resume.log"; fail "resume with another reward command"; }
grep -q "note: the run's rewards came from \`grep.*, now from \`echo 1\`" "$work/rl-cmd-resume.log" \
  || { cat "$work/rl-cmd-resume.log"; fail "a changed reward command not noted"; }
"$anvil" rl "${rl_short[@]}" --out "$work/rl-cmd-fail" --set rl.reward_command='"exit 3"' \
  --set rl.reward_at_once=3 > "$work/rl-cmd-fail.log" 2>&1 \
  || { cat "$work/rl-cmd-fail.log"; fail "rl with a failing reward command"; }
[ "$(grep -c 'reward command: .* s for 32 samples, failed on 32 (reward 0): reward command exited with 3' \
    "$work/rl-cmd-fail.log")" = 2 ] || { cat "$work/rl-cmd-fail.log"; fail "reward command failures not reported"; }
grep -q '"reward":0.0,.*"reward_errors":32' "$work/rl-cmd-fail/metrics.jsonl" \
  || fail "reward command failures not in metrics.jsonl"
# Ctrl-C while reward commands run: they are killed (not waited for), the
# step is dropped, and the run checkpoints as it stood before it, without a
# held-out pass. Colocated: stopped in step 1, resumed, stopped in step 2
# and resumed again; asynchronous (its checkpoint keeps the snapshot the
# dropped step's samples came from): stopped in step 2 and resumed. Each
# ends where an uninterrupted run does, bit for bit (and evaluates as
# often). The reward varies with the sample (the first digit of its input's
# checksum), so the steps train; while $work/arm holds N, the calls after
# the N-th wait until killed, each listing its process group in
# $work/waiting.
cat > "$work/reward.sh" <<EOF
input=\$(cat)
if [ -f "$work/arm" ]; then
  echo >> "$work/calls"
  if [ "\$(wc -l < "$work/calls")" -gt "\$(cat "$work/arm")" ]; then
    sed 's/.*) //' /proc/\$\$/stat | cut -d' ' -f3 >> "$work/waiting"  # its process group
    exec sleep 30
  fi
fi
printf '%s\n' "\$input" | cksum | cut -c1
EOF
varying=(--set rl.reward_command="\"sh $work/reward.sh\"" --set rl.reward_timeout_s=60
         --set rl.steps=3)
alive() {  # alive PGID: a process of the group that is not a zombie (awk reads all,
  # and a process gone between the glob and the read is no failure)
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } | sed 's/.*) //' \
    | awk -v g="$1" '$3 == g && $1 != "Z" { found = 1 } END { exit !found }'
}
left_after_5s() {  # left=1 while a waiting command's group still runs, for up to 5 s
  for _ in $(seq 1 50); do
    left=0
    for g in $(cat "$work/waiting"); do alive "$g" && left=1; done
    [ "$left" = 0 ] && break
    sleep 0.1
  done
}
# arm_and_stop RUN ARM STEP [ARGS...]: the run RUN (new, with ARGS, at
# step 1 or when ARGS are given; else resumed) armed with ARM, stopped by
# Ctrl-C while its step STEP's commands wait.
arm_and_stop() {
  local run=$1 armed=$2 step=$3
  shift 3
  rm -f "$work/calls" "$work/waiting"
  echo "$armed" > "$work/arm"
  local log
  log="$work/$(basename "$run")-stop$step.log"
  if [ "$step" = 1 ] || [ $# -gt 0 ]; then
    "$anvil" rl "${rl_short[@]}" "${varying[@]}" "$@" --out "$run" > "$log" 2>&1 &
  else
    "$anvil" rl --resume "$run" > "$log" 2>&1 &
  fi
  local pid=$!
  for _ in $(seq 1 600); do [ -f "$work/waiting" ] && break; sleep 0.1; done
  [ -f "$work/waiting" ] || { kill -9 "$pid"; cat "$log"; fail "$run step $step: no command waited"; }
  local stopped_at rc=0
  stopped_at=$(date +%s)
  kill -INT "$pid"
  wait "$pid" || rc=$?
  rm "$work/arm"
  [ "$rc" = 0 ] || { cat "$log"; fail "$run: Ctrl-C during step $step's rewards: exit code $rc"; }
  [ $(( $(date +%s) - stopped_at )) -lt 10 ] || { cat "$log"; fail "$run: Ctrl-C waited for the reward commands"; }
  left_after_5s
  [ "$left" = 0 ] || fail "$run: Ctrl-C left reward commands running"
  grep -q "stop requested during its rewards of step $step: the step is dropped" "$log" \
    || { cat "$log"; fail "$run: the dropped step $step not said"; }
  [ "$(cat "$run/latest")" = "step_$((step - 1))" ] || fail "$run stopped in step $step is not at its checkpoint"
  if grep -q "\"step\":$step," "$run/metrics.jsonl"; then fail "$run: the dropped step $step was recorded"; fi
  if [ "$step" -gt 1 ]; then  # (its last evaluation was at step 0)
    grep -q "held-out accuracy [0-9.]*% at step 0;" "$log" \
      || { cat "$log"; fail "$run step $step: the summary names no earlier evaluation"; }
  fi
}
# same_run REF RUN: RUN, resumed to its end, has REF's metrics and weights.
same_run() {
  "$anvil" rl --resume "$2" > "$2-done.log" 2>&1 || { cat "$2-done.log"; fail "the last resume of $2"; }
  /usr/bin/python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PY' \
    || fail "$2, stopped and resumed, has metrics other than the uninterrupted run's"
import json, sys
def load(path):
    return [{k: v for k, v in json.loads(line).items() if "seconds" not in k and "per_s" not in k
             and k != "mem_high_water"} for line in open(path)]
a, b = load(sys.argv[1]), load(sys.argv[2])
if a != b:
    sys.exit("\n".join(map(str, a + ["vs"] + b)))
PY
  for f in model optimizer; do
    cmp -s "$1/step_3/$f.safetensors" "$2/step_3/$f.safetensors" \
      || fail "$2, stopped and resumed: its $f.safetensors differs from the uninterrupted run's"
  done
}
"$anvil" rl "${rl_short[@]}" "${varying[@]}" --out "$work/rl-cmd-ref" > "$work/rl-cmd-ref.log" 2>&1 \
  || { cat "$work/rl-cmd-ref.log"; fail "rl with a varying reward"; }
grep -q '"filtered_groups":[0-3],' "$work/rl-cmd-ref/metrics.jsonl" \
  || { cat "$work/rl-cmd-ref/metrics.jsonl"; fail "no group's rewards varied: nothing trained"; }
arm_and_stop "$work/rl-cmd-stop" 0 1   # (32 samples a step)
arm_and_stop "$work/rl-cmd-stop" 32 2
same_run "$work/rl-cmd-ref" "$work/rl-cmd-stop"
async=(--set rl.max_staleness=1)
"$anvil" rl "${rl_short[@]}" "${varying[@]}" "${async[@]}" --out "$work/rl-cmd-async" \
  > "$work/rl-cmd-async.log" 2>&1 || { cat "$work/rl-cmd-async.log"; fail "asynchronous rl with a varying reward"; }
arm_and_stop "$work/rl-cmd-async-stop" 32 2 "${async[@]}"
same_run "$work/rl-cmd-async" "$work/rl-cmd-async-stop"
# SIGKILL, which anvil cannot see, ends them too (its keeper process does).
rm -f "$work/calls" "$work/waiting"
echo 0 > "$work/arm"
"$anvil" rl "${rl_short[@]}" "${varying[@]}" --out "$work/rl-cmd-kill9" > "$work/rl-cmd-kill9.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do [ -f "$work/waiting" ] && break; sleep 0.1; done
[ -f "$work/waiting" ] || { kill -9 "$pid"; cat "$work/rl-cmd-kill9.log"; fail "kill -9: no command waited"; }
kill -9 "$pid"
wait "$pid" || true
rm "$work/arm"
left_after_5s
if [ "$left" = 1 ]; then
  for g in $(cat "$work/waiting"); do kill -9 -- "-$g" 2>/dev/null || true; done
  fail "kill -9 of anvil left reward commands running"
fi
if "$anvil" rl "${rl_short[@]}" --out "$work/rl-cmd-bad" --set rl.reward_command='"true"' \
    --set rl.reward_timeout_s=0 > "$work/rl-cmd-bad.log" 2>&1; then
  fail "rl accepted rl.reward_timeout_s = 0"
fi
grep -q "rl.reward_timeout_s = 0: expected" "$work/rl-cmd-bad.log" || { cat "$work/rl-cmd-bad.log"; fail "timeout message"; }

# The FP8 recipes whose scales do not depend on the batch (fp8-delayed's are
# fixed for a step; from this f32 checkpoint its histories start from the
# first prompts): the same exact parity every step; fp8-tensor is refused.
for recipe in fp8-block mxfp8 fp8-delayed; do
  "$anvil" rl --config "$src/configs/rl-addition.toml" --out "$work/rl-$recipe" --set task.digits=1 \
    --set rl.init="$work/sft" --set rl.steps=3 --set rl.prompts_per_step=4 --set rl.eval_every=0 \
    --set rl.eval_problems=10 --set rl.log_every=1 --set rl.precision="\"$recipe\"" \
    > "$work/rl-$recipe.log" 2>&1 || { cat "$work/rl-$recipe.log"; fail "rl $recipe"; }
  [ "$(grep -c '|dlogp| 0 ' "$work/rl-$recipe.log")" = 3 ] \
    || { cat "$work/rl-$recipe.log"; fail "$recipe: rollout and trainer log-probs differ"; }
done
if "$anvil" rl --config "$src/configs/rl-addition.toml" --out "$work/rl-tensor" \
    --set rl.init="$work/sft" --set rl.precision='"fp8-tensor"' > "$work/rl-tensor.log" 2>&1; then
  fail "rl ran fp8-tensor"
fi
grep -q "fp8-block, mxfp8 or fp8-delayed" "$work/rl-tensor.log" || { cat "$work/rl-tensor.log"; fail "fp8-tensor message"; }

"$anvil" generate --ckpt "$work/rl" --prompt "1+2=" --greedy --max-new 3 > "$work/gen.log" 2>&1 \
  || { cat "$work/gen.log"; fail "generate from the rl checkpoint"; }
# An export names the special tokens, so a Hugging Face generate() stops at <|eos|>.
"$anvil" export --ckpt "$work/rl" --out "$work/rl_hf" > "$work/export.log" 2>&1 \
  || { cat "$work/export.log"; fail "export of the rl checkpoint"; }
/usr/bin/python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); assert (c["bos_token_id"], c["eos_token_id"], c["pad_token_id"]) == (256, 257, 258), c' \
  "$work/rl_hf/config.json" || fail "the export's config.json lacks the special tokens' ids"
# The export samples what its checkpoint does (same seed, same text), and
# starts an RL run as rl.init.
for ckpt in rl rl_hf; do
  "$anvil" generate --ckpt "$work/$ckpt" --prompt "1+2=" --temperature 3 --seed 1 --max-new 6 \
    > "$work/gen_t3_$ckpt.log" 2>&1 || { cat "$work/gen_t3_$ckpt.log"; fail "generate from $ckpt"; }
done
[ "$(head -n 1 "$work/gen_t3_rl_hf.log")" = "$(head -n 1 "$work/gen_t3_rl.log")" ] \
  || { cat "$work/gen_t3_rl.log" "$work/gen_t3_rl_hf.log"; fail "the export samples other text"; }
grep -q "rl_hf (an export):" "$work/gen_t3_rl_hf.log" || { cat "$work/gen_t3_rl_hf.log"; fail "generate did not say it read an export"; }
"$anvil" rl "${rl_short[@]}" --out "$work/rl-from-hf" --set rl.init="$work/rl_hf" \
  > "$work/rl-from-hf.log" 2>&1 || { cat "$work/rl-from-hf.log"; fail "rl from an export"; }
# The same weights in the checkpoint the export came from: the resume takes them.
"$anvil" rl --resume "$work/rl-from-hf" --set rl.steps=3 --set rl.init="$work/rl/step_5" \
  > "$work/rl-from-hf-resume.log" 2>&1 \
  || { cat "$work/rl-from-hf-resume.log"; fail "resume with rl.init at the export's checkpoint"; }

# The rollout benchmark on the RL checkpoint, with a trace of each timed
# batch (two batch sizes: one file each).
"$anvil" bench rollout --ckpt "$work/rl" --batch 1 --batch 2 --rounds 1 --prompt-len 4 --max-new 3 \
  --no-peer --trace "$work/rollout.json" > "$work/bench_rollout.log" 2>&1 \
  || { cat "$work/bench_rollout.log"; fail "bench rollout"; }
for b in 1 2; do
  grep -q '"name":"attention_decode"' "$work/rollout-b$b.json" \
    || { cat "$work/bench_rollout.log"; fail "no decode attention in the batch-$b rollout trace"; }
done
"$anvil" bench rollout --ckpt "$work/rl" --batch 2 --rounds 1 --prompt-len 4 --max-new 3 \
  --no-peer --repeat 2 --trace "$work/one" > "$work/bench_rollout1.log" 2>&1 \
  || { cat "$work/bench_rollout1.log"; fail "bench rollout, one batch size"; }
grep -q '"name":"attention_decode"' "$work/one" || fail "one batch size: the trace is not at the path given"
grep -Eq "runs \(anvil\): [0-9]+ [0-9]+$" "$work/bench_rollout1.log" \
  || { cat "$work/bench_rollout1.log"; fail "--repeat 2 did not list two runs"; }

# PPO with asynchronous rollouts: its value line and the staleness after step 1.
"$anvil" rl --config "$src/configs/rl-addition.toml" --out "$work/ppo" --set task.digits=1 \
  --set rl.init="$work/sft" --set rl.steps=3 --set rl.prompts_per_step=4 --set rl.eval_every=0 \
  --set rl.eval_problems=10 --set rl.log_every=1 --set rl.algorithm='"ppo"' \
  --set rl.max_staleness=1 > "$work/ppo.log" 2>&1 || { cat "$work/ppo.log"; fail "rl ppo"; }
grep -q "^PPO (1 update a step) for 3 steps" "$work/ppo.log" || { cat "$work/ppo.log"; fail "ppo banner"; }
[ "$(grep -c 'explained variance' "$work/ppo.log")" = 3 ] || { cat "$work/ppo.log"; fail "ppo value lines"; }
[ "$(grep -c '1 step stale' "$work/ppo.log")" = 2 ] || { cat "$work/ppo.log"; fail "async staleness"; }
[ -f "$work/ppo/step_3/value_head.safetensors" ] || fail "no value head in the checkpoint"
# REINFORCE sampling through W8A8 layers on purpose: the mismatch is
# reported every step (not 0), with the importance weights that correct it.
"$anvil" rl --config "$src/configs/rl-addition.toml" --out "$work/w8a8" --set task.digits=1 \
  --set rl.init="$work/sft" --set rl.steps=2 --set rl.prompts_per_step=4 --set rl.eval_every=0 \
  --set rl.eval_problems=10 --set rl.log_every=1 --set rl.algorithm='"reinforce"' \
  --set rl.rollout_quant='"w8a8"' > "$work/w8a8.log" 2>&1 || { cat "$work/w8a8.log"; fail "rl w8a8"; }
grep -q "^REINFORCE .* for 2 steps" "$work/w8a8.log" || { cat "$work/w8a8.log"; fail "reinforce banner"; }
[ "$(grep -c '^rl step .* |dlogp| 0 ' "$work/w8a8.log")" = 0 ] \
  || { cat "$work/w8a8.log"; fail "W8A8 rollouts reported no mismatch"; }
[ "$(grep -c 'importance weights: mean' "$work/w8a8.log")" = 2 ] \
  || { cat "$work/w8a8.log"; fail "W8A8 rollouts: no importance weights"; }
if "$anvil" rl --config "$src/configs/rl-addition.toml" --out "$work/bad" \
    --set rl.algorithm='"ppo2"' > "$work/bad.log" 2>&1; then fail "rl accepted ppo2"; fi
grep -q 'expected "grpo"' "$work/bad.log" || { cat "$work/bad.log"; fail "algorithm message"; }

# A user's own pairs (task.name = "pairs"): SFT trains on them and scores
# the held-out ones, RL goes on from it with their exact-match reward; a
# bad line is named.
for i in $(seq 1 60); do
  w=$(printf '%s' "$i" | tr 0-9 a-j)
  printf '{"prompt": "copy %s:", "response": " %s"}\n' "$w" "$w"
done > "$work/pairs.jsonl"
pairs=(--set task.name='"pairs"' --set task.data="\"$work/pairs.jsonl\"" --set task.held_out=10)
"$anvil" sft --config "$src/configs/sft-addition.toml" --out "$work/sft-pairs" "${micro[@]}" "${pairs[@]}" \
  --set sft.steps=20 --set sft.eval_every=10 --set sft.eval_problems=10 \
  --set sft.stop_at_accuracy=0 --set sft.log_every=10 > "$work/sft-pairs.log" 2>&1 \
  || { cat "$work/sft-pairs.log"; fail "sft on a file of pairs"; }
grep -aq "held-out accuracy [0-9.]*% of 10 problems .*e.g. copy fb:" "$work/sft-pairs.log" \
  || { cat "$work/sft-pairs.log"; fail "sft on pairs: no held-out accuracy"; }
"$anvil" rl --config "$src/configs/rl-addition.toml" --out "$work/rl-pairs" "${pairs[@]}" \
  --set rl.init="$work/sft-pairs" --set rl.steps=2 --set rl.prompts_per_step=4 --set rl.eval_every=0 \
  --set rl.eval_problems=10 --set rl.log_every=1 > "$work/rl-pairs.log" 2>&1 \
  || { cat "$work/rl-pairs.log"; fail "rl on a file of pairs"; }
[ "$(grep -c '^rl step [0-9]*/2 .* |dlogp| 0 ' "$work/rl-pairs.log")" = 2 ] \
  || { cat "$work/rl-pairs.log"; fail "rl on pairs: step lines"; }
echo '{"prompt": "copy x:"}' >> "$work/pairs.jsonl"
if "$anvil" sft --config "$src/configs/sft-addition.toml" --out "$work/sft-pairs-bad" "${micro[@]}" \
    "${pairs[@]}" > "$work/sft-pairs-bad.log" 2>&1; then fail "sft accepted a bad line of pairs"; fi
grep -q "pairs.jsonl line 61: expected" "$work/sft-pairs-bad.log" \
  || { cat "$work/sft-pairs-bad.log"; fail "a bad line of pairs not named"; }

# A new run into a folder that holds one, a missing starting policy, a typo.
if "$anvil" rl --config "$src/configs/rl-addition.toml" --out "$work/rl" --set task.digits=1 \
    --set rl.init="$work/sft" > "$work/again.log" 2>&1; then fail "rl overwrote a run"; fi
grep -q "already holds a run" "$work/again.log" || { cat "$work/again.log"; fail "occupied folder message"; }
if "$anvil" rl --config "$src/configs/rl-addition.toml" --out "$work/none" \
    --set rl.init="$work/no_such_run" > "$work/none.log" 2>&1; then fail "rl without a policy"; fi
grep -q "no_such_run" "$work/none.log" || { cat "$work/none.log"; fail "missing init message"; }
if "$anvil" sft --config "$src/configs/sft-addition.toml" --out "$work/typo" \
    --set sft.stepz=3 > "$work/typo.log" 2>&1; then fail "sft accepted a typo"; fi
grep -q "sft.stepz" "$work/typo.log" || { cat "$work/typo.log"; fail "typo message"; }
# A typo into a folder that holds a run: the typo is named first.
if "$anvil" rl --config "$src/configs/rl-addition.toml" --out "$work/rl" \
    --set rl.init="$work/sft" --set rl.stepz=3 > "$work/typo2.log" 2>&1; then
  fail "rl accepted a typo"
fi
grep -q "rl.stepz" "$work/typo2.log" || { cat "$work/typo2.log"; fail "typo before folder"; }
echo "rl cli: ok"
