// Clocks: a monotonic wall clock for timing and progress, and per-thread CPU
// time for telling busy from parked threads.
#pragma once

#include <chrono>
#include <cstdint>

namespace anvil {

// Seconds on the monotonic clock since an arbitrary origin.
inline double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Measures elapsed wall time from construction or the last Reset().
class Stopwatch {
 public:
  Stopwatch() : start_(NowSeconds()) {}
  void Reset() { start_ = NowSeconds(); }
  double Seconds() const { return NowSeconds() - start_; }

 private:
  double start_;
};

}  // namespace anvil
