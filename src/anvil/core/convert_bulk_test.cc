// Every bulk path this CPU supports against the scalar functions, bit for bit:
// all rounding boundaries, 10^6 random f32, every 8/16-bit code, lengths 0..70
// at unaligned offsets (tails), guard bytes past the end, and FTZ+DAZ set.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "anvil/core/convert.h"
#include "anvil/core/convert_testing.h"

namespace anvil {
namespace {

using testing::Bits;
using testing::Hex;

// One bulk conversion under test: `bulk` converts n elements from `src` to
// `dst`; `scalar` gives the expected output bits of element i of `src`.
template <typename From, typename To>
struct BulkCase {
  const char* name;
  std::function<void(Isa, const From*, To*, size_t)> bulk;
  std::function<To(From)> scalar;
};

template <typename T>
uint32_t OutBits(T v) {
  if constexpr (std::is_same_v<T, float>) return Bits(v);
  return v;
}

template <typename From, typename To>
void ExpectBulkMatchesScalar(const BulkCase<From, To>& c, const std::vector<From>& inputs) {
  for (Isa isa : testing::SupportedIsas()) {
    SCOPED_TRACE(std::string(c.name) + " on " + IsaName(isa));
    // The whole array.
    std::vector<To> out(inputs.size());
    c.bulk(isa, inputs.data(), out.data(), inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      ASSERT_EQ(OutBits(out[i]), OutBits(c.scalar(inputs[i])))
          << "element " << i << " input bits " << Hex(OutBits(inputs[i]));
    }
    // Every length up to a few vectors at unaligned offsets: the tails, and no
    // byte written past the end.
    constexpr size_t kGuard = 64;
    for (size_t offset = 0; offset < 4; ++offset) {
      for (size_t n = 0; n <= 70; ++n) {
        const From* src = inputs.data() + (1000 + 37 * n + offset) % (inputs.size() - 80);
        std::vector<To> dst(offset + n + kGuard);
        std::fill(dst.begin(), dst.end(), static_cast<To>(0x5A));
        c.bulk(isa, src, dst.data() + offset, n);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(OutBits(dst[offset + i]), OutBits(c.scalar(src[i]))) << "n " << n;
        }
        for (size_t i = offset + n; i < dst.size(); ++i) {
          ASSERT_EQ(OutBits(dst[i]), OutBits(static_cast<To>(0x5A))) << "wrote past n = " << n;
        }
        for (size_t i = 0; i < offset; ++i) {
          ASSERT_EQ(OutBits(dst[i]), OutBits(static_cast<To>(0x5A)));
        }
      }
    }
  }
}

void ExpectEncodesMatchScalar(const std::vector<float>& inputs) {
  ExpectBulkMatchesScalar<float, uint16_t>({"f32->bf16",
                                            [](Isa isa, const float* s, uint16_t* d, size_t n) {
                                              F32ToBF16(isa, {s, n}, {d, n});
                                            },
                                            [](float x) { return F32ToBF16(x); }},
                                           inputs);
  ExpectBulkMatchesScalar<float, uint16_t>({"f32->f16",
                                            [](Isa isa, const float* s, uint16_t* d, size_t n) {
                                              F32ToF16(isa, {s, n}, {d, n});
                                            },
                                            [](float x) { return F32ToF16(x); }},
                                           inputs);
  for (Overflow o : {Overflow::kSaturate, Overflow::kNoSaturate}) {
    const char* sat = o == Overflow::kSaturate ? " sat" : " nosat";
    ExpectBulkMatchesScalar<float, uint8_t>({(std::string("f32->e4m3") + sat).c_str(),
                                             [o](Isa isa, const float* s, uint8_t* d, size_t n) {
                                               F32ToE4M3(isa, {s, n}, {d, n}, o);
                                             },
                                             [o](float x) { return F32ToE4M3(x, o); }},
                                            inputs);
    ExpectBulkMatchesScalar<float, uint8_t>({(std::string("f32->e5m2") + sat).c_str(),
                                             [o](Isa isa, const float* s, uint8_t* d, size_t n) {
                                               F32ToE5M2(isa, {s, n}, {d, n}, o);
                                             },
                                             [o](float x) { return F32ToE5M2(x, o); }},
                                            inputs);
  }
}

// Every code several times over, shuffled, so tails and offsets see all of them.
template <typename T>
std::vector<T> AllCodesShuffled(uint32_t count) {
  std::vector<T> codes;
  for (int rep = 0; rep < 4; ++rep) {
    for (uint32_t c = 0; c < count; ++c) codes.push_back(static_cast<T>(c));
  }
  std::shuffle(codes.begin(), codes.end(), std::mt19937(7));
  return codes;
}

void ExpectDecodesMatchScalar() {
  const auto halves = AllCodesShuffled<uint16_t>(0x10000);
  const auto bytes = AllCodesShuffled<uint8_t>(0x100);
  ExpectBulkMatchesScalar<uint16_t, float>({"bf16->f32",
                                            [](Isa isa, const uint16_t* s, float* d, size_t n) {
                                              BF16ToF32(isa, {s, n}, {d, n});
                                            },
                                            [](uint16_t x) { return BF16ToF32(x); }},
                                           halves);
  ExpectBulkMatchesScalar<uint16_t, float>({"f16->f32",
                                            [](Isa isa, const uint16_t* s, float* d, size_t n) {
                                              F16ToF32(isa, {s, n}, {d, n});
                                            },
                                            [](uint16_t x) { return F16ToF32(x); }},
                                           halves);
  ExpectBulkMatchesScalar<uint8_t, float>({"e4m3->f32",
                                           [](Isa isa, const uint8_t* s, float* d, size_t n) {
                                             E4M3ToF32(isa, {s, n}, {d, n});
                                           },
                                           [](uint8_t x) { return E4M3ToF32(x); }},
                                          bytes);
  ExpectBulkMatchesScalar<uint8_t, float>({"e5m2->f32",
                                           [](Isa isa, const uint8_t* s, float* d, size_t n) {
                                             E5M2ToF32(isa, {s, n}, {d, n});
                                           },
                                           [](uint8_t x) { return E5M2ToF32(x); }},
                                          bytes);
}

TEST(ConvertBulk, EncodeMatchesScalar) {
  ExpectEncodesMatchScalar(testing::BoundaryAndRandom(1'000'000, 20240612));
}

TEST(ConvertBulk, DecodeMatchesScalar) { ExpectDecodesMatchScalar(); }

// Flush-to-zero and denormals-are-zero change no bit: the kernels are integer
// code, F16C ignores FTZ, and DAZ only touches f32 subnormals, which f16
// rounds to +-0 anyway. (Training code may well run with FTZ/DAZ set.)
TEST(ConvertBulk, UnderFtzDaz) {
  struct MxcsrGuard {
    unsigned saved = _mm_getcsr();
    ~MxcsrGuard() { _mm_setcsr(saved); }
  } guard;
  _mm_setcsr(guard.saved | 0x8040u);  // FTZ (bit 15) | DAZ (bit 6)
  ExpectEncodesMatchScalar(testing::BoundaryInputs());
  ExpectDecodesMatchScalar();
}

TEST(ConvertBulk, AnyDType) {
  const std::vector<float> inputs = testing::RandomInputs(1001, 99);  // odd: a lone int4
  const ConvertOptions options = {.overflow = Overflow::kNoSaturate,
                                  .e8m0_rounding = E8M0Rounding::kTowardZero};
  for (Isa isa : testing::SupportedIsas()) {
    for (DType dtype : kAllDTypes) {
      SCOPED_TRACE(std::string(DTypeName(dtype)) + " on " + IsaName(isa));
      const auto n = static_cast<int64_t>(inputs.size());
      std::vector<uint8_t> encoded(DTypeBytes(dtype, n));
      ConvertFromF32(isa, inputs.data(), dtype, encoded.data(), n, options);
      std::vector<float> decoded(inputs.size());
      ConvertToF32(isa, dtype, encoded.data(), decoded.data(), n);
      for (size_t i = 0; i < inputs.size(); ++i) {
        const float x = inputs[i];
        float want = x;
        switch (dtype) {
          case DType::kF32:
            break;
          case DType::kBF16:
            want = BF16ToF32(F32ToBF16(x));
            break;
          case DType::kF16:
            want = F16ToF32(F32ToF16(x));
            break;
          case DType::kE4M3:
            want = E4M3ToF32(F32ToE4M3(x, options.overflow));
            break;
          case DType::kE5M2:
            want = E5M2ToF32(F32ToE5M2(x, options.overflow));
            break;
          case DType::kE8M0:
            want = E8M0ToF32(F32ToE8M0(x, options.e8m0_rounding, options.overflow));
            break;
          case DType::kI8:
            want = I8ToF32(F32ToI8(x));
            break;
          case DType::kI4:
            want = I4ToF32(F32ToI4(x));
            break;
        }
        ASSERT_EQ(Bits(decoded[i]), Bits(want)) << "element " << i << " " << Hex(Bits(x));
      }
    }
  }
  std::vector<int8_t> values = {-8, 7, 3, -1, 0};
  std::vector<uint8_t> packed(3);
  PackI4(values, packed);
  EXPECT_EQ(packed, (std::vector<uint8_t>{0x78, 0xF3, 0x00}));
  std::vector<int8_t> unpacked(5);
  UnpackI4(packed, unpacked);
  EXPECT_EQ(unpacked, values);
}

TEST(ConvertBulkDeathTest, ChecksSizes) {
  std::vector<float> src(3);
  std::vector<uint16_t> dst(2);
  EXPECT_DEATH(F32ToBF16(Isa::kScalar, src, dst), "equal source and destination sizes");
  std::vector<uint8_t> packed(1);
  EXPECT_DEATH(PackI4(std::vector<int8_t>(3), packed), "PackI4");
}

}  // namespace
}  // namespace anvil
