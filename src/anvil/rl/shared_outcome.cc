#include "anvil/rl/shared_outcome.h"

#include <fmt/core.h>

namespace anvil::rl {

Status AgreeOnOutcome(comm::Group& group, const Status& mine, std::string_view failed,
                      std::string_view cut) {
  // 0 done, 1 cut, 2 + r failed on rank r: the highest wins.
  const bool mine_cut = mine.code() == StatusCode::kCancelled;
  const int worst = group.AllReduceValue<int>(mine.ok()  ? 0
                                              : mine_cut ? 1
                                                         : 2 + group.rank(),
                                              comm::ReduceOp::kMax);
  if (!mine.ok() && (!mine_cut || worst == 1)) return mine;
  if (worst == 1) return Cancelled(fmt::format("{} cancelled on another trainer rank", cut));
  if (worst != 0) return Aborted(fmt::format("trainer rank {} failed {}", worst - 2, failed));
  return Status::Ok();
}

Status SetupAgreement::Passed(const Status& mine) {
  agreed_ = true;
  Status all = mine;
  if (ranks_ != nullptr && ranks_->size() > 1) {
    all = AgreeOnOutcome(*ranks_, mine, "its setup", "the setup");
  }
  if (!all.ok() && failed_ != nullptr) *failed_ = true;
  return all;
}

SetupAgreement::~SetupAgreement() {
  if (!agreed_) (void)Passed(Aborted("this rank's setup failed (its error is returned)"));
}

}  // namespace anvil::rl
