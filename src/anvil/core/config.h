// A run's configuration as dotted keys ("model.dim") with typed values, read
// from a TOML file and `--set key=value` overrides. Components pull the keys
// they own (each with its default); keys nobody pulled are errors, so a typo
// never passes silently. The resolved config — every key read, with the value
// used — prints back as TOML and is saved with the run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "anvil/core/status.h"

namespace anvil {

class Config {
 public:
  using Value = std::variant<int64_t, double, bool, std::string>;

  Config() = default;
  static Result<Config> FromFile(const std::string& path);
  // `source` names the text in error messages (a file name, "--set").
  static Result<Config> FromString(std::string_view toml, const std::string& source);

  // "model.n_layers=4". The value is read as a TOML value (4, 0.1, true,
  // "text"); anything that is not one is taken as a bare string (bf16).
  Status Set(std::string_view assignment);

  // Typed reads with a default for absent keys. A present key of the wrong
  // type is an error naming the source and the key. Ints are accepted where a
  // double is wanted.
  Result<int64_t> GetInt(const std::string& key, int64_t fallback);
  Result<double> GetDouble(const std::string& key, double fallback);
  Result<bool> GetBool(const std::string& key, bool fallback);
  Result<std::string> GetString(const std::string& key, const std::string& fallback);

  bool Has(const std::string& key) const { return values_.count(key) != 0; }

  // Records `value` as what `key` resolved to, for a setting whose given value
  // is a policy the reader decides (train.precision = "auto" -> "bf16"), so the
  // saved config says what ran and a resume on another machine does the same.
  // Also for a value the run settles later (train.steps fitted to a time budget).
  void Resolve(const std::string& key, Value value) { resolved_[key] = std::move(value); }

  // Error listing every key that was given but never read.
  Status CheckAllUsed() const;

  // Every key read so far with the value used (given or default), as TOML.
  std::string ResolvedToml() const;

  // For a resume: the keys read so far that `kept` selects and `saved` (the
  // run's config.toml) gives another value, each as "key = saved (now:
  // value)". Numbers compare as numbers (2 == 2.0); a key `saved` lacks (a
  // run from before the key existed) is not compared.
  std::vector<std::string> ChangedFrom(const Config& saved,
                                       const std::function<bool(const std::string&)>& kept) const;

 private:
  struct Entry {
    Value value;
    std::string source;  // file name or "--set"
  };
  template <typename T>
  Result<T> Get(const std::string& key, T fallback, const char* type_name);

  std::map<std::string, Entry> values_;
  std::map<std::string, Value> resolved_;
};

// A resume's refusal of `changed` (ChangedFrom's lines), naming the saved
// config and what to do instead (`alternative`: "start a new run"); Ok when
// nothing changed.
Status RefuseResumeChanges(const std::string& saved_path, const std::vector<std::string>& changed,
                           const std::string& alternative);

}  // namespace anvil
