#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` preset: clang, ASan + UBSan) and
# runs each, one at a time in one process, from its seeds in fuzz/corpus/<name>/.
#
#   scripts/run_fuzz.sh smoke [TARGET...]     20000 executions per target
#   scripts/run_fuzz.sh long N [TARGET...]    N executions per target
#
# TARGETs (default: all): safetensors tokenizer_json config shard
# checkpoint_manifest trainer_state hf_config task_pairs. Inputs the fuzzer finds go to a temporary
# folder, so the repository is not modified. Exits non-zero if any target
# crashes, hangs (-timeout), allocates past -malloc_limit_mb or gets a
# sanitizer report; the input that did it is kept in build/fuzz/artifacts/<name>/
# (add it, minimized with -minimize_crash=1, to the seeds once fixed).
# ANVIL_FUZZ_BUILD_JOBS sets the build's parallelism (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: $0 smoke [TARGET...] | $0 long N [TARGET...]" >&2
  exit 2
}
all_targets=(safetensors tokenizer_json config shard checkpoint_manifest trainer_state hf_config
  task_pairs)

[ $# -ge 1 ] || usage
case "$1" in
  smoke) runs=20000; shift ;;
  long)
    [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] || usage
    runs=$2; shift 2 ;;
  *) usage ;;
esac
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "run_fuzz: unknown target '$t'" >&2; usage; }
done

echo "== build: fuzz"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "${ANVIL_FUZZ_BUILD_JOBS:-1}"

work=$(mktemp -d "${TMPDIR:-/tmp}/anvil-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=()
for t in "${targets[@]}"; do
  artifacts=build/fuzz/artifacts/$t
  mkdir -p "$work/$t" "$artifacts"
  log=$work/$t.log
  echo "== fuzz: $t ($runs executions)"
  start=$(date +%s)
  rc=0
  # The first folder receives new inputs; the seeds are only read.
  TMPDIR=$work build/fuzz/bin/${t}_fuzz -runs="$runs" -timeout=25 -rss_limit_mb=2048 -malloc_limit_mb=512 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$work/$t" "fuzz/corpus/$t" \
    >"$log" 2>&1 || rc=$?
  secs=$(($(date +%s) - start))
  done_runs=$(grep -o 'Done [0-9]* runs' "$log" | tail -1 | awk '{print $2}' || true)
  if [ "$rc" -ne 0 ] || grep -q -E '^(==[0-9]+==ERROR|SUMMARY: |.*runtime error:)' "$log"; then
    failed+=("$t")
    tail -n 60 "$log"
    echo "$t: FAILED (exit $rc) after ${secs}s; artifacts in $artifacts/"
  else
    echo "$t: Done ${done_runs:-?} runs in ${secs}s, $(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)," \
         "corpus $(ls "$work/$t" | wc -l) new + $(ls "fuzz/corpus/$t" | wc -l) seeds"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "run_fuzz: all ${#targets[@]} targets clean"
