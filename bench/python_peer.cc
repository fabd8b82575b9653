// Python peers in their own processes (python_peer.h).
#include "python_peer.h"

#include <fmt/core.h>

#include <cstdio>
#include <filesystem>

#include "anvil/core/cpu_features.h"

namespace anvil::bench {
namespace {

constexpr char kTcmalloc[] = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4";

}  // namespace

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

nlohmann::json PeerModelJson(const model::ModelConfig& c) {
  return {{"dim", c.dim},           {"n_layers", c.n_layers},
          {"n_heads", c.n_heads},   {"n_kv_heads", c.n_kv_heads},
          {"ffn_dim", c.ffn_dim},   {"vocab_size", c.vocab_size},
          {"rope_theta", c.rope_theta}, {"norm_eps", c.norm_eps},
          {"tie_embeddings", c.tie_embeddings}, {"init_std", c.init_std}};
}

std::string PeerScriptPath(const std::string& name) {
  return (std::filesystem::path(__FILE__).parent_path() / name).string();
}

Result<nlohmann::json> RunPythonPeer(const std::string& python, const std::string& script,
                                     const std::string& args) {
  std::string env = "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE";
  // With anvil's tier lowered to AVX2 on a bigger CPU (ANVIL_ISA=avx2), the
  // peer is held to AVX2 too: PyTorch's own kernels, its oneDNN and OpenBLAS.
  if (BestIsa() == Isa::kAvx2 && IsaSupported(Isa::kAvx512)) {
    env += " ATEN_CPU_CAPABILITY=avx2 DNNL_MAX_CPU_ISA=AVX2 ONEDNN_MAX_CPU_ISA=AVX2"
           " OPENBLAS_CORETYPE=Haswell";
  }
  if (std::filesystem::exists(kTcmalloc)) env += fmt::format(" LD_PRELOAD={}", kTcmalloc);
  const std::string cmd =
      fmt::format("{} {} {} {}", env, ShellQuote(python), ShellQuote(script), args);
  std::FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return Internal(fmt::format("cannot start the peer: {}", cmd));
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, got);
  const int rc = ::pclose(pipe);
  try {
    const size_t brace = out.rfind('{');
    if (brace == std::string::npos) throw std::runtime_error("no JSON in its output");
    nlohmann::json j = nlohmann::json::parse(out.substr(brace));
    if (j.contains("error")) throw std::runtime_error(j["error"].get<std::string>());
    return j;
  } catch (const std::exception& e) {
    return Internal(fmt::format("peer failed (exit {}): {} {}", rc, e.what(), out));
  }
}

}  // namespace anvil::bench
