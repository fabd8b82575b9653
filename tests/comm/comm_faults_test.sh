#!/usr/bin/env bash
# A failed CHECK on one rank ends the whole job at once, naming the rank; a
# rank that never joins a collective is caught by the watchdog
# (comm.timeout_s, 3 s here), which names the collective, group, step and the
# rank that did not arrive. Usage: comm_faults_test.sh REPO BINARY
set -uo pipefail
repo=$1 bin=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }

start=$(date +%s)
"$repo/scripts/mpirun_test.sh" 3 "$bin" --fault=check >"$out" 2>&1 && fail "a failed CHECK must fail the job"
grep -q "\[rank 2\] CHECK failed at .*injected failure" "$out" || fail "no rank-2 CHECK message"
(( $(date +%s) - start < 20 )) || fail "the job did not end promptly after the CHECK"

start=$(date +%s)
"$repo/scripts/mpirun_test.sh" 3 "$bin" --fault=hang >"$out" 2>&1 && fail "a hung rank must fail the job"
grep -q "comm watchdog: all-reduce #0 on group world (f32 x 100) did not finish within comm.timeout_s = 3 s at step 7: no answer from rank 2" "$out" \
  || fail "no watchdog message naming rank 2"
(( $(date +%s) - start < 30 )) || fail "the watchdog did not end the job promptly"
echo "ok: CHECK failure and hung rank both end the job with the rank named"
