// ParallelConfig: reading "parallel.*" and "comm.*", validation.
#include "anvil/parallel/config.h"

#include <fmt/core.h>

namespace anvil::parallel {

Result<ParallelConfig> ParallelConfig::FromConfig(Config& config) {
  ParallelConfig c;
  ASSIGN_OR_RETURN(c.dp, config.GetInt("parallel.dp", c.dp));
  ASSIGN_OR_RETURN(c.tp, config.GetInt("parallel.tp", c.tp));
  ASSIGN_OR_RETURN(c.pp, config.GetInt("parallel.pp", c.pp));
  ASSIGN_OR_RETURN(c.cp, config.GetInt("parallel.cp", c.cp));
  ASSIGN_OR_RETURN(c.ep, config.GetInt("parallel.ep", c.ep));
  ASSIGN_OR_RETURN(c.zero, config.GetInt("parallel.zero", c.zero));
  ASSIGN_OR_RETURN(c.bucket_mb, config.GetDouble("parallel.bucket_mb", c.bucket_mb));
  ASSIGN_OR_RETURN(c.overlap, config.GetBool("parallel.overlap", c.overlap));
  ASSIGN_OR_RETURN(c.timeout_s, config.GetDouble("comm.timeout_s", c.timeout_s));
  RETURN_IF_ERROR(c.Validate());
  return c;
}

Status ParallelConfig::Validate() const {
  if (dp < 0 || dp > 65536) {
    return InvalidArgument(fmt::format("key parallel.dp = {}: must be 0 (every rank) or a rank count", dp));
  }
  const struct {
    const char* key;
    int64_t value;
    const char* what;
  } degrees[] = {{"parallel.tp", tp, "tensor"}, {"parallel.pp", pp, "pipeline"},
                 {"parallel.cp", cp, "context"}, {"parallel.ep", ep, "expert"}};
  for (const auto& d : degrees) {
    if (d.value < 1) return InvalidArgument(fmt::format("key {} = {}: must be >= 1", d.key, d.value));
    if (d.value > 1) {
      return InvalidArgument(fmt::format(
          "key {} = {}: {} parallelism is not implemented yet (data parallelism is: parallel.dp)",
          d.key, d.value, d.what));
    }
  }
  if (zero < 0 || zero > 3) {
    return InvalidArgument(fmt::format("key parallel.zero = {}: must be 0, 1, 2 or 3", zero));
  }
  if (!(bucket_mb > 0 && bucket_mb <= 4096)) {
    return InvalidArgument(fmt::format("key parallel.bucket_mb = {}: must be in (0, 4096]", bucket_mb));
  }
  if (!(timeout_s > 0)) {
    return InvalidArgument(fmt::format("key comm.timeout_s = {}: must be > 0", timeout_s));
  }
  return Status::Ok();
}

Status ParallelConfig::ResolveWorld(int world_size, Config& config) {
  const int64_t others = tp * pp * cp * ep;
  if (dp == 0) {
    dp = world_size / others;
    config.Resolve("parallel.dp", Config::Value{dp});
  }
  if (dp * others != world_size) {
    return InvalidArgument(fmt::format(
        "key parallel.dp = {} but the job has {} rank{}: the degrees (dp x tp x pp x cp x ep "
        "= {}) must multiply to the number of ranks (mpirun -np {}, or --set parallel.dp={}; a "
        "checkpoint loads into any layout)",
        dp, world_size, world_size == 1 ? "" : "s", dp * others, dp * others, world_size / others));
  }
  return Status::Ok();
}

}  // namespace anvil::parallel
