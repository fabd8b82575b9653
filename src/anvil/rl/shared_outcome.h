// One outcome for work the trainer ranks share (a draw, a held-out pass):
// each did its part, and all must go on, stop or fail together, none waiting
// for another's results.
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

}  // namespace anvil::rl
