// Process groups this process started that must not outlive it (a user's
// reward commands run each in a group of its own, out of reach of the
// terminal's Ctrl-C). What ends the process ends the tracked groups first:
// a second stop signal (train/progress.cc), a failed CHECK (core/check.cc)
// and an MPI job's abort (comm/mpi_world.cc). What no handler sees (SIGKILL:
// the kernel's OOM killer, mpirun's last word) leaves the groups to a keeper:
// a small shell started at the first spawn that learns of every group
// tracked and untracked over a socket, and kills those still tracked when
// the socket closes, which it does when this process ends, however it ends.
#pragma once

#include <sys/types.h>

#include <functional>

namespace anvil {

inline constexpr int kMaxChildGroups = 512;

// Calls `spawn`, which starts a process group and returns its id (<= 0:
// none started), and tracks the group until UntrackChildGroup; the two as
// one step a handler cannot split (signals are blocked in this thread
// meanwhile, and EndChildGroups waits for spawns under way). Once
// EndChildGroups has begun, returns 0 without calling `spawn`. A group
// beyond kMaxChildGroups tracked at once runs untracked.
pid_t SpawnTrackedGroup(const std::function<pid_t()>& spawn);
void UntrackChildGroup(pid_t pgid);

// For a signal handler about to end the process (async-signal-safe): no
// spawn starts from now on; waits (at most about a second) for those under
// way, then sends SIGKILL to every tracked group.
void EndChildGroups();

}  // namespace anvil
