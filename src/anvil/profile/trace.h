// Trace zones: a scoped recorder of (name, start, duration, thread) events,
// written as Chrome trace JSON ({"traceEvents":[...]}, "ph":"X", µs). Off by
// default, when a zone costs one relaxed atomic load. On, events go to a
// buffer sized up front at Start() (no allocation while recording; a slot is
// claimed with one atomic add, so any thread may record; events past the
// capacity are counted as dropped). Zone names must outlive the tracer
// (string literals).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "anvil/core/status.h"

namespace anvil::profile {

struct TraceEvent {
  const char* name = nullptr;
  int64_t begin_ns = 0;  // since Start()
  int64_t dur_ns = 0;
  uint32_t tid = 0;  // small id per thread, in order of first record
  // Communication zones: the group (a name that outlives the tracer's
  // output) and the bytes this rank sent; -1 / null elsewhere.
  int64_t bytes = -1;
  const char* group = nullptr;
};

namespace trace_detail {
inline std::atomic<bool> g_enabled{false};
int64_t NowNs();
void Record(const char* name, int64_t begin_ns, int64_t end_ns, int64_t bytes = -1,
            const char* group = nullptr);
}  // namespace trace_detail

// Records a finished communication zone (when tracing is on): `name` a
// literal, times from trace_detail::NowNs().
inline void RecordComm(const char* name, int64_t begin_ns, int64_t end_ns, int64_t bytes,
                       const char* group) {
  if (trace_detail::g_enabled.load(std::memory_order_relaxed)) {
    trace_detail::Record(name, begin_ns, end_ns, bytes, group);
  }
}

// Process-wide recorder. Start/Stop/Clear/Events from one controlling thread
// while no zone is open on another (e.g. between training steps).
class Tracer {
 public:
  // Reserves `capacity` events and starts recording (a restart clears).
  static void Start(size_t capacity = size_t{1} << 20);
  static void Stop();
  static bool enabled() { return trace_detail::g_enabled.load(std::memory_order_relaxed); }
  // Events recorded since Start(), in slot order.
  static std::vector<TraceEvent> Events();
  static size_t dropped();
  // {"traceEvents":[...]} with one "X" event per zone (ts/dur in µs; comm
  // zones with args bytes and group), plus thread-name metadata; atomically
  // written. `pid` and `process` name the process (a rank of a job).
  static std::string ChromeJson(int pid = 0, const std::string& process = "anvil");
  static Status WriteChromeJson(const std::string& path, int pid = 0,
                                const std::string& process = "anvil");
};

// Records [construction, destruction) under `name` when tracing is on.
class TraceZone {
 public:
  explicit TraceZone(const char* name) {
    if (trace_detail::g_enabled.load(std::memory_order_relaxed)) {
      name_ = name;
      begin_ns_ = trace_detail::NowNs();
    }
  }
  ~TraceZone() {
    if (name_ != nullptr) trace_detail::Record(name_, begin_ns_, trace_detail::NowNs());
  }
  TraceZone(const TraceZone&) = delete;
  TraceZone& operator=(const TraceZone&) = delete;

 private:
  const char* name_ = nullptr;
  int64_t begin_ns_ = 0;
};

}  // namespace anvil::profile

#define ANVIL_TRACE_CONCAT_INNER(a, b) a##b
#define ANVIL_TRACE_CONCAT(a, b) ANVIL_TRACE_CONCAT_INNER(a, b)
// ANVIL_TRACE_ZONE("attention_fwd"): a zone to the end of the enclosing scope.
#define ANVIL_TRACE_ZONE(name) \
  ::anvil::profile::TraceZone ANVIL_TRACE_CONCAT(anvil_trace_zone_, __LINE__)(name)
