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
#include <spawn.h>
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
// This process's end of the keeper's socket (-1: none), and the process
// whose keeper it is: a fork's child inherits both and starts its own.
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

// "+pgid" (tracked) or "-pgid" (untracked, or ended by this process) as a
// line to the keeper; async-signal-safe. `wait` false (a signal handler's):
// a keeper stopped with a full socket loses the line rather than hang the
// handler. A keeper gone (killed by hand) costs nothing but its service.
void TellKeeper(char sign, pid_t pgid, bool wait = true) {
  const int fd = g_keeper.load();
  if (fd < 0 || g_keeper_of.load() != getpid()) return;
  char line[16];
  int at = sizeof line;
  line[--at] = '\n';
  auto v = static_cast<unsigned>(pgid);
  do {
    line[--at] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  line[--at] = sign;
  const int flags = MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT);
  while (send(fd, line + at, sizeof line - at, flags) < 0 && errno == EINTR) {
  }
}

// The keeper: a shell reading those lines from fd 3 until the socket closes,
// which it does when this process ends, however it ends; then it kills the
// groups still tracked. A program of its own (posix_spawn), not a fork:
// a fork would hold on to this process's pages (every page written after
// it copied for this process, the old one kept for the keeper), and an MPI
// library's registered memory does not survive a fork. (A group whose
// processes have all ended may see its id reused before the keeper's kill;
// that comes within milliseconds of this process's end, and Linux hands out
// ids in increasing order, so the window is all but closed.)
constexpr const char* kKeeperScript =
    "g=' '\n"
    "while IFS= read -r m; do\n"
    "  case $m in\n"
    "    +*) g=\"$g${m#+} \" ;;\n"
    "    -*) case $g in *\" ${m#-} \"*) g=\"${g%% ${m#-} *} ${g#* ${m#-} }\" ;; esac ;;\n"
    "  esac\n"
    "done <&3\n"
    "for p in $g; do kill -9 \"-$p\" 2>/dev/null; done\n";

// Starts this process's keeper unless it has one. A failure leaves none (the
// groups then end only as child_groups.h says SIGKILL's could not).
void EnsureKeeper() {
  const pid_t self = getpid();
  if (g_keeper_of.load() == self) return;
  const std::lock_guard lock(g_keeper_start);
  if (g_keeper_of.load() == self) return;
  const int inherited = g_keeper.exchange(-1);
  if (inherited >= 0) close(inherited);  // the parent's keeper's, after a fork
  // (published last: a thread that sees g_keeper_of sees the socket too)
  const auto done = [&](int fd) {
    g_keeper.store(fd);
    g_keeper_of.store(self);
  };
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return done(-1);
  // The keeper's end on fd 3 (dup2 onto itself would keep close-on-exec).
  if (ends[1] == 3) {
    const int moved = fcntl(ends[1], F_DUPFD_CLOEXEC, 4);
    close(ends[1]);
    ends[1] = moved;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDWR, 0);
  posix_spawn_file_actions_adddup2(&actions, 0, 1);
  posix_spawn_file_actions_adddup2(&actions, 0, 2);
  posix_spawn_file_actions_adddup2(&actions, ends[1], 3);
  posix_spawn_file_actions_addclosefrom_np(&actions, 4);
  // A group of its own, every signal blocked: the terminal's Ctrl-C (sent to
  // this process's group) and a kill of this process's group by name or id
  // must not end it before the process it watches.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  const char* argv[] = {"anvil-keeper", "-c", kKeeperScript, nullptr};
  const char* envp[] = {nullptr};
  pid_t keeper = 0;
  const int spawned =
      ends[1] < 0 ? -1
                  : posix_spawn(&keeper, "/bin/sh", &actions, &attr, const_cast<char* const*>(argv),
                                const_cast<char* const*>(envp));
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (ends[1] >= 0) close(ends[1]);
  if (spawned != 0) {
    close(ends[0]);
    return done(-1);
  }
  done(ends[0]);
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
    if (pgid > 0 && Track(pgid)) TellKeeper('+', pgid);
  }
  g_spawning.fetch_sub(1);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return pgid;
}

void UntrackChildGroup(pid_t pgid) {
  if (pgid <= 0) return;  // (0 marks a free slot)
  for (std::atomic<pid_t>& slot : g_groups) {
    pid_t tracked = pgid;
    if (slot.compare_exchange_strong(tracked, 0)) return TellKeeper('-', pgid);
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
      TellKeeper('-', pgid, /*wait=*/false);  // its id may be reused once this process is gone
    }
  }
}

}  // namespace anvil
