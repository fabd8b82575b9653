// ParallelPlan (see plan.h).
#include "anvil/parallel/plan.h"

namespace anvil::parallel {

Result<ParallelPlan> ParallelPlan::Create(ParallelConfig parallel,
                                          std::shared_ptr<comm::Group> world, Config& config) {
  RETURN_IF_ERROR(parallel.Validate());
  RETURN_IF_ERROR(parallel.ResolveWorld(world->size(), config));
  ParallelPlan plan;
  plan.config_ = parallel;
  plan.world_ = world;
  // Rank r is data-parallel rank r: every other degree is 1.
  plan.dp_ = world->size() == 1 ? world : std::shared_ptr<comm::Group>(world->Split(0, world->rank(), "dp"));
  return plan;
}

}  // namespace anvil::parallel
