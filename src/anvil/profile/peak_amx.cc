// The AMX bf16 peak's inner loop (compiled with AMX flags; called only where
// AmxEnabled()).
#include <cstdint>

#include "anvil/core/amx_tiles.h"
#include "anvil/core/intrinsics.h"
#include "anvil/profile/peak.h"

namespace anvil::profile::detail {

// Four independent accumulator tiles, each tdpbf16ps one 16 x 16 x 32 block
// (2 x 16 x 16 x 32 FLOP); the operand tiles stay in registers, so only the
// tile unit is timed. `iterations` / 32 rounds keep a trial as long as the
// vector loops' (a tdpbf16ps does the work of 256 vdpbf16ps).
double Bf16TileLoopAmx(long iterations) {
  ConfigureAmxTiles();
  alignas(64) uint16_t ones[16 * 32];
  for (uint16_t& v : ones) v = 0x3380;  // bf16 ~6e-8: the sums stay finite
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const long rounds = iterations / 32;
  for (long it = 0; it < rounds; ++it) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(0, out, 64);
  volatile float sink = out[0];
  (void)sink;
  _tile_release();
  return 4 * 2.0 * 16 * 16 * 32 * static_cast<double>(rounds);
}

}  // namespace anvil::profile::detail
