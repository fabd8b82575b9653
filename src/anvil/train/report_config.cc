// Resolved-config entries and their differences (see report_config.h).
#include "anvil/train/report_config.h"

#include <sstream>

namespace anvil::train {
namespace {

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

}  // namespace

std::string ConfigLineKey(const std::string& line, std::string& table) {
  const std::string t = Trim(line);
  if (t.empty() || t[0] == '#') return "";
  if (t.front() == '[' && t.back() == ']') {
    table = Trim(t.substr(1, t.size() - 2));
    return "";
  }
  const size_t eq = t.find('=');
  if (eq == std::string::npos) return "";
  const std::string key = Trim(t.substr(0, eq));
  return table.empty() ? key : table + "." + key;
}

std::map<std::string, std::string> ConfigEntries(const std::string& toml) {
  std::map<std::string, std::string> entries;
  std::istringstream in(toml);
  std::string line, table;
  while (std::getline(in, line)) {
    const std::string key = ConfigLineKey(line, table);
    if (!key.empty()) entries[key] = Trim(line.substr(line.find('=') + 1));
  }
  return entries;
}

std::set<std::string> DifferingKeys(const std::map<std::string, std::string>& a,
                                    const std::map<std::string, std::string>& b) {
  std::set<std::string> keys;
  for (const auto& [k, v] : a) {
    const auto it = b.find(k);
    if (it == b.end() || it->second != v) keys.insert(k);
  }
  for (const auto& [k, v] : b) {
    if (a.count(k) == 0) keys.insert(k);
  }
  return keys;
}

}  // namespace anvil::train
