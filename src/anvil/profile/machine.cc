// Machine description from /proc and /sys (Linux).
#include "anvil/profile/machine.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace anvil::profile {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "32K" / "1024K" / "32M" -> bytes.
long ParseCacheSize(const std::string& s) {
  if (s.empty()) return 0;
  long value = std::stol(s);
  switch (s.back()) {
    case 'K': return value << 10;
    case 'M': return value << 20;
    case 'G': return value << 30;
    default: return value;
  }
}

// Number of CPUs in a sysfs cpu list like "0-1,4".
int CountCpuList(const std::string& list) {
  int count = 0;
  std::stringstream ss(list);
  std::string part;
  while (std::getline(ss, part, ',')) {
    const size_t dash = part.find('-');
    if (dash == std::string::npos) {
      ++count;
    } else {
      count += std::stoi(part.substr(dash + 1)) - std::stoi(part.substr(0, dash)) + 1;
    }
  }
  return count;
}

}  // namespace

MachineInfo DescribeMachine() {
  MachineInfo info;
  info.logical_cpus = static_cast<int>(std::thread::hardware_concurrency());
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      info.cpu_model = line.substr(line.find(':') + 2);
      break;
    }
  }
  for (int index = 0;; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    const std::string level = ReadFirstLine(dir + "/level");
    if (level.empty()) break;
    CacheInfo cache;
    cache.level = std::stoi(level);
    cache.type = ReadFirstLine(dir + "/type");
    cache.size_bytes = ParseCacheSize(ReadFirstLine(dir + "/size"));
    const std::string shared = ReadFirstLine(dir + "/shared_cpu_list");
    cache.shared_by_cpus = shared.empty() ? 1 : CountCpuList(shared);
    info.caches.push_back(cache);
  }
  if (info.caches.empty()) {
    // No sysfs cache directory (some VMs): ask glibc, which reads CPUID.
    const struct {
      int level;
      const char* type;
      int name;
    } kSysconfCaches[] = {{1, "Data", _SC_LEVEL1_DCACHE_SIZE},
                          {1, "Instruction", _SC_LEVEL1_ICACHE_SIZE},
                          {2, "Unified", _SC_LEVEL2_CACHE_SIZE},
                          {3, "Unified", _SC_LEVEL3_CACHE_SIZE}};
    for (const auto& c : kSysconfCaches) {
      const long size = sysconf(c.name);
      if (size > 0) info.caches.push_back({c.level, c.type, size, /*shared_by_cpus=*/0});
    }
  }
  info.memory_bytes = sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE);
  return info;
}

long AvailableMemoryBytes() {
  long available = -1;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  long kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") {
      available = kib << 10;
      break;
    }
  }
  // A container's own limit ("max" when none) can be far below the host's
  // memory. Its usage counts page cache; the inactive part is reclaimable.
  const std::string limit = ReadFirstLine("/sys/fs/cgroup/memory.max");
  const std::string used = ReadFirstLine("/sys/fs/cgroup/memory.current");
  if (!limit.empty() && limit != "max" && !used.empty()) {
    long reclaimable = 0;
    std::ifstream stat("/sys/fs/cgroup/memory.stat");
    long value = 0;
    while (stat >> key >> value) {
      if (key == "inactive_file") reclaimable = value;
    }
    const long headroom = std::max(std::strtol(limit.c_str(), nullptr, 10) -
                                       std::strtol(used.c_str(), nullptr, 10) + reclaimable,
                                   0L);
    if (available < 0 || headroom < available) available = headroom;
  }
  return available;
}

}  // namespace anvil::profile
