// Tensor-parallel shape of the model (shard.h), run under mpirun with the
// world as the tensor-parallel group: every rank builds the whole model (one
// rank's layout) and its tp slice, from one seed, and checks that
//  - the slice's initial weights are the whole model's at the places
//    ShardSegments names (bitwise: Init draws by whole-tensor position);
//  - the loss, every gradient slice, the logits and the input-side grads agree
//    with the whole model's to summation-order rounding (a row-parallel GEMM
//    sums its K in pieces, one per rank; bitwise at one rank);
//  - KV-cache decode of the slice gives its own Logits bitwise (parity holds
//    under tensor parallelism too), and a second step repeats the first's bits.
// Exit 0 when every rank passed; failures are printed with the rank.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "anvil/comm/world.h"
#include "anvil/core/thread_pool.h"
#include "anvil/model/decode.h"
#include "anvil/model/llama.h"
#include "model_testing.h"
#include "mpi_testing.h"

namespace anvil::model {
namespace {

using anvil::testing::Expect;
using anvil::testing::g_failures;
using anvil::testing::g_rank;

// max |a - b| over max |b| (0 when b is all zero and a equals it).
double RelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// The whole model's elements that the slice `p` of `tp` holds, in slice order.
std::vector<float> WholeAtSlice(const Llama& whole, std::span<const float> whole_buf,
                                const ParamInfo& p, const ShardInfo& shard) {
  std::vector<float> out(p.numel);
  for (const ParamInfo& q : whole.params().params()) {
    if (q.name != p.name) continue;
    for (const ShardSegment& s : ShardSegments(p, shard)) {
      std::copy_n(whole_buf.data() + q.offset + s.global, s.count, out.data() + s.local);
    }
  }
  return out;
}

std::vector<float> Slice(std::span<const float> buf, const ParamInfo& p) {
  return {buf.begin() + p.offset, buf.begin() + p.offset + p.numel};
}

void CheckPrecision(comm::Group& tp, Precision precision, bool packed) {
  const std::string where =
      fmt::format("{} {}", PrecisionName(precision), packed ? "packed" : "windows");
  // f32 differs only by the order of the row-parallel sums; bf16 also by the
  // bf16 roundings that order can flip (one ulp, 2^-8, of some activations).
  const double tol = precision == Precision::kF32 ? 2e-5 : 1e-2;
  ThreadPool pool(1);
  kernels::KernelCtx ctx(pool);
  const ModelConfig config = testing::MicroConfig();
  const LlamaOptions whole_options{.precision = precision, .max_batch = 2, .max_seq_len = 32};
  LlamaOptions tp_options = whole_options;
  tp_options.shard = ShardInfo::Of(tp);
  Llama whole(config, whole_options, ctx);
  Llama sliced(config, tp_options, ctx);
  whole.InitWeights(ctx, 17);
  sliced.InitWeights(ctx, 17);
  const ShardInfo& shard = tp_options.shard;

  for (const ParamInfo& p : sliced.params().params()) {
    Expect(WholeAtSlice(whole, whole.params().weights(), p, shard) ==
               Slice(sliced.params().weights(), p),
           fmt::format("{}: initial {} is not the whole model's slice", where, p.name));
  }

  const testing::TestBatch tb = testing::MakeBatch(2, 32, config.vocab_size, 5, packed);
  whole.ZeroGrads(ctx);
  sliced.ZeroGrads(ctx);
  const LossStats lw = whole.ForwardBackward(ctx, tb.batch, 0.0f);
  const LossStats ls = sliced.ForwardBackward(ctx, tb.batch, 0.0f);
  Expect(lw.tokens == ls.tokens, where + ": counted tokens differ");
  const double loss_diff = std::fabs(lw.loss_sum - ls.loss_sum) / std::fabs(lw.loss_sum);
  Expect(loss_diff <= tol * 0.1, fmt::format("{}: loss {} vs whole {} (rel {:.2e})", where,
                                             ls.loss_sum, lw.loss_sum, loss_diff));
  if (tp.size() == 1) Expect(loss_diff == 0, where + ": one rank must be bitwise the whole model");
  double worst = 0;
  for (const ParamInfo& p : sliced.params().params()) {
    const double d = RelDiff(Slice(sliced.params().grads(), p),
                             WholeAtSlice(whole, whole.params().grads(), p, shard));
    worst = std::max(worst, d);
    Expect(d <= tol, fmt::format("{}: grad of {} differs from the whole model's slice by {:.2e} "
                                 "(tolerance {:.0e})",
                                 where, p.name, d, tol));
    if (tp.size() == 1) Expect(d == 0, where + ": one rank, grad of " + p.name + " not bitwise");
  }

  // Logits of the slice against the whole model's, and decode against Logits.
  const int64_t n = 16, v = config.vocab_size;
  testing::TestBatch prompt = testing::MakeBatch(1, n, v, 9, false);
  std::vector<float> logits_whole(n * v), logits_tp(n * v), logits_decode(n * v);
  whole.Logits(ctx, prompt.batch, logits_whole.data());
  sliced.Logits(ctx, prompt.batch, logits_tp.data());
  const double ld = RelDiff(logits_tp, logits_whole);
  Expect(ld <= tol, fmt::format("{}: logits differ from the whole model's by {:.2e}", where, ld));
  Decoder decoder(sliced.forward_weights(), 1, n, n);
  decoder.Append(ctx, 0, std::span<const int32_t>(prompt.tokens.data(), 10), logits_decode.data());
  for (int64_t t = 10; t < n; ++t) {
    decoder.Append(ctx, 0, std::span<const int32_t>(prompt.tokens.data() + t, 1),
                   logits_decode.data() + t * v);
  }
  Expect(logits_decode == logits_tp, where + ": KV-cache decode is not bitwise the slice's Logits");

  // The same step again: the same bits.
  std::vector<float> first(sliced.params().grads().begin(), sliced.params().grads().end());
  sliced.ZeroGrads(ctx);
  const LossStats again = sliced.ForwardBackward(ctx, tb.batch, 0.0f);
  Expect(again.loss_sum == ls.loss_sum, where + ": second step's loss differs");
  Expect(std::equal(first.begin(), first.end(), sliced.params().grads().begin()),
         where + ": second step's grads differ");
  if (g_rank == 0) {
    std::printf("tp %d %-16s loss rel %.2e, worst grad rel %.2e, logits rel %.2e\n", tp.size(),
                where.c_str(), loss_diff, worst, ld);
  }
}

int Main() {
  auto world = comm::InitWorld({.timeout_s = 120.0});
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().ToString().c_str());
    return 1;
  }
  comm::Group& tp = **world;
  g_rank = tp.rank();
  for (const Precision p : {Precision::kF32, Precision::kBF16}) {
    for (const bool packed : {false, true}) CheckPrecision(tp, p, packed);
  }
  const int64_t failures = tp.AllReduceValue<int64_t>(g_failures);
  if (g_rank == 0)
    std::printf("%s: %lld failures over %d ranks\n", failures ? "FAILED" : "ok",
                static_cast<long long>(failures), tp.size());
  comm::FinalizeWorld();
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace anvil::model

int main() { return anvil::model::Main(); }
