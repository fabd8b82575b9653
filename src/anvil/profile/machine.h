// A description of the machine: CPU model, cores, caches, ISA. Printed by
// `anvil env` and saved with benchmark results.
#pragma once

#include <string>
#include <vector>

namespace anvil::profile {

struct CacheInfo {
  int level = 0;
  std::string type;  // "Data", "Instruction", "Unified"
  long size_bytes = 0;
  int shared_by_cpus = 1;  // 0: unknown
};

struct MachineInfo {
  std::string cpu_model;
  int logical_cpus = 0;
  std::vector<CacheInfo> caches;  // of cpu0: sysfs, else CPUID via sysconf
  long memory_bytes = 0;
};

MachineInfo DescribeMachine();

// Bytes a new allocation can use now: /proc/meminfo's MemAvailable, lowered
// to a cgroup v2 memory limit's headroom where one is set (its reclaimable
// file cache counted as free); -1 if unknown.
long AvailableMemoryBytes();

}  // namespace anvil::profile
