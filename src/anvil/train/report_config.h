// The resolved config.toml of a run as key -> value text, to list and
// highlight what differs between two runs. The file is anvil's own
// Config::ResolvedToml output ("[table]" headers, one "key = value" a line),
// so a line reader suffices; a hand-edited file with other TOML shapes only
// loses highlighting, never the text shown.
#pragma once

#include <map>
#include <set>
#include <string>

namespace anvil::train {

// "model.dim" -> "64" for every "key = value" line under its [table].
std::map<std::string, std::string> ConfigEntries(const std::string& toml);

// The dotted key of a config line under `table` ("" for a header, blank or
// comment line); updates `table` at a "[table]" header.
std::string ConfigLineKey(const std::string& line, std::string& table);

// Keys present in only one, or with different values.
std::set<std::string> DifferingKeys(const std::map<std::string, std::string>& a,
                                    const std::map<std::string, std::string>& b);

}  // namespace anvil::train
