// Tensor views and their shape bookkeeping.
#include "anvil/core/tensor.h"

#include "anvil/core/arena.h"
#include "anvil/core/check.h"

namespace anvil {

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) Append(d);
}

void Shape::Append(int64_t extent) {
  CHECK_LT(rank_, kMaxDims) << "more than " << kMaxDims << " dimensions";
  CHECK_GE(extent, 0) << "negative extent";
  dims_[rank_++] = extent;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

std::string Shape::ToString() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) s += (i ? ", " : "") + std::to_string(dims_[i]);
  return s + "]";
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] != other.dims_[i]) return false;
  }
  return true;
}

void Tensor::SetContiguousStrides() {
  int64_t s = 1;
  for (int i = shape_.rank() - 1; i >= 0; --i) {
    strides_[i] = s;
    s *= shape_[i];
  }
}

Tensor Tensor::Empty(DType dtype, const Shape& shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.SetContiguousStrides();
  t.owner_ = std::make_shared<AlignedBuffer>(DTypeBytes(dtype, shape.numel()));
  t.base_ = t.owner_->data();
  return t;
}

Tensor Tensor::FromArena(Arena& arena, DType dtype, const Shape& shape) {
  return Borrow(arena.Allocate(DTypeBytes(dtype, shape.numel())), dtype, shape);
}

Tensor Tensor::Borrow(void* data, DType dtype, const Shape& shape) {
  CHECK(data != nullptr || shape.numel() == 0) << "borrowing a null pointer";
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.SetContiguousStrides();
  // A zero-size view still needs a non-null base to count as defined.
  static std::byte empty_sentinel;
  t.base_ = data ? static_cast<std::byte*>(data) : &empty_sentinel;
  return t;
}

bool Tensor::is_contiguous() const {
  int64_t s = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != s) return false;
    s *= shape_[i];
  }
  return true;
}

void* Tensor::raw() const {
  CHECK(defined()) << "raw() of an undefined tensor";
  if (DTypeBits(dtype_) < 8) {
    CHECK_EQ(offset_ * DTypeBits(dtype_) % 8, 0) << "sub-byte view must start on a byte boundary";
  }
  return base_ + offset_ * DTypeBits(dtype_) / 8;
}

void Tensor::CheckElementSize(size_t bytes) const {
  CHECK_EQ(static_cast<int>(bytes * 8), DTypeBits(dtype_))
      << "typed access to a " << DTypeName(dtype_) << " tensor with a " << bytes << "-byte type";
}

Tensor Tensor::Slice(int dim, int64_t begin, int64_t end) const {
  CHECK(dim >= 0 && dim < rank()) << "slice dim " << dim << " of " << ToString();
  CHECK(0 <= begin && begin <= end && end <= shape_[dim])
      << "slice [" << begin << ", " << end << ") of extent " << shape_[dim];
  Tensor t = *this;
  t.shape_[dim] = end - begin;
  t.offset_ += begin * strides_[dim];
  return t;
}

Tensor Tensor::Select(int dim, int64_t index) const {
  CHECK(dim >= 0 && dim < rank()) << "select dim " << dim << " of " << ToString();
  CHECK(0 <= index && index < shape_[dim]) << "index " << index << " of extent " << shape_[dim];
  Tensor t = *this;
  t.offset_ += index * strides_[dim];
  t.shape_ = Shape();
  for (int i = 0, r = 0; i < rank(); ++i) {
    if (i == dim) continue;
    t.shape_.Append(shape_[i]);
    t.strides_[r++] = strides_[i];
  }
  return t;
}

Tensor Tensor::Transpose(int dim0, int dim1) const {
  CHECK(dim0 >= 0 && dim0 < rank() && dim1 >= 0 && dim1 < rank())
      << "transpose dims " << dim0 << ", " << dim1 << " of " << ToString();
  Tensor t = *this;
  std::swap(t.shape_[dim0], t.shape_[dim1]);
  std::swap(t.strides_[dim0], t.strides_[dim1]);
  return t;
}

Tensor Tensor::Reshape(const Shape& shape) const {
  CHECK(is_contiguous()) << "reshape of a non-contiguous view " << ToString();
  CHECK_EQ(shape.numel(), numel()) << "reshape " << shape_.ToString() << " -> " << shape.ToString();
  Tensor t = *this;
  t.shape_ = shape;
  t.SetContiguousStrides();
  return t;
}

std::string Tensor::ToString() const {
  std::string s = std::string(DTypeName(dtype_)) + shape_.ToString() + " strides [";
  for (int i = 0; i < rank(); ++i) s += (i ? ", " : "") + std::to_string(strides_[i]);
  return s + "] offset " + std::to_string(offset_);
}

}  // namespace anvil
