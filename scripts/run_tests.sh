#!/usr/bin/env bash
# Sets up a fresh machine, builds, and runs every test: the release build
# (with the layering check) and the AddressSanitizer + UBSan build.
# .ci/run runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
jobs=$(nproc)

for preset in release debug-asan; do
  echo "== build: $preset"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  echo "== test: $preset"
  ctest --preset "$preset" -j "$jobs"
done
