// A bump allocator over one buffer reserved up front, for per-step scratch.
// Sizes come from config x (B, T) before the first step; the high-water mark
// says how much the arena really needed. Running out is a sizing bug: CHECK.
#pragma once

#include <cstddef>
#include <string>

#include "anvil/core/aligned_buffer.h"

namespace anvil {

class Arena {
 public:
  Arena() = default;
  Arena(size_t capacity_bytes, std::string name);

  // `bytes` of 64-byte aligned memory, valid until Reset/ResetTo below it.
  std::byte* Allocate(size_t bytes);
  template <typename T>
  T* AllocateArray(size_t count) {
    return reinterpret_cast<T*>(Allocate(count * sizeof(T)));
  }

  // A mark to return to: scratch used inside a scope is released at its end.
  size_t Mark() const { return used_; }
  void ResetTo(size_t mark);
  void Reset() { ResetTo(0); }

  size_t used() const { return used_; }
  size_t high_water() const { return high_water_; }
  size_t capacity() const { return buffer_.size(); }
  const std::string& name() const { return name_; }

 private:
  AlignedBuffer buffer_;
  std::string name_;
  size_t used_ = 0;
  size_t high_water_ = 0;
};

}  // namespace anvil
