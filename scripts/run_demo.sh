#!/usr/bin/env bash
# Sets up a fresh machine, builds anvil, and runs the main job. Today that is
# the foundation: version, the machine and its measured peaks. Later it
# prepares the Brown corpus, trains the tiny model and prints a sample.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"

anvil=build/release/bin/anvil
"$anvil" --version
"$anvil" env
