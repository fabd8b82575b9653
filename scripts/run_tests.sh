#!/usr/bin/env bash
# Sets up a fresh machine, builds, and runs every test: the release build
# (with the layering check), the AddressSanitizer + UBSan build, and a short
# run of every fuzz target (scripts/run_fuzz.sh smoke).
# The release suite runs once per SIMD tier below the host's best
# (ANVIL_ISA=avx2 on an AVX-512 host, ANVIL_ISA=scalar everywhere), so every
# tier a user's machine may pick is tested on whichever host CI gets. Left
# out of those runs: the multi-rank training tests (label mpi: their subject
# is the communication, not the kernels), the kernel and conversion tests
# (label every_tier: each of them runs every tier the CPU has, whatever
# ANVIL_ISA says), and on the scalar tier the command-line scripts (label
# cli: flags, errors, stops and resumes, which no tier changes).
# .ci/run runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each phase's start says how long the run has taken so far (SECONDS: bash's
# clock), so a slow host's log shows where the time went.
at() { printf '%d:%02d' $((SECONDS / 60)) $((SECONDS % 60)); }

bash scripts/setup.sh
echo "== set up ($(at))"
jobs=$(nproc)

lower_tiers=(scalar)
grep -qw avx512f /proc/cpuinfo && lower_tiers=(avx2 scalar)
declare -A left_out=([avx2]="^(mpi|every_tier)$" [scalar]="^(mpi|every_tier|cli)$")

for preset in release debug-asan; do
  echo "== build: $preset ($(at))"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs"
  echo "== test: $preset ($(at))"
  ctest --preset "$preset" -j "$jobs"
  if [ "$preset" = release ]; then
    for isa in "${lower_tiers[@]}"; do
      echo "== test: $preset, ANVIL_ISA=$isa ($(at))"
      ANVIL_ISA=$isa ctest --preset "$preset" -j "$jobs" -LE "${left_out[$isa]}"
    done
  fi
done

echo "== fuzz: smoke ($(at))"
ANVIL_FUZZ_BUILD_JOBS=$jobs bash scripts/run_fuzz.sh smoke
echo "== all tests passed ($(at))"
