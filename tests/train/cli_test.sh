#!/usr/bin/env bash
# End to end through the `anvil` binary: prepare a small text folder, train a
# micro model for a few steps, generate from its checkpoint, evaluate it (f32,
# W8A8, W4A8); an unknown config key is an error naming it; a non-finite
# gradient is skipped and named (or stops the run); the numerics probe (of a
# run, and of a checkpoint's step) names a planted fault; the FP8 precisions
# train; Ctrl-C (SIGINT) checkpoints, exits 0, and the run resumes (on other
# kernels with a note that its bits part from an uninterrupted run), refusing
# a changed train.seq_len or train.steps below its step; SIGTERM stops a run
# as Ctrl-C does; bad --threads and --temperature values are refused.
# Usage: cli_test.sh ANVIL_BINARY WORK_DIR
set -euo pipefail
anvil=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$(dirname "$0")/micro_run.sh"
micro_data
micro_toml 4 2 1

"$anvil" train --config "$work/micro.toml" --out "$work/run" > "$work/train.log" 2>&1 \
  || { cat "$work/train.log"; fail "train"; }
[ -f "$work/run/latest" ] || fail "no latest checkpoint"
[ "$(grep -c '"loss"' "$work/run/metrics.jsonl")" = 4 ] || fail "metrics.jsonl lines"
grep -q "val_loss" "$work/run/metrics.jsonl" || fail "no val_loss in metrics.jsonl"
# Resuming a finished run says so and evaluates nothing again.
vals=$(grep -c '"val_loss"' "$work/run/metrics.jsonl")
"$anvil" train --resume "$work/run" > "$work/resume_done.log" 2>&1 \
  || { cat "$work/resume_done.log"; fail "resume of a finished run"; }
grep -q "all done (raise train.steps to go on past step 4)" "$work/resume_done.log" \
  || { cat "$work/resume_done.log"; fail "a finished run's resume did not say so"; }
[ "$(grep -c '"val_loss"' "$work/run/metrics.jsonl")" = "$vals" ] || fail "a finished run's resume evaluated again"
grep -q "final val_loss [0-9]" "$work/resume_done.log" || { cat "$work/resume_done.log"; fail "no final val_loss"; }

"$anvil" generate --ckpt "$work/run" --prompt "the jury" --max-new 8 --seed 3 > "$work/gen.log" 2>&1 \
  || { cat "$work/gen.log"; fail "generate"; }
grep -q "tokens/s" "$work/gen.log" || fail "generate printed no tokens/s"
"$anvil" generate --ckpt "$work/run/latest" --prompt "the jury" --max-new 8 --seed 3 > "$work/gen2.log" 2>&1
cmp -s "$work/gen.log" "$work/gen2.log" || true  # timings differ; the text must not:
[ "$(head -c 40 "$work/gen.log")" = "$(head -c 40 "$work/gen2.log")" ] || fail "generate not deterministic"

# `anvil eval` over the trainer's validation windows (eval_batches 2 x batch
# 2) reproduces its last val_loss in the run's precision; the quantized
# layers (W8A8, W4A8) evaluate and generate, close to f32.
prec=$(sed -n "s/^precision = '\(.*\)'$/\1/p" "$work/run/config.toml")
"$anvil" eval --ckpt "$work/run" --precision "$prec" --windows 4 --json > "$work/eval.json" \
  2> "$work/eval.log" || { cat "$work/eval.log"; fail "eval"; }
val=$(grep '"val_loss"' "$work/run/metrics.jsonl" | tail -1 | sed 's/.*"val_loss":\([^,}]*\).*/\1/')
got=$(sed 's/.*"loss":\([^,}]*\).*/\1/' "$work/eval.json")
awk -v a="$got" -v b="$val" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * b) }' \
  || fail "eval loss $got differs from the trainer's val_loss $val"
"$anvil" eval --ckpt "$work/run" --windows 4 --json > "$work/eval_f32.json" 2>/dev/null \
  || fail "eval f32"
f32=$(sed 's/.*"loss":\([^,}]*\).*/\1/' "$work/eval_f32.json")
# Its export evaluates to the same loss (no run config there: the window
# length and the data are given), and says it is one.
"$anvil" export --ckpt "$work/run" --out "$work/run_hf" > /dev/null 2>&1 || fail "export"
if "$anvil" eval --ckpt "$work/run_hf" --windows 4 > "$work/eval_hf_bad.log" 2>&1; then
  fail "eval of an export without --seq-len was accepted"
fi
grep -q "an export carries no run config; pass --seq-len and --data" "$work/eval_hf_bad.log" \
  || { cat "$work/eval_hf_bad.log"; fail "eval of an export: no reason given"; }
"$anvil" eval --ckpt "$work/run_hf/" --windows 4 --seq-len 16 --data "$work/data" --json \
  > "$work/eval_hf.json" 2> "$work/eval_hf.log" || { cat "$work/eval_hf.log"; fail "eval of the export"; }
[ "$(sed 's/.*"loss":\([^,}]*\).*/\1/' "$work/eval_hf.json")" = "$f32" ] \
  || { cat "$work/eval_f32.json" "$work/eval_hf.json"; fail "the export evaluates to another loss"; }
grep -q '"step":null' "$work/eval_hf.json" || { cat "$work/eval_hf.json"; fail "an export's step is not null"; }
rm "$work/run_hf/tokenizer.json"
if "$anvil" generate --ckpt "$work/run_hf" --prompt "the" > "$work/gen_hf_notok.log" 2>&1; then
  fail "generate from an export without its tokenizer was accepted"
fi
grep -q "no tokenizer.json, nor a run config naming the data's; pass --tokenizer" \
  "$work/gen_hf_notok.log" || { cat "$work/gen_hf_notok.log"; fail "a missing tokenizer not said"; }
for q in w8a8:0.01 w4a8:0.05; do
  "$anvil" eval --ckpt "$work/run" --quant "${q%%:*}" --windows 4 --json > "$work/eval_q.json" \
    2> "$work/eval_q.log" || { cat "$work/eval_q.log"; fail "eval --quant ${q%%:*}"; }
  loss=$(sed 's/.*"loss":\([^,}]*\).*/\1/' "$work/eval_q.json")
  awk -v a="$loss" -v b="$f32" -v tol="${q##*:}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= tol * b) }' \
    || fail "${q%%:*} loss $loss too far from f32's $f32"
  "$anvil" generate --ckpt "$work/run" --prompt "the jury" --max-new 8 --quant "${q%%:*}" \
    > "$work/gen_q.log" 2>&1 || { cat "$work/gen_q.log"; fail "generate --quant ${q%%:*}"; }
  grep -q "${q%%:*} layer weights" "$work/gen_q.log" || fail "generate --quant ${q%%:*} printed no size"
done
if "$anvil" eval --ckpt "$work/run" --precision bf16 --quant w8a8 > "$work/eval_bad.log" 2>&1; then
  fail "eval --quant with --precision bf16 was accepted"
fi
grep -q "use --precision f32" "$work/eval_bad.log" || { cat "$work/eval_bad.log"; fail "no reason given"; }

# A prompt longer than the context (max_seq_len 32) is cut, and the user is told.
long_prompt=$(printf 'the jury said that city court %.0s' $(seq 1 20))
"$anvil" generate --ckpt "$work/run" --prompt "$long_prompt" --max-new 4 > "$work/gen_long.log" 2>&1 \
  || { cat "$work/gen_long.log"; fail "generate with a long prompt"; }
grep -q "tokens are dropped" "$work/gen_long.log" || { cat "$work/gen_long.log"; fail "no notice of the cut prompt"; }

# A model too large for the machine is refused up front with the estimate.
if "$anvil" train --config "$work/micro.toml" --out "$work/run_huge" --set model.dim=65536 \
     --set model.n_heads=512 --set model.n_kv_heads=512 > "$work/huge.log" 2>&1; then
  fail "a model too large for memory was accepted"
fi
grep -q "GiB available" "$work/huge.log" || { cat "$work/huge.log"; fail "no memory estimate"; }

# A thread count out of range is refused by the flag, not by an abort later.
for cmd in "generate --ckpt $work/run --prompt the" "eval --ckpt $work/run" "probe --ckpt $work/run --out $work/p_bad"; do
  rc=0
  # shellcheck disable=SC2086
  "$anvil" $cmd --threads -1 > "$work/threads_bad.log" 2>&1 || rc=$?
  [ "$rc" != 0 ] && [ "$rc" != 134 ] || { cat "$work/threads_bad.log"; fail "$cmd --threads -1: exit $rc"; }
  grep -q -- "--threads" "$work/threads_bad.log" || { cat "$work/threads_bad.log"; fail "$cmd: --threads not named"; }
done
# A refused request prints no prompt: stdout stays empty.
if "$anvil" generate --ckpt "$work/no_such_run" --prompt "the jury" > "$work/gen_none.out" 2> /dev/null; then
  fail "generate from a missing checkpoint"
fi
[ ! -s "$work/gen_none.out" ] || fail "a refused generate printed to stdout"
# An empty --out is a mistake, not the default folder.
if "$anvil" train --config "$work/micro.toml" --out "" > "$work/out_empty.log" 2>&1; then fail "--out '' accepted"; fi
grep -q -- "--out: an empty path" "$work/out_empty.log" || { cat "$work/out_empty.log"; fail "empty --out not named"; }
# More windows than the validation shard holds: all of them, and it says so.
"$anvil" eval --ckpt "$work/run" --windows 100000 > "$work/eval_many.log" 2>&1 || { cat "$work/eval_many.log"; fail "eval --windows 100000"; }
grep -q "the validation shard holds .* windows" "$work/eval_many.log" || { cat "$work/eval_many.log"; fail "no note of the windows evaluated"; }
# A temperature too small to sample soundly is refused, pointing at --greedy.
if "$anvil" generate --ckpt "$work/run" --prompt "the" --temperature 1e-20 > "$work/temp.log" 2>&1; then
  fail "--temperature 1e-20 accepted"
fi
grep -q "use --greedy" "$work/temp.log" || { cat "$work/temp.log"; fail "no --greedy hint"; }
# `anvil env --no-peaks --json`: the machine as JSON, without the peaks.
"$anvil" env --no-peaks --json > "$work/env.json" 2>&1 || { cat "$work/env.json"; fail "env --no-peaks --json"; }
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["threads"] >= 1 and "isa" in d and "f32_fma_gflops" not in d, d' \
  "$work/env.json" || { cat "$work/env.json"; fail "env --no-peaks --json is not the machine's JSON"; }

# A malformed environment variable is one plain error line, not an abort.
rc=0
ANVIL_THREADS=two "$anvil" env --no-peaks > "$work/env_bad.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$work/env_bad.log"; fail "bad ANVIL_THREADS: exit $rc, want 2"; }
grep -q "ANVIL_THREADS must be an integer" "$work/env_bad.log" || { cat "$work/env_bad.log"; fail "bad ANVIL_THREADS not named"; }

# A gradient that overflows (an absurd learning rate blows the weights up):
# the step is skipped and the tensor named, or, with on_nonfinite = stop,
# the run ends with an error saying so.
blowup=(--set optim.lr=1e25 --set optim.weight_decay=0 --set train.steps=4 --set train.eval_every=0)
"$anvil" train --config "$work/micro.toml" --out "$work/run_nan" "${blowup[@]}" > "$work/nan.log" 2>&1 \
  || { cat "$work/nan.log"; fail "a run with non-finite gradients should skip them"; }
grep -q "the gradient is not finite .*first in backward order: lm_head); the optimizer step was skipped" \
  "$work/nan.log" || { cat "$work/nan.log"; fail "skipped step not reported"; }
[ "$(grep -c '"skipped":true' "$work/run_nan/metrics.jsonl")" -ge 1 ] || fail "no skipped step in metrics"
if "$anvil" train --config "$work/micro.toml" --out "$work/run_nan_stop" "${blowup[@]}" \
     --set train.on_nonfinite=stop > "$work/nan_stop.log" 2>&1; then fail "on_nonfinite = stop did not stop"; fi
grep -q 'train.on_nonfinite = "stop" ends the run' "$work/nan_stop.log" || { cat "$work/nan_stop.log"; fail "no stop message"; }

# The numerics probe: two runs from one seed agree everywhere; a planted
# fault (one activation scaled by 1.05) is named as the first divergence.
probe=(--probe --set train.steps=2 --set train.eval_every=0)
for r in probe_a probe_b; do
  "$anvil" train --config "$work/micro.toml" --out "$work/$r" "${probe[@]}" > "$work/$r.log" 2>&1 \
    || { cat "$work/$r.log"; fail "train $r"; }
done
"$anvil" train --config "$work/micro.toml" --out "$work/probe_f" "${probe[@]}" \
  --probe-fault layers.1.attn_out=1.05 > "$work/probe_f.log" 2>&1 || { cat "$work/probe_f.log"; fail "train probe_f"; }
"$anvil" probe diff "$work/probe_a" "$work/probe_b" > "$work/diff_same.log" || fail "probe diff"
grep -q "no divergence beyond" "$work/diff_same.log" || { cat "$work/diff_same.log"; fail "identical runs parted"; }
rc=0
"$anvil" probe diff "$work/probe_a" "$work/probe_f" > "$work/diff_fault.log" || rc=$?
[ "$rc" = 1 ] || { cat "$work/diff_fault.log"; fail "probe diff at a divergence: exit $rc, want 1"; }
grep -q "first divergence: step 1, layers.1.attn_out (activation)" "$work/diff_fault.log" \
  || { cat "$work/diff_fault.log"; fail "the planted fault was not named"; }

# The probe on a saved checkpoint and batch: the same step twice agrees, a
# planted fault is named, a bad token file is one clear error.
"$anvil" probe --ckpt "$work/run" --out "$work/cprobe_a" --rows 2 > "$work/cprobe.log" 2>&1 \
  || { cat "$work/cprobe.log"; fail "probe --ckpt"; }
"$anvil" probe --ckpt "$work/run" --out "$work/cprobe_b" --rows 2 > /dev/null 2>&1 || fail "probe --ckpt b"
"$anvil" probe --ckpt "$work/run" --out "$work/cprobe_f" --rows 2 \
  --probe-fault layers.1.attn_out=1.05 > /dev/null 2>&1 || fail "probe --ckpt with a fault"
"$anvil" probe diff "$work/cprobe_a" "$work/cprobe_b" | grep -q "no divergence beyond" \
  || fail "a checkpoint's probe differs from itself"
rc=0
"$anvil" probe diff "$work/cprobe_a" "$work/cprobe_f" > "$work/cdiff_fault.log" || rc=$?
[ "$rc" = 1 ] && grep -q "first divergence: step 4, layers.1.attn_out (activation)" "$work/cdiff_fault.log" \
  || { cat "$work/cdiff_fault.log"; fail "the planted fault in the checkpoint probe was not named (exit $rc)"; }
# Records of another batch (one row, not two) do not compare: said, exit 2.
"$anvil" probe --ckpt "$work/run" --out "$work/cprobe_r1" --rows 1 > /dev/null 2>&1 || fail "probe --ckpt --rows 1"
rc=0
"$anvil" probe diff "$work/cprobe_a" "$work/cprobe_r1" > "$work/cdiff_rows.log" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "do not compare" "$work/cdiff_rows.log" \
  || { cat "$work/cdiff_rows.log"; fail "records of another batch compared (exit $rc)"; }
# A fault at a tensor the probe never sees would plant nothing: refused, as
# is a fault without the probe to find it.
if "$anvil" probe --ckpt "$work/run" --out "$work/cprobe_x" --probe-fault bogus=1.01 \
     > "$work/cprobe_x.log" 2>&1; then fail "a fault at an unknown tensor was accepted"; fi
grep -q "the probe sees no tensor bogus" "$work/cprobe_x.log" || { cat "$work/cprobe_x.log"; fail "unknown fault tensor not named"; }
if "$anvil" train --config "$work/micro.toml" --out "$work/probe_np" --set train.steps=1 \
     --probe-fault layers.0.attn_out=2 > "$work/probe_np.log" 2>&1; then fail "--probe-fault without --probe"; fi
grep -q "add --probe" "$work/probe_np.log" || { cat "$work/probe_np.log"; fail "--probe-fault without --probe: no hint"; }
printf '1 2 x 3' > "$work/bad_tokens.txt"
if "$anvil" probe --ckpt "$work/run" --out "$work/cprobe_bad" --tokens "$work/bad_tokens.txt" \
     > "$work/cprobe_bad.log" 2>&1; then fail "a malformed token file was accepted"; fi
grep -q "expected token ids" "$work/cprobe_bad.log" || { cat "$work/cprobe_bad.log"; fail "bad tokens not explained"; }

# FP8 recipes train through the CLI.
for p in fp8-tensor fp8-delayed fp8-block mxfp8; do
  "$anvil" train --config "$work/micro.toml" --out "$work/run_$p" --set train.precision=$p \
    > "$work/$p.log" 2>&1 || { cat "$work/$p.log"; fail "train $p"; }
  grep -q "$p precision" "$work/$p.log" || { cat "$work/$p.log"; fail "$p not reported"; }
  # Evaluated in its recipe (delayed scales restored from the checkpoint), the
  # checkpoint gives the trainer's last val_loss (fp8-tensor's scale depends
  # on the batch: not comparable).
  if [ "$p" != fp8-tensor ]; then
    "$anvil" eval --ckpt "$work/run_$p" --precision "$p" --windows 4 --json > "$work/eval_$p.json" \
      2> "$work/eval_$p.log" || { cat "$work/eval_$p.log"; fail "eval $p"; }
    val=$(grep '"val_loss"' "$work/run_$p/metrics.jsonl" | tail -1 | sed 's/.*"val_loss":\([^,}]*\).*/\1/')
    got=$(sed 's/.*"loss":\([^,}]*\).*/\1/' "$work/eval_$p.json")
    awk -v a="$got" -v b="$val" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * b) }' \
      || fail "eval $p loss $got differs from the trainer's val_loss $val"
  fi
done
# fp8-delayed generation: the scales of its own run are restored; from an f32
# run there are none, and the user is told that current scaling runs instead.
"$anvil" generate --ckpt "$work/run_fp8-delayed" --prompt "the" --max-new 2 --precision fp8-delayed \
  > "$work/gen_delayed.log" 2>&1 || { cat "$work/gen_delayed.log"; fail "generate fp8-delayed"; }
if grep -q "lacks amax histories" "$work/gen_delayed.log"; then
  cat "$work/gen_delayed.log"; fail "fp8-delayed's histories were not restored"
fi
"$anvil" generate --ckpt "$work/run" --prompt "the" --max-new 2 --precision fp8-delayed \
  > "$work/gen_nohist.log" 2>&1 || { cat "$work/gen_nohist.log"; fail "generate fp8-delayed (f32 run)"; }
grep -q "lacks amax histories" "$work/gen_nohist.log" || { cat "$work/gen_nohist.log"; fail "no notice of current scaling"; }
"$anvil" eval --ckpt "$work/run" --precision fp8-delayed --windows 1 > "$work/eval_nohist.log" 2>&1 \
  || { cat "$work/eval_nohist.log"; fail "eval fp8-delayed (f32 run)"; }
grep -q "lacks amax histories" "$work/eval_nohist.log" || { cat "$work/eval_nohist.log"; fail "eval: no notice of current scaling"; }

if "$anvil" train --config "$work/micro.toml" --out "$work/run_bad" --set train.bogus_key=1 \
     > "$work/bad.log" 2>&1; then fail "unknown key accepted"; fi
grep -q "train.bogus_key" "$work/bad.log" || { cat "$work/bad.log"; fail "unknown key not named"; }

# interrupt_run RUN LOG SIGNAL: a long run into $work/RUN, sent SIGNAL once it
# has logged three steps; fails unless it then exits 0.
interrupt_run() {
  "$anvil" train --config "$work/micro.toml" --out "$work/$1" --set train.steps=1000000 \
    --set train.eval_every=0 > "$work/$2" 2>&1 &
  local pid=$! rc=0
  for _ in $(seq 1 600); do
    if [ -f "$work/$1/metrics.jsonl" ] && [ "$(wc -l < "$work/$1/metrics.jsonl")" -ge 3 ]; then break; fi
    sleep 0.1
  done
  kill "-$3" "$pid"
  wait "$pid" || rc=$?
  [ "$rc" = 0 ] || { cat "$work/$2"; fail "SIG$3 exit code $rc"; }
}
# Ctrl-C: a long run, interrupted once it has logged steps.
interrupt_run run_int int.log INT
grep -q "resume with: anvil train --resume" "$work/int.log" || { cat "$work/int.log"; fail "no resume hint"; }
step=$(sed 's/step_//' "$work/run_int/latest")
[ "$step" -ge 3 ] || fail "checkpoint step $step"
"$anvil" train --resume "$work/run_int" --set train.steps=$((step + 2)) > "$work/resume.log" 2>&1 \
  || { cat "$work/resume.log"; fail "resume"; }
[ "$(cat "$work/run_int/latest")" = "step_$((step + 2))" ] || fail "resume did not finish"
# A resume keeps each step's rows, and cannot end before where the run is.
if "$anvil" train --resume "$work/run_int" --set train.steps=$((step + 4)) --set train.seq_len=8 \
     > "$work/resume_seq.log" 2>&1; then fail "a resume changing train.seq_len was accepted"; fi
grep -q "changes train.seq_len = 16 (now: 8)" "$work/resume_seq.log" || { cat "$work/resume_seq.log"; fail "seq_len change not named"; }
if "$anvil" train --resume "$work/run_int" --set train.steps=1 > "$work/resume_steps.log" 2>&1; then
  fail "a resume with train.steps below the run's step was accepted"
fi
grep -q "past train.steps = 1" "$work/resume_steps.log" || { cat "$work/resume_steps.log"; fail "steps below the run's not named"; }
if grep -q "note: the checkpoint's steps ran on" "$work/resume.log"; then
  cat "$work/resume.log"; fail "a resume on the same kernels noted other kernels"
fi
# On other kernels (the scalar tier) the resume runs, and says its bits part.
if [ "${ANVIL_ISA:-}" != scalar ]; then
  ANVIL_ISA=scalar "$anvil" train --resume "$work/run_int" --set train.steps=$((step + 3)) \
    > "$work/resume_scalar.log" 2>&1 || { cat "$work/resume_scalar.log"; fail "scalar resume"; }
  grep -q "note: the checkpoint's steps ran on the .* kernels, this session's on scalar" \
    "$work/resume_scalar.log" || { cat "$work/resume_scalar.log"; fail "no kernels note"; }
fi
# SIGTERM (batch schedulers, `timeout`) stops a run as Ctrl-C does.
interrupt_run run_term term.log TERM
grep -q "interrupted (SIGTERM)" "$work/term.log" || { cat "$work/term.log"; fail "SIGTERM: no checkpoint"; }
[ -f "$work/run_term/latest" ] || fail "SIGTERM: no latest checkpoint"
echo "cli_test: OK"
rm -rf "$work"
