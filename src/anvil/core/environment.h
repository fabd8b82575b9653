// The ANVIL_* environment variables, checked up front. The library reads them
// lazily (the thread count when a pool is built, the SIMD tier on first
// dispatch) and treats a malformed value as a broken invariant; a program
// calls CheckEnvironment() first so a typo in the shell becomes one plain
// error line instead of an abort from deep inside a command.
#pragma once

#include "anvil/core/status.h"

namespace anvil {

// ANVIL_THREADS (an integer in [1, 1024]) and ANVIL_ISA (scalar|avx2|avx512),
// where set. The first malformed one, named with its value.
Status CheckEnvironment();

}  // namespace anvil
