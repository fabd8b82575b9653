// Arena allocation and high-water tracking.
#include "anvil/core/arena.h"

#include <algorithm>

#include "anvil/core/check.h"

namespace anvil {

Arena::Arena(size_t capacity_bytes, std::string name)
    : buffer_(AlignUp(capacity_bytes)), name_(std::move(name)) {}

std::byte* Arena::Allocate(size_t bytes) {
  const size_t size = AlignUp(bytes);
  CHECK_LE(used_ + size, buffer_.size())
      << "arena '" << name_ << "' is too small: " << used_ << " bytes in use, " << size
      << " more requested; size it from the config before the first step";
  std::byte* p = buffer_.data() + used_;
  used_ += size;
  high_water_ = std::max(high_water_, used_);
  return p;
}

void Arena::ResetTo(size_t mark) {
  CHECK_LE(mark, used_) << "arena '" << name_ << "': reset to a mark above the current use";
  used_ = mark;
}

}  // namespace anvil
