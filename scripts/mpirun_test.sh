#!/usr/bin/env bash
# Runs a test program on N ranks of this machine: scripts/mpirun_test.sh N PROGRAM [ARGS...]
# For the test harness only: as root OpenMPI needs explicit permission, and
# --oversubscribe lets 4 ranks share 2 cores. Ranks are not pinned (anvil's
# threads are), and ASan's leak check is off (MPI keeps allocations to exit).
set -euo pipefail
np=$1
shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
exec mpirun -np "$np" --oversubscribe --bind-to none -x ASAN_OPTIONS "$@"
