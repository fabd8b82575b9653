// One outcome for work the trainer ranks share (a draw, a held-out pass, a
// run's setup): each did its part, and all must go on, stop or fail
// together, none waiting for another's results.
#pragma once

#include <string_view>

#include "anvil/comm/group.h"
#include "anvil/core/status.h"

namespace anvil::rl {

// Every rank of `group` calls this with its part's status. Ok on every rank
// only when all parts succeeded; else a rank's own failure or cut, or one
// naming the other rank: a failure outranks a cut (kCancelled, a stop
// request), and of two failures the higher rank's is named. `failed`
// completes "trainer rank R failed ..."; `cut` names the work cancelled.
Status AgreeOnOutcome(comm::Group& group, const Status& mine, std::string_view failed,
                      std::string_view cut);

// AgreeOnOutcome over a setup with many early returns: Passed(status) at
// its end, or, on a return before it, the destructor with this rank's
// failure, so that every rank meets the others at the agreement either way.
// Sets *failed (may be null) when the setup failed on any rank. (The setup
// must hold no collective: a rank that returned early would not meet it.)
class SetupAgreement {
 public:
  SetupAgreement(comm::Group* ranks, bool* failed) : ranks_(ranks), failed_(failed) {}
  SetupAgreement(const SetupAgreement&) = delete;
  SetupAgreement& operator=(const SetupAgreement&) = delete;
  ~SetupAgreement();
  Status Passed(const Status& mine);

 private:
  comm::Group* ranks_;
  bool* failed_;
  bool agreed_ = false;
};

}  // namespace anvil::rl
