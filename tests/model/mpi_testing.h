// Shared by the multi-rank model and parallel tests (run under mpirun): a
// failure count and Expect(), which prints what failed with the rank and
// keeps going, so every rank reports and the job agrees on the verdict
// (an all-reduce of the count) before it exits.
#pragma once

#include <cstdio>
#include <string>

namespace anvil::testing {

inline int g_failures = 0;
inline int g_rank = 0;

inline void Expect(bool ok, const std::string& what) {
  if (ok) return;
  ++g_failures;
  std::fprintf(stderr, "[rank %d] FAILED: %s\n", g_rank, what.c_str());
}

}  // namespace anvil::testing
