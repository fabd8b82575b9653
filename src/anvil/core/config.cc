// Config: TOML parsing (toml++, confined to this file to keep builds lean),
// typed reads, unknown-key detection, resolved output.
#include "anvil/core/config.h"

#include <fmt/core.h>
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <optional>
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

// What toml++ 3.3 cannot be given, found by fuzz/config_fuzz.cc, refused here
// before it reads the text:
// - Non-ASCII text between tokens. toml++ asks "is this whitespace?" of the
//   characters between tokens (also past a bad one: it reads a bad value to
//   its end before reporting it) and of the first one after a backslash in a
//   multi-line string; for most non-ASCII characters (U+00A1..U+0499,
//   U+2F4E..U+3347, U+FB86..U+FEFE) its generated lookup then reaches
//   __builtin_unreachable(): undefined behaviour. TOML allows non-ASCII text
//   only inside strings and comments. A quote opens a string only where TOML
//   has one (after `=`, `[`, `{`, `,`, `.` or at the start of a line);
//   elsewhere the input is bad and stays "between tokens".
// - Tables nested thousands deep (`a.a.a...` or `[a.a.a...]`): toml++ and its
//   tables recurse per level and exhaust the stack. Each `.` of a key opens
//   one level, inline tables at most 256 (toml++'s own limit), and a key
//   stays on one line, so dots per line are capped.
constexpr int kMaxDotsPerLine = 256;

Status CheckTomlText(std::string_view t, const std::string& source) {
  const auto fail = [&](size_t i, const char* what) {
    const size_t line_start = t.rfind('\n', i);  // npos + 1 == 0
    std::ostringstream msg;
    msg << source << ":" << std::count(t.begin(), t.begin() + i, '\n') + 1 << ":"
        << i - (line_start + 1) + 1 << ": " << what;
    return InvalidArgument(msg.str());
  };
  constexpr const char* kNonAscii =
      "non-ASCII text outside a string or comment (or right after a backslash)";
  enum { kCode, kBasic, kLiteral, kMultiBasic, kMultiLiteral } state = kCode;
  const auto non_ascii = [&](size_t i) { return i < t.size() && (t[i] & 0x80) != 0; };
  const auto blank = [&](size_t i) {
    return i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r');
  };
  char prev = '\n';  // the last character between tokens that is not ' ' or '\t'
  int dots = 0;       // '.' between tokens on this line
  size_t i = t.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;  // a byte order mark
  while (i < t.size()) {
    const char c = t[i];
    if (state == kCode) {
      if (non_ascii(i)) return fail(i, kNonAscii);
      if (c == '\n') dots = 0;
      if (c == '.' && ++dots > kMaxDotsPerLine) {
        return fail(i, "more than 256 '.' on one line: keys nest too deep");
      }
      const bool opens = std::string_view("\n=[{,.").find(prev) != std::string_view::npos;
      if (c == '#') {  // a comment, to the end of the line
        i = t.find('\n', i);
        if (i == std::string_view::npos) break;
      } else if (opens && (t.substr(i, 3) == "\"\"\"" || t.substr(i, 3) == "'''")) {
        state = c == '"' ? kMultiBasic : kMultiLiteral;
        i += 3;
      } else {
        if (opens && c == '"') state = kBasic;
        if (opens && c == '\'') state = kLiteral;
        if (c != ' ' && c != '\t') prev = c;
        ++i;
      }
    } else if ((state == kBasic || state == kMultiBasic) && c == '\\') {
      if (non_ascii(++i)) return fail(i, kNonAscii);
      if (state == kMultiBasic && blank(i)) {  // a line-ending backslash
        while (blank(i)) ++i;
        if (non_ascii(i)) return fail(i, kNonAscii);
      } else {
        ++i;
      }
    } else if (state == kMultiBasic || state == kMultiLiteral) {
      const char quote = state == kMultiBasic ? '"' : '\'';
      if (c == quote && t.substr(i, 3) == std::string(3, quote)) {
        while (i < t.size() && t[i] == quote) ++i;  // up to two quotes belong to the text
        state = kCode;
        prev = quote;
      } else {
        ++i;
      }
    } else {  // a one-line string
      if (c == (state == kBasic ? '"' : '\'') || c == '\n') {
        state = kCode;
        prev = c;
      }
      ++i;
    }
  }
  return Status::Ok();
}

Result<std::map<std::string, Config::Value>> Parse(std::string_view text,
                                                    const std::string& source) {
  RETURN_IF_ERROR(CheckTomlText(text, source));
  // CheckTomlText follows strings as valid TOML has them; bad input can start
  // what toml++ reads as one bad value, quotes included, to its end. So text
  // with non-ASCII bytes is first parsed with each of them replaced by '~',
  // which is fine where non-ASCII text is (strings, comments) and an error
  // everywhere else: toml++ sees the original only once that copy is valid.
  std::string ascii;
  if (std::any_of(text.begin(), text.end(), [](char c) { return (c & 0x80) != 0; })) {
    ascii.assign(text);
    for (char& c : ascii) c = (c & 0x80) != 0 ? '~' : c;
    if (text.substr(0, 3) == "\xEF\xBB\xBF") ascii.replace(0, 3, "   ");  // a byte order mark
  }
  toml::table table;
  for (const bool check : {true, false}) {
    if (check && ascii.empty()) continue;
    try {
      table = toml::parse(check ? std::string_view(ascii) : text, source);  // errors by exception
    } catch (const toml::parse_error& e) {
      std::ostringstream msg;
      msg << source << ":" << e.source().begin.line << ":" << e.source().begin.column << ": ";
      // The ASCII copy has one character per byte: find the one toml++ refused.
      size_t at = 0;
      for (auto line = e.source().begin.line; line > 1 && at != std::string_view::npos; --line) {
        at = text.find('\n', at);
        if (at != std::string_view::npos) ++at;
      }
      if (check && at != std::string_view::npos && at + e.source().begin.column - 1 < text.size() &&
          (text[at + e.source().begin.column - 1] & 0x80) != 0) {
        msg << "non-ASCII text outside a string or comment";
      } else {
        msg << e.description();
      }
      return InvalidArgument(msg.str());
    }
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
  // One line: a literal string where the text allows ('bf16'), else a basic
  // string with escapes. (toml++'s printer writes text holding a line break
  // as a multi-line literal string, '''...''', which ends early if the text
  // holds ''' itself; found by fuzz/config_fuzz.cc.)
  const std::string& str = std::get<std::string>(v);
  if (std::none_of(str.begin(), str.end(), [](char c) {
        return c == '\'' || (c >= 0 && c < 0x20 && c != '\t') || c == 0x7f;
      })) {
    return "'" + str + "'";
  }
  std::string out = "\"";
  for (const char c : str) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if ((c >= 0 && c < 0x20) || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04X", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;  // printable ASCII, or UTF-8 (toml++ checked it)
        }
    }
  }
  return out + "\"";
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

std::vector<std::string> Config::ChangedFrom(
    const Config& saved, const std::function<bool(const std::string&)>& kept) const {
  const auto number = [](const Value& v) -> std::optional<double> {
    if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
    if (const auto* d = std::get_if<double>(&v)) return *d;
    return std::nullopt;
  };
  std::vector<std::string> changed;
  for (const auto& [key, now] : resolved_) {
    const auto it = saved.values_.find(key);
    if (it == saved.values_.end() || !kept(key)) continue;
    const Value& was = it->second.value;
    const std::optional<double> a = number(was), b = number(now);
    if (a && b ? *a == *b : was == now) continue;
    changed.push_back(fmt::format("{} = {} (now: {})", key, TomlValue(was), TomlValue(now)));
  }
  return changed;
}

Status RefuseResumeChanges(const std::string& saved_path, const std::vector<std::string>& changed,
                           const std::string& alternative) {
  if (changed.empty()) return Status::Ok();
  std::string list;
  for (const std::string& c : changed) list += (list.empty() ? "" : "; ") + c;
  return InvalidArgument(fmt::format(
      "{}: a resume continues the run as it ran, and this one changes {}; set {} back, or {}",
      saved_path, list, changed.size() == 1 ? "it" : "them", alternative));
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
