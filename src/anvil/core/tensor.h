// Tensor: a typed, strided view (dtype + shape + strides + offset) over shared
// storage. Views, slices and transposes never copy. Storage is either owned
// (shared AlignedBuffer) or borrowed (an arena or a flat parameter buffer that
// outlives the view). Strides and offsets count elements, not bytes.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/dtype.h"

namespace anvil {

class Arena;

inline constexpr int kMaxDims = 6;

// Up to kMaxDims extents.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);

  void Append(int64_t extent);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  int64_t numel() const;
  std::string ToString() const;  // "[4, 256, 768]"
  bool operator==(const Shape& other) const;

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int rank_ = 0;
};

class Tensor {
 public:
  Tensor() = default;

  // Fresh contiguous storage (untouched pages).
  static Tensor Empty(DType dtype, const Shape& shape);
  // Contiguous memory carved from `arena`; valid until the arena resets.
  static Tensor FromArena(Arena& arena, DType dtype, const Shape& shape);
  // A contiguous view of memory owned elsewhere (e.g. a flat weight buffer).
  static Tensor Borrow(void* data, DType dtype, const Shape& shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t stride(int i) const { return strides_[i]; }
  int64_t offset() const { return offset_; }
  int64_t numel() const { return shape_.numel(); }
  bool defined() const { return base_ != nullptr; }
  bool is_contiguous() const;

  // Address of element 0 of this view. int4 views must start on a byte.
  void* raw() const;
  // Typed address; CHECKs that T's size matches the dtype's element size.
  template <typename T>
  T* data() const {
    CheckElementSize(sizeof(T));
    return static_cast<T*>(raw());
  }

  // Views, sharing storage:
  Tensor Slice(int dim, int64_t begin, int64_t end) const;  // [begin, end) along dim
  Tensor Select(int dim, int64_t index) const;              // drops dim
  Tensor Transpose(int dim0, int dim1) const;
  Tensor Reshape(const Shape& shape) const;                  // contiguous views only

  std::string ToString() const;  // "bf16[4, 256, 768] strides [...] offset 0"

 private:
  void CheckElementSize(size_t bytes) const;
  void SetContiguousStrides();

  DType dtype_ = DType::kF32;
  Shape shape_;
  std::array<int64_t, kMaxDims> strides_{};
  int64_t offset_ = 0;
  std::byte* base_ = nullptr;                // storage start
  std::shared_ptr<AlignedBuffer> owner_;     // null when borrowed
};

}  // namespace anvil
