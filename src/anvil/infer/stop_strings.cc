// Stop strings (stop_strings.h).
#include "anvil/infer/stop_strings.h"

#include <algorithm>

namespace anvil::infer {

bool HitsStop(std::string_view text, size_t added, std::span<const std::string> stops) {
  added = std::min(added, text.size());
  for (const std::string& stop : stops) {
    // An occurrence ending in the new bytes starts at or after this.
    const size_t tail = added + stop.size() - 1;
    const size_t from = text.size() > tail ? text.size() - tail : 0;
    if (text.find(stop, from) != std::string_view::npos) return true;
  }
  return false;
}

Status ValidateStops(std::span<const std::string> stops) {
  for (const std::string& stop : stops) {
    if (stop.empty()) return InvalidArgument("a stop string must not be empty");
  }
  return Status::Ok();
}

}  // namespace anvil::infer
