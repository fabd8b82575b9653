// libFuzzer target: tokenizer.json loading (TokenizerFromJson, what
// LoadTokenizer runs on a file's text). A tokenizer it accepts must encode and
// decode losslessly and write JSON that it reads back.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/core/check.h"
#include "anvil/data/tokenizer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const anvil::Result<anvil::data::Tokenizer> tok =
      anvil::data::TokenizerFromJson(text, "fuzz/tokenizer.json");
  if (!tok.ok()) return 0;
  const std::string sample = "The quick brown fox, 42 times!\n  <|eos|> \xc3\xa9t\xc3\xa9";
  const std::vector<uint32_t> ids = tok->Encode(sample);
  CHECK(tok->Decode(ids) == sample);
  const anvil::Result<std::string> json = anvil::data::TokenizerToJson(*tok);
  if (json.ok()) {
    const anvil::Result<anvil::data::Tokenizer> again =
        anvil::data::TokenizerFromJson(*json, "fuzz/rewritten.json");
    CHECK(again.ok()) << again.status().ToString();
    CHECK_EQ(again->vocab_size(), tok->vocab_size());
    CHECK(again->Encode(sample) == ids);
  }
  return 0;
}
