// For tests of child process groups: a waiting child in a group of its own,
// whether a process is gone, and the keeper process (child_groups.h).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace anvil::testing {

// A child in a process group of its own (as a reward command is), waiting.
inline pid_t ForkGroup() {
  const pid_t child = fork();
  if (child == 0) {
    setpgid(0, 0);
    // No descriptor of the test's: a death test reads its child's output
    // to the end, which a stray waiting process would never let come.
    const int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
    closefrom(3);
    pause();
    _exit(0);
  }
  if (child > 0) setpgid(child, child);  // (either side may run first)
  return child;
}

// Whether `pid` is gone or a zombie (its parent gone, init may be slow to reap it).
inline bool Dead(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

// Waits up to about 5 s for `pid` to be Dead.
inline bool DiesSoon(pid_t pid) {
  for (int i = 0; i < 5000; ++i) {
    if (Dead(pid)) return true;
    usleep(1000);
  }
  return Dead(pid);
}

// The keeper process (argv[0] "anvil-keeper", a group leader) whose parent
// is `parent`, or 0.
inline pid_t KeeperOf(pid_t parent) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    std::string argv0;
    std::getline(std::ifstream(entry.path() / "cmdline"), argv0, '\0');
    if (argv0 != "anvil-keeper" || getpgid(pid) != pid) continue;
    std::string line;
    std::getline(std::ifstream(entry.path() / "stat"), line);
    const size_t paren = line.rfind(')');
    int ppid = 0;
    if (paren != std::string::npos) std::sscanf(line.c_str() + paren + 2, "%*c %d", &ppid);
    if (ppid == parent) return pid;
  }
  return 0;
}

// KeeperOf, tried for up to about 2 s: posix_spawn returns once the exec
// has begun, and the new program's cmdline shows a moment later.
inline pid_t WaitForKeeperOf(pid_t parent) {
  pid_t keeper = 0;
  for (int tries = 0; keeper == 0 && tries < 2000; ++tries) {
    if (tries > 0) usleep(1000);
    keeper = KeeperOf(parent);
  }
  return keeper;
}

}  // namespace anvil::testing
