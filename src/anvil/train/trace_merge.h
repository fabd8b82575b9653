// One Chrome trace of a multi-rank run: the ranks' trace files (each written
// with its rank as the process id) merged into one, a process per rank, so
// the ranks' compute and communication zones line up on one timeline.
#pragma once

#include <string>

#include "anvil/core/status.h"

namespace anvil::train {

// Reads RUN/trace.rank<r>.json for r < ranks, writes their events into `out`
// (atomically) and removes the rank files. Errors name the file.
Status MergeRankTraces(const std::string& run_dir, int ranks, const std::string& out);

}  // namespace anvil::train
