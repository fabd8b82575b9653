// tokenizer.json writing and validated reading. nlohmann::json throws; every
// call into it stays inside this file and exceptions become Status here.
#include "anvil/data/tokenizer_json.h"

#include <fmt/core.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "anvil/data/byte_level.h"
#include "anvil/core/file_util.h"

namespace anvil::data {
namespace {

using Json = nlohmann::ordered_json;

// tokenizer.json nests a few levels. Deeper input is refused while parsing:
// dump() and comparisons recurse, and would exhaust the stack on it.
constexpr int kMaxJsonDepth = 64;
struct TooDeep {};  // thrown by the parse callback

Json ByteLevelComponent() {
  return Json{{"type", "ByteLevel"},
              {"add_prefix_space", false},
              {"trim_offsets", true},
              {"use_regex", true}};
}

// Checks that `j[key]`, if present and not null, equals what anvil does.
Status ExpectOptional(const Json& j, const char* key, const Json& want, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null() || *it == want) return Status::Ok();
  return Unimplemented(
      fmt::format("{}.{} is {}; anvil supports only {}", where, key, it->dump(), want.dump()));
}

Status CheckByteLevel(const Json& root, const char* key, bool required) {
  const auto it = root.find(key);
  if (it == root.end() || it->is_null()) {
    if (!required) return Status::Ok();
    return Unimplemented(fmt::format("{} is missing; anvil needs a ByteLevel {}", key, key));
  }
  if (!it->is_object() || it->value("type", "") != "ByteLevel") {
    return Unimplemented(fmt::format("{} is {}; anvil supports only ByteLevel", key,
                                     it->is_object() ? it->value("type", "?") : it->dump()));
  }
  if (std::string(key) == "pre_tokenizer") {
    RETURN_IF_ERROR(ExpectOptional(*it, "add_prefix_space", false, key));
    RETURN_IF_ERROR(ExpectOptional(*it, "use_regex", true, key));
  }
  return Status::Ok();
}

Result<Tokenizer> Parse(const Json& root, const SpecialTokens& names) {
  if (!root.is_object()) return InvalidArgument("the top level is not a JSON object");
  if (const auto n = root.find("normalizer"); n != root.end() && !n->is_null()) {
    return Unimplemented(
        fmt::format("normalizer {} is not supported (must be null)", n->value("type", n->dump())));
  }
  RETURN_IF_ERROR(CheckByteLevel(root, "pre_tokenizer", /*required=*/true));
  RETURN_IF_ERROR(CheckByteLevel(root, "decoder", /*required=*/false));
  const auto model = root.find("model");
  if (model == root.end() || !model->is_object()) return InvalidArgument("no \"model\" object");
  if (model->value("type", "BPE") != "BPE") {
    return Unimplemented(
        fmt::format("model type {} is not supported (must be BPE)", model->value("type", "")));
  }
  for (const char* key : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
    RETURN_IF_ERROR(ExpectOptional(*model, key, nullptr, "model"));
  }
  RETURN_IF_ERROR(ExpectOptional(*model, "byte_fallback", false, "model"));
  const auto vocab = model->find("vocab");
  const auto merges = model->find("merges");
  if (vocab == model->end() || !vocab->is_object()) {
    return InvalidArgument("model.vocab is missing or not an object");
  }
  if (merges == model->end() || !merges->is_array()) {
    return InvalidArgument("model.merges is missing or not an array");
  }

  // Specials: added tokens named as bos/eos/pad; their vocab keys are raw text.
  std::unordered_map<std::string, uint32_t> special_ids;
  if (const auto added = root.find("added_tokens"); added != root.end() && added->is_array()) {
    for (const Json& t : *added) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_unsigned() ||
          t["id"].get<uint64_t>() > UINT32_MAX || !t.contains("content") ||
          !t["content"].is_string()) {
        return InvalidArgument(
            fmt::format("added token {} needs an unsigned \"id\" and a string "
                        "\"content\"",
                        t.dump()));
      }
      const std::string content = t["content"];
      if (content != names.bos && content != names.eos && content != names.pad) {
        return Unimplemented(
            fmt::format("added token \"{}\" is not one of the special tokens "
                        "anvil knows (\"{}\", \"{}\", \"{}\")",
                        content, names.bos, names.eos, names.pad));
      }
      special_ids[content] = t["id"].get<uint32_t>();
    }
  }
  TokenizerParts parts;
  parts.names = names;
  for (const auto& [role, name, id] :
       {std::tuple{"bos", &names.bos, &parts.bos}, std::tuple{"eos", &names.eos, &parts.eos},
        std::tuple{"pad", &names.pad, &parts.pad}}) {
    const auto it = special_ids.find(*name);
    if (it == special_ids.end()) {
      return InvalidArgument(
          fmt::format("the {} token \"{}\" is not among added_tokens", role, *name));
    }
    *id = it->second;
  }

  // Ids must be dense: 0..V-1, each once, specials included.
  struct Entry {
    uint32_t id;
    std::string bytes;
    bool special;
  };
  std::vector<Entry> entries;
  entries.reserve(vocab->size() + special_ids.size());
  std::unordered_map<std::string, uint32_t> ids;  // byte-level spelling -> id
  ids.reserve(vocab->size());
  for (const auto& [key, value] : vocab->items()) {
    if (!value.is_number_unsigned() || value.get<uint64_t>() > UINT32_MAX) {
      return InvalidArgument(
          fmt::format("model.vocab[\"{}\"] is {}, not an unsigned id", key, value.dump()));
    }
    const uint32_t id = value.get<uint32_t>();
    if (const auto s = special_ids.find(key); s != special_ids.end()) {
      if (s->second != id) {
        return InvalidArgument(
            fmt::format("special token \"{}\" has id {} in added_tokens but {} "
                        "in the vocab",
                        key, s->second, id));
      }
      continue;  // placed with the added tokens below
    }
    std::string bytes;
    if (!FromByteLevel(key, &bytes)) {
      return InvalidArgument(
          fmt::format("model.vocab token \"{}\" (id {}) is not byte-level "
                      "text",
                      key, id));
    }
    entries.push_back({id, std::move(bytes), false});
    ids.emplace(key, id);
  }
  for (const auto& [name, id] : special_ids) entries.push_back({id, name, true});
  uint32_t max_id = 0;
  for (const Entry& e : entries) max_id = std::max(max_id, e.id);
  if (max_id >= entries.size()) {  // a gap somewhere (checked before sizing any table)
    std::vector<bool> seen(entries.size(), false);
    for (const Entry& e : entries) {
      if (e.id < entries.size()) seen[e.id] = true;
    }
    const size_t gap = std::find(seen.begin(), seen.end(), false) - seen.begin();
    return InvalidArgument(
        fmt::format("no token has id {} but token ids go up to {}; ids must be "
                    "dense (0..V-1)",
                    gap, max_id));
  }
  parts.tokens.assign(entries.size(), std::string());
  std::vector<bool> seen(entries.size(), false);
  for (Entry& e : entries) {
    if (seen[e.id]) return InvalidArgument(fmt::format("id {} is given to two tokens", e.id));
    seen[e.id] = true;
    parts.tokens[e.id] = std::move(e.bytes);
  }

  parts.merges.reserve(merges->size());
  for (size_t rank = 0; rank < merges->size(); ++rank) {
    const Json& m = (*merges)[rank];
    std::string left, right;
    if (m.is_string()) {  // "left right": byte-level text never holds ' '
      const std::string s = m;
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return InvalidArgument(
            fmt::format("merge {} \"{}\" is not two tokens separated by one "
                        "space",
                        rank, s));
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0];
      right = m[1];
    } else {
      return InvalidArgument(
          fmt::format("merge {} is {}; expected \"left right\" or "
                      "[\"left\", \"right\"]",
                      rank, m.dump()));
    }
    const auto l = ids.find(left), r = ids.find(right), result = ids.find(left + right);
    if (l == ids.end() || r == ids.end() || result == ids.end()) {
      const std::string& missing = l == ids.end() ? left : r == ids.end() ? right : left + right;
      return InvalidArgument(fmt::format("merge {} (\"{}\" \"{}\"): \"{}\" is not in the vocab",
                                         rank, left, right, missing));
    }
    parts.merges.push_back({l->second, r->second, result->second});
  }
  return Tokenizer::FromParts(std::move(parts));
}

}  // namespace

Result<std::string> TokenizerToJson(const Tokenizer& tok) {
  try {
    Json added = Json::array();
    std::vector<uint32_t> special_ids;
    for (uint32_t id : {tok.bos_id(), tok.eos_id(), tok.pad_id()}) {
      if (std::find(special_ids.begin(), special_ids.end(), id) != special_ids.end()) continue;
      special_ids.push_back(id);
      added.push_back({{"id", id},
                       {"content", tok.TokenBytes(id)},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", true}});
    }
    Json vocab = Json::object();
    std::unordered_set<std::string> keys;
    for (uint32_t id = 0; id < static_cast<uint32_t>(tok.vocab_size()); ++id) {
      std::string key = tok.IsSpecial(id) ? tok.TokenBytes(id) : ToByteLevel(tok.TokenBytes(id));
      if (!keys.insert(key).second) {
        return InvalidArgument(
            fmt::format("token {} is spelled \"{}\" like another token; rename "
                        "the special tokens",
                        id, key));
      }
      vocab[key] = id;
    }
    Json merges = Json::array();
    for (const BpeMerge& m : tok.merges()) {
      merges.push_back(ToByteLevel(tok.TokenBytes(m.left)) + " " +
                       ToByteLevel(tok.TokenBytes(m.right)));
    }
    Json model = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", nullptr},
                  {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", nullptr},
                  {"fuse_unk", false},
                  {"byte_fallback", false},
                  {"ignore_merges", false},
                  {"vocab", std::move(vocab)},
                  {"merges", std::move(merges)}};
    Json root = {{"version", "1.0"},          {"truncation", nullptr},
                 {"padding", nullptr},        {"added_tokens", std::move(added)},
                 {"normalizer", nullptr},     {"pre_tokenizer", ByteLevelComponent()},
                 {"post_processor", nullptr}, {"decoder", ByteLevelComponent()},
                 {"model", std::move(model)}};
    return root.dump(2) + "\n";
  } catch (const std::exception& e) {  // e.g. a special name that is not UTF-8
    return InvalidArgument(fmt::format("cannot write the tokenizer as JSON: {}", e.what()));
  }
}

Status SaveTokenizer(const Tokenizer& tokenizer, const std::string& path) {
  auto json = TokenizerToJson(tokenizer);
  if (!json.ok()) return json.status().WithContext(path);
  return WriteFileAtomic(path, *json);
}

Result<Tokenizer> TokenizerFromJson(std::string_view text, const std::string& origin,
                                    const SpecialTokens& names) {
  try {
    const Json root =
        Json::parse(text.begin(), text.end(), [](int depth, Json::parse_event_t, Json&) {
          if (depth > kMaxJsonDepth) throw TooDeep{};
          return true;
        });
    auto tok = Parse(root, names);
    if (!tok.ok()) return tok.status().WithContext(origin);
    return tok;
  } catch (const TooDeep&) {
    return InvalidArgument(fmt::format("{}: JSON nested deeper than {} levels; not a tokenizer",
                                       origin, kMaxJsonDepth));
  } catch (const Json::parse_error& e) {
    return InvalidArgument(fmt::format("{}: not valid JSON: {}", origin, e.what()));
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("{}: malformed tokenizer: {}", origin, e.what()));
  }
}

Result<Tokenizer> LoadTokenizer(const std::string& path, const SpecialTokens& names) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return TokenizerFromJson(text, path, names);
}

}  // namespace anvil::data
