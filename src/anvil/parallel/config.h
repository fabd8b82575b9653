// The parallel layout of a run: "parallel.*" (degrees, ZeRO stage, gradient
// buckets) and "comm.*" (the collectives' watchdog), read from a run Config
// and validated once against the job's world size.
#pragma once

#include <cstdint>

#include "anvil/core/config.h"
#include "anvil/core/status.h"

namespace anvil::parallel {

struct ParallelConfig {
  // parallel.dp: data-parallel ranks; 0 means the ranks the other degrees
  // leave (the resolved config records the number). The degrees multiply to
  // the job's world size.
  int64_t dp = 0;
  // parallel.tp / pp / cp / ep: tensor, pipeline, context and expert
  // parallel degrees. Only 1 so far (the keys exist so a layout says all of
  // itself; larger values are refused as not implemented).
  int64_t tp = 1, pp = 1, cp = 1, ep = 1;
  // parallel.zero: 0 (gradients all-reduced, every rank holds the whole
  // optimizer state); 1 (gradients reduce-scattered, each rank updates its
  // shard of the weights with its shard of the AdamW state, then the weights
  // are all-gathered); 2 (also no whole gradient buffer: each unit's grads
  // are reduce-scattered as its backward ends); 3 (also no whole weights:
  // each unit is all-gathered before its forward and again before its
  // backward, the next one prefetched). Tied embeddings: 0 and 1 only.
  int64_t zero = 0;
  double bucket_mb = 25;  // parallel.bucket_mb: gradient bucket size (reverse layer order)
  // parallel.overlap: reduce a bucket as soon as its grads are final (ZeRO-0/1;
  // ZeRO-2/3 always reduce each unit as its backward ends).
  bool overlap = true;
  double timeout_s = 600;  // comm.timeout_s: a collective that takes longer aborts the job

  static Result<ParallelConfig> FromConfig(Config& config);
  Status Validate() const;
  // Fixes dp for a job of `world_size` ranks (dp = 0) or checks it.
  Status ResolveWorld(int world_size, Config& config);
};

}  // namespace anvil::parallel
