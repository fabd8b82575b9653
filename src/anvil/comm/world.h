// The job's world group and the process-wide communication runtime.
//
// Under mpirun (or srun with OpenMPI's PMIx) the world is MPI: initialised
// once per process, every collective runs on one communication thread that
// polls without spinning, a CHECK failure on any rank aborts the whole job
// (MPI_Abort) with the rank in the message, and a watchdog aborts the job when
// a collective has not finished within `timeout_s`, naming the collective, the
// group, the training step and the ranks that did not arrive. Otherwise the
// world is the local group of one process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "anvil/comm/group.h"
#include "anvil/core/status.h"

namespace anvil::comm {

struct WorldOptions {
  double timeout_s = 600;  // comm.timeout_s: the watchdog's limit per collective
};

// True when this process was started by an MPI launcher.
bool UnderMpiLauncher();

// The world group (shared: every call returns the same one; `options` of the
// latest call apply). Fails when an MPI launcher started the process but MPI
// cannot start.
Result<std::shared_ptr<Group>> InitWorld(const WorldOptions& options = {});

// A group of one process that is not part of any job (tests, tools).
std::unique_ptr<Group> MakeLocalGroup(const std::string& name = "local");

// Ends MPI after every collective finished (a no-op for the local world). A
// process that called InitWorld under mpirun must call this before it exits
// with status 0, or mpirun reports the job as failed.
void FinalizeWorld();

// Ends the whole job now with exit status `code` (MPI_Abort; the process
// alone without MPI): for an error the ranks may not all have seen.
[[noreturn]] void AbortWorld(int code);

// Changes the watchdog's limit (comm.timeout_s) of later collectives.
void SetWatchdogTimeout(double seconds);

// The training step the watchdog names in its message (-1: none).
void SetDiagnosticStep(int64_t step);

}  // namespace anvil::comm
