// Dumps what tests/model/torch_parity.py compares against an independent
// PyTorch Llama: the HF checkpoint (model/), the batch (batch.json), anvil's
// loss (anvil.json), logits and every parameter gradient (HF names and
// orientation) and the weights after one AdamW step (lr 1e-3, betas 0.9/0.95,
// eps 1e-8, weight decay 0.1 on every tensor, norms included).
//   model_parity_dump --out DIR [--packed] [--tied] [--bf16]
#include <cstdio>
#include <cstring>
#include <string>

#include "anvil/core/file_util.h"
#include "anvil/core/thread_pool.h"
#include "anvil/io/safetensors.h"
#include "anvil/kernels/ctx.h"
#include "anvil/kernels/optim.h"
#include "anvil/model/hf_checkpoint.h"
#include "anvil/model/llama.h"
#include "model_testing.h"

namespace anvil::model {
namespace {

std::string JsonList(const std::vector<int32_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(v[i]);
  }
  return s + "]";
}

Status WriteHf(const std::string& path, const LlamaParams& params, std::span<const float> buffer) {
  const std::vector<HfTensor> tensors = ToHfTensors(params, buffer);
  std::vector<io::TensorRef> refs;
  for (const HfTensor& t : tensors) refs.push_back({t.name, DType::kF32, t.shape, t.data.data()});
  return io::WriteSafetensors(path, refs);
}

Status Run(const std::string& out, bool packed, bool tied, bool bf16) {
  ThreadPool pool(2);
  kernels::KernelCtx ctx(pool);
  ModelConfig cfg = testing::MicroConfig(tied);
  cfg.vocab_size = 256;
  cfg.ffn_dim = 96;
  cfg.init_std = 0.05;
  constexpr int64_t kRows = 2, kSeq = 32;
  Llama model(cfg, {.precision = bf16 ? Precision::kBF16 : Precision::kF32, .max_batch = kRows,
                    .max_seq_len = kSeq}, ctx);
  model.InitWeights(ctx, 1234);
  RETURN_IF_ERROR(MakeDirectories(out));
  RETURN_IF_ERROR(SaveHfCheckpoint(out + "/model", model.params()));
  auto tb = testing::MakeBatch(kRows, kSeq, cfg.vocab_size, 5, packed);
  if (!packed) {  // positions and documents as the model derives them, for the Python side
    tb.cu_seqlens = {0, static_cast<int32_t>(kSeq), static_cast<int32_t>(2 * kSeq)};
    for (int64_t i = 0; i < kRows * kSeq; ++i) tb.positions.push_back(static_cast<int32_t>(i % kSeq));
  }
  RETURN_IF_ERROR(WriteFileAtomic(
      out + "/batch.json",
      "{\"rows\":" + std::to_string(kRows) + ",\"seq_len\":" + std::to_string(kSeq) +
          ",\"tokens\":" + JsonList(tb.tokens) + ",\"targets\":" + JsonList(tb.targets) +
          ",\"cu_seqlens\":" + JsonList(tb.cu_seqlens) + ",\"positions\":" +
          JsonList(tb.positions) + "}\n"));
  const int64_t n = kRows * kSeq;
  std::vector<float> logits(n * cfg.vocab_size);
  model.Logits(ctx, tb.batch, logits.data());
  RETURN_IF_ERROR(io::WriteSafetensors(out + "/logits.safetensors",
                                       {{"logits", DType::kF32, {n, cfg.vocab_size}, logits.data()}}));
  model.ZeroGrads(ctx);
  const LossStats loss = model.ForwardBackward(ctx, tb.batch, 0.0f);
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "{\"loss\": %.17g, \"loss_sum\": %.17g, \"tokens\": %lld, \"precision\": \"%s\", "
                "\"amx\": %s}\n",
                loss.mean(), loss.loss_sum, static_cast<long long>(loss.tokens),
                bf16 ? "bf16" : "f32", bf16 && ctx.amx() ? "true" : "false");
  RETURN_IF_ERROR(WriteFileAtomic(out + "/anvil.json", buf));
  RETURN_IF_ERROR(WriteHf(out + "/grads.safetensors", model.params(), model.params().grads()));

  LlamaParams& p = model.params();
  std::vector<float> m(p.size(), 0.0f), v(p.size(), 0.0f);
  kernels::AdamWUpdate(ctx, {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                             .weight_decay = 0.1},
                       /*step=*/1, /*grad_scale=*/1.0f, p.size(), p.weights().data(),
                       p.grads().data(), m.data(), v.data(), nullptr);
  return WriteHf(out + "/step1.safetensors", p, p.weights());
}

}  // namespace
}  // namespace anvil::model

int main(int argc, char** argv) {
  std::string out;
  bool packed = false, tied = false, bf16 = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else if (std::strcmp(argv[i], "--packed") == 0) {
      packed = true;
    } else if (std::strcmp(argv[i], "--tied") == 0) {
      tied = true;
    } else if (std::strcmp(argv[i], "--bf16") == 0) {
      bf16 = true;
    } else {
      std::fprintf(stderr, "usage: model_parity_dump --out DIR [--packed] [--tied] [--bf16]\n");
      return 2;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "usage: model_parity_dump --out DIR [--packed] [--tied] [--bf16]\n");
    return 2;
  }
  const anvil::Status s = anvil::model::Run(out, packed, tied, bf16);
  if (!s.ok()) {
    std::fprintf(stderr, "model_parity_dump: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
