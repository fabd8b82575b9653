#!/usr/bin/env bash
# Faults in a 2-rank data-parallel run (comm.timeout_s = 5):
#  1. Rank 1 killed (SIGKILL) mid-run: the job ends within the timeout with
#     a message naming the lost rank; `latest` names a complete checkpoint
#     (never one being written); --resume continues to the end with exactly
#     the losses, weights and AdamW state of an uninterrupted run.
#  2. Rank 1 stopped (SIGSTOP): rank 0's watchdog ends the job within the
#     timeout, naming the collective and rank 1.
# Usage: dp_faults_test.sh REPO ANVIL
set -uo pipefail
repo=$1 anvil=$2
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"; pkill -KILL -f "$work" 2>/dev/null' EXIT
fail() { echo "FAIL: $*"; exit 1; }
source "$repo/tests/train/micro_run.sh"
micro_data
micro_toml 1500 500 10
sets=(--set train.precision=f32 --set train.checkpoint_every=25 --set train.keep_checkpoints=2
      --set comm.timeout_s=5)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Under AddressSanitizer: MPI keeps allocations to exit (as in mpirun_test.sh).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
start_job() {  # start_job OUT: a 2-rank run in the background; sets $job
  mpirun -np 2 --oversubscribe --bind-to none "$anvil" train --config "$work/micro.toml" \
    --out "$work/$1" "${sets[@]}" > "$work/$1.log" 2>&1 &
  job=$!
}
rank_pid() {  # rank_pid R: the pid of rank R of $job
  local p
  for p in $(pgrep -P "$job"); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "$p"; return; }
  done
}
wait_for_steps() {  # wait_for_steps OUT N: until metrics.jsonl has N lines
  for _ in $(seq 1 300); do
    [ "$(cat "$work/$1/metrics.jsonl" 2>/dev/null | wc -l)" -ge "$2" ] && return 0
    sleep 0.1
  done
  fail "$1 made no progress"
}
ended_within() {  # ended_within SECONDS: $job ended (non-zero) within SECONDS
  for _ in $(seq 1 $(( $1 * 10 ))); do
    if ! kill -0 "$job" 2>/dev/null; then
      wait "$job" && fail "the job exited 0 after losing a rank"
      return 0
    fi
    sleep 0.1
  done
  fail "the job did not end within $1 s"
}

"$anvil" train --config "$work/micro.toml" --out "$work/whole" --set train.grad_accum=2 "${sets[@]}" \
  > "$work/whole.log" 2>&1 || { cat "$work/whole.log"; fail "uninterrupted run"; }

# 1. SIGKILL.
start_job killed
wait_for_steps killed 300
kill -KILL "$(rank_pid 1)" || fail "no rank 1 to kill"
ended_within 10
grep -q "rank 1 .* exited on signal 9" "$work/killed.log" || { cat "$work/killed.log"; fail "the lost rank is not named"; }
latest=$(cat "$work/killed/latest") || fail "no checkpoint before the kill"
[ -f "$work/killed/$latest/manifest.json" ] || fail "latest ($latest) is not a complete checkpoint"
step=${latest#step_}
mpirun -np 2 --oversubscribe --bind-to none "$anvil" train --resume "$work/killed" \
  > "$work/resumed.log" 2>&1 || { cat "$work/resumed.log"; fail "resume after the kill"; }
/usr/bin/python3 "$repo/tests/train/compare_runs.py" "$work/whole" "$work/killed" --from-step "$step" \
  || fail "the resumed run differs from the uninterrupted one"

# 2. SIGSTOP.
start_job stopped
wait_for_steps stopped 100
kill -STOP "$(rank_pid 1)" || fail "no rank 1 to stop"
ended_within 20
grep -q "comm watchdog: .* did not finish within comm.timeout_s = 5 s at step [0-9]*: no answer from rank 1" \
  "$work/stopped.log" || { cat "$work/stopped.log"; fail "no watchdog message naming rank 1"; }
echo "ok: a killed rank ends the job and the run resumes bitwise from step $step; a hung rank is caught by the watchdog"
