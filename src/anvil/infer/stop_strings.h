// Stop strings: generation ends once the text generated so far holds one of
// them. Text grows a token's bytes at a time, and a stop string may span
// token boundaries, so each check looks at the occurrences that end in the
// bytes just added (earlier ones were seen before). The text keeps the stop
// string, and the token that completed it stays in the completion (an RL
// trainer scores the tokens sampled).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "anvil/core/status.h"

namespace anvil::infer {

// Whether `text`, whose last `added` bytes are new, now holds one of `stops`
// ending in those bytes.
bool HitsStop(std::string_view text, size_t added, std::span<const std::string> stops);

// Stop strings must be non-empty.
Status ValidateStops(std::span<const std::string> stops);

}  // namespace anvil::infer
