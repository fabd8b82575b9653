// Writes the fuzz seeds that come from the project's own writers into OUT_DIR:
// safetensors/, tokenizer_json/, shard/ and checkpoint_manifest/ (the config
// and trainer_state seeds are written by hand). Run once; the seeds are
// checked in under fuzz/corpus/. Usage: fuzz_make_seeds OUT_DIR
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/core/dtype.h"
#include "anvil/core/file_util.h"
#include "anvil/core/thread_pool.h"
#include "anvil/data/bpe_train.h"
#include "anvil/data/shard.h"
#include "anvil/data/tokenizer_json.h"
#include "anvil/io/checkpoint.h"
#include "anvil/io/safetensors.h"

namespace fs = std::filesystem;
using namespace anvil;

namespace {

Status Run(const std::string& out) {
  for (const char* d : {"safetensors", "tokenizer_json", "shard", "checkpoint_manifest"}) {
    RETURN_IF_ERROR(MakeDirectories(out + "/" + d));
  }
  // safetensors: one F32 and one BF16 tensor with metadata; an empty file.
  const float f[6] = {1, -2, 3.5f, 0, 1e-3f, 7};
  const uint16_t h[3] = {0x3f80, 0xc000, 0x0000};
  RETURN_IF_ERROR(io::WriteSafetensors(
      out + "/safetensors/two.safetensors",
      {{"w", DType::kF32, {2, 3}, f}, {"b", DType::kBF16, {3}, h}}, {{"step", "7"}}));
  RETURN_IF_ERROR(io::WriteSafetensors(out + "/safetensors/empty.safetensors", {}));
  RETURN_IF_ERROR(io::WriteSafetensors(out + "/safetensors/scalar.safetensors",
                                       {{"s", DType::kE4M3, {}, h}, {"z", DType::kI8, {0, 4}, h}}));

  // tokenizer.json: bytes, specials and a few merges learned from a sentence.
  ThreadPool pool(1);
  data::BpeTrainOptions options;
  options.vocab_size = 256 + 3 + 6;
  const std::string_view docs[] = {"the cat sat on the mat; the cat ate the rat"};
  ASSIGN_OR_RETURN(data::Tokenizer tok, data::TrainBpe(docs, options, pool));
  RETURN_IF_ERROR(data::SaveTokenizer(tok, out + "/tokenizer_json/small.json"));

  // Token shards: 2-byte tokens (three documents), 4-byte tokens, and none.
  {
    ASSIGN_OR_RETURN(data::ShardWriter w,
                     data::ShardWriter::Create(out + "/shard/small.bin", 300));
    const std::vector<uint32_t> a = {1, 2, 3}, b = {299}, c = {5, 0, 7, 7, 9};
    RETURN_IF_ERROR(w.AddDocument(a));
    RETURN_IF_ERROR(w.AddDocument(b));
    RETURN_IF_ERROR(w.AddDocument(c));
    RETURN_IF_ERROR(w.Finish().status());
  }
  {
    ASSIGN_OR_RETURN(data::ShardWriter w,
                     data::ShardWriter::Create(out + "/shard/wide.bin", 70000));
    const std::vector<uint32_t> a = {69999, 65536, 3};
    RETURN_IF_ERROR(w.AddDocument(a));
    RETURN_IF_ERROR(w.Finish().status());
  }
  {
    ASSIGN_OR_RETURN(data::ShardWriter w,
                     data::ShardWriter::Create(out + "/shard/empty.bin", 256));
    RETURN_IF_ERROR(w.Finish().status());
  }

  // A checkpoint manifest: two small files.
  const std::string run = out + "/checkpoint_manifest/run.tmp";
  {
    ASSIGN_OR_RETURN(io::CheckpointWriter w, io::CheckpointWriter::Begin(run, 12));
    RETURN_IF_ERROR(WriteFileAtomic(w.Path("a.bin"), "payload"));
    RETURN_IF_ERROR(WriteFileAtomic(w.Path("trainer_state.json"), "{}\n"));
    RETURN_IF_ERROR(w.Commit().status());
  }
  std::error_code ec;
  fs::copy_file(run + "/step_12/manifest.json", out + "/checkpoint_manifest/manifest.json",
                fs::copy_options::overwrite_existing, ec);
  if (ec) return IoError("copy manifest: " + ec.message());
  fs::remove_all(run, ec);
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const Status s = Run(argv[1]);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
