// Bulk conversions: the scalar kernels (loops over the inline scalar functions),
// the dispatch to the requested ISA's kernel table, and the dtype-generic entry
// points.
#include "anvil/core/convert.h"

#include "anvil/core/check.h"
#include "anvil/core/convert_internal.h"

// The compiler may auto-vectorise the scalar loops (-march=native). That keeps
// their semantics, which is all the scalar path promises: it is the portable
// reference the SIMD paths are tested against, not slow on purpose.

namespace anvil {
namespace convert_internal {
namespace {

template <auto kFn, typename From, typename To>
void Loop(const From* src, To* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = kFn(src[i]);
}

template <auto kFn>
void LoopOverflow(const float* src, uint8_t* dst, size_t n, Overflow overflow) {
  // Two loops so that `overflow` is a constant inside each.
  if (overflow == Overflow::kSaturate) {
    for (size_t i = 0; i < n; ++i) dst[i] = kFn(src[i], Overflow::kSaturate);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = kFn(src[i], Overflow::kNoSaturate);
  }
}

uint16_t ScalarF32ToBF16(float x) { return F32ToBF16(x); }
float ScalarBF16ToF32(uint16_t x) { return BF16ToF32(x); }
uint16_t ScalarF32ToF16(float x) { return F32ToF16(x); }
float ScalarF16ToF32(uint16_t x) { return F16ToF32(x); }
uint8_t ScalarF32ToE4M3(float x, Overflow o) { return F32ToE4M3(x, o); }
float ScalarE4M3ToF32(uint8_t x) { return E4M3ToF32(x); }
uint8_t ScalarF32ToE5M2(float x, Overflow o) { return F32ToE5M2(x, o); }
float ScalarE5M2ToF32(uint8_t x) { return E5M2ToF32(x); }

}  // namespace

const Kernels& ScalarKernels() {
  static constexpr Kernels kKernels = {
      .f32_to_bf16 = Loop<ScalarF32ToBF16, float, uint16_t>,
      .bf16_to_f32 = Loop<ScalarBF16ToF32, uint16_t, float>,
      .f32_to_f16 = Loop<ScalarF32ToF16, float, uint16_t>,
      .f16_to_f32 = Loop<ScalarF16ToF32, uint16_t, float>,
      .f32_to_e4m3 = LoopOverflow<ScalarF32ToE4M3>,
      .e4m3_to_f32 = Loop<ScalarE4M3ToF32, uint8_t, float>,
      .f32_to_e5m2 = LoopOverflow<ScalarF32ToE5M2>,
      .e5m2_to_f32 = Loop<ScalarE5M2ToF32, uint8_t, float>,
  };
  return kKernels;
}

}  // namespace convert_internal

namespace {

const convert_internal::Kernels& KernelsFor(Isa isa) {
  CHECK(IsaSupported(isa)) << "bulk conversion asked for " << IsaName(isa)
                           << ", which this CPU does not support";
  switch (isa) {
    case Isa::kAvx512:
      return convert_internal::Avx512Kernels();
    case Isa::kAvx2:
      return convert_internal::Avx2Kernels();
    case Isa::kScalar:
      break;
  }
  return convert_internal::ScalarKernels();
}

template <typename From, typename To>
void CheckSizes(std::span<const From> src, std::span<To> dst) {
  CHECK_EQ(src.size(), dst.size()) << "bulk conversion needs equal source and destination sizes";
}

}  // namespace

void F32ToBF16(Isa isa, std::span<const float> src, std::span<uint16_t> dst) {
  CheckSizes(src, dst);
  KernelsFor(isa).f32_to_bf16(src.data(), dst.data(), src.size());
}
void BF16ToF32(Isa isa, std::span<const uint16_t> src, std::span<float> dst) {
  CheckSizes(src, dst);
  KernelsFor(isa).bf16_to_f32(src.data(), dst.data(), src.size());
}
void F32ToF16(Isa isa, std::span<const float> src, std::span<uint16_t> dst) {
  CheckSizes(src, dst);
  KernelsFor(isa).f32_to_f16(src.data(), dst.data(), src.size());
}
void F16ToF32(Isa isa, std::span<const uint16_t> src, std::span<float> dst) {
  CheckSizes(src, dst);
  KernelsFor(isa).f16_to_f32(src.data(), dst.data(), src.size());
}
void F32ToE4M3(Isa isa, std::span<const float> src, std::span<uint8_t> dst, Overflow overflow) {
  CheckSizes(src, dst);
  KernelsFor(isa).f32_to_e4m3(src.data(), dst.data(), src.size(), overflow);
}
void E4M3ToF32(Isa isa, std::span<const uint8_t> src, std::span<float> dst) {
  CheckSizes(src, dst);
  KernelsFor(isa).e4m3_to_f32(src.data(), dst.data(), src.size());
}
void F32ToE5M2(Isa isa, std::span<const float> src, std::span<uint8_t> dst, Overflow overflow) {
  CheckSizes(src, dst);
  KernelsFor(isa).f32_to_e5m2(src.data(), dst.data(), src.size(), overflow);
}
void E5M2ToF32(Isa isa, std::span<const uint8_t> src, std::span<float> dst) {
  CheckSizes(src, dst);
  KernelsFor(isa).e5m2_to_f32(src.data(), dst.data(), src.size());
}

void PackI4(std::span<const int8_t> values, std::span<uint8_t> packed) {
  CHECK_EQ(packed.size(), DTypeBytes(DType::kI4, static_cast<int64_t>(values.size())))
      << "PackI4: packed must hold (values + 1) / 2 bytes";
  const size_t pairs = values.size() / 2;
  for (size_t i = 0; i < pairs; ++i) packed[i] = PackI4(values[2 * i], values[2 * i + 1]);
  if (values.size() % 2 != 0) packed[pairs] = PackI4(values[2 * pairs], 0);
}

void UnpackI4(std::span<const uint8_t> packed, std::span<int8_t> values) {
  CHECK_EQ(packed.size(), DTypeBytes(DType::kI4, static_cast<int64_t>(values.size())))
      << "UnpackI4: packed must hold (values + 1) / 2 bytes";
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = i % 2 == 0 ? UnpackI4Lo(packed[i / 2]) : UnpackI4Hi(packed[i / 2]);
  }
}

void ConvertFromF32(Isa isa, const float* src, DType dtype, void* dst, int64_t n,
                    const ConvertOptions& options) {
  CHECK_GE(n, 0);
  const auto count = static_cast<size_t>(n);
  const std::span<const float> in(src, count);
  switch (dtype) {
    case DType::kF32:
      for (size_t i = 0; i < count; ++i) static_cast<float*>(dst)[i] = src[i];
      return;
    case DType::kBF16:
      return F32ToBF16(isa, in, {static_cast<uint16_t*>(dst), count});
    case DType::kF16:
      return F32ToF16(isa, in, {static_cast<uint16_t*>(dst), count});
    case DType::kE4M3:
      return F32ToE4M3(isa, in, {static_cast<uint8_t*>(dst), count}, options.overflow);
    case DType::kE5M2:
      return F32ToE5M2(isa, in, {static_cast<uint8_t*>(dst), count}, options.overflow);
    case DType::kE8M0: {
      auto* out = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i < count; ++i) {
        out[i] = F32ToE8M0(src[i], options.e8m0_rounding, options.overflow);
      }
      return;
    }
    case DType::kI8: {
      auto* out = static_cast<int8_t*>(dst);
      for (size_t i = 0; i < count; ++i) out[i] = F32ToI8(src[i]);
      return;
    }
    case DType::kI4: {
      auto* out = static_cast<uint8_t*>(dst);
      for (size_t i = 0; i + 1 < count; i += 2) {
        out[i / 2] = PackI4(F32ToI4(src[i]), F32ToI4(src[i + 1]));
      }
      if (count % 2 != 0) out[count / 2] = PackI4(F32ToI4(src[count - 1]), 0);
      return;
    }
  }
  CheckFailed(__FILE__, __LINE__, "ConvertFromF32: unknown dtype");
}

void ConvertToF32(Isa isa, DType dtype, const void* src, float* dst, int64_t n) {
  CHECK_GE(n, 0);
  const auto count = static_cast<size_t>(n);
  const std::span<float> out(dst, count);
  switch (dtype) {
    case DType::kF32:
      for (size_t i = 0; i < count; ++i) dst[i] = static_cast<const float*>(src)[i];
      return;
    case DType::kBF16:
      return BF16ToF32(isa, {static_cast<const uint16_t*>(src), count}, out);
    case DType::kF16:
      return F16ToF32(isa, {static_cast<const uint16_t*>(src), count}, out);
    case DType::kE4M3:
      return E4M3ToF32(isa, {static_cast<const uint8_t*>(src), count}, out);
    case DType::kE5M2:
      return E5M2ToF32(isa, {static_cast<const uint8_t*>(src), count}, out);
    case DType::kE8M0: {
      const auto* in = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = E8M0ToF32(in[i]);
      return;
    }
    case DType::kI8: {
      const auto* in = static_cast<const int8_t*>(src);
      for (size_t i = 0; i < count; ++i) dst[i] = I8ToF32(in[i]);
      return;
    }
    case DType::kI4: {
      const auto* in = static_cast<const uint8_t*>(src);
      for (size_t i = 0; i < count; ++i) {
        dst[i] = I4ToF32(i % 2 == 0 ? UnpackI4Lo(in[i / 2]) : UnpackI4Hi(in[i / 2]));
      }
      return;
    }
  }
  CheckFailed(__FILE__, __LINE__, "ConvertToF32: unknown dtype");
}

}  // namespace anvil
