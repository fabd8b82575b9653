// For tests of child process groups: a waiting child in a group of its own,
// and whether a process is gone.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

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

}  // namespace anvil::testing
