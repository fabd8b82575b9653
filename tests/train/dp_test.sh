#!/usr/bin/env bash
# Data parallel trains the same model as one process, bit for bit:
#  1. N ranks with one micro-batch each == 1 process accumulating N (N = 2, 4;
#     ZeRO-0, 1, 2 and 3; f32 and bf16): every loss, gradient norm and
#     validation loss, the final weights and AdamW's m and v
#     (compare_runs.py). Also with overlap off, with one tensor per bucket,
#     and 2 ranks x 2 micro-batches (ZeRO-0 to 3; ZeRO-3 with full recompute)
#     == 1 process x 4; the FP8 recipes fp8-block and mxfp8 at ZeRO-1 (and
#     mxfp8 at ZeRO-3).
#  2. Resharding: a run started as dp4-zero3, continued from its step-2
#     checkpoint by 1 process (grad_accum 4), continued from that run's
#     step-4 checkpoint as dp2-zero1 (grad_accum 2), ends where the
#     uninterrupted 1-process run ends. The ZeRO checkpoints hold one weight
#     shard per rank (no model.safetensors); `anvil export` of one is the
#     1-process export, byte for byte, and `anvil generate` reads it.
#  3. --trace merges the ranks' traces (a process per rank, comm zones with
#     bytes and group); metrics carry each step's exposed communication.
#     A time budget on 2 ranks: one fitted step count for all, bitwise the
#     one process configured with it; refitted, every step recorded and the
#     last checkpoint at the step config.toml names; plain log lines under
#     mpirun.
#  4. A layout the job cannot have is refused with a clear message, said
#     once (not by every rank) and without aborting the job.
# Usage: dp_test.sh REPO ANVIL
set -uo pipefail
repo=$1 anvil=$2
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT; echo "work: $work"
fail() { echo "FAIL: $*"; exit 1; }
source "$repo/tests/train/micro_run.sh"
compare() { /usr/bin/python3 "$repo/tests/train/compare_runs.py" "$@" || fail "runs differ: $*"; }
mpi() { local np=$1; shift; "$repo/scripts/mpirun_test.sh" "$np" "$anvil" "$@"; }

micro_data
micro_toml 6 3 2
cfg=$work/micro.toml

one() {  # one OUT PRECISION ACCUM [sets...]
  local out=$1 p=$2 accum=$3
  shift 3
  "$anvil" train --config "$cfg" --out "$work/$out" --set train.precision="$p" \
    --set train.grad_accum="$accum" "$@" > "$work/$out.log" 2>&1 || { cat "$work/$out.log"; fail "$out"; }
}
dp() {  # dp OUT NP PRECISION ZERO ACCUM [sets...]
  local out=$1 np=$2 p=$3 zero=$4 accum=$5
  shift 5
  mpi "$np" train --config "$cfg" --out "$work/$out" --set train.precision="$p" \
    --set parallel.zero="$zero" --set train.grad_accum="$accum" "$@" > "$work/$out.log" 2>&1 \
    || { cat "$work/$out.log"; fail "$out"; }
}

# 1. The equivalence matrix.
for p in f32 bf16; do
  for n in 2 4; do
    one "one_${p}_a$n" "$p" "$n"
    for zero in 0 1 2 3; do
      dp "dp${n}_z${zero}_$p" "$n" "$p" "$zero" 1
      compare "$work/one_${p}_a$n" "$work/dp${n}_z${zero}_$p"
    done
  done
done
dp dp2_z1_nooverlap 2 f32 1 1 --set parallel.overlap=false
compare "$work/one_f32_a2" "$work/dp2_z1_nooverlap"
dp dp2_z0_tiny_buckets 2 bf16 0 1 --set parallel.bucket_mb=0.000001
compare "$work/one_bf16_a2" "$work/dp2_z0_tiny_buckets"
dp dp2_z0_a2 2 f32 0 2
dp dp2_z1_a2 2 f32 1 2
dp dp2_z1_a2_tiny_buckets 2 f32 1 2 --set parallel.bucket_mb=0.000001
compare "$work/dp2_z1_a2" "$work/dp2_z1_a2_tiny_buckets"
compare "$work/dp2_z0_a2" "$work/dp2_z1_a2"
compare "$work/one_f32_a4" "$work/dp2_z0_a2"  # 2 ranks x 2 micro-batches == 1 x 4
dp dp2_z2_a2_bf16 2 bf16 2 2
compare "$work/one_bf16_a4" "$work/dp2_z2_a2_bf16"
dp dp2_z3_a2_bf16 2 bf16 3 2 --set train.recompute=full
compare "$work/one_bf16_a4" "$work/dp2_z3_a2_bf16"

# The FP8 recipes are per-row math inside each rank's GEMMs: data parallel
# trains them bitwise like one process too (ZeRO-1, and ZeRO-3 for one);
# fp8-delayed too, its step amaxes max-reduced over the ranks.
for p in fp8-block mxfp8 fp8-delayed; do
  one "one_${p}_a2" "$p" 2
  dp "dp2_z1_$p" 2 "$p" 1 1
  compare "$work/one_${p}_a2" "$work/dp2_z1_$p"
done
dp dp2_z3_mxfp8 2 mxfp8 3 1
compare "$work/one_mxfp8_a2" "$work/dp2_z3_mxfp8"

# A model smaller than two norm chunks (16384 elements): ranks 2 and 3 of 4
# own no shard and must still take part in every collective.
nano=(--set model.dim=32 --set model.n_layers=1 --set model.ffn_dim=16 --set model.n_heads=2
      --set model.n_kv_heads=1)
one one_nano f32 4 "${nano[@]}"
for zero in 1 3; do
  dp "dp4_nano_z$zero" 4 f32 "$zero" 1 "${nano[@]}"
  compare "$work/one_nano" "$work/dp4_nano_z$zero"
done

# 2. Resharding: dp4-zero3 -> 1 process -> dp2-zero1.
keep=(--set train.checkpoint_every=2 --set train.keep_checkpoints=0)
one base f32 4 "${keep[@]}"
dp stage1 4 f32 3 1 "${keep[@]}"
rewind() {  # rewind FROM TO STEP: TO is FROM as it was at checkpoint STEP
  cp -r "$work/$1" "$work/$2"
  echo "step_$3" > "$work/$2/latest"
  for d in "$work/$2"/step_*; do
    [ "${d##*/step_}" -gt "$3" ] && rm -rf "$d"
  done
  return 0
}
rewind stage1 stage2 2
"$anvil" train --resume "$work/stage2" --set parallel.dp=1 --set parallel.zero=0 \
  --set train.grad_accum=4 > "$work/stage2.log" 2>&1 \
  || { cat "$work/stage2.log"; fail "1-process resume of a dp4-zero3 checkpoint"; }
rewind stage2 stage3 4
mpi 2 train --resume "$work/stage3" --set parallel.dp=2 --set parallel.zero=1 --set train.grad_accum=2 \
  > "$work/stage3.log" 2>&1 || { cat "$work/stage3.log"; fail "dp2-zero1 resume of a 1-process checkpoint"; }
compare "$work/base" "$work/stage1"
/usr/bin/python3 - "$work/stage1" <<'PY' || fail "checkpoint_index.json"
import json, sys
run = sys.argv[1]
ckpt = f"{run}/" + open(f"{run}/latest").read().strip()
index = json.load(open(f"{ckpt}/checkpoint_index.json"))
assert index["layout"]["dp"] == 4 and index["layout"]["zero"] == 3, index["layout"]
ranges = [(o["begin"], o["end"]) for o in index["optimizer"]]
assert ranges[0][0] == 0 and ranges[-1][1] == index["flat_size"], ranges
assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:])), ranges
for o in index["optimizer"]:
    header = open(f"{ckpt}/{o['file']}", "rb").read(8)
    assert len(header) == 8
# Each rank wrote its shard of the weights; nobody wrote them whole.
import os
files = index["weights"]["files"]
assert [f["file"] for f in files] == [f"weights-{r:05d}-of-00004.safetensors" for r in range(4)], files
assert [(f["begin"], f["end"]) for f in files] == ranges, files
assert all(os.path.exists(f"{ckpt}/{f['file']}") for f in files)
assert not os.path.exists(f"{ckpt}/model.safetensors")
assert os.path.exists(f"{ckpt}/config.json")
t = index["tensors"]
assert t[-1]["offset"] + t[-1]["numel"] <= index["flat_size"]
PY
compare "$work/base" "$work/stage2" --from-step 2
compare "$work/base" "$work/stage3" --from-step 4

# anvil export: the same Hugging Face folder from a sharded run as from one process.
"$anvil" export --ckpt "$work/stage1" --out "$work/export_dp4" > /dev/null || fail "export of a dp4-zero3 run"
"$anvil" export --ckpt "$work/base" --out "$work/export_one" > /dev/null || fail "export of a 1-process run"
for f in model.safetensors config.json tokenizer.json; do
  cmp -s "$work/export_dp4/$f" "$work/export_one/$f" || fail "exported $f differs"
done
# anvil generate reads a sharded checkpoint as it reads a whole one.
for run in stage1 base; do
  "$anvil" generate --ckpt "$work/$run" --prompt "the jury" --max-new 12 --seed 5 2> /dev/null \
    | head -1 > "$work/$run.generated" || fail "generate from $run"
done
cmp -s "$work/stage1.generated" "$work/base.generated" || fail "generate from a sharded checkpoint differs"

# --trace: one Chrome trace, a process per rank, collectives with bytes and group.
mpi 2 train --config "$cfg" --out "$work/traced" --trace --set train.precision=f32 > "$work/traced.log" 2>&1 \
  || { cat "$work/traced.log"; fail "traced run"; }
/usr/bin/python3 - "$work/traced" <<'PY' || fail "merged trace"
import json, sys
run = sys.argv[1]
events = json.load(open(f"{run}/trace.json"))["traceEvents"]
pids = {e["pid"] for e in events if e["ph"] == "X"}
assert pids == {0, 1}, pids
comm = [e for e in events if e["name"] in ("all-reduce", "reduce-scatter", "all-gather")]
assert comm and all(e["args"]["group"] in ("world", "world/dp") and e["args"]["bytes"] >= 0 for e in comm), comm[:3]
assert any(e["args"]["bytes"] > 100000 for e in comm), "no gradient-sized collective"
assert any(e["name"] == "dp_reduce_wait" for e in events)
import os
assert not any(f.startswith("trace.rank") for f in os.listdir(run)), "rank files left"
lines = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"loss"' in l]
assert all(l["exposed_comm_seconds"] >= 0 for l in lines)
PY

# A time budget: the ranks fit one step count from the slowest rank's clock,
# so they leave the loop together (a rank that fitted its own would wait
# forever in the others' collectives), and the run is bitwise the one
# configured with the fitted steps. With the checks of the fit as the run
# goes (refit, the default), every rank ends at the step config.toml names.
budget=(--set train.steps=100000 --set train.time_budget_minutes=0.03 --set optim.warmup_steps=50
        --set train.eval_every=0)
dp dp2_budget 2 f32 1 1 "${budget[@]}" --set train.time_budget_refit=false
fitted=$(sed -n 's/.*schedule fitted: train.steps 100000 -> \([0-9]*\).*/\1/p' "$work/dp2_budget.log")
[ -n "$fitted" ] || { cat "$work/dp2_budget.log"; fail "no fitted schedule on 2 ranks"; }
one one_budget f32 2 --set train.steps="$fitted" --set optim.warmup_steps=50 --set train.eval_every=0
compare "$work/one_budget" "$work/dp2_budget"
dp dp2_budget_refit 2 f32 1 1 "${budget[@]}"
# Open MPI gives each rank a terminal even when its output goes to a file:
# the log holds plain step lines, not a redrawn progress line.
if grep -q $'\r' "$work/dp2_budget_refit.log"; then fail "a rank under mpirun redrew its progress line into the log"; fi
grep -q "^step [0-9]*/[0-9]*  loss" "$work/dp2_budget_refit.log" || { cat "$work/dp2_budget_refit.log"; fail "no step lines under mpirun"; }
/usr/bin/python3 - "$work/dp2_budget_refit" <<'PY' || { cat "$work/dp2_budget_refit.log"; fail "refitted run on 2 ranks"; }
import json, re, sys
run = sys.argv[1]
steps = int(re.search(r"\nsteps = (\d+)\n", open(f"{run}/config.toml").read()).group(1))
done = [json.loads(l)["step"] for l in open(f"{run}/metrics.jsonl") if '"loss"' in l]
assert steps < 100000 and done == list(range(1, steps + 1)), (steps, done[-3:])
assert open(f"{run}/latest").read().strip() == f"step_{steps}", open(f"{run}/latest").read()
PY

# 3. Refusals: said once (every rank has the same error), and the job ends
# without MPI_Abort (no rank is left waiting).
said_once() {  # said_once LOG TEXT
  [ "$(grep -c -- "$2" "$1")" = 1 ] || { cat "$1"; fail "not said exactly once: $2"; }
  if grep -q "MPI_ABORT\|\[rank " "$1"; then cat "$1"; fail "a refusal aborted the job: $2"; fi
}
if mpi 2 train --config "$cfg" --out "$work/bad" --set parallel.dp=4 > "$work/bad.log" 2>&1; then
  fail "parallel.dp = 4 on 2 ranks must be refused"
fi
said_once "$work/bad.log" "parallel.dp = 4 but the job has 2 ranks"
if mpi 2 train --resume "$work/stage3" --set train.grad_accum=1 > "$work/bad2.log" 2>&1; then
  fail "a resume that changes the global batch must be refused"
fi
said_once "$work/bad2.log" "a resume may change the layout, not the global batch"
if mpi 2 train --config "$cfg" --out "$work/bad3" --set parallel.zero=3 --set model.tie_embeddings=true \
  > "$work/bad3.log" 2>&1; then
  fail "ZeRO-3 with tied embeddings must be refused"
fi
said_once "$work/bad3.log" "parallel.zero = 3: model.tie_embeddings = true needs the whole weights"
if mpi 2 train --config "$cfg" --out "$work/bad4" --set train.stepz=3 > "$work/bad4.log" 2>&1; then
  fail "a config key no component reads must be refused"
fi
said_once "$work/bad4.log" "unknown key 'train.stepz'"
if mpi 2 train --config "$work/no-such.toml" --out "$work/bad5" > "$work/bad5.log" 2>&1; then
  fail "a missing config must be refused"
fi
said_once "$work/bad5.log" "no-such.toml"
echo "ok: data parallel == one process, bitwise, for every case; checkpoints reshard"
