# Sourced by the shell tests of `anvil`: a small prepared corpus and a micro
# model config, so each test runs real prepare -> train in seconds.
# Expects $anvil (the binary), $work (a fresh folder) and fail() to be set.

# $work/data: 40 documents of a 30-word vocabulary through `anvil prepare`
# (BPE vocabulary 300, 10% validation).
micro_data() {
  mkdir -p "$work/text"
  local words=(the jury said that city court election was a fine report of an old man and his dog
               walked to river where children played with boats under bright summer sky while birds sang)
  local d i line
  for d in $(seq 1 40); do
    line=""
    for i in $(seq 1 120); do line+="${words[$(( (d * 7 + i * i) % ${#words[@]} ))]} "; done
    echo "$line." > "$work/text/doc$d.txt"
  done
  "$anvil" prepare --corpus "$work/text" --vocab 300 --out "$work/data" --threads 1 \
    --val-fraction 0.1 > "$work/prepare.log" 2>&1 || { cat "$work/prepare.log"; fail "prepare"; }
}

# $work/micro.toml: a 2-layer dim-64 model over $work/data. fp8_decode and
# fp8_high_precision are pinned: "auto" times the dot products, and two runs on a loaded machine
# could decode differently (other bits), which the comparisons would report.
# Usage: micro_toml STEPS EVAL_EVERY WARMUP_STEPS
micro_toml() {
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
steps = $1
batch_size = 2
seq_len = 16
threads = 1
eval_every = $2
eval_batches = 2
fp8_decode = "bf16"
fp8_high_precision = "bf16"
[optim]
lr = 0.01
warmup_steps = $3
[data]
dir = "$work/data"
TOML
}
