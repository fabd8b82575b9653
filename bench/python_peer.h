// Running a Python peer of a benchmark (bench/torch_*_peer.py) in its own
// process: OpenBLAS's pinning variables unset, OMP_WAIT_POLICY=PASSIVE and
// tcmalloc preloaded where installed (as a tuning user would run PyTorch),
// held to AVX2 when anvil's tier is lowered to it on an AVX-512 CPU;
// its last output line is one JSON object, {"error": ...} when it failed.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "anvil/core/status.h"
#include "anvil/model/config.h"

namespace anvil::bench {

// `args`: the script's arguments, already shell-quoted where needed.
Result<nlohmann::json> RunPythonPeer(const std::string& python, const std::string& script,
                                     const std::string& args);

// A model's [model] keys as the peers read them (--model JSON).
nlohmann::json PeerModelJson(const model::ModelConfig& c);

// `s` in single quotes for /bin/sh.
std::string ShellQuote(const std::string& s);

// <this source folder>/<name>: where the peer scripts live.
std::string PeerScriptPath(const std::string& name);

}  // namespace anvil::bench
