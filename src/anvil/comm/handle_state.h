// The shared completion state behind a Handle (group.h), for the backends.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "anvil/comm/group.h"

namespace anvil::comm {

struct Handle::State {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> done{false};

  void Complete() {
    {
      std::lock_guard<std::mutex> lock(mu);
      done.store(true, std::memory_order_release);
    }
    cv.notify_all();
  }
};

}  // namespace anvil::comm
