#include "anvil/agreed_failure.h"

#include <fmt/core.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <span>
#include <string>

namespace anvil::cli {

void SayAgreedFailure(comm::Group& world, const Status& failure, std::string_view command) {
  const std::string text = failure.ToString();
  bool own = !failure.ok() && failure.code() != StatusCode::kAborted;
  if (world.AllReduceValue<int32_t>(own ? 1 : 0) == 0) own = !failure.ok();  // (all Aborted)
  // Whether every rank failed on its own account with one message: the
  // largest and (negated) smallest of the messages' hashes, over those ranks.
  const int64_t hash = static_cast<int64_t>(std::hash<std::string>{}(text) >> 2);
  int64_t v[3] = {own ? 1 : 0, own ? hash : -1, own ? -hash : INT64_MIN + 1};
  world.AllReduce(std::span<int64_t>(v, 1), comm::ReduceOp::kSum);
  world.AllReduce(std::span<int64_t>(v + 1, 2), comm::ReduceOp::kMax);
  const bool alike = v[0] == world.size() && v[1] == -v[2];
  if (alike) {
    if (world.rank() == 0) fmt::print(stderr, "{}: {}\n", command, text);
  } else if (own) {
    fmt::print(stderr, "{}: [rank {}] {}\n", command, world.rank(), text);
  }
  std::fflush(stderr);
}

}  // namespace anvil::cli
