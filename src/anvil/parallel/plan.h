// The parallel layout of a job, built once: the degrees validated against the
// world and a communication group per dimension. Today every degree but data
// parallelism is 1, so the data-parallel group spans the world; the trainer
// already takes its groups from here, so tensor, pipeline, context and
// expert groups (split from the world by color) slot in beside it.
#pragma once

#include <memory>

#include "anvil/comm/group.h"
#include "anvil/core/config.h"
#include "anvil/core/status.h"
#include "anvil/parallel/config.h"

namespace anvil::parallel {

class ParallelPlan {
 public:
  // Resolves parallel.dp in `config` (the run's resolved keys) and checks that
  // the degrees multiply to the world's size. Collective over `world` when it
  // has more than one rank (the groups are split from it).
  static Result<ParallelPlan> Create(ParallelConfig parallel, std::shared_ptr<comm::Group> world,
                                     Config& config);

  const ParallelConfig& config() const { return config_; }
  int zero() const { return static_cast<int>(config_.zero); }
  comm::Group& world() { return *world_; }
  // The ranks that hold the same model part and see different data.
  comm::Group& dp() { return *dp_; }

 private:
  ParallelConfig config_;
  std::shared_ptr<comm::Group> world_;
  std::shared_ptr<comm::Group> dp_;
};

}  // namespace anvil::parallel
