#!/usr/bin/env bash
# End to end through the `anvil` binary: prepare a small text folder, train a
# micro model for a few steps, generate from its checkpoint; an unknown config
# key is an error naming it; Ctrl-C (SIGINT) checkpoints, exits 0, and the run
# resumes. Usage: cli_test.sh ANVIL_BINARY WORK_DIR
set -euo pipefail
anvil=$1
work=$2
rm -rf "$work"
mkdir -p "$work/text"
fail() { echo "FAIL: $*" >&2; exit 1; }

words=(the jury said that city court election was a fine report of an old man and his dog
       walked to river where children played with boats under bright summer sky while birds sang)
for d in $(seq 1 40); do
  line=""
  for i in $(seq 1 120); do line+="${words[$(( (d * 7 + i * i) % ${#words[@]} ))]} "; done
  echo "$line." > "$work/text/doc$d.txt"
done

"$anvil" prepare --corpus "$work/text" --vocab 300 --out "$work/data" --threads 1 --val-fraction 0.1 \
  > "$work/prepare.log" || fail "prepare"

cat > "$work/micro.toml" <<TOML
[model]
dim = 64
n_layers = 2
n_heads = 4
n_kv_heads = 2
ffn_dim = 48
vocab_size = 300
max_seq_len = 32
[train]
steps = 4
batch_size = 2
seq_len = 16
threads = 1
eval_every = 2
eval_batches = 2
[optim]
lr = 0.01
warmup_steps = 1
[data]
dir = "$work/data"
TOML

"$anvil" train --config "$work/micro.toml" --out "$work/run" > "$work/train.log" 2>&1 \
  || { cat "$work/train.log"; fail "train"; }
[ -f "$work/run/latest" ] || fail "no latest checkpoint"
[ "$(grep -c '"loss"' "$work/run/metrics.jsonl")" = 4 ] || fail "metrics.jsonl lines"
grep -q "val_loss" "$work/run/metrics.jsonl" || fail "no val_loss in metrics.jsonl"

"$anvil" generate --ckpt "$work/run" --prompt "the jury" --max-new 8 --seed 3 > "$work/gen.log" 2>&1 \
  || { cat "$work/gen.log"; fail "generate"; }
grep -q "tokens/s" "$work/gen.log" || fail "generate printed no tokens/s"
"$anvil" generate --ckpt "$work/run/latest" --prompt "the jury" --max-new 8 --seed 3 > "$work/gen2.log" 2>&1
cmp -s "$work/gen.log" "$work/gen2.log" || true  # timings differ; the text must not:
[ "$(head -c 40 "$work/gen.log")" = "$(head -c 40 "$work/gen2.log")" ] || fail "generate not deterministic"

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

# A malformed environment variable is one plain error line, not an abort.
rc=0
ANVIL_THREADS=two "$anvil" env --no-peaks > "$work/env_bad.log" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$work/env_bad.log"; fail "bad ANVIL_THREADS: exit $rc, want 2"; }
grep -q "ANVIL_THREADS must be an integer" "$work/env_bad.log" || { cat "$work/env_bad.log"; fail "bad ANVIL_THREADS not named"; }

if "$anvil" train --config "$work/micro.toml" --out "$work/run_bad" --set train.bogus_key=1 \
     > "$work/bad.log" 2>&1; then fail "unknown key accepted"; fi
grep -q "train.bogus_key" "$work/bad.log" || { cat "$work/bad.log"; fail "unknown key not named"; }

# Ctrl-C: a long run, interrupted once it has logged steps.
"$anvil" train --config "$work/micro.toml" --out "$work/run_int" --set train.steps=1000000 \
  --set train.eval_every=0 > "$work/int.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  if [ -f "$work/run_int/metrics.jsonl" ] && [ "$(wc -l < "$work/run_int/metrics.jsonl")" -ge 3 ]; then break; fi
  sleep 0.1
done
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" = 0 ] || { cat "$work/int.log"; fail "SIGINT exit code $rc"; }
grep -q "resume with: anvil train --resume" "$work/int.log" || { cat "$work/int.log"; fail "no resume hint"; }
step=$(sed 's/step_//' "$work/run_int/latest")
[ "$step" -ge 3 ] || fail "checkpoint step $step"
"$anvil" train --resume "$work/run_int" --set train.steps=$((step + 2)) > "$work/resume.log" 2>&1 \
  || { cat "$work/resume.log"; fail "resume"; }
[ "$(cat "$work/run_int/latest")" = "step_$((step + 2))" ] || fail "resume did not finish"
echo "cli_test: OK"
rm -rf "$work"
