// Embedding (embedding.h): forward is an exact gather (a copy, or one RNE
// rounding to bf16); backward equals, bit for bit, the plain f32 loop that adds
// tokens in order (so it cannot depend on the thread count), and the double
// oracle within the bound of those additions; bad ids name the token.
#include "anvil/kernels/embedding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "anvil/kernels/ref/embedding_ref.h"
#include "anvil/kernels/rowwise_testing.h"

namespace anvil::kernels {
namespace {

using testing::AsDouble;
using testing::Ctx;
using testing::kU;
using testing::Random;
using testing::SameBits;
using testing::SupportedIsas;

const int64_t kDims[] = {1, 5, 16, 17, 31, 64, 100, 1031};

std::vector<int32_t> Ids(int64_t tokens, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> ids(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    ids[t] = static_cast<int32_t>((t * 2654435761u + seed) % vocab);
  return ids;
}

TEST(Embedding, ForwardGathersExactly) {
  const int64_t vocab = 11, tokens = 23;
  const auto ids = Ids(tokens, vocab, 3);
  for (Isa isa : SupportedIsas()) {
    for (int64_t dim : kDims) {
      SCOPED_TRACE(::testing::Message() << IsaName(isa) << " dim " << dim);
      const auto table = Random<float>(vocab * dim, 1, -3, 3);
      const auto table_bf16 = testing::ToBF16(table);
      std::vector<float> out(tokens * dim);
      std::vector<BF16> out_bf16(tokens * dim), out_conv(tokens * dim);
      const KernelCtx& ctx = Ctx(isa, 2);
      EmbeddingForward(ctx, tokens, vocab, dim, table.data(), ids.data(), out.data());
      EmbeddingForward(ctx, tokens, vocab, dim, table_bf16.data(), ids.data(), out_bf16.data());
      EmbeddingForward(ctx, tokens, vocab, dim, table.data(), ids.data(), out_conv.data());
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t c = 0; c < dim; ++c) {
          const int64_t src = ids[t] * dim + c, dst = t * dim + c;
          ASSERT_EQ(std::bit_cast<uint32_t>(out[dst]), std::bit_cast<uint32_t>(table[src]));
          ASSERT_EQ(out_bf16[dst].bits, table_bf16[src].bits);
          ASSERT_EQ(out_conv[dst].bits, ToBF16(table[src]).bits);  // convert.h's RNE
        }
      }
    }
  }
}

// Backward on a small vocabulary (every id repeats), 1 and 2 threads, against
// (a) the sequential f32 loop, bitwise, and (b) the double oracle: each
// element is k f32 additions onto its start value (k = the id's count), so
// |err| <= k u (|start| + sum |terms|).
template <typename T>
void CheckBackward() {
  const int64_t vocab = 7, tokens = 50;
  const auto ids = Ids(tokens, vocab, 5);
  for (Isa isa : SupportedIsas()) {
    for (int64_t dim : kDims) {
      for (int threads : {1, 2}) {
        SCOPED_TRACE(::testing::Message()
                     << IsaName(isa) << " dim " << dim << " threads " << threads);
        const auto dout = Random<T>(tokens * dim, 2, -1, 1);
        const auto start = Random<float>(vocab * dim, 3, -1, 1);
        std::vector<float> dtable = start;
        EmbeddingBackward(Ctx(isa, threads), tokens, vocab, dim, ids.data(), dout.data(),
                          dtable.data());
        std::vector<float> sequential = start;
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t c = 0; c < dim; ++c) {
            float& acc = sequential[ids[t] * dim + c];
            acc = acc + static_cast<float>(AsDouble(dout[t * dim + c]));
          }
        }
        ASSERT_TRUE(SameBits(dtable, sequential));
        std::vector<double> want(start.begin(), start.end()), mag(vocab * dim);
        ref::EmbeddingBackward(tokens, dim, ids.data(), dout.data(), want.data());
        std::vector<int> count(vocab, 0);
        for (int32_t id : ids) ++count[id];
        for (int64_t i = 0; i < vocab * dim; ++i) mag[i] = std::abs(start[i]);
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t c = 0; c < dim; ++c)
            mag[ids[t] * dim + c] += std::abs(AsDouble(dout[t * dim + c]));
        }
        for (int64_t i = 0; i < vocab * dim; ++i) {
          ASSERT_LE(std::abs(dtable[i] - want[i]), count[i / dim] * kU * mag[i]) << "i " << i;
        }
      }
    }
  }
}

TEST(Embedding, BackwardF32IsTheSequentialSum) { CheckBackward<float>(); }
TEST(Embedding, BackwardBf16IsTheSequentialSum) { CheckBackward<BF16>(); }

TEST(Embedding, BackwardLeavesUnusedRowsAlone) {
  const int64_t vocab = 5, dim = 33;
  const std::vector<int32_t> ids = {3, 1, 3};
  const auto dout = Random<float>(3 * dim, 4);
  for (Isa isa : SupportedIsas()) {
    std::vector<float> dtable(vocab * dim, 0.5f);
    EmbeddingBackward(Ctx(isa, 2), 3, vocab, dim, ids.data(), dout.data(), dtable.data());
    for (int64_t row : {0, 2, 4}) {
      for (int64_t c = 0; c < dim; ++c) ASSERT_EQ(dtable[row * dim + c], 0.5f) << IsaName(isa);
    }
  }
}

// The oracle's backward is the adjoint of its forward: central differences of
// L = sum(out * R) in double (linear: only cancellation error, ~1e-10).
TEST(EmbeddingReference, BackwardMatchesFiniteDifferences) {
  const int64_t vocab = 4, dim = 3, tokens = 5;
  const std::vector<int32_t> ids = {2, 0, 2, 3, 2};
  const auto tf = testing::RandomF32(vocab * dim, 6);
  const auto rf = testing::RandomF32(tokens * dim, 7);
  std::vector<double> table(tf.begin(), tf.end()), proj(rf.begin(), rf.end());
  const auto loss = [&](const std::vector<double>& t) {
    std::vector<double> out(tokens * dim);
    ref::EmbeddingForward(tokens, dim, t.data(), ids.data(), out.data());
    double l = 0;
    for (size_t i = 0; i < out.size(); ++i) l += out[i] * proj[i];
    return l;
  };
  std::vector<double> grad(vocab * dim, 0.0);
  ref::EmbeddingBackward(tokens, dim, ids.data(), proj.data(), grad.data());
  for (size_t i = 0; i < table.size(); ++i) {
    const double h = 1e-6 * std::max(1.0, std::abs(table[i]));
    const double keep = table[i];
    table[i] = keep + h;
    const double up = loss(table);
    table[i] = keep - h;
    const double down = loss(table);
    table[i] = keep;
    EXPECT_NEAR((up - down) / (2 * h), grad[i], 1e-6) << "i " << i;
  }
}

TEST(EmbeddingDeathTest, ChecksIds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> table(4 * 3), out(2 * 3);
  const std::vector<int32_t> bad = {0, 4};
  EXPECT_DEATH(
      EmbeddingForward(Ctx(Isa::kScalar, 1), 2, 4, 3, table.data(), bad.data(), out.data()),
      "token 1 has id 4");
  const std::vector<int32_t> negative = {-1};
  EXPECT_DEATH(
      EmbeddingBackward(Ctx(Isa::kScalar, 1), 1, 4, 3, negative.data(), out.data(), table.data()),
      "token 0 has id -1");
}

}  // namespace
}  // namespace anvil::kernels
