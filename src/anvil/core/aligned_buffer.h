// Owned, 64-byte aligned memory (one cache line; the widest vector load).
// Allocation does not touch the pages: first touch costs ~10 µs per 4 KiB on
// these machines, so buffers are made once and reused, never per step.
// Buffers of kHugePageBytes or more are aligned to it and asked to be backed
// by transparent huge pages (madvise; the hosts leave THP to madvise): one
// fault per 2 MiB instead of 512, and weights, caches and activations that
// stream through the caches each step miss the TLB 512 times less often.
#pragma once

#include <cstddef>

namespace anvil {

inline constexpr size_t kAlignment = 64;
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  // Sets every byte to 0 (first touch of its pages); nothing for an empty buffer.
  void Zero();

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// Rounds `bytes` up to a multiple of kAlignment.
constexpr size_t AlignUp(size_t bytes, size_t alignment = kAlignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace anvil
