// Failures of an mpirun job that every rank returns from at one point (its
// setup: every rank reads the same arguments and config, then the ranks
// agree): said once where every rank has the same, and ended without
// MPI_Abort, since no rank is left waiting in a collective.
#pragma once

#include <string_view>

#include "anvil/comm/group.h"
#include "anvil/core/status.h"

namespace anvil::cli {

// Every rank of `world` calls it with its own outcome of `what`: a rank's
// failure is returned as is, and a rank that did not fail gets Aborted ("what:
// another rank failed"), so that all go on or none.
Status AgreeOnSetup(comm::Group& world, const Status& mine, std::string_view what);

// Says `failure`, which every rank of `world` returned with at one point (all
// call this): once, by rank 0, where every rank failed with the same message;
// else each rank that failed on its own account, with its rank ("[rank 1]
// ..."). Aborted marks a rank that failed because another did (AgreeOnSetup,
// train::Trainer's setup); such ranks say nothing. `command`: "anvil train".
void SayAgreedFailure(comm::Group& world, const Status& failure, std::string_view command);

}  // namespace anvil::cli
