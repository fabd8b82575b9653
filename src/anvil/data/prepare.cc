// The prepare pipeline: read, split, train, encode (threads over documents),
// write shards and meta.json.
#include "anvil/data/prepare.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "anvil/core/clock.h"
#include "anvil/core/thread_pool.h"
#include "anvil/data/bpe_train.h"
#include "anvil/data/corpus.h"
#include "anvil/core/file_util.h"
#include "anvil/data/shard.h"
#include "anvil/data/tokenizer_json.h"

namespace anvil::data {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t DocHash(uint64_t seed, uint64_t i) { return SplitMix64(seed ^ SplitMix64(i)); }

std::string Megabytes(int64_t bytes) { return fmt::format("{:.2f} MB", bytes / 1e6); }

}  // namespace

Status PrepareOptions::Validate() const {
  if (corpus.empty()) return InvalidArgument("no corpus given (--corpus brown or a path)");
  if (out_dir.empty()) return InvalidArgument("no output folder given (--out DIR)");
  if (!(val_fraction > 0 && val_fraction <= 0.5)) {
    return InvalidArgument(fmt::format("--val-fraction {} must be in (0, 0.5]", val_fraction));
  }
  if (threads < 0) return InvalidArgument(fmt::format("--threads {} must be >= 0", threads));
  BpeTrainOptions train;
  train.vocab_size = vocab_size;
  train.specials = specials;
  return train.Validate();
}

std::vector<bool> ValidationDocuments(size_t num_docs, double fraction, uint64_t seed) {
  std::vector<bool> val(num_docs, false);
  if (num_docs < 2) return val;
  // fraction * 2^64 without overflow: fraction <= 0.5.
  const auto threshold = static_cast<uint64_t>(std::ldexp(fraction, 64));
  size_t count = 0, smallest = 0;
  for (size_t i = 0; i < num_docs; ++i) {
    const uint64_t h = DocHash(seed, i);
    if (h < threshold) val[i] = true, ++count;
    if (h < DocHash(seed, smallest)) smallest = i;
  }
  if (count == 0) val[smallest] = true;
  if (count == num_docs) val[smallest] = false;  // unreachable for fraction <= 0.5 but cheap
  return val;
}

double UnigramEntropy(const std::vector<int64_t>& counts) {
  double total = 0;
  for (int64_t c : counts) total += static_cast<double>(c);
  if (total == 0) return 0;
  double h = 0;
  for (int64_t c : counts) {
    if (c > 0) h -= (c / total) * std::log(c / total);
  }
  return h;
}

Result<PrepareSummary> Prepare(const PrepareOptions& options, const PrepareProgress& progress) {
  RETURN_IF_ERROR(options.Validate());
  Stopwatch total;
  auto report = [&](std::string_view stage, const std::string& detail) {
    if (progress) progress(stage, detail, total.Seconds());
  };
  ThreadPool pool(options.threads);
  PrepareSummary s;
  s.corpus = options.corpus;
  s.out_dir = options.out_dir;

  ASSIGN_OR_RETURN(Corpus corpus, ReadCorpus(options.corpus));
  s.corpus_root = corpus.root;
  const size_t n = corpus.documents.size();
  report("corpus",
         fmt::format("{} documents, {} from {}{}", n, Megabytes(corpus.bytes), corpus.root,
                     corpus.empty_files_skipped
                         ? fmt::format(" ({} empty files skipped)", corpus.empty_files_skipped)
                         : std::string()));
  if (n < 2) {
    return InvalidArgument(
        fmt::format("{}: {} document; the train/validation split is by "
                    "document and needs at least 2 (use a folder of files)",
                    corpus.root, n));
  }
  RETURN_IF_ERROR(MakeDirectories(options.out_dir));  // before the work, to fail early
  const std::vector<bool> is_val = ValidationDocuments(n, options.val_fraction, options.seed);
  std::vector<std::string_view> train_text;
  for (size_t i = 0; i < n; ++i) {
    SplitSummary& split = is_val[i] ? s.val : s.train;
    ++split.documents;
    split.bytes += static_cast<int64_t>(corpus.documents[i].text.size());
    if (!is_val[i]) train_text.push_back(corpus.documents[i].text);
  }
  report("split", fmt::format("{} train / {} validation documents ({} / {})", s.train.documents,
                              s.val.documents, Megabytes(s.train.bytes), Megabytes(s.val.bytes)));

  BpeTrainOptions train_options;
  train_options.vocab_size = options.vocab_size;
  train_options.specials = options.specials;
  BpeTrainStats stats;
  ASSIGN_OR_RETURN(Tokenizer tokenizer, TrainBpe(train_text, train_options, pool, &stats));
  s.vocab_size = tokenizer.vocab_size();
  s.merges = stats.merges;
  s.tokenizer_seconds = stats.count_seconds + stats.merge_seconds;
  report("tokenizer",
         fmt::format("{} tokens ({} merges) from {} words ({} distinct) in {:.2f} s "
                     "(count {:.2f} s, merge {:.2f} s) on {} threads",
                     s.vocab_size, s.merges, stats.pretokens, stats.unique_words,
                     s.tokenizer_seconds, stats.count_seconds, stats.merge_seconds, pool.size()));
  if (s.vocab_size < options.vocab_size) {
    report("tokenizer", fmt::format("the corpus has no pair seen twice beyond {} tokens; the "
                                    "vocabulary is smaller than the {} asked for",
                                    s.vocab_size, options.vocab_size));
  }

  const std::filesystem::path out(options.out_dir);
  RETURN_IF_ERROR(SaveTokenizer(tokenizer, (out / "tokenizer.json").string()));

  // Encode: each thread its own cached Encoder over a static range of documents.
  Stopwatch encode_watch;
  std::vector<std::vector<uint32_t>> tokens(n);
  pool.ParallelFor(static_cast<int64_t>(n), [&](int64_t begin, int64_t end, int) {
    Encoder encoder(tokenizer);
    for (int64_t i = begin; i < end; ++i) {
      std::vector<uint32_t>& t = tokens[i];
      t.push_back(tokenizer.bos_id());
      encoder.Encode(corpus.documents[i].text, &t);
      t.push_back(tokenizer.eos_id());
    }
  });
  const double encode_s = encode_watch.Seconds();
  s.encode_mb_per_s = corpus.bytes / 1e6 / std::max(encode_s, 1e-9);
  int64_t train_text_tokens = 0;
  std::vector<int64_t> val_counts(static_cast<size_t>(s.vocab_size), 0);
  for (size_t i = 0; i < n; ++i) {
    if (is_val[i]) {
      s.val.tokens += static_cast<int64_t>(tokens[i].size());
      for (uint32_t t : tokens[i]) ++val_counts[t];
    } else {
      s.train.tokens += static_cast<int64_t>(tokens[i].size());
      train_text_tokens += static_cast<int64_t>(tokens[i].size()) - 2;
    }
  }
  report("encode", fmt::format("{} train + {} validation tokens in {:.2f} s ({:.1f} MB/s)",
                               s.train.tokens, s.val.tokens, encode_s, s.encode_mb_per_s));

  for (const bool val : {false, true}) {
    const std::string path = (out / (val ? "val.bin" : "train.bin")).string();
    ASSIGN_OR_RETURN(ShardWriter writer,
                     ShardWriter::Create(path, static_cast<uint32_t>(s.vocab_size)));
    for (size_t i = 0; i < n; ++i) {
      if (is_val[i] == val) RETURN_IF_ERROR(writer.AddDocument(tokens[i]));
    }
    ASSIGN_OR_RETURN(ShardInfo info, writer.Finish());
    report("shards", fmt::format("{}: {} documents, {} tokens, {} bytes", path, info.num_docs,
                                 info.num_tokens, info.file_bytes));
  }

  s.bytes_per_token = static_cast<double>(s.train.bytes) / std::max<int64_t>(train_text_tokens, 1);
  s.val_bytes_per_token = static_cast<double>(s.val.bytes) / std::max<int64_t>(s.val.tokens, 1);
  s.val_unigram_entropy_nats = UnigramEntropy(val_counts);
  s.val_unigram_bits_per_byte =
      s.val_unigram_entropy_nats / std::log(2.0) / std::max(s.val_bytes_per_token, 1e-9);

  using Json = nlohmann::ordered_json;
  auto split_json = [](const SplitSummary& x) {
    return Json{{"documents", x.documents}, {"bytes", x.bytes}, {"tokens", x.tokens}};
  };
  Json meta = {{"format", "anvil-prepare/1"},
               {"corpus", s.corpus},
               {"corpus_root", s.corpus_root},
               {"documents", static_cast<int64_t>(n)},
               {"bytes", corpus.bytes},
               {"train", split_json(s.train)},
               {"val", split_json(s.val)},
               {"vocab_size", s.vocab_size},
               {"vocab_size_requested", options.vocab_size},
               {"merges", s.merges},
               {"special_tokens",
                {{"bos", {{"name", options.specials.bos}, {"id", tokenizer.bos_id()}}},
                 {"eos", {{"name", options.specials.eos}, {"id", tokenizer.eos_id()}}},
                 {"pad", {{"name", options.specials.pad}, {"id", tokenizer.pad_id()}}}}},
               {"documents_framed_as", "bos text eos"},
               {"seed", options.seed},
               {"val_fraction", options.val_fraction},
               {"compression_bytes_per_token", s.bytes_per_token},
               {"val_bytes_per_token", s.val_bytes_per_token},
               {"val_unigram_entropy_nats", s.val_unigram_entropy_nats},
               {"val_unigram_bits_per_byte", s.val_unigram_bits_per_byte},
               {"files", {"tokenizer.json", "train.bin", "val.bin"}}};
  std::string meta_text;
  try {
    meta_text = meta.dump(2) + "\n";
  } catch (const std::exception& e) {  // a special name that is not UTF-8
    return InvalidArgument(fmt::format("cannot write meta.json: {}", e.what()));
  }
  RETURN_IF_ERROR(WriteFileAtomic((out / "meta.json").string(), meta_text));
  s.seconds = total.Seconds();
  report("done",
         fmt::format("wrote {}/{{tokenizer.json,train.bin,val.bin,meta.json}}", options.out_dir));
  return s;
}

}  // namespace anvil::data
