// AlignedBuffer: aligned operator new/delete, move-only ownership.
#include "anvil/core/aligned_buffer.h"

#include <cstring>
#include <new>
#include <utility>

namespace anvil {

AlignedBuffer::AlignedBuffer(size_t bytes) : size_(bytes) {
  if (bytes > 0) {
    data_ = static_cast<std::byte*>(::operator new(AlignUp(bytes), std::align_val_t{kAlignment}));
  }
}

AlignedBuffer::~AlignedBuffer() {
  if (data_) ::operator delete(data_, std::align_val_t{kAlignment});
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    AlignedBuffer old(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void AlignedBuffer::Zero() {
  if (size_ > 0) std::memset(data_, 0, size_);
}

}  // namespace anvil
