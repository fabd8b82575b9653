// AMX tile configuration shared by the units that run tile instructions
// (kernels' AMX GEMM, profile's AMX peak). Include only from files built
// with AMX flags (-mamx-tile), and only call after AmxEnabled(); the
// function has internal linkage, so each file keeps its own copy.
#pragma once

#include <cstdint>

#include "anvil/core/intrinsics.h"

namespace anvil {
namespace {  // NOLINT(build/namespaces): a copy per file and ISA flags

// Loads palette 1 on the calling thread: eight tiles of 64-byte rows, 16 of
// them, or `rows` (1 to 16) in tiles 0-5, which by this project's use hold
// sums and A (the rows of C a call computes; B's tiles 6-7 keep 16 rows of k).
[[gnu::always_inline]] inline void ConfigureAmxTiles(int rows = 16) {
  struct alignas(64) TileConfig {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
  } cfg{};
  cfg.palette = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = static_cast<uint8_t>(t < 6 ? rows : 16);
  }
  // Not _tile_loadconfig: GCC 12's macro hands the asm an 8-byte memory
  // operand, so stores to the rest of cfg may be dropped as dead (they were,
  // inlined into the integer GEMM: ldtilecfg then faulted on garbage).
  asm volatile("ldtilecfg %0" : : "m"(cfg));
}

}  // namespace
}  // namespace anvil
