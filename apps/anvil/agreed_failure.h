// Failures of an mpirun job that every rank returns from at one point (its
// setup: every rank reads the same arguments and config, then the ranks
// agree): said once where every rank has the same, and ended without
// MPI_Abort, since no rank is left waiting in a collective.
#pragma once

#include <string_view>

#include "anvil/comm/group.h"
#include "anvil/core/status.h"

namespace anvil::cli {

// Says `failure`, which every rank of `world` returned with at one point (all
// call this): once, by rank 0, where every rank failed with the same message;
// else each rank that failed on its own account, with its rank ("[rank 1]
// ..."). Aborted marks a rank that failed because another did
// (comm::AgreeOnStatus, as in train::Trainer's setup); such ranks say
// nothing. `command`: "anvil train".
void SayAgreedFailure(comm::Group& world, const Status& failure, std::string_view command);

}  // namespace anvil::cli
