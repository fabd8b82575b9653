// `anvil bench train`: training tokens/s and MFU, anvil vs PyTorch.
#include <memory>

#include "anvil/commands.h"
#include "train_bench.h"

namespace anvil::cli {

void AddBenchTrain(CLI::App& bench) {
  auto o = std::make_shared<bench::TrainBenchOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "train", "Steady-state training tokens/s and MFU against a PyTorch Llama of the same config");
  cmd->add_option("--config", o->config, "Run config (TOML)")->required();
  cmd->add_option("--precision", o->precision,
                  "f32, bf16, an FP8 recipe (fp8-tensor, fp8-delayed, fp8-block, mxfp8; the "
                  "peer then runs bf16) or auto (default: the config's; with --dp, f32)")
      ->check(CLI::IsMember({"f32", "bf16", "fp8-tensor", "fp8-delayed", "fp8-block", "mxfp8",
                             "auto"}));
  cmd->add_option("--threads", o->threads, "Threads (0: ANVIL_THREADS or all)")
      ->check(ThreadsRange());
  cmd->add_option("--steps", o->steps, "Timed steps")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed steps first")->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_flag("!--no-peer", o->peer, "Skip the PyTorch peer");
  cmd->add_option("--python", o->python, "Interpreter with torch")->capture_default_str();
  cmd->add_option("--peer-script", o->peer_script, "Path of torch_train_peer.py");
  cmd->add_flag("--json", o->json, "One JSON object");
  cmd->add_option("--dp", o->dp,
                  "Data parallel: N ranks x 1 thread (ZeRO 0/1, overlap on/off) against 1 rank x "
                  "N threads, same global batch; starts mpirun itself")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--set", o->sets, "Override a config key: key=value (repeatable)");
  cmd->add_flag("--dp-worker", o->dp_worker, "(internal) one rank of a --dp case")->group("");
  cmd->callback([o] {
    if (const int rc = bench::RunTrainBench(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace anvil::cli
