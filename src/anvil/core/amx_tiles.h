// AMX tile configuration shared by the units that run tile instructions
// (kernels' AMX GEMM, profile's AMX peak). Include only from files built
// with AMX flags (-mamx-tile), and only call after AmxEnabled(); the
// function has internal linkage, so each file keeps its own copy.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace anvil {
namespace {  // NOLINT(build/namespaces): a copy per file and ISA flags

// Loads palette 1 with all eight tiles at their largest, 16 rows of 64
// bytes (ldtilecfg's 64-byte operand), on the calling thread.
[[gnu::always_inline]] inline void ConfigureAmxTiles() {
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
    cfg.rows[t] = 16;
  }
  // Not _tile_loadconfig: GCC 12's macro hands the asm an 8-byte memory
  // operand, so stores to the rest of cfg may be dropped as dead (they were,
  // inlined into the integer GEMM: ldtilecfg then faulted on garbage).
  asm volatile("ldtilecfg %0" : : "m"(cfg));
}

}  // namespace
}  // namespace anvil
