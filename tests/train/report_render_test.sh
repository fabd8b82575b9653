#!/usr/bin/env bash
# `anvil report` end to end: two real micro runs (prepare -> train), a
# compared report written through the CLI, rendered by headless Chromium to a
# PNG that must exist and not be trivially small (a blank page of this size
# is a few KB). Also: the default output path and the CLI's one-line errors.
# Skips (77) where /usr/bin/chromium is absent.
# Usage: report_render_test.sh ANVIL_BINARY WORK_DIR
# Leaves WORK_DIR/report.html and WORK_DIR/report.png to look at.
set -euo pipefail
anvil=$1
work=$2
chromium=/usr/bin/chromium
fail() { echo "FAIL: $*" >&2; exit 1; }
if [ ! -x "$chromium" ]; then
  echo "SKIP: $chromium not found; install Debian's chromium" \
       "(apt-get install -y --no-install-recommends chromium) to render the report"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
source "$(dirname "$0")/micro_run.sh"
micro_data
micro_toml 60 10 5
for run in lr_0.01:0.01 lr_0.003:0.003; do
  name=${run%%:*}
  "$anvil" train --config "$work/micro.toml" --out "$work/$name" --set optim.lr=${run##*:} \
    > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; fail "train $name"; }
  [ -s "$work/$name/machine.json" ] || fail "$name: the trainer wrote no machine.json"
done

# One run, default output path; the path is printed.
out=$("$anvil" report "$work/lr_0.01") || fail "report of one run"
[ "$out" = "$work/lr_0.01/report.html" ] || fail "printed '$out'"
[ -s "$work/lr_0.01/report.html" ] || fail "no report.html"

# Two runs compared, rendered.
"$anvil" report "$work/lr_0.01" --compare "$work/lr_0.003" --out "$work/report.html" > /dev/null \
  || fail "report --compare"
grep -q "lr_0.003" "$work/report.html" || fail "compared run not named"
if grep -qE "https?://|src=" "$work/report.html"; then fail "external reference in the page"; fi
timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$work/chromium-profile" --screenshot="$work/report.png" \
  --window-size=1280,2400 "file://$work/report.html" > "$work/chromium.log" 2>&1 \
  || { cat "$work/chromium.log"; fail "chromium"; }
[ -f "$work/report.png" ] || { cat "$work/chromium.log"; fail "no PNG"; }
[ "$(head -c 8 "$work/report.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "not a PNG"
size=$(stat -c %s "$work/report.png")
[ "$size" -gt 40000 ] || fail "PNG of $size bytes: the page rendered (nearly) blank"

# Errors: one line naming the folder or file (and line).
if "$anvil" report "$work/no_such_run" > /dev/null 2> "$work/err.log"; then fail "missing folder accepted"; fi
grep -q "no_such_run: no such run folder" "$work/err.log" || { cat "$work/err.log"; fail "missing folder"; }
printf '{"step":1,"loss":3.0}\n{"step":2,"lo\n' > "$work/lr_0.003/metrics.jsonl"
if "$anvil" report "$work/lr_0.003" > /dev/null 2> "$work/err.log"; then fail "corrupt metrics accepted"; fi
grep -q "lr_0.003/metrics.jsonl:2: not valid JSON" "$work/err.log" || { cat "$work/err.log"; fail "corrupt line"; }
[ "$(wc -l < "$work/err.log")" = 1 ] || { cat "$work/err.log"; fail "error is not one line"; }

echo "report_render_test: OK ($work/report.png, $size bytes)"
rm -rf "$work/text" "$work/data" "$work/lr_0.01" "$work/lr_0.003" "$work/chromium-profile"
