// Whole-model gradient check: every parameter tensor's gradient against
// central finite differences of the f32 loss along directions in that
// tensor's space (the gradient's own direction and random sign vectors).
//
// Why directions, not single coordinates: the loss is computed in f32, so it
// carries ~1e-7 of rounding noise that changes pseudo-randomly with any
// perturbation. A single-coordinate difference quotient with a step small
// enough for the truncation error is dominated by that noise (gradient
// entries here are 1e-4..1e-2). A perturbation along a unit direction u of
// the whole tensor with step h = 2e-3 ||w|| moves the loss by ~||g|| h, so
// noise/h stays ~1e-4 relative and so does truncation (h^2 L'''). The
// gradient direction checks magnitude and angle; random directions catch
// entries the gradient misses (those are orthogonal to the gradient itself).
#include <gtest/gtest.h>

#include <cmath>

#include "anvil/core/thread_pool.h"
#include "anvil/kernels/ctx.h"
#include "model_testing.h"

namespace anvil::model {
namespace {

// Weights at twice the default init make every path (attention patterns,
// SwiGLU curvature) matter to the loss; the step balances truncation (h^2)
// against f32 noise (1/h): measured worst errors ~1e-3 at 2x and h in
// [1e-3, 3e-3] ||w||, growing to 1e-2 at 3e-4 (noise) and at 1e-2 (truncation).
constexpr float kWeightScale = 2.0f;
constexpr double kStep = 2e-3;

double Loss(Llama& model, const kernels::KernelCtx& ctx, const Batch& batch) {
  return model.Forward(ctx, batch).mean();
}

void CheckGradients(bool packed, bool tied) {
  ThreadPool pool(1);
  kernels::KernelCtx ctx(pool);
  const ModelConfig cfg = testing::MicroConfig(tied);
  Llama model(cfg, {.max_batch = 2, .max_seq_len = 9}, ctx);
  model.InitWeights(ctx, 7);
  for (float& w : model.params().weights()) w *= kWeightScale;
  auto tb = testing::MakeBatch(2, 9, cfg.vocab_size, 11, packed);
  model.ZeroGrads(ctx);
  model.ForwardBackward(ctx, tb.batch, 0.0f);  // grad of the mean loss

  const std::vector<float> g_all(model.params().grads().begin(), model.params().grads().end());
  double worst = 0;
  std::string worst_name;
  for (const ParamInfo& p : model.params().params()) {
    std::span<float> w = model.params().weights().subspan(p.offset, p.numel);
    const float* g = g_all.data() + p.offset;
    double wnorm = 0, gnorm = 0;
    for (int64_t i = 0; i < p.numel; ++i) {
      wnorm += double(w[i]) * w[i];
      gnorm += double(g[i]) * g[i];
    }
    wnorm = std::sqrt(wnorm);
    gnorm = std::sqrt(gnorm);
    ASSERT_GT(gnorm, 0) << p.name << " has an all-zero gradient";
    const std::vector<float> w0(w.begin(), w.end());
    for (int dir = 0; dir < 3; ++dir) {
      std::vector<double> u(p.numel);
      double unorm = 0;
      const RngStream rng(99 + dir, RngPurpose::kTest, static_cast<uint32_t>(p.offset));
      for (int64_t i = 0; i < p.numel; ++i) {
        u[i] = dir == 0 ? g[i] : (rng.U32(i) & 1 ? 1.0 : -1.0);
        unorm += u[i] * u[i];
      }
      unorm = std::sqrt(unorm);
      double expected = 0;
      for (int64_t i = 0; i < p.numel; ++i) {
        u[i] /= unorm;
        expected += u[i] * g[i];
      }
      const double h = kStep * wnorm;
      auto loss_at = [&](double s) {
        for (int64_t i = 0; i < p.numel; ++i) w[i] = static_cast<float>(w0[i] + s * h * u[i]);
        return Loss(model, ctx, tb.batch);
      };
      const double fd = (loss_at(1) - loss_at(-1)) / (2 * h);
      for (int64_t i = 0; i < p.numel; ++i) w[i] = w0[i];
      // Scale of a directional derivative: |g.u| along g, ||g||/sqrt(n) for random u.
      const double scale = std::abs(expected) + gnorm / std::sqrt(double(p.numel));
      const double err = std::abs(fd - expected) / scale;
      if (err > worst) {
        worst = err;
        worst_name = p.name;
      }
      EXPECT_LT(err, 1e-2) << p.name << " direction " << dir << ": analytic " << expected
                           << " finite difference " << fd << " (||g|| " << gnorm << ")";
    }
  }
  std::printf("gradient check (%s, %s): worst relative error %.3g in %s\n",
              packed ? "packed" : "fixed windows", tied ? "tied" : "untied", worst,
              worst_name.c_str());
}

TEST(ModelGradTest, FixedWindowsUntied) { CheckGradients(false, false); }
TEST(ModelGradTest, PackedTied) { CheckGradients(true, true); }

}  // namespace
}  // namespace anvil::model
