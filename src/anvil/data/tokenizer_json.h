// Hugging Face tokenizer.json for byte-level BPE: model "BPE" with "vocab" and
// "merges" ("left right" strings), ByteLevel pre-tokenizer and decoder, and
// the special tokens as added_tokens (also in the vocab, at their ids). The
// `tokenizers` library reads what we write; we read that dialect back and
// reject what we cannot reproduce (normalizers, prefix spaces, dropout, ...).
#pragma once

#include <string>
#include <string_view>

#include "anvil/core/status.h"
#include "anvil/data/tokenizer.h"

namespace anvil::data {

// The JSON text. Fails if a special name is not valid UTF-8 or clashes with
// the byte-level spelling of an ordinary token.
Result<std::string> TokenizerToJson(const Tokenizer& tokenizer);

// Writes atomically.
Status SaveTokenizer(const Tokenizer& tokenizer, const std::string& path);

// Parses tokenizer.json text; `origin` (a path) prefixes every error. The
// roles of the special tokens come from `names`: each must be an added token.
Result<Tokenizer> TokenizerFromJson(std::string_view json, const std::string& origin,
                                    const SpecialTokens& names = {});
Result<Tokenizer> LoadTokenizer(const std::string& path, const SpecialTokens& names = {});

}  // namespace anvil::data
