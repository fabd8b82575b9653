// tokenizer.json: the layout Hugging Face reads, save/load round trips that
// encode identically, foreign id orders, and errors that name file and problem.
#include "anvil/data/tokenizer_json.h"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "anvil/core/rng.h"
#include "anvil/core/thread_pool.h"
#include "anvil/data/bpe_train.h"
#include "anvil/data/byte_level.h"
#include "anvil/data/testing.h"

namespace anvil::data {
namespace {

Tokenizer SmallTokenizer() {
  ThreadPool pool(1);
  BpeTrainOptions options;
  options.vocab_size = 330;
  std::vector<std::string_view> docs = {
      "The cat sat on the mat. The cat's hat isn't here.\n\nThe end, 1234 5678!",
      "caf\xC3\xA9 na\xC3\xAFve \xE2\x80\x94 the the the cat cat"};
  auto t = TrainBpe(docs, options, pool);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

std::string HasError(const Result<Tokenizer>& r) {
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().ToString();
}

TEST(TokenizerJson, HasTheHuggingFaceLayout) {
  const Tokenizer t = SmallTokenizer();
  auto json = TokenizerToJson(t);
  ASSERT_TRUE(json.ok());
  const std::string& j = *json;
  EXPECT_NE(j.find("\"type\": \"BPE\""), std::string::npos);
  EXPECT_NE(j.find("\"pre_tokenizer\": {\n    \"type\": \"ByteLevel\",\n    \"add_prefix_space\": "
                   "false"),
            std::string::npos);
  EXPECT_NE(j.find("\"decoder\": {\n    \"type\": \"ByteLevel\""), std::string::npos);
  EXPECT_NE(j.find("\"id\": 256,\n      \"content\": \"<|bos|>\""), std::string::npos);
  EXPECT_NE(j.find("\"\u0120\": 32,"), std::string::npos);  // ' ' is byte token 32, spelled Ġ
  EXPECT_NE(j.find("\"<|pad|>\": 258,"), std::string::npos);
  const std::string first_merge =
      fmt::format("\"{} {}\"", ToByteLevel(t.TokenBytes(t.merges()[0].left)),
                  ToByteLevel(t.TokenBytes(t.merges()[0].right)));
  EXPECT_NE(j.find("\"merges\": [\n      " + first_merge), std::string::npos);
}

TEST(TokenizerJson, SaveLoadRoundTripEncodesIdentically) {
  testing::TempDir dir;
  const Tokenizer t = SmallTokenizer();
  ASSERT_TRUE(SaveTokenizer(t, dir / "tokenizer.json").ok());
  auto loaded = LoadTokenizer(dir / "tokenizer.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->vocab_size(), t.vocab_size());
  ASSERT_EQ(loaded->merges().size(), t.merges().size());
  for (int id = 0; id < t.vocab_size(); ++id) EXPECT_EQ(loaded->TokenBytes(id), t.TokenBytes(id));
  EXPECT_EQ(loaded->eos_id(), t.eos_id());
  const RngStream rng(3, RngPurpose::kTest);
  uint64_t k = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::string s;
    const int n = rng.U32(k++) % 120;
    for (int i = 0; i < n; ++i) {
      const uint32_t r = rng.U32(k++);
      s.push_back(r % 4 == 0 ? static_cast<char>(r >> 8) : "The cat's hat, 12\n"[(r >> 8) % 18]);
    }
    EXPECT_EQ(loaded->Encode(s), t.Encode(s));
  }
  // Saving the loaded tokenizer reproduces the file byte for byte.
  EXPECT_EQ(*TokenizerToJson(*loaded), testing::ReadBytes(dir / "tokenizer.json"));
}

// A hand-written file in the style of GPT-2's: bytes at other ids, merges as
// [left, right] pairs, one special token for all three roles.
TEST(TokenizerJson, ReadsForeignIdOrders) {
  std::string vocab;
  for (int b = 0; b < 256; ++b) {  // byte b gets id 255 - b
    std::string key = ToByteLevel(std::string(1, static_cast<char>(b)));
    if (key == "\"" || key == "\\") key = "\\" + key;
    vocab += fmt::format("\"{}\": {}, ", key, 255 - b);
  }
  vocab += "\"ab\": 256, \"\u0120ab\": 257, \"<|endoftext|>\": 258";
  const std::string json = fmt::format(
      R"({{"added_tokens": [{{"id": 258, "content": "<|endoftext|>", "special": true}}],
          "normalizer": null, "pre_tokenizer": {{"type": "ByteLevel", "add_prefix_space": false}},
          "decoder": {{"type": "ByteLevel"}},
          "model": {{"type": "BPE", "vocab": {{{}}}, "merges": [["a", "b"], "\u0120 ab"]}}}})",
      vocab);
  const SpecialTokens names{"<|endoftext|>", "<|endoftext|>", "<|endoftext|>"};
  auto t = TokenizerFromJson(json, "gpt2.json", names);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->ByteToken('a'), uint32_t(255 - 'a'));
  EXPECT_EQ(t->Encode("ab ab x"), (std::vector<uint32_t>{256, 257, 255 - ' ', 255 - 'x'}));
  EXPECT_EQ(t->eos_id(), 258u);
  EXPECT_EQ(t->Decode(std::vector<uint32_t>{258, 257}), "<|endoftext|> ab");
}

TEST(TokenizerJson, ErrorsNameTheFileAndTheProblem) {
  testing::TempDir dir;
  const Tokenizer t = SmallTokenizer();
  const std::string good = *TokenizerToJson(t);
  auto load = [&](const std::string& text) {
    testing::WriteBytes(dir / "tok.json", text);
    return LoadTokenizer(dir / "tok.json");
  };
  auto replace = [&](std::string from, std::string to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::string missing = HasError(LoadTokenizer(dir / "nope.json"));
  EXPECT_NE(missing.find("nope.json: no such file"), std::string::npos) << missing;
  const std::string path = dir / "tok.json";
  auto expect = [&](const Result<Tokenizer>& r, const std::string& what) {
    const std::string e = HasError(r);
    EXPECT_NE(e.find(path + ": "), std::string::npos) << e;
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  expect(load("{\"model\": "), "not valid JSON");
  expect(load("[1, 2]"), "not a JSON object");
  expect(load(replace("\"type\": \"BPE\"", "\"type\": \"WordPiece\"")), "model type WordPiece");
  expect(load(replace("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFC\"}")),
         "normalizer NFC");
  expect(load(replace("\"add_prefix_space\": false", "\"add_prefix_space\": true")),
         "add_prefix_space");
  expect(load(replace("\"<|eos|>\"", "\"<|end|>\"")), "\"<|end|>\" is not one of the special");
  expect(load(replace("\"\u0120\": 32,", "")), "no token has id 32");
  expect(load(replace("\"\u0120\": 32,", "\"\u0120\": \"x\",")), "not an unsigned id");
  expect(load(replace("\"\u0120\": 32,", "\"\u0120\": 32, \"\u20ac\": 9999,")), "not byte-level");
  const std::string m0 = fmt::format("\"{} {}\"", ToByteLevel(t.TokenBytes(t.merges()[0].left)),
                                     ToByteLevel(t.TokenBytes(t.merges()[0].right)));
  expect(load(replace(m0, "\"a \u0100\"")), "is not in the vocab");
  expect(load(replace(m0, "\"ab\"")), "not two tokens separated by one space");
}

TEST(TokenizerJson, RejectsSpecialNamesThatCannotBeWritten) {
  TokenizerParts parts;
  for (int b = 0; b < 256; ++b) parts.tokens.emplace_back(1, static_cast<char>(b));
  parts.names = {"\xff\xfe", "<|eos|>", "<|pad|>"};  // not UTF-8
  parts.tokens.push_back(parts.names.bos);
  parts.tokens.push_back(parts.names.eos);
  parts.tokens.push_back(parts.names.pad);
  parts.bos = 256, parts.eos = 257, parts.pad = 258;
  auto t = Tokenizer::FromParts(parts);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(TokenizerToJson(*t).ok());
}

}  // namespace
}  // namespace anvil::data
