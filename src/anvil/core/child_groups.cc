// The table of child process groups (child_groups.h): lock-free slots and
// counters, so a signal handler may read them while threads change them.
//
// Why no group escapes: a spawning thread counts itself in (g_spawning)
// before it reads g_ending, and the handler sets g_ending before it reads
// g_spawning (all sequentially consistent). So either the thread sees the
// end and starts nothing, or the handler sees the thread and waits until
// its group is in the table before killing the table's groups.
#include "anvil/core/child_groups.h"

#include <signal.h>
#include <time.h>

#include <atomic>

namespace anvil {
namespace {

std::atomic<pid_t> g_groups[kMaxChildGroups];  // 0: a free slot
std::atomic<int> g_spawning{0};
std::atomic<bool> g_ending{false};
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free &&
                  std::atomic<bool>::is_always_lock_free,
              "a signal handler reads them");

void Track(pid_t pgid) {
  for (std::atomic<pid_t>& slot : g_groups) {
    pid_t free = 0;
    if (slot.compare_exchange_strong(free, pgid)) return;
  }
}

}  // namespace

pid_t SpawnTrackedGroup(const std::function<pid_t()>& spawn) {
  // (a handler on this thread between the spawn and the table would wait
  // for this very spawn)
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  g_spawning.fetch_add(1);
  pid_t pgid = 0;
  if (!g_ending.load()) {
    pgid = spawn();
    if (pgid > 0) Track(pgid);
  }
  g_spawning.fetch_sub(1);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return pgid;
}

void UntrackChildGroup(pid_t pgid) {
  if (pgid <= 0) return;  // (0 marks a free slot)
  for (std::atomic<pid_t>& slot : g_groups) {
    pid_t tracked = pgid;
    if (slot.compare_exchange_strong(tracked, 0)) return;
  }
}

void EndChildGroups() {
  g_ending.store(true);
  const timespec ms{0, 1'000'000};
  for (int i = 0; i < 1000 && g_spawning.load() != 0; ++i) nanosleep(&ms, nullptr);
  for (std::atomic<pid_t>& slot : g_groups) {
    const pid_t pgid = slot.load();
    if (pgid > 0) kill(-pgid, SIGKILL);
  }
}

}  // namespace anvil
