// Timing for `anvil bench`: warm up, then repeat until a minimum time has
// passed and report the median (these machines are noisy; medians and ratios
// are what we quote).
#pragma once

#include <algorithm>
#include <vector>

#include "anvil/core/clock.h"

namespace anvil::bench {

struct Timing {
  double median_seconds = 0;
  double min_seconds = 0;
  int runs = 0;
};

// Runs fn() once to warm up, then at least `min_runs` times and until
// `min_total_seconds` have passed (for calls of microseconds too: a window
// of a few milliseconds let one transient, such as a peer library's threads
// still spinning, set the whole median).
template <typename Fn>
Timing TimeMedian(Fn&& fn, double min_total_seconds = 0.5, int min_runs = 5) {
  fn();
  std::vector<double> samples;
  Stopwatch total;
  while (static_cast<int>(samples.size()) < min_runs || total.Seconds() < min_total_seconds) {
    Stopwatch one;
    fn();
    samples.push_back(one.Seconds());
    if (samples.size() >= 1000000) break;
  }
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front(), static_cast<int>(samples.size())};
}

}  // namespace anvil::bench
