// libFuzzer target: the TOML config (Config::FromString, what
// Config::FromFile runs on a file's text, and Config::Set, the --set path).
// Typed reads must not crash, and the resolved config must read back as the
// same values.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "anvil/core/check.h"
#include "anvil/core/config.h"

namespace {

// Keys of the shipped configs and a few short ones the fuzzer can spell. None
// is the table of another (components never read both "a" and "a.b").
constexpr const char* kKeys[] = {"b",         "a.b",        "t.x",       "model.dim",
                                 "train.lr",  "train.precision",         "data.dir",
                                 "optim.eps", "train.seed", "model.tie_embeddings"};

using Value = std::variant<int64_t, double, bool, std::string>;

// Reads `key` as whichever type it has; false when absent.
bool ReadAny(anvil::Config& c, const std::string& key, Value* out) {
  if (!c.Has(key)) return false;
  if (auto i = c.GetInt(key, 0); i.ok()) {
    *out = *i;
  } else if (auto d = c.GetDouble(key, 0); d.ok()) {
    *out = *d;
  } else if (auto b = c.GetBool(key, false); b.ok()) {
    *out = *b;
  } else if (auto s = c.GetString(key, ""); s.ok()) {
    *out = *s;
  } else {
    CHECK(false) << "key '" << key << "' is present but of no type";
  }
  return true;
}

bool Same(const Value& a, const Value& b) {
  if (a.index() != b.index()) return false;
  if (const double* x = std::get_if<double>(&a)) {
    const double y = std::get<double>(b);
    return (std::isnan(*x) && std::isnan(y)) || *x == y;
  }
  return a == b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  {
    anvil::Config set;
    (void)set.Set(text);
  }
  anvil::Result<anvil::Config> config = anvil::Config::FromString(text, "fuzz.toml");
  if (!config.ok()) return 0;
  Value values[std::size(kKeys)];
  bool present[std::size(kKeys)];
  for (size_t k = 0; k < std::size(kKeys); ++k) present[k] = ReadAny(*config, kKeys[k], &values[k]);
  (void)config->CheckAllUsed();
  const std::string resolved = config->ResolvedToml();
  anvil::Result<anvil::Config> again = anvil::Config::FromString(resolved, "resolved.toml");
  CHECK(again.ok()) << again.status().ToString() << "\n" << resolved;
  for (size_t k = 0; k < std::size(kKeys); ++k) {
    Value v;
    CHECK_EQ(ReadAny(*again, kKeys[k], &v), present[k]) << kKeys[k] << "\n" << resolved;
    if (present[k]) CHECK(Same(v, values[k])) << kKeys[k] << "\n" << resolved;
  }
  return 0;
}
