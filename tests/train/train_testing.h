// Helpers of the trainer tests: a tiny synthetic token corpus written as
// shards, a micro model config as TOML, and temporary run folders.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "anvil/core/config.h"
#include "anvil/core/rng.h"
#include "anvil/data/shard.h"

namespace anvil::train::testing {

inline constexpr int kVocab = 64;

// Documents of a learnable pattern (token i+1 follows i, with noise), so the
// loss falls within a few steps.
inline void WriteShard(const std::string& path, int docs, int doc_len, uint64_t seed) {
  auto w = data::ShardWriter::Create(path, kVocab);
  CHECK(w.ok()) << w.status().ToString();
  const RngStream rng(seed, RngPurpose::kTest);
  uint64_t k = 0;
  for (int d = 0; d < docs; ++d) {
    std::vector<uint32_t> doc;
    uint32_t t = rng.U32(k++) % kVocab;
    for (int i = 0; i < doc_len; ++i) {
      doc.push_back(t);
      t = rng.U32(k++) % 8 == 0 ? rng.U32(k++) % kVocab : (t + 1) % kVocab;
    }
    CHECK(w->AddDocument(doc).ok());
  }
  CHECK(w->Finish().ok());
}

// A fresh folder under the temp dir, removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_((std::filesystem::temp_directory_path() /
               ("anvil_train_test_" + std::to_string(::getpid()) + "_" + name))
                  .string()) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// data_dir/{train,val}.bin of the synthetic corpus.
inline void WriteSyntheticData(const std::string& data_dir) {
  std::filesystem::create_directories(data_dir);
  WriteShard(data_dir + "/train.bin", 40, 100, 1);
  WriteShard(data_dir + "/val.bin", 8, 100, 2);
}

// The micro model and a short run over `data_dir`.
inline std::string MicroToml(const std::string& data_dir, const std::string& precision) {
  return "[model]\ndim = 64\nn_layers = 2\nn_heads = 4\nn_kv_heads = 2\nffn_dim = 48\n"
         "vocab_size = 64\nmax_seq_len = 32\n"
         "[train]\nsteps = 8\nbatch_size = 4\nseq_len = 16\ngrad_accum = 2\nseed = 7\n"
         "precision = \"" +
         precision +
         "\"\nthreads = 2\neval_every = 4\neval_batches = 2\n"
         // Pinned: "auto" picks the faster dot product by timing it, and two
         // runs on a loaded machine could pick differently (other bits).
         "fp8_decode = \"bf16\"\nfp8_high_precision = \"bf16\"\n"
         "keep_checkpoints = 2\n"
         "[optim]\nlr = 0.01\nwarmup_steps = 2\nweight_decay = 0.1\ngrad_clip = 1.0\n"
         "[data]\ndir = \"" +
         data_dir + "\"\n";
}

inline Config MicroConfig(const std::string& data_dir, const std::string& precision,
                          const std::vector<std::string>& sets = {}) {
  auto c = Config::FromString(MicroToml(data_dir, precision), "micro.toml");
  CHECK(c.ok()) << c.status().ToString();
  for (const std::string& s : sets) CHECK(c->Set(s).ok()) << s;
  return std::move(*c);
}

}  // namespace anvil::train::testing
