// The table of child process groups (child_groups.h): lock-free slots and
// counters, so a signal handler may read them while threads change them.
//
// Why no group escapes: a spawning thread counts itself in (g_spawning)
// before it reads g_ending, and the handler sets g_ending before it reads
// g_spawning (all sequentially consistent). So either the thread sees the
// end and starts nothing, or the handler sees the thread and waits until
// its group is in the table before killing the table's groups.
#include "anvil/core/child_groups.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>

namespace anvil {
namespace {

std::atomic<pid_t> g_groups[kMaxChildGroups];  // 0: a free slot
std::atomic<int> g_spawning{0};
std::atomic<bool> g_ending{false};
// This process's end of the keeper's socket (-1: no keeper yet), and the
// process that started it: a fork's child inherits both and starts its own.
std::atomic<int> g_keeper{-1};
std::atomic<pid_t> g_keeper_of{0};
std::mutex g_keeper_start;
static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free &&
                  std::atomic<bool>::is_always_lock_free,
              "a signal handler reads them");

bool Track(pid_t pgid) {
  for (std::atomic<pid_t>& slot : g_groups) {
    pid_t free = 0;
    if (slot.compare_exchange_strong(free, pgid)) return true;
  }
  return false;
}

// +pgid: tracked; -pgid: untracked (or ended by this process). One datagram
// each; a keeper gone (killed by hand) costs nothing but its service.
void TellKeeper(int32_t message) {
  const int fd = g_keeper.load();
  if (fd < 0) return;
  while (send(fd, &message, sizeof message, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

// The keeper, in the child of a fork of a process that may run many threads:
// async-signal-safe calls only, every signal but SIGKILL blocked (the
// spawning thread's mask; the terminal's Ctrl-C reaches this process's group,
// and the keeper must outlive the process it watches), no descriptor but its
// socket (one held open here would keep a pipe of the parent's from closing).
[[noreturn]] void Keep(int socket) {
  setpgid(0, 0);
  prctl(PR_SET_NAME, "anvil-keeper", 0, 0, 0);
  if (socket != 3) {
    dup2(socket, 3);
    close(socket);
  }
  const int null = open("/dev/null", O_RDWR);
  for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
  close_range(4, ~0U, 0);
  pid_t groups[kMaxChildGroups] = {};
  for (;;) {
    int32_t message = 0;
    const ssize_t got = recv(3, &message, sizeof message, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got != static_cast<ssize_t>(sizeof message)) break;  // 0: the process ended
    const pid_t find = message > 0 ? 0 : -message;
    for (pid_t& g : groups) {
      if (g == find) {
        g = message > 0 ? message : 0;
        break;
      }
    }
  }
  for (const pid_t g : groups) {
    if (g > 0) kill(-g, SIGKILL);
  }
  _exit(0);
}

// Starts this process's keeper unless it has one (a failure leaves none:
// the groups then end only as before).
void EnsureKeeper() {
  const pid_t self = getpid();
  if (g_keeper_of.load() == self) return;
  const std::lock_guard lock(g_keeper_start);
  if (g_keeper_of.load() == self) return;
  const int inherited = g_keeper.exchange(-1);
  if (inherited >= 0) close(inherited);  // the parent's keeper's, after a fork
  g_keeper_of.store(self);
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) return;
  // _Fork: no atfork handlers (an MPI library's or a BLAS's) run for it.
  const pid_t keeper = _Fork();
  if (keeper == 0) {
    close(ends[0]);
    Keep(ends[1]);
  }
  close(ends[1]);
  if (keeper < 0) {
    close(ends[0]);
    return;
  }
  g_keeper.store(ends[0]);
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
    EnsureKeeper();
    pgid = spawn();
    if (pgid > 0 && Track(pgid)) TellKeeper(pgid);
  }
  g_spawning.fetch_sub(1);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return pgid;
}

void UntrackChildGroup(pid_t pgid) {
  if (pgid <= 0) return;  // (0 marks a free slot)
  for (std::atomic<pid_t>& slot : g_groups) {
    pid_t tracked = pgid;
    if (slot.compare_exchange_strong(tracked, 0)) return TellKeeper(-pgid);
  }
}

void EndChildGroups() {
  g_ending.store(true);
  const timespec ms{0, 1'000'000};
  for (int i = 0; i < 1000 && g_spawning.load() != 0; ++i) nanosleep(&ms, nullptr);
  for (std::atomic<pid_t>& slot : g_groups) {
    const pid_t pgid = slot.load();
    if (pgid > 0) {
      kill(-pgid, SIGKILL);
      TellKeeper(-pgid);  // its id may be reused once this process is gone
    }
  }
}

}  // namespace anvil
