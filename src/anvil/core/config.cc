// Config: TOML parsing (toml++, confined to this file to keep builds lean),
// typed reads, unknown-key detection, resolved output.
#include "anvil/core/config.h"

#include <toml++/toml.h>

#include <charconv>
#include <fstream>
#include <sstream>

namespace anvil {
namespace {

// Flattens nested tables into dotted keys. Arrays and dates are not config
// values here; they are rejected with the key named.
Status Flatten(const toml::table& table, const std::string& prefix, const std::string& source,
               std::map<std::string, Config::Value>* out) {
  for (const auto& [k, node] : table) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* sub = node.as_table()) {
      RETURN_IF_ERROR(Flatten(*sub, key, source, out));
    } else if (const auto* i = node.as_integer()) {
      (*out)[key] = i->get();
    } else if (const auto* d = node.as_floating_point()) {
      (*out)[key] = d->get();
    } else if (const auto* b = node.as_boolean()) {
      (*out)[key] = b->get();
    } else if (const auto* s = node.as_string()) {
      (*out)[key] = s->get();
    } else {
      return InvalidArgument(source + ": key '" + key +
                             "': only integers, floats, booleans and strings are supported");
    }
  }
  return Status::Ok();
}

Result<std::map<std::string, Config::Value>> Parse(std::string_view text,
                                                    const std::string& source) {
  toml::table table;
  try {
    table = toml::parse(text, source);  // this toml++ build reports errors by exception
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << source << ":" << e.source().begin.line << ":" << e.source().begin.column << ": "
        << e.description();
    return InvalidArgument(msg.str());
  }
  std::map<std::string, Config::Value> values;
  RETURN_IF_ERROR(Flatten(table, "", source, &values));
  return values;
}

std::string TomlValue(const Config::Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* d = std::get_if<double>(&v)) {
    // The shortest text that reads back as the same double (0.9, not 0.90000000000000002).
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof(buf), *d);
    std::string text(buf, res.ptr);
    // Keep it a TOML float.
    if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
    return text;
  }
  std::ostringstream s;
  s << toml::value<std::string>(std::get<std::string>(v));
  return s.str();
}

}  // namespace

Result<Config> Config::FromString(std::string_view toml, const std::string& source) {
  ASSIGN_OR_RETURN(auto values, Parse(toml, source));
  Config c;
  for (auto& [k, v] : values) c.values_[k] = {std::move(v), source};
  return c;
}

Result<Config> Config::FromFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(path + ": cannot open the config file");
  std::ostringstream text;
  text << in.rdbuf();
  return FromString(text.str(), path);
}

Status Config::Set(std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return InvalidArgument("--set '" + std::string(assignment) + "': expected key=value");
  }
  const std::string key(assignment.substr(0, eq));
  const std::string text(assignment.substr(eq + 1));
  Result<std::map<std::string, Value>> parsed = Parse("v = " + text, "--set");
  Value value;
  if (parsed.ok() && parsed->count("v")) {
    value = parsed->at("v");
  } else {
    value = text;  // a bare word such as bf16
  }
  values_[key] = {std::move(value), "--set"};
  return Status::Ok();
}

template <typename T>
Result<T> Config::Get(const std::string& key, T fallback, const char* type_name) {
  const auto it = values_.find(key);
  if (it == values_.end()) {
    resolved_[key] = fallback;
    return fallback;
  }
  const Value& v = it->second.value;
  if (const T* exact = std::get_if<T>(&v)) {
    resolved_[key] = *exact;
    return *exact;
  }
  if constexpr (std::is_same_v<T, double>) {
    if (const int64_t* i = std::get_if<int64_t>(&v)) {
      resolved_[key] = static_cast<double>(*i);
      return static_cast<double>(*i);
    }
  }
  return InvalidArgument(it->second.source + ": key '" + key + "' must be " + type_name +
                         ", got " + TomlValue(v));
}

Result<int64_t> Config::GetInt(const std::string& key, int64_t fallback) {
  return Get<int64_t>(key, fallback, "an integer");
}
Result<double> Config::GetDouble(const std::string& key, double fallback) {
  return Get<double>(key, fallback, "a number");
}
Result<bool> Config::GetBool(const std::string& key, bool fallback) {
  return Get<bool>(key, fallback, "true or false");
}
Result<std::string> Config::GetString(const std::string& key, const std::string& fallback) {
  return Get<std::string>(key, fallback, "a string");
}

Status Config::CheckAllUsed() const {
  std::string unknown;
  for (const auto& [key, entry] : values_) {
    if (resolved_.count(key)) continue;
    unknown += "\n  " + entry.source + ": unknown key '" + key + "'";
  }
  if (unknown.empty()) return Status::Ok();
  return InvalidArgument("the config has keys no component reads (typo?):" + unknown);
}

std::string Config::ResolvedToml() const {
  // Group by table: "model.dim" goes under [model].
  std::map<std::string, std::map<std::string, std::string>> tables;
  for (const auto& [key, value] : resolved_) {
    const size_t dot = key.rfind('.');
    const std::string table = dot == std::string::npos ? "" : key.substr(0, dot);
    tables[table][key.substr(dot == std::string::npos ? 0 : dot + 1)] = TomlValue(value);
  }
  std::string out;
  for (const auto& [table, entries] : tables) {
    if (!table.empty()) out += (out.empty() ? "[" : "\n[") + table + "]\n";
    for (const auto& [k, v] : entries) out += k + " = " + v + "\n";
  }
  return out;
}

}  // namespace anvil
